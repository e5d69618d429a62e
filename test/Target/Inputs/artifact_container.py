"""Reads the artifact container of docs/artifact.md (format version 11) with struct, zlib and
json only, independently of medrun: read(path) -> (document, {section name: bytes}).
Raises ValueError naming what is wrong (magic, version, checksum, section table)."""
import json
import struct
import zlib


def read(path):
    b = open(path, "rb").read()
    if b[:8] != b"MEDCART\0":
        raise ValueError("not an artifact")
    version, = struct.unpack("<I", b[8:12])
    if version != 11:
        raise ValueError("format version %d, expected 11" % version)
    if zlib.crc32(b[:-4]) != struct.unpack("<I", b[-4:])[0]:
        raise ValueError("CRC mismatch")
    n, = struct.unpack("<Q", b[16:24])
    doc = json.loads(b[24:24 + n])
    off = 24 + n
    count, = struct.unpack("<Q", b[off:off + 8])
    off += 8
    sections = {}
    for _ in range(count):
        ln, = struct.unpack("<Q", b[off:off + 8])
        name = b[off + 8:off + 8 + ln].decode()
        off += 8 + ln
        sz, = struct.unpack("<Q", b[off:off + 8])
        sections[name] = b[off + 8:off + 8 + sz]
        off += 8 + sz
    if off != len(b) - 4:
        raise ValueError("sections do not end at the checksum")
    return doc, sections
