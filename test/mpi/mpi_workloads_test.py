#!/usr/bin/env python3
"""Collectives, jobs and streams on several processes: metaroce-sim-mpi under mpirun against
the one-process metaroce-sim, on one scenario of test/mpi (ring-allreduce, alltoall, streams
or job; MetaRoCE and RoCEv2 variants each).

- 1 process with METAROCE_RUN_IN_PARTS set runs the several-process path (QPs, sources and
  collective state on their NICs' process only, results combined through DistributedRun,
  completion decided between time windows, the drain in windows): its CSV is byte-identical
  to metaroce-sim's, but for the streams' sender state read at the run's end (END_STATE).
  So that path changes nothing else by itself; on more processes only the engine's order of
  frames that reach a node at the same picosecond from another process differs
  (results/distributed.md).
- 2 and 4 processes: what the workload is (messages, bytes, QPs, collectives or iterations
  completed, algorithm, protocol, channels) equal; its times within TOLERANCE of one
  process's (that tie order shifts ECN marks' random draws and equal-time enqueues, and
  congestion control carries the difference on: measured spreads in results/distributed.md).
- Every process simulated NICs, and the events split over them.

usage: mpi_workloads_test.py METAROCE_SIM METAROCE_SIM_MPI REPO_ROOT SCENARIO
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

SIM, SIM_MPI, ROOT, NAME = sys.argv[1:5]
SCENARIO = os.path.join(ROOT, "test", "mpi", NAME + ".json")
MPIRUN = ["mpirun", "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
# What the workload is: the same whatever the processes.
EXACT = {
    "ring-allreduce": ["size_bytes", "completed", "ended_by", "algorithm", "protocol", "channels",
                       "messages", "qps", "wire_bytes_per_rank", "ranks"],
    "alltoall": ["size_bytes", "completed", "ended_by", "algorithm", "protocol", "channels",
                 "messages", "qps", "wire_bytes_per_rank", "ranks"],
    "streams": ["messages_completed", "messages_total", "bytes_completed", "bytes_delivered",
                "qps", "qps_unfinished", "ended_by"],
    "job": ["phase", "groups", "algorithm", "iterations_completed", "payload_bytes_posted",
            "ended_by"],
}[NAME]
# Times, relative tolerance: about twice the largest difference measured on 2 and 4
# processes (results/distributed.md). The ring's steps wait on one another and leave no
# equal-time races; all-to-all's and the job's congested fabric does not.
TOLERANCE = {
    "ring-allreduce": {"time_us": 0.005},
    "alltoall": {"time_us": 0.02},
    "streams": {"completion_us": 0.10, "msg_fct_mean_us": 0.05, "msg_fct_p50_us": 0.05},
    "job": {"time_us": 0.06, "iteration_us": 0.06},
}[NAME]
# A sender's state read when the run ends (MetaRoCE's windows and paths): one process reads
# it at the last completion, several at the first window boundary after it, when the last
# acknowledgements have arrived (results/distributed.md): within 1%.
END_STATE = {"streams": ["mean_qwnd_packets", "max_active_paths"]}.get(NAME, [])
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(cmd, out, env=None):
    r = subprocess.run(cmd + [SCENARIO, "--quiet", "--out", out], cwd=ROOT,
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, **(env or {})))
    check(r.returncode == 0, f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    with open(out[:-len(".json")] + ".csv") as f:
        text = f.read()
    with open(out) as f:
        runs = json.load(f)["runs"]
    return text, list(csv.DictReader(text.splitlines())), runs


with tempfile.TemporaryDirectory() as tmp:
    seq_text, seq, _ = run([SIM], os.path.join(tmp, "seq.json"))
    check(len(seq) >= 2, f"{NAME}: rows {len(seq)}")
    parts = {"METAROCE_RUN_IN_PARTS": "1"}
    text, rows, _ = run(MPIRUN + ["-x", "METAROCE_RUN_IN_PARTS", "-np", "1", SIM_MPI],
                        os.path.join(tmp, "parts1.json"), parts)
    if not END_STATE:
        check(text == seq_text, f"{NAME}: 1 process in parts: CSV differs from metaroce-sim's")
    for row, one in zip(rows, seq):
        for k in one:
            a, b = row.get(k), one[k]
            if k in END_STATE and a and b:
                check(abs(float(a) - float(b)) <= 0.01 * abs(float(b)),
                      f"{NAME}: 1 process in parts: {k} {a} vs {b}")
            else:
                check(a == b, f"{NAME}: 1 process in parts: {k} {a} != {b}")
    for np in (2, 4):
        _, rows, runs = run(MPIRUN + ["-np", str(np), SIM_MPI], os.path.join(tmp, f"np{np}.json"))
        check(len(rows) == len(seq), f"{NAME}, {np} processes: {len(rows)} rows")
        for row, one in zip(rows, seq):
            where = f"{NAME}, {np} processes, {one['variant']}"
            for k in EXACT:
                check(row.get(k) == one.get(k), f"{where}: {k} {row.get(k)} != {one.get(k)}")
            for k, tol in TOLERANCE.items():
                a, b = float(row[k]), float(one[k])
                check(abs(a - b) <= tol * abs(b), f"{where}: {k} {a} vs {b} (tolerance {tol})")
        for r in runs:
            dist = (r.get("cost") or {}).get("distributed", {})
            if not dist:
                continue
            check(dist["ranks"] == np and len(dist["nics"]) == np and min(dist["nics"]) > 0
                  and sum(dist["nics"]) == 64, f"{NAME}, {np} processes: {dist}")
            check(min(dist["events"]) > 0, f"{NAME}, {np} processes: events {dist['events']}")

if failures:
    print(f"{len(failures)} failed")
    sys.exit(1)
print(f"mpi workloads ({NAME}): all checks passed")
