#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (test/fuzz/corpus/<target>/) and dictionaries
(test/fuzz/<target>.dict): the shipped scenarios, topologies and jobs, inputs that once
crashed the runner, and headers' bytes. Run from anywhere; rewrites the seed files it owns.

usage: make-seeds.py
"""
import glob
import json
import os
import re
import shutil
import struct

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FUZZ = os.path.join(ROOT, "test", "fuzz")


def put(target, name, data):
    d = os.path.join(FUZZ, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def copy(target, pattern, prefix=""):
    for p in sorted(glob.glob(os.path.join(ROOT, pattern))):
        with open(p, "rb") as f:
            put(target, prefix + os.path.basename(p), f.read())


def deep(n):
    return "[" * n + "]" * n


# Scenarios: every shipped one, and inputs that crashed the loader.
copy("scenario", "scenarios/*.json")
copy("scenario", "scenarios/bench/*.json", "bench-")
with open(os.path.join(ROOT, "scenarios", "multiplane-bidirectional.json")) as f:
    streams = f.read()
with open(os.path.join(ROOT, "scenarios", "fabric-ecmp-collisions.json")) as f:
    raw = f.read()
put("scenario", "crash-number-overflow.json", raw.replace('"duration_us": ', '"duration_us": 1e400, "x": ', 1))
put("scenario", "crash-deep-nesting.json",
    raw.replace('"workload": {', '"workload": {"planes": ' + deep(80) + ",", 1))
put("scenario", "crash-topology-directory.json", raw.replace("topologies/fpf-8plane-64.json", "topologies", 1))
put("scenario", "crash-topology-name-too-long.json",
    raw.replace("topologies/fpf-8plane-64.json", "a" * 300, 1))
put("scenario", "crash-time-unit.json",
    streams.replace('"transport": {', '"transport": {"attributes": {"RtoMin": "5xs"}, ', 1))
put("scenario", "crash-uinteger-text.json",
    streams.replace('"transport": {', '"transport": {"attributes": {"MinPaths": "abc"}, ', 1))

# Topologies: every shipped one and the crashes that apply to a topology file.
copy("topology", "topologies/*.json")
with open(os.path.join(ROOT, "topologies", "fpf-8plane-64.json")) as f:
    topo = f.read()
put("topology", "crash-number-overflow.json", topo.replace("{", '{"nics_per_leaf": 1e400, ', 1))
put("topology", "crash-deep-nesting.json", topo.replace("{", '{"switch": ' + deep(80) + ", ", 1))

# Jobs: every shipped job file.
copy("job", "scenarios/jobs/*.json")
put("job", "crash-deep-nesting.json", '{"name": "x", "phases": ' + deep(80) + "}")

# --set arguments, among them those that crashed the runner.
for i, s in enumerate([
    b"duration_us=50",
    b"workload.qps_per_flow=4",
    b"faults[0].until_us=90",
    b"faults.0.plane=1",
    b"variants[1].set={}",
    b"topology.switch.ecn_kmin_bytes=40000",
    b"transport.attributes.MinPaths=16",
    b'outputs.table=["goodput_gbps","drops_buffer"]',
    b"name=\xff",
    b"\xff=1",
    b"workload.planes=" + deep(80).encode(),
    b"a." * 70 + b"b=1",
    b"transport.attributes.RtoMin=5xs",
    b"transport.attributes.MinPaths=abc",
    b"transport.attributes.Mtu=99999999999999999999",
    b"topology=topologies",
    b"seed=1e400",
    b"transport.cc_attributes.AdditiveIncrease=1.5x",
    b"transport.cc_attributes.AdditiveIncrease=nan",
]):
    put("set", f"set-{i:02d}", s)


# Headers: the first byte picks the header (0: RdmaHeader, 1: FabricHeader, 2: RawHeader).
def bth(op):
    return struct.pack(">BBHII", op, 0x01, 0x0203, 0x00abcdef, 0x89abcdef)


icrc = b"\0" * 4
rdma = {
    "data": bth(0x0a) + struct.pack(">QII", 1 << 20, 7, 4096) + icrc,
    "path-data": bth(0x40) + struct.pack(">QIIHBBIQ", 1 << 20, 7, 4096, 3, 1, 0, 99, 123456) + icrc,
    "ack": bth(0x11) + struct.pack(">I", 7) + icrc,
    "nak": bth(0x12) + struct.pack(">I", 7) + icrc,
    "path-ack": bth(0x41) + struct.pack(">IHBB4QQII", 7, 3, 1, 0, 1, 2, 3, 4, 123456, 400000, 0)
    + icrc,
    "cnp": bth(0x81) + b"\0" * 16 + icrc,
}
for name, b in rdma.items():
    put("headers", "rdma-" + name, b"\0" + b + b"payload")
    put("headers", "rdma-" + name + "-truncated", b"\0" + b[: len(b) // 2])
fabric = (b"\x02\x00" + struct.pack(">I", 5) + b"\x02\x00" + struct.pack(">I", 3) + b"\x08\x00"
          + struct.pack(">BBHHHBBHII", 0x45, (3 << 5) | 2, 28 + 1000, 0, 0x4000, 64, 17, 0,
                        0x0a000003, 0x0a000005)
          + struct.pack(">HHHH", 777, 4791, 8 + 1000, 0))
put("headers", "fabric", b"\x01" + fabric + b"payload")
put("headers", "fabric-truncated", b"\x01" + fabric[:20])
raw = struct.pack(">IIQ", 12, 345, 678901234)
put("headers", "raw", b"\x02" + raw + b"payload")
put("headers", "raw-truncated", b"\x02" + raw[:9])


# Dictionaries: the keys and named values the loaders read, attribute and TypeId names.
def literals(*patterns):
    words = set()
    for pattern in patterns:
        for p in glob.glob(os.path.join(ROOT, pattern)):
            with open(p) as f:
                words |= set(re.findall(r'"([A-Za-z_][A-Za-z0-9_:.\-]*)"', f.read()))
    return words


loader_words = literals("helper/scenario.cc", "helper/topology-spec.cc", "helper/json-reader.cc")
attributes = set()
for p in glob.glob(os.path.join(ROOT, "model", "**", "*.cc"), recursive=True):
    with open(p) as f:
        text = f.read()
    attributes |= set(re.findall(r'AddAttribute\(\s*"([A-Za-z]+)"', text))
    attributes |= set(re.findall(r'TypeId\("(ns3::[A-Za-z:]+)"\)', text))
files = ["topologies/" + os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "topologies", "*.json"))]
files += ["scenarios/jobs/" + os.path.basename(p)
          for p in glob.glob(os.path.join(ROOT, "scenarios", "jobs", "*.json"))]
json_words = sorted(loader_words | attributes | set(files) | {"topologies", "scenarios/jobs"})


def escape(s):
    return "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "\\x%02x" % ord(c) for c in s)


def write_dict(name, entries):
    with open(os.path.join(FUZZ, name + ".dict"), "w") as f:
        f.write("# libFuzzer dictionary written by make-seeds.py\n")
        for e in entries:
            f.write('"%s"\n' % escape(e))


json_entries = ['"%s"' % w for w in json_words] + [
    "{", "}", "[", "]", ":", ",", "true", "false", "null", "1e400", "-1", "0.5", "4294967296",
    "18446744073709551616", "\\u0000", "\\ud800"]
for target in ("scenario", "topology", "job"):
    write_dict(target, json_entries)
write_dict("set", json_words + ["=", ".", "[0]", "[1]", "[", "]", "{}", "[]", '""', "1e400",
                                "\xff", "5us", "5xs", "nan", "transport.attributes.",
                                "transport.cc_attributes.", "workload.", "topology.",
                                "topology.switch.", "faults[0].", "variants[0].set.",
                                "outputs.table="])
