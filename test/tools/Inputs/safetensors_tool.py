#!/usr/bin/env python3
"""Looks into and damages safetensors files for the `tetra quantize` and
`tetra train` tests.

Standard library only, written from the format's description, independently
of the C++ reader it checks.

  header FILE                  print "NAME DTYPE [dims]" per tensor, in header
                               order, then "metadata KEY=VALUE" lines
  same-layout A B              fail unless A and B hold the same tensor names,
                               dtypes and shapes
  same-tensors A B             fail unless A and B hold the same tensors, bit
                               for bit (metadata aside); print "N tensors
                               identical"
  check-mx-codes FILE NAME ELEMENT
                               decode NAME.codes with NAME.scales (E8M0) and
                               compare with the F32 tensor NAME: exit 1 unless
                               every value matches exactly (ELEMENT: e2m1,
                               e4m3 or e5m2)
  sqnr A B NAME                print the SQNR in dB of B's tensor NAME against
                               A's (F32, F16 or BF16)
  truncate IN OUT N            copy the first N bytes of IN to OUT
  make-bad KIND OUT            write a malformed file, KIND one of
                               bad-json, not-object, unknown-dtype,
                               negative-shape, overlap, duplicate,
                               header-too-long, size-mismatch
"""

import json
import math
import struct
import sys

SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "U16": 2, "I16": 2, "F16": 2,
         "BF16": 2, "U32": 4, "I32": 4, "F32": 4, "U64": 8, "I64": 8,
         "F64": 8, "F8_E4M3": 1, "F8_E5M2": 1}


def read(path):
    data = open(path, "rb").read()
    (length,) = struct.unpack("<Q", data[:8])
    # object_pairs_hook keeps the order and shows duplicates.
    header = json.loads(data[8:8 + length].decode("utf-8"),
                        object_pairs_hook=lambda pairs: pairs)
    return header, data[8 + length:]


def tensors(header):
    return [(name, dict(entry)) for name, entry in header
            if name != "__metadata__"]


def cmd_header(path):
    header, _ = read(path)
    for name, entry in tensors(header):
        print(name, entry["dtype"], entry["shape"])
    for name, entry in header:
        if name == "__metadata__":
            for key, value in entry:
                print("metadata %s=%s" % (key, value))
    return 0


def cmd_same_layout(a, b):
    layout_a = [(n, e["dtype"], e["shape"]) for n, e in tensors(read(a)[0])]
    layout_b = [(n, e["dtype"], e["shape"]) for n, e in tensors(read(b)[0])]
    if layout_a != layout_b:
        print("layouts differ:\n  %s\n  %s" % (layout_a, layout_b))
        return 1
    return 0


def cmd_same_tensors(a, b):
    def contents(path):
        header, data = read(path)
        return {name: (e["dtype"], e["shape"],
                       data[e["data_offsets"][0]:e["data_offsets"][1]])
                for name, e in tensors(header)}
    ta, tb = contents(a), contents(b)
    if sorted(ta) != sorted(tb):
        print("tensor names differ")
        return 1
    for name in sorted(ta):
        if ta[name] != tb[name]:
            print("tensor %s differs" % name)
            return 1
    print("%d tensors identical" % len(ta))
    return 0


def decode_minifloat(code, exponent_bits, mantissa_bits, bias):
    sign = -1.0 if code >> (exponent_bits + mantissa_bits) & 1 else 1.0
    exponent = (code >> mantissa_bits) & ((1 << exponent_bits) - 1)
    mantissa = code & ((1 << mantissa_bits) - 1)
    if exponent == 0:
        return sign * mantissa * 2.0 ** (1 - bias - mantissa_bits)
    return sign * (1 + mantissa / 2.0 ** mantissa_bits) * 2.0 ** (exponent - bias)


