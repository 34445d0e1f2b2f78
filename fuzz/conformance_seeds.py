#!/usr/bin/env python3
"""Writes fuzz/corpus/readrows_merger/seed-conformance-*: the official
ReadRows conformance vectors (testdata/bigtable/readrows.json) as inputs of
the readrows_merger target (fuzz_targets/readrows_merger.rs, mode 0: one
framed chunk after another). Run from the repository root."""
import base64, json, struct, pathlib

FAMILIES = {"a": 0, "b": 1, "cf": 2}

def chunk_bytes(b):
    return struct.pack("<H", len(b)) + b

def frame(c):
    fields, body = 0, b""
    if c.get("rowKey"):
        fields |= 1; body += chunk_bytes(base64.b64decode(c["rowKey"]))
    if "familyName" in c:
        fields |= 2; body += bytes([FAMILIES.get(c["familyName"].lower(), 0)])
    if "qualifier" in c:
        fields |= 4; body += chunk_bytes(base64.b64decode(c["qualifier"]))
    if int(c.get("timestampMicros", 0)):
        fields |= 8; body += struct.pack("<q", int(c["timestampMicros"]))
    if c.get("labels"):
        fields |= 16; body += chunk_bytes(c["labels"][0].encode())
    if c.get("value"):
        fields |= 32; body += chunk_bytes(base64.b64decode(c["value"]))
    if c.get("valueSize"):
        fields |= 64; body += struct.pack("<h", int(c["valueSize"]))
    status = 1 if c.get("commitRow") else 2 if c.get("resetRow") else 0
    return bytes([0, fields, status]) + body

tests = json.load(open("testdata/bigtable/readrows.json"))["readRowsTests"]
out = pathlib.Path("fuzz/corpus/readrows_merger")
for i, t in enumerate(tests):
    data = bytes([0]) + b"".join(frame(c) for c in t.get("chunks", []))
    (out / f"seed-conformance-{i:02}").write_bytes(data)
