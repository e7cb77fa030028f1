#!/usr/bin/env python3
"""Replaying recorded jobs (workload kind "trace") end to end: a hand-written 4-rank profiler
trace whose answer follows from its gaps and the collective workload's time for the same
all-reduce, an NCCL log, scaling, the public 2-rank trace, unfinished runs, and bad traces
(exit 2 naming the file, the event and the field; nothing written).

usage: trace_test.py METAROCE_SIM REPO_ROOT
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

SIM, ROOT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
DATA = os.path.join(ROOT, "test", "data", "traces")
KNOWN = [os.path.join(DATA, "known-4rank-rank%d.json" % r) for r in range(4)]
LOG = os.path.join(DATA, "known-4rank.nccl.log")
SHARED = os.path.join(ROOT, "scenarios", "traces", "allreduce-broadcast-2rank.pt.trace.json.gz")
TOPO = os.path.join(ROOT, "topologies", "fpf-8plane-64.json")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def close(a, b, tol=1e-6):
    return a is not None and b is not None and abs(a - b) <= tol * max(1.0, abs(b))


def scenario(workload, **extra):
    s = {"name": "trace-test", "topology": TOPO, "seed": 1, "duration_us": 1e7,
         "transport": {"kind": "metaroce"}, "workload": workload}
    s.update(extra)
    return s


def run(tmp, name, sc, args=()):
    """Runs a scenario; returns (exit status, stdout, stderr, results or None)."""
    path = os.path.join(tmp, name + ".json")
    out = os.path.join(tmp, name + "-out.json")
    with open(path, "w") as f:
        json.dump(sc, f)
    r = subprocess.run([SIM, path, "--quiet", "--out", out] + list(args), cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    res = None
    if os.path.exists(out):
        with open(out) as f:
            res = json.load(f)
    return r.returncode, r.stdout, r.stderr, res


def rows(res, variant=None):
    return [x["metrics"] for x in res["runs"] if variant is None or x["variant"] == variant]


with tempfile.TemporaryDirectory() as tmp:
    # -- The 4-rank trace: one all-reduce of 2 MiB after 10 us of compute, then another after
    # 100 us (ranks 0-2) or 300 us (rank 3): the second starts when rank 3 reaches it.
    rc, _, err, res = run(tmp, "known", scenario({"kind": "trace", "file": KNOWN}))
    check(rc == 0, f"known 4-rank trace: exit {rc}: {err}")
    rc2, _, err2, coll = run(tmp, "coll", scenario({"kind": "collective", "op": "allreduce",
                                                    "sizes_bytes": [2097152], "ranks": 4}))
    check(rc2 == 0, f"collective of the same size: exit {rc2}: {err2}")
    if res and coll:
        a, b = rows(res)
        t = coll["runs"][0]["metrics"]["time_us"]
        check(a["bytes"] == 2097152 and b["bytes"] == 2097152,
              f"sizes: 1,048,576 Half = 2 MiB, got {a['bytes']}, {b['bytes']}")
        check(a["recorded_us"] == 40 and a["timing"] == "kernel", f"kernel timing: {a}")
        check(close(a["start_us"], 10), f"first all-reduce after 10 us of compute: {a['start_us']}")
        check(close(a["time_us"], t) and a["algorithm"] == coll["runs"][0]["metrics"]["algorithm"],
              f"a trace's all-reduce is the collective workload's: {a['time_us']} vs {t}")
        check(close(b["start_us"], 10 + a["time_us"] + 300),
              f"second all-reduce when the slowest rank reaches it: {b['start_us']} vs "
              f"{10 + a['time_us'] + 300}")
        check(close(a["iteration_us"], b["start_us"] + b["time_us"]),
              f"iteration ends with the last collective: {a['iteration_us']}")
        # ranks 0-2 wait 200 us in the second: mean communication T_a + T_b + 3 * 200 / 4
        check(close(a["comm_us"], a["time_us"] + b["time_us"] + 150),
              f"communication time: {a['comm_us']} vs {a['time_us'] + b['time_us'] + 150}")
        check(close(a["exposed_comm_us"], a["comm_us"]),
              "one stream per rank: all of its communication is exposed")
        check(a.get("skipped_events") == "wait x4", f"waits counted: {a.get('skipped_events')}")
        tl = res["runs"][0].get("timeline", [])
        waits = [e for e in tl if e["rank"] == 0 and e["what"] == "wait"]
        check(len(waits) == 1 and close(waits[0]["end_us"] - waits[0]["start_us"], 200),
              f"timeline: rank 0 waits 200 us for rank 3: {waits}")
    # Every column a trace run writes is one outputs.table accepts (ResultColumns("trace")).
    rc3, _, err3, _ = run(tmp, "columns", scenario({"kind": "trace", "file": KNOWN},
                                                   outputs={"table": ["?"]}), ["--dry-run"])
    allowed = err3.split("must be one of ")[-1].split(", got")[0].split(", ")
    with open(os.path.join(tmp, "known-out.csv")) as f:
        header = f.readline().strip().split(",")[2:]
    check(rc3 == 2 and all(c in allowed for c in header),
          f"columns outputs.table rejects: {[c for c in header if c not in allowed]}")
    check("wait x4" in err and err.count("not replayed") == 1,
          f"harmless events reported once: {err!r}")

    # The end of a coalesced group is counted, not replayed, like a wait.
    with open(KNOWN[0]) as f:
        d = json.load(f)
    d["traceEvents"][4]["args"]["Collective name"] = "coalesced"
    coal = os.path.join(tmp, "coalesced-trace.json")
    with open(coal, "w") as f:
        json.dump(d, f)
    rc, _, err, res = run(tmp, "coalesced", scenario({"kind": "trace", "file": coal}))
    check(rc == 0 and res and rows(res)[0]["skipped_events"] == "coalesced x1" and
          len(rows(res)) == 2, f"coalesced skipped: {rc} {err}")

    # One rank's trace: the others run its collectives (every group holds them all).
    rc, _, err, res = run(tmp, "one", scenario({"kind": "trace", "file": KNOWN[0]}))
    check(rc == 0, f"one rank's trace: exit {rc}: {err}")
    if res:
        a, b = rows(res)
        check(close(b["start_us"], 10 + a["time_us"] + 100),
              f"untraced ranks copy rank 0's gaps: {b['start_us']}")

    # Scaling: the world group widens; 6 is not a multiple of 4.
    rc, _, err, res = run(tmp, "scaled", scenario({"kind": "trace", "file": KNOWN,
                                                   "scale_to": 8}))
    check(rc == 0 and res and rows(res)[0]["group_size"] == 8 and rows(res)[0]["ranks"] == 8,
          f"scale_to 8 widens the data-parallel group: {rc} {err}")
    rc, out, err, res = run(tmp, "bad-scale", scenario({"kind": "trace", "file": KNOWN,
                                                       "scale_to": 6}))
    check(rc == 2 and "workload.scale_to" in err and "multiple" in err and res is None,
          f"scale_to 6 refused: {rc} {err}")

    # Random placement: the 4 ranks on other accelerators (the collective workload's shuffle),
    # the same answers' shape, and the same run twice.
    rnd = scenario({"kind": "trace", "file": KNOWN, "placement": "random"})
    rc, _, err, res = run(tmp, "random", rnd)
    rc2, _, _, res2 = run(tmp, "random2", rnd)
    check(rc == 0 and res and res2 and rows(res) == rows(res2) and
          close(rows(res)[1]["start_us"], 10 + rows(res)[0]["time_us"] + 300),
          f"random placement: {rc} {err}")

    # -- NCCL log: 4 processes, an all-reduce of 262,144 floats on the world, then all-gathers
    # of 131,072 bf16 per rank on two 2-rank communicators, 20 us of compute before each.
    rc, _, err, res = run(tmp, "log", scenario({"kind": "trace", "file": LOG, "gap_us": 20}))
    check(rc == 0, f"NCCL log: exit {rc}: {err}")
    if res:
        r = rows(res)
        check([x["op"] for x in r] == ["allreduce", "allgather", "allgather"],
              f"log: ops {[x['op'] for x in r]}")
        check(r[0]["bytes"] == 1048576 and r[1]["bytes"] == 524288 and r[1]["group_size"] == 2,
              f"log: sizes count x datatype (x nranks for all-gather): {r}")
        check(close(r[0]["start_us"], 20) and close(r[1]["start_us"], 20 + r[0]["time_us"] + 20),
              f"log: gap_us before each collective: {r[0]['start_us']}, {r[1]['start_us']}")
        check(r[0]["timing"] == "none" and "recorded_us" not in r[0], "log: no recorded times")
    rc, _, err, res = run(tmp, "log-scaled", scenario({"kind": "trace", "file": LOG,
                                                       "scale_to": 8}))
    check(rc == 0 and res and [x["instances"] for x in rows(res)] == [1, 2, 2],
          f"log scaled to 8: sub-communicators copied per replica: {rc} {err}")
    one = os.path.join(tmp, "one-rank.log")
    with open(one, "w") as f:
        f.write("h:7:7 [3] NCCL INFO AllReduce: opCount 139e sendbuff 0x1 recvbuff 0x2 count 1024 "
                "datatype 6 op 0 root 0 comm 0xabc [nranks=4] stream 0xdef\n")
    rc, _, err, res = run(tmp, "log-one", scenario({"kind": "trace", "file": one}))
    check(rc == 0 and res and rows(res)[0]["bytes"] == 2048 and rows(res)[0]["group_size"] == 4,
          f"one process's log line (the COLL format): {rc} {err}")

    # -- The public 2-rank trace (gzip): 15 all-reduces and 6 broadcasts, 6 waits skipped.
    rc, _, err, res = run(tmp, "shared", scenario({"kind": "trace", "file": SHARED}))
    check(rc == 0, f"shared trace: exit {rc}: {err}")
    if res:
        r = rows(res)
        check(len(r) == 21 and sum(x["op"] == "allreduce" for x in r) == 15 and
              sum(x["op"] == "broadcast" for x in r) == 6, f"shared trace: {len(r)} collectives")
        check(r[2]["bytes"] == 2049000 * 4 and r[2]["recorded_us"] == 3306.963,
              f"shared trace: first all-reduce {r[2]['bytes']} B, {r[2].get('recorded_us')} us")
        check(r[0]["skipped_events"] == "wait x6", "shared trace: 6 waits")
        check(r[0]["steps"] == 3 and close(r[0]["step_us"], r[0]["iteration_us"] / 3),
              f"shared trace: 3 profiler steps: {r[0].get('steps')}")

    # -- Two process groups on two streams: a collective on one overlaps the compute gap on the
    # other, so the exposed time is the communication less that overlap (from the timeline).
    def two_streams(r):
        ev = []
        for i, (pg, stream, ts, n) in enumerate([("0", 20, 1000, 1 << 20), ("1", 21, 1000, 1 << 24),
                                                 ("0", 20, 1300, 1 << 20)]):
            ev.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1,
                       "tid": 1, "ts": ts - 1 + i * 0.1, "dur": 1,
                       "args": {"External id": i + 1, "Collective name": "allreduce",
                                "In msg nelems": n, "Out msg nelems": n, "dtype": "Float",
                                "Group size": 2, "Process Group Name": pg,
                                "Process Group Ranks": "[0, 1]"}})
            ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0,
                       "tid": stream, "ts": ts, "dur": 100,
                       "args": {"External id": i + 1, "stream": stream}})
        return {"distributedInfo": {"rank": r, "world_size": 2}, "traceEvents": ev}
    files = []
    for r in range(2):
        files.append(os.path.join(tmp, "streams-%d.json" % r))
        with open(files[-1], "w") as f:
            json.dump(two_streams(r), f)
    rc, _, err, res = run(tmp, "streams", scenario({"kind": "trace", "file": files}))
    check(rc == 0, f"two streams: exit {rc}: {err}")
    if res:
        m = rows(res)[0]
        tl = res["runs"][0]["timeline"]

        def union(iv):
            out = []
            for a, b in sorted(iv):
                if out and a <= out[-1][1]:
                    out[-1][1] = max(out[-1][1], b)
                else:
                    out.append([a, b])
            return out
        comm = union([(e["start_us"], e["end_us"]) for e in tl
                      if e["rank"] == 0 and e["what"] in ("wait", "collective")])
        comp = union([(e["start_us"], e["end_us"]) for e in tl
                      if e["rank"] == 0 and e["what"] == "compute"])
        total = sum(b - a for a, b in comm)
        over = sum(max(0, min(b, d) - max(a, c)) for a, b in comm for c, d in comp)
        check(over > 0 and close(m["comm_us"], total, 1e-6) and
              close(m["exposed_comm_us"], total - over, 1e-6),
              f"exposed communication: {m['comm_us']} {m['exposed_comm_us']} vs {total} {over}")

    # -- Refused: an all-to-all over the whole world cannot be scaled; NCCL's Send cannot run.
    with open(KNOWN[0]) as f:
        d = json.load(f)
    d["traceEvents"][2]["args"]["Collective name"] = "all_to_all"
    d["traceEvents"][6]["args"]["Collective name"] = "all_to_all"
    a2a = os.path.join(tmp, "a2a-trace.json")
    with open(a2a, "w") as f:
        json.dump(d, f)
    rc, _, err, res = run(tmp, "a2a", scenario({"kind": "trace", "file": a2a, "scale_to": 8}))
    check(rc == 2 and "workload.scale_to" in err and "all-to-all over the whole world" in err,
          f"an all-to-all on the world is not scaled: {rc} {err}")
    rc, _, err, res = run(tmp, "a2a-ok", scenario({"kind": "trace", "file": a2a}))
    check(rc == 0 and res and rows(res)[0]["op"] == "alltoall", f"all-to-all replayed: {rc} {err}")
    send = os.path.join(tmp, "send-trace.log")
    with open(send, "w") as f:
        f.write("h:7:7 [0] NCCL INFO Send: opCount 1 sendbuff 0x1 recvbuff 0x0 count 8 datatype 0 "
                "op 0 root 1 comm 0xabc [nranks=2] stream 0xdef\n")
    rc, _, err, res = run(tmp, "send", scenario({"kind": "trace", "file": send}))
    check(rc == 2 and "line 1" in err and '"Send" cannot be replayed' in err,
          f"point-to-point refused: {rc} {err}")

    # -- Deterministic: the same trace twice gives the same CSV.
    run(tmp, "again", scenario({"kind": "trace", "file": KNOWN}))
    with open(os.path.join(tmp, "known-out.csv")) as f1, \
            open(os.path.join(tmp, "again-out.csv")) as f2:
        check(f1.read() == f2.read(), "a replay is deterministic")

    # -- A bad key in a later variant: the error alone on stderr (the skipped waits are
    # reported when a run starts, not by a load that fails).
    rc, out, err, res = run(tmp, "bad-variant", scenario(
        {"kind": "trace", "file": KNOWN},
        variants=[{"name": "a"}, {"name": "b", "set": {"workload.stride": 0}}]))
    check(rc == 2 and res is None and "not replayed" not in err and "workload.stride" in err,
          f"a bad variant: only its error: {rc} {err!r}")

    # -- Unfinished: the run's time limit ends it inside the second all-reduce: exit 3, written.
    rc, _, err, res = run(tmp, "short", scenario({"kind": "trace", "file": KNOWN},
                                                 duration_us=150))
    check(rc == 3 and res and rows(res)[0]["collectives_completed"] == 1 and
          rows(res)[0]["collectives_total"] == 2 and "1 of 2 collectives unfinished" in err,
          f"unfinished replay: exit {rc}: {err}")

    # -- Bad traces: exit 2, the file, the event and the field named, nothing written.
    with open(KNOWN[0]) as f:
        good = json.load(f)
    rank1 = json.load(open(KNOWN[1]))

    def bad(name, doc, expect, extra=None):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        files = [path] + (extra or [])
        rc, out, err, res = run(tmp, "bad-" + name, scenario({"kind": "trace", "file": files}))
        line = err.strip().splitlines()[0] if err.strip() else ""
        ok = rc == 2 and res is None and out == ""
        check(ok and path in line and all(e in line for e in expect),
              f"{name}: exit {rc}, expected {expect} in {err!r}")

    bad("not-json.json", "{ this is not json", ["workload.file", "not a PyTorch profiler trace"])
    bad("plain.txt", "hello\n", ["neither a PyTorch profiler trace"])
    d = json.loads(json.dumps(good))
    del d["distributedInfo"]
    bad("no-dist.json", d, ["distributedInfo: missing"])
    d = json.loads(json.dumps(good))
    del d["traceEvents"][2]["args"]["In msg nelems"]
    bad("no-size.json", d, ["event 2 (record_param_comms)", 'args."In msg nelems": missing'])
    d = json.loads(json.dumps(good))
    d["traceEvents"][2]["args"]["Collective name"] = "allfoo"
    bad("unknown-op.json", d, ["event 2", 'args."Collective name"', 'unknown collective "allfoo"'])
    d = json.loads(json.dumps(good))
    d["traceEvents"][6]["args"]["dtype"] = "Quaternion"
    bad("unknown-dtype.json", d, ["event 6", 'args."dtype"', "unknown dtype"])
    d = json.loads(json.dumps(rank1))
    d["traceEvents"][6]["args"]["In msg nelems"] = 7
    bad("disagree.json", d, ["event 6", "In msg nelems", "default_pg, collective 1", "rank 1"],
        extra=KNOWN[0:1] + KNOWN[2:])
    with open(LOG) as f:
        log = f.read().replace("datatype 9", "datatype 42", 1)
    bad("bad-dtype.log", log, ["line 13", "datatype", "unknown ncclDataType_t 42"])
    with gzip.open(os.path.join(tmp, "trunc.json.gz"), "wt") as f:
        f.write(json.dumps(good)[:300])
    rc, out, err, res = run(tmp, "trunc", scenario({"kind": "trace",
                                                    "file": os.path.join(tmp, "trunc.json.gz")}))
    check(rc == 2 and "trunc.json.gz" in err and "not a PyTorch profiler trace" in err,
          f"truncated gzip trace: {rc} {err}")

print(f"{len(failures)} failure(s)" if failures else "trace tests: all passed")
sys.exit(1 if failures else 0)
