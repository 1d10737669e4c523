#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""Writes the gzip / DEFLATE fixtures of tests/unit/test_data.cpp, compressed by Python's zlib.

The fixtures are committed so that the tests need no Python; rerun this script only to change
them. The uncompressed content is not stored: payload() is mirrored by fixture_payload() in
test_data.cpp, which regenerates it to compare.
"""
import gzip
import io
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def payload(n):
    """Deterministic text-like bytes with literals, runs and matches up to ~32 KiB back."""
    words = [b"flotilla ", b"gradient ", b"tensor ", b"batch ", b"epoch ", b"shard ", b"loss ", b"adam "]
    x = 0x12345678
    out = bytearray()
    while len(out) < n:
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        r = x % 16
        if r < 9:
            out += words[(x >> 4) & 7]
        elif r < 12:
            out.append((x >> 8) & 0xFF)
        elif r < 14:
            out += bytes([(x >> 16) & 0xFF]) * (((x >> 8) & 63) + 1)
        elif len(out) > 33000:
            start = len(out) - 32000 - ((x >> 8) & 511)
            out += out[start:start + 40 + ((x >> 20) & 127)]
        else:
            out += words[(x >> 7) & 7] + words[(x >> 10) & 7]
    return bytes(out[:n])


def raw_deflate(data, level=6, strategy=zlib.Z_DEFAULT_STRATEGY, flushes=()):
    c = zlib.compressobj(level, zlib.DEFLATED, -15, 9, strategy)
    body, pos = b"", 0
    for at, mode in flushes:  # flush at byte `at` of the input, emitting stored blocks mid-stream
        body += c.compress(data[pos:at]) + c.flush(mode)
        pos = at
    return body + c.compress(data[pos:]) + c.flush()


def write(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def main():
    p = payload(36000)
    for level in (0, 1, 6, 9):
        write(f"level{level}.gz", gzip.compress(p, compresslevel=level, mtime=0))

    buf = io.BytesIO()
    with gzip.GzipFile(filename="payload.txt", mode="wb", fileobj=buf, mtime=0) as f:
        f.write(p[:6000])
    write("fname.gz", buf.getvalue())

    # Every optional header field: FTEXT | FHCRC | FEXTRA | FNAME | FCOMMENT.
    extra = b"FL" + struct.pack("<H", 3) + b"abc"
    header = b"\x1f\x8b\x08" + bytes([0x1F]) + struct.pack("<I", 0) + b"\x00\x03"
    header += struct.pack("<H", len(extra)) + extra + b"payload.txt\x00" + b"a comment\x00"
    header += struct.pack("<H", zlib.crc32(header) & 0xFFFF)
    d = p[:8000]
    body = raw_deflate(d, 6, flushes=((2000, zlib.Z_SYNC_FLUSH), (5000, zlib.Z_FULL_FLUSH)))
    write("flags.gz", header + body + struct.pack("<II", zlib.crc32(d), len(d)))

    members = [gzip.compress(p[:3000], compresslevel=9, mtime=0), gzip.compress(b"", mtime=0),
               gzip.compress(b"hello, fixed Huffman codes", mtime=0), gzip.compress(p[3000:9000], compresslevel=1, mtime=0)]
    write("multi.gz", b"".join(members))

    write("fixed.deflate", raw_deflate(p[:6000], 9, zlib.Z_FIXED))
    write("rle.deflate", raw_deflate(p[:6000], 9, zlib.Z_RLE))
    write("huffman_only.deflate", raw_deflate(p[:3000], 9, zlib.Z_HUFFMAN_ONLY))


if __name__ == "__main__":
    main()
