#!/usr/bin/env python3
"""Writes a small, deterministic safetensors file of LLM-like tensors.

The tensors are what `tetra quantize` is demonstrated and tested on:

  weight      F32  256x512  Gaussian, std 0.02 (a linear layer's weight)
  activation  F32  128x512  heavy-tailed (Student-t, 3 degrees of freedom)
                            with 6 outlier channels 30-60x larger: the
                            pattern that makes activations hard for FP4
  gradient    BF16 128x256  Gaussian, std 1e-6 (tiny-magnitude gradients)
  embedding   F16  64x256   Gaussian, std 0.5

Python standard library only. The values come from random.Random(seed) and a
Box-Muller transform written here (not random.gauss, whose algorithm is an
implementation detail), so the same seed gives the same file.

  python3 make_sample_tensors.py OUT.safetensors [--seed N] [--odd]

--odd adds a 1-D F32 tensor "bias" of 100 elements, which blocks of 32 cannot
cover: it exercises the "not divisible by the block size" path.
"""

import argparse
import json
import math
import random
import struct
import sys


def gaussian(rng, count, std):
    values = []
    while len(values) < count:
        u1 = rng.random()
        u2 = rng.random()
        radius = math.sqrt(-2.0 * math.log(1.0 - u1))
        values.append(std * radius * math.cos(2.0 * math.pi * u2))
        values.append(std * radius * math.sin(2.0 * math.pi * u2))
    return values[:count]


def student_t(rng, count, dof, scale):
    """Student-t: a Gaussian over sqrt(chi^2 / dof)."""
    normals = gaussian(rng, count, 1.0)
    chi = gaussian(rng, count * dof, 1.0)
    return [scale * normals[k] /
            math.sqrt(sum(z * z for z in chi[k * dof:(k + 1) * dof]) / dof)
            for k in range(count)]


def activation(rng, rows, channels):
    values = student_t(rng, rows * channels, 3, 0.5)
    outliers = rng.sample(range(channels), 6)
    gains = {c: rng.uniform(30.0, 60.0) for c in outliers}
    for r in range(rows):
        for c, gain in gains.items():
            values[r * channels + c] *= gain
    return values


def pack_f32(values):
    return struct.pack("<%df" % len(values), *values)


def pack_f16(values):
    # struct's 'e' rounds to nearest even, as IEEE asks.
    return struct.pack("<%de" % len(values), *values)


def pack_bf16(values):
    words = struct.unpack("<%dI" % len(values), pack_f32(values))
    out = []
    for bits in words:
        # Round to nearest even on the top 16 bits (no NaNs here).
        bits += 0x7FFF + ((bits >> 16) & 1)
        out.append((bits >> 16) & 0xFFFF)
    return struct.pack("<%dH" % len(out), *out)


def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": metadata}
    data = bytearray()
    for name, dtype, shape, payload in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        out.write(data)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("output")
    parser.add_argument("--seed", type=int, default=2605)
    parser.add_argument("--odd", action="store_true",
                        help="add a 1-D tensor of 100 elements")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    tensors = [
        ("weight", "F32", [256, 512], pack_f32(gaussian(rng, 256 * 512, 0.02))),
        ("activation", "F32", [128, 512], pack_f32(activation(rng, 128, 512))),
        ("gradient", "BF16", [128, 256],
         pack_bf16(gaussian(rng, 128 * 256, 1e-6))),
        ("embedding", "F16", [64, 256], pack_f16(gaussian(rng, 64 * 256, 0.5))),
    ]
    if args.odd:
        tensors.append(("bias", "F32", [100], pack_f32(gaussian(rng, 100, 0.1))))
    write_safetensors(args.output, tensors,
                      {"source": "tools/make_sample_tensors.py",
                       "seed": str(args.seed)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
