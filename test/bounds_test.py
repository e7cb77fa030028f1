#!/usr/bin/env python3
"""Every value the loader accepts runs: each numeric key of each workload kind, set to 0, -0,
1 and huge values, either is refused as bad input (exit 2, naming the key) or runs a few
simulated microseconds to an ordinary end (exit 0 or 3). A crash (a signal, exit 134), any
other status, or a hang fails. Both transports for the kinds that use one.

usage: bounds_test.py METAROCE_SIM REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

SIM, ROOT = sys.argv[1], sys.argv[2]
LAB = os.path.join(ROOT, "topologies", "fpf-8x100g-lab.json")
SMALL = os.path.join(ROOT, "topologies", "fpf-8plane-64.json")
VALUES = [0, -0.0, 1, 4294967296, 2 ** 60, 1e300]

# (name, workload, topology, numeric keys to walk)
KINDS = [
    ("raw", {"kind": "raw", "pattern": "pairs"}, LAB,
     ["entropies_per_flow", "payload_bytes", "rate_gbps", "planes"]),
    ("streams", {"kind": "streams", "pattern": "explicit", "flows": [{"src": 0, "dst": 1}],
                 "message_bytes": 65536, "messages_per_qp": 2}, LAB,
     ["message_bytes", "messages_per_qp", "outstanding_per_qp", "qps_per_flow",
      "streams_per_qp", "start_us"]),
    ("collective", {"kind": "collective", "op": "allreduce", "sizes_bytes": [65536],
                    "ranks": 8}, SMALL,
     ["ranks", "channels", "iterations", "warmup_iterations", "qps_per_connection",
      "reduce_ps_per_byte", "ranks_per_host"]),
    ("collective sizes", {"kind": "collective", "op": "alltoall", "ranks": 8,
                          "sizes_bytes": [65536]}, SMALL, ["sizes_bytes.0"]),
    ("job", {"kind": "job", "job": {"name": "j", "iterations": 1, "ranks": 8, "phases": [
        {"name": "p", "op": "allreduce", "bytes": 65536, "group_size": 8}]}}, SMALL,
     ["job.iterations", "job.ranks", "job.phases.0.bytes", "job.phases.0.group_size"]),
]


def set_key(w, key, v):
    parts = key.split(".")
    for p in parts[:-1]:
        w = w[int(p)] if p.isdigit() else w[p]
    last = parts[-1]
    if last.isdigit():
        w[int(last)] = v
    else:
        w[last] = v




def replay(tmp, trace, fmt, *args):
    """metaroce-sim on a scenario replaying `trace` for 20 us on the 64-NIC fabric."""
    doc = {"name": "bounds", "topology": SMALL, "seed": 1, "duration_us": 20,
           "transport": {"kind": "metaroce"},
           "workload": {"kind": "trace", "file": trace, "format": fmt}}
    path = os.path.join(tmp, "trace-scenario.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    return subprocess.run([SIM, path, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


failures = 0
runs = 0
with tempfile.TemporaryDirectory() as tmp:
    for name, workload, topo, keys in KINDS:
        for transport in (("metaroce", "rocev2") if name != "raw" else ("metaroce",)):
            for key in keys:
                for v in VALUES:
                    w = json.loads(json.dumps(workload))
                    set_key(w, key, v)
                    doc = {"name": "bounds", "topology": topo, "seed": 1, "duration_us": 20,
                           "transport": {"kind": transport}, "workload": w}
                    path = os.path.join(tmp, "s.json")
                    with open(path, "w") as f:
                        json.dump(doc, f)
                    out = os.path.join(tmp, f"o{runs}.json")
                    runs += 1
                    what = f"{name}/{transport}: {key}={v!r}"
                    try:
                        r = subprocess.run([SIM, path, "--quiet", "--out", out,
                                            "--max-memory", "2G"], cwd=ROOT,
                                           capture_output=True, text=True, timeout=120)
                    except subprocess.TimeoutExpired:
                        print(f"FAIL: {what}: no end within 120 s")
                        failures += 1
                        continue
                    ok = r.returncode in (0, 3) or (r.returncode == 2 and "error" in r.stderr)
                    if not ok:
                        failures += 1
                        print(f"FAIL: {what}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    # A trace's collective of more bytes than a scenario may give one (2^32 messages and
    # more aborted the plan): exit 2 naming the record; just under the bound it runs.
    log = os.path.join(ROOT, "test", "data", "traces", "known-4rank.nccl.log")
    with open(log) as f:
        text = f.read()
    for count, want in (("2000000000000000000", 2), ("400000000000", 2), ("200000000000", 3)):
        t = os.path.join(tmp, f"count-{count}.nccl.log")
        with open(t, "w") as f:
            f.write(text.replace("count 262144", f"count {count}"))
        r = replay(tmp, t, "nccl-log", "--quiet", "--out", os.path.join(tmp, "t-out.json"))
        runs += 1
        named = want != 2 or "count" in r.stderr
        if r.returncode != want or not named:
            failures += 1
            print(f"FAIL: NCCL log count {count}: exit {r.returncode} (want {want}): "
                  f"{r.stderr.strip()[-300:]}")
    # A gzip trace that is padded, cut off or damaged is an error naming the file, not a
    # shorter trace (trailing garbage was accepted silently).
    gz = os.path.join(ROOT, "scenarios", "traces", "allreduce-broadcast-2rank.pt.trace.json.gz")
    with open(gz, "rb") as f:
        data = f.read()
    bad = bytearray(data)
    bad[len(bad) // 2] ^= 0xFF
    for what, blob, words in (("padded", data + b"garbage", "after the end"),
                              ("cut off", data[:2000], "cut off"),
                              ("damaged", bytes(bad), "not a valid gzip"),
                              ("whole", data, None)):
        t = os.path.join(tmp, "trace.json.gz")
        with open(t, "wb") as f:
            f.write(blob)
        r = replay(tmp, t, "pytorch-profiler", "--dry-run")
        runs += 1
        ok = r.returncode == 0 if words is None else \
            (r.returncode == 2 and words in r.stderr and t in r.stderr)
        if not ok:
            failures += 1
            print(f"FAIL: gzip trace {what}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
print(f"bounds: {runs} runs, {failures} failed")
sys.exit(1 if failures else 0)