def cmd_check_mx_codes(path, name, element):
    bits = {"e2m1": (2, 1, 1), "e4m3": (4, 3, 7), "e5m2": (5, 2, 15)}[element]
    header, data = read(path)
    entries = dict(tensors(header))

    def raw(tensor):
        begin, end = entries[tensor]["data_offsets"]
        return data[begin:end]

    values = struct.unpack("<%df" % (len(raw(name)) // 4), raw(name))
    codes = raw(name + ".codes")
    scales = raw(name + ".scales")
    shape = entries[name]["shape"]
    extent = shape[-1]
    block = extent // entries[name + ".scales"]["shape"][-1]
    for index, value in enumerate(values):
        row, column = divmod(index, extent)
        scale = scales[row * (extent // block) + column // block]
        expected = decode_minifloat(codes[index], *bits) * 2.0 ** (scale - 127)
        if expected != value:
            print("%s[%d]: codes give %r, the tensor holds %r"
                  % (name, index, expected, value))
            return 1
    print("%s: %d values match their codes and scales" % (name, len(values)))
    return 0


def floats(path, name):
    header, data = read(path)
    entry = dict(tensors(header))[name]
    begin, end = entry["data_offsets"]
    raw = data[begin:end]
    if entry["dtype"] == "F32":
        return struct.unpack("<%df" % (len(raw) // 4), raw)
    if entry["dtype"] == "F16":
        return struct.unpack("<%de" % (len(raw) // 2), raw)
    if entry["dtype"] == "BF16":
        words = struct.unpack("<%dH" % (len(raw) // 2), raw)
        return struct.unpack("<%df" % len(words),
                             struct.pack("<%dI" % len(words),
                                         *[w << 16 for w in words]))
    raise SystemExit("%s: tensor %s is %s" % (path, name, entry["dtype"]))


def cmd_sqnr(reference, other, name):
    x = floats(reference, name)
    q = floats(other, name)
    signal = sum(v * v for v in x)
    noise = sum((a - b) ** 2 for a, b in zip(x, q))
    if noise == 0:
        print("%s: inf dB" % name)
    else:
        print("%s: %.2f dB" % (name, 10 * math.log10(signal / noise)))
    return 0


def cmd_truncate(source, target, size):
    open(target, "wb").write(open(source, "rb").read()[:int(size)])
    return 0


def write(path, header_text, data=b"", length=None):
    header = header_text.encode("utf-8")
    if length is None:
        length = len(header)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", length) + header + data)


def entry(dtype, shape, begin, end):
    return '{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}' % (
        dtype, json.dumps(shape), begin, end)


def cmd_make_bad(kind, path):
    w = entry("F32", [4, 32], 0, 512)
    if kind == "bad-json":
        write(path, '{"w":' + w + ',}', bytes(512))
    elif kind == "not-object":
        write(path, "[1, 2, 3]")
    elif kind == "unknown-dtype":
        write(path, '{"w":' + entry("F12", [4, 32], 0, 512) + "}", bytes(512))
    elif kind == "negative-shape":
        write(path, '{"w":' + entry("F32", [-4, 32], 0, 512) + "}", bytes(512))
    elif kind == "overlap":
        write(path, '{"w":' + w + ',"v":' + entry("F32", [4, 32], 256, 768)
              + "}", bytes(768))
    elif kind == "duplicate":
        write(path, '{"w":' + w + ',"w":' + entry("F32", [4, 32], 512, 1024)
              + "}", bytes(1024))
    elif kind == "header-too-long":
        write(path, '{"w":' + w + "}", bytes(512), length=1 << 20)
    elif kind == "size-mismatch":
        write(path, '{"w":' + entry("F32", [4, 32], 0, 500) + "}", bytes(500))
    else:
        print("unknown kind " + kind)
        return 2
    return 0


COMMANDS = {"header": cmd_header, "same-layout": cmd_same_layout,
            "same-tensors": cmd_same_tensors,
            "check-mx-codes": cmd_check_mx_codes, "sqnr": cmd_sqnr,
            "truncate": cmd_truncate,
            "make-bad": cmd_make_bad}

if __name__ == "__main__":
    sys.exit(COMMANDS[sys.argv[1]](*sys.argv[2:]))
