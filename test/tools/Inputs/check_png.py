"""Decodes an 8-bit RGB PNG (any zlib stream) with the standard library and
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
assert len(raw) == height * (width * 3 + 1), "wrong amount of pixel data"
print("png %dx%d" % (width, height))
for spec in sys.argv[2:]:
    rgb = bytes(int(v) for v in spec.split(","))
    count = sum(raw[r * (width * 3 + 1) + 1:][:width * 3][i:i + 3] == rgb
                for r in range(height) for i in range(0, width * 3, 3))
    print("color %s: %s" % (spec, "present" if count > 50 else "absent"))
