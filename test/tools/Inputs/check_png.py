"""Decodes an 8-bit RGB PNG (any zlib stream, any row filters) with the standard library and
prints its size and how many pixels have each given color: enough to check
that `tetra plot` drew a real picture with the curves in it."""
import struct
import sys
import zlib

data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
pos, chunks = 8, {}
while pos < len(data):
    (length,) = struct.unpack(">I", data[pos:pos + 4])
    kind = data[pos + 4:pos + 8]
    body = data[pos + 8:pos + 8 + length]
    (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
    assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc, "bad CRC in %r" % kind
    chunks.setdefault(kind, b"")
    chunks[kind] += body
    pos += 12 + length
width, height, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
assert (depth, color) == (8, 2), "not 8-bit RGB"
raw = zlib.decompress(chunks[b"IDAT"])
stride = width * 3
assert len(raw) == height * (stride + 1), "wrong amount of pixel data"
# Undo each row's filter (PNG's five: none, sub, up, average, Paeth).
rows, previous = [], bytearray(stride)
for r in range(height):
    kind, row = raw[r * (stride + 1)], bytearray(raw[r * (stride + 1) + 1:][:stride])
    for i in range(stride):
        a = row[i - 3] if i >= 3 else 0
        b = previous[i]
        c = previous[i - 3] if i >= 3 else 0
        if kind == 1:
            row[i] = (row[i] + a) & 255
        elif kind == 2:
            row[i] = (row[i] + b) & 255
        elif kind == 3:
            row[i] = (row[i] + (a + b) // 2) & 255
        elif kind == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        else:
            assert kind == 0, "unknown filter %d" % kind
    rows.append(bytes(row))
    previous = row
print("png %dx%d" % (width, height))
for spec in sys.argv[2:]:
    rgb = bytes(int(v) for v in spec.split(","))
    count = sum(row[i:i + 3] == rgb for row in rows for i in range(0, stride, 3))
    print("color %s: %s" % (spec, "present" if count > 50 else "absent"))
