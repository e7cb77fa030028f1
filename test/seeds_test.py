#!/usr/bin/env python3
"""Properties the seeds state, end to end through metaroce-sim: a collective takes as long
after another collective in the same world as alone (no state of finished work carries into
new work).

usage: seeds_test.py METAROCE_SIM REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

SIM, ROOT = sys.argv[1], sys.argv[2]
A2A = os.path.join(ROOT, "scenarios", "collectives-64gpu-alltoall.json")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def collective_time(tmp, name, *sets):
    out = os.path.join(tmp, name + ".json")
    r = subprocess.run([SIM, A2A, "--quiet", "--variant", "MetaRoCE", "--out", out,
                        "--set", "workload.sizes_bytes=[8388608]"] +
                       [a for s in sets for a in ("--set", s)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"{name}: exit {r.returncode}: {r.stderr.strip()}")
    with open(out) as f:
        return json.load(f)["runs"][0]["metrics"]["time_us"]


with tempfile.TemporaryDirectory() as tmp:
    # 64 ranks, 8 MiB all-to-all: timed alone, and timed after one untimed run of itself in
    # the same world (warmup_iterations = 1), with the receivers' rate hints on.
    alone = collective_time(tmp, "alone")
    after = collective_time(tmp, "after", "workload.warmup_iterations=1")
    print(f"8 MiB all-to-all: {alone} us alone, {after} us after another")
    check(abs(after - alone) <= 0.01 * alone,
          f"all-to-all after another takes {after} us, alone {alone} us (more than 1% apart)")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
