#!/usr/bin/env python3
"""Collectives, jobs and streams on several processes: metaroce-sim-mpi under mpirun against
the one-process metaroce-sim, on one scenario of test/mpi (ring-allreduce, alltoall, streams
or job; MetaRoCE and RoCEv2 variants each). QPs, sources and collective state exist on their
NICs' process only, results are combined through DistributedRun, completion is decided
between time windows.

- The module's own engine (metaroce-sim-mpi's default, ties ordered by node): the CSV is
  byte-identical on 1, 2 and 4 processes, and to metaroce-sim --tie-order node's but for the
  streams' sender state read at the run's end (END_STATE: one process reads it at the last
  completion, a run in parts at the window boundary after it), within 1%.
- ns-3's DistributedSimulatorImpl: 1 process with METAROCE_RUN_IN_PARTS set is byte-identical
  to metaroce-sim's (ns-3's tie order) but for END_STATE; on 2 processes what the workload
  is (messages, bytes, QPs, collectives or iterations completed, algorithm, protocol,
  channels) is equal, its times within TOLERANCE (ns-3 takes a frame from another process
  after the receiver's own events of the same picosecond: results/distributed.md).
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


def same_but_end_state(rows, ref, where):
    check(len(rows) == len(ref), f"{where}: {len(rows)} rows, {len(ref)} expected")
    for row, one in zip(rows, ref):
        for k in one:
            a, b = row.get(k), one[k]
            if k in END_STATE and a and b:
                check(abs(float(a) - float(b)) <= 0.01 * abs(float(b)), f"{where}: {k} {a} vs {b}")
            else:
                check(a == b, f"{where}: {k} {a} != {b}")


def check_split(runs, np, where):
    for r in runs:
        dist = (r.get("cost") or {}).get("distributed", {})
        if not dist:
            continue
        check(dist["ranks"] == np and len(dist["nics"]) == np and min(dist["nics"]) > 0
              and sum(dist["nics"]) == 64, f"{where}: {dist}")
        check(min(dist["events"]) > 0, f"{where}: events {dist['events']}")


NS3 = {"NS_GLOBAL_VALUE": "SimulatorImplementationType=ns3::DistributedSimulatorImpl"}
with tempfile.TemporaryDirectory() as tmp:
    # The own engine: the same bytes on 1, 2 and 4 processes.
    node_text, node, _ = run([SIM, "--tie-order", "node"], os.path.join(tmp, "node.json"))
    check(len(node) >= 2, f"{NAME}: rows {len(node)}")
    own = None
    for np in (1, 2, 4):
        text, rows, runs = run(MPIRUN + ["-np", str(np), SIM_MPI],
                               os.path.join(tmp, f"own{np}.json"))
        own = text if own is None else own
        check(text == own, f"{NAME}, {np} processes: CSV differs from 1 process's:\n{text}\n{own}")
        if np == 1:
            same_but_end_state(rows, node, f"{NAME}, own engine, 1 process vs metaroce-sim")
        else:
            check_split(runs, np, f"{NAME}, {np} processes")

    # ns-3's engine.
    seq_text, seq, _ = run([SIM], os.path.join(tmp, "seq.json"))
    parts = dict(NS3, METAROCE_RUN_IN_PARTS="1")
    text, rows, _ = run(MPIRUN + ["-x", "NS_GLOBAL_VALUE", "-x", "METAROCE_RUN_IN_PARTS", "-np",
                                  "1", SIM_MPI], os.path.join(tmp, "parts1.json"), parts)
    same_but_end_state(rows, seq, f"{NAME}: ns-3's engine, 1 process in parts")
    for np in (2,):
        _, rows, runs = run(MPIRUN + ["-x", "NS_GLOBAL_VALUE", "-np", str(np), SIM_MPI],
                            os.path.join(tmp, f"np{np}.json"), NS3)
        check(len(rows) == len(seq), f"{NAME}, {np} processes: {len(rows)} rows")
        for row, one in zip(rows, seq):
            where = f"{NAME}, ns-3's engine, {np} processes, {one['variant']}"
            for k in EXACT:
                check(row.get(k) == one.get(k), f"{where}: {k} {row.get(k)} != {one.get(k)}")
            for k, tol in TOLERANCE.items():
                a, b = float(row[k]), float(one[k])
                check(abs(a - b) <= tol * abs(b), f"{where}: {k} {a} vs {b} (tolerance {tol})")
        check_split(runs, np, f"{NAME}, ns-3's engine, {np} processes")

if failures:
    print(f"{len(failures)} failed")
    sys.exit(1)
print(f"mpi workloads ({NAME}): all checks passed")
