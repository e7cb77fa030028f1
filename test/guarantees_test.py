#!/usr/bin/env python3
"""The runner's guarantees end to end: outputs are checked before anything is simulated and
never replace what the runner did not create; metrics cover completed work only and
unfinished work is never silent (exit 3); a run that cannot progress ends as stalled with a
diagnosis; --max-wall-s ends a run; a broken invariant exits 4.

usage: guarantees_test.py METAROCE_SIM REPO_ROOT
"""
import json
import os
import stat
import subprocess
import sys
import tempfile
import time

SIM, ROOT = sys.argv[1], sys.argv[2]
LAB = os.path.join(ROOT, "scenarios", "multiplane-bidirectional.json")
COLL = os.path.join(ROOT, "scenarios", "collectives-64gpu-allreduce.json")
failures = []


def run(args, timeout=300):
    t0 = time.monotonic()
    r = subprocess.run([SIM] + args, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    r.wall = time.monotonic() - t0
    return r


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def lab(tmp, extra=None, **top):
    """The 2-NIC lab, MetaRoCE, 8 QPs of 8 x 1 MiB one way (no variants)."""
    with open(LAB) as f:
        j = json.load(f)
    j.pop("variants")
    j["workload"]["bidirectional"] = False
    j["topology"] = os.path.join(ROOT, j["topology"])
    j.update(top)
    for k, v in (extra or {}).items():
        j[k] = v
    path = os.path.join(tmp, "lab.json")
    with open(path, "w") as f:
        json.dump(j, f)
    return path


def warnings(r):
    return [l for l in r.stderr.splitlines() if "warning:" in l]


with tempfile.TemporaryDirectory() as tmp:
    scen = lab(tmp)

    # 1. --out never replaces or writes through what is not a regular file.
    r = run([scen, "--quiet", "--out", "/dev/null"])
    check(r.returncode == 2 and "--out" in r.stderr and "/dev/null" in r.stderr,
          f"--out /dev/null: exit 2 naming it (got {r.returncode}: {r.stderr.strip()})")
    check(stat.S_ISCHR(os.stat("/dev/null").st_mode), "/dev/null is still a device")
    check(not os.path.exists("/dev/null.csv"), "no /dev/null.csv written")
    target = os.path.join(tmp, "target.json")
    with open(target, "w") as f:
        f.write("keep")
    link = os.path.join(tmp, "link.json")
    os.symlink(target, link)
    r = run([scen, "--quiet", "--out", link])
    check(r.returncode == 2 and "symbolic link" in r.stderr, f"--out symlink: exit 2 ({r.stderr.strip()})")
    check(open(target).read() == "keep" and os.path.islink(link), "the link and its target are untouched")
    folder = os.path.join(tmp, "folder.json")
    os.mkdir(folder)
    r = run([scen, "--quiet", "--out", folder])
    check(r.returncode == 2 and "not a regular file" in r.stderr, f"--out folder: exit 2 ({r.stderr.strip()})")

    # 5. Output problems are found before the simulation, and a run writes all or nothing.
    twin = os.path.join(tmp, "twin")
    os.mkdir(twin + ".csv")  # the CSV twin's path is taken by a folder
    r = run([scen, "--quiet", "--out", twin + ".json"])
    check(r.returncode == 2 and "twin.csv" in r.stderr, f"CSV twin unusable: exit 2 ({r.stderr.strip()})")
    check(not os.path.exists(twin + ".json"), "no JSON left behind when the CSV cannot be written")
    for bad, why in [("/proc/self/x.json", "pseudo file system"),
                     (os.path.join(tmp, "missing", "x.json"), "missing folder"),
                     (os.path.join(tmp, "x" * 250 + ".json"), "over-long name"),
                     (os.path.join(tmp, "dir") + "/", "a folder name")]:
        r = run([scen, "--quiet", "--out", bad])
        check(r.returncode == 2 and "--out" in r.stderr and r.stdout == "",
              f"--out {why}: exit 2 before simulating (got {r.returncode}: {r.stderr.strip()})")
    if os.geteuid() != 0:  # root writes anywhere: the permission case only means something for others
        ro = os.path.join(tmp, "ro")
        os.mkdir(ro, 0o555)
        r = run([scen, "--quiet", "--out", os.path.join(ro, "x.json")])
        check(r.returncode == 2 and "cannot create" in r.stderr, "read-only folder: exit 2")
    good = os.path.join(tmp, "good.json")
    r = run([scen, "--quiet", "--out", good])
    check(r.returncode == 0 and os.path.exists(good) and os.path.exists(os.path.join(tmp, "good.csv")),
          f"a good run writes JSON and CSV ({r.stderr.strip()})")
    leftovers = [n for n in os.listdir(tmp) if n.startswith(".")]
    check(not leftovers, f"no temporaries left behind: {leftovers}")
    rec = json.load(open(good))["runs"][0]
    check(rec["metrics"]["ended_by"] == "completed", "a finished run says ended_by completed")

    # 2. Metrics cover completed work only; unfinished work is never silent.
    down = [{"kind": "link_down", "nic": 1, "plane": p, "at_us": 100} for p in range(8)]
    cut = lab(tmp, {"faults": down})
    out = os.path.join(tmp, "cut.json")
    r = run([cut, "--quiet", "--out", out])
    check(r.returncode == 3, f"receiver cut off: exit 3 (got {r.returncode}: {r.stderr.strip()})")
    w = warnings(r)
    check(len(w) == 1 and "unfinished" in w[0] and "stalled" in w[0] and "port(s) down" in w[0],
          f"one warning line naming the stall and the down ports: {w}")
    check(r.wall < 60, f"the stall ends the run quickly ({r.wall:.1f} s)")
    m = json.load(open(out))["runs"][0]["metrics"]
    check(m["messages_completed"] < m["messages_total"], "messages_completed < messages_total")
    check(m["goodput_gbps"] <= 800, f"goodput within the NIC's 800 Gb/s: {m['goodput_gbps']}")
    span = m["completion_us"]
    if m["messages_completed"] > 0 and span > 0:
        check(abs(m["goodput_gbps"] - m["bytes_completed"] * 8 / (span * 1e3)) < 1e-6 * m["goodput_gbps"] + 1e-9,
              "goodput is completed bytes over the completion span")
    check(m["bytes_delivered"] >= m["bytes_completed"], "partial bytes are counted apart")
    check(" completed" in r.stdout and f"{m['messages_completed']}/{m['messages_total']}" in r.stdout,
          f"the table shows the completed count: {r.stdout}")
    r = run([lab(tmp, {"faults": down, "expect_unfinished": True}), "--quiet"])
    check(r.returncode == 0 and len(warnings(r)) == 1 and "expected" in r.stderr,
          f"expect_unfinished: exit 0, the warning still printed ({r.returncode}: {r.stderr.strip()})")
    r = run([lab(tmp, duration_us=100), "--quiet"])
    check(r.returncode == 3 and "duration_us" in r.stderr,
          f"a short duration_us: exit 3 naming it ({r.returncode}: {r.stderr.strip()})")

    # 6. A collective that can never finish ends as stalled, not after duration_us (1e9 us).
    cfaults = json.dumps([{"kind": "link_down", "nic": 5, "plane": p, "at_us": 1} for p in range(8)])
    r = run([COLL, "--quiet", "--set", "workload.sizes_bytes=[1048576]", "--set", f"faults={cfaults}",
             "--set", "stall_us=2000"])
    check(r.returncode == 3 and r.stderr.count("stalled") >= 1 and "NIC 5 port" in r.stderr,
          f"collective with a NIC cut off: exit 3, stalled, NIC 5's ports named ({r.returncode}: {r.stderr[:400]})")
    check(r.wall < 120, f"it ends in seconds ({r.wall:.1f} s)")

    # --max-wall-s ends any run.
    r = run([COLL, "--quiet", "--set", "workload.sizes_bytes=[1073741824]", "--max-wall-s", "1"])
    check(r.returncode == 3 and "max_wall_s" in r.stderr and r.wall < 30,
          f"--max-wall-s 1: exit 3 within seconds ({r.returncode}, {r.wall:.1f} s: {r.stderr[:300]})")
    for bad in ["0", "-1", "x", "nan"]:
        r = run([scen, "--max-wall-s", bad])
        check(r.returncode == 2 and "--max-wall-s" in r.stderr, f"--max-wall-s {bad}: exit 2")

    # A broken invariant exits 4 naming the rule: a lossless fabric whose buffer is too small
    # for PFC's headroom drops frames of its lossless class.
    incast = os.path.join(ROOT, "scenarios", "incast.json")
    small = ["--variant", "rocev2 PFC only", "--set", "topology.switch.buffer_per_port_bytes=4096"]
    out = os.path.join(tmp, "violation.json")
    r = run([incast, "--quiet", "--out", out] + small)
    check(r.returncode == 4 and "lossless" in r.stderr and "switch (site 0" in r.stderr
          and " us: " in r.stderr and not os.path.exists(out),
          f"lossless drop: exit 4 naming the switch, the rule and the time, nothing written "
          f"({r.returncode}: {r.stderr.strip()[:300]})")
    r = run([incast, "--quiet", "--set", "check_invariants=false"] + small)
    check(r.returncode == 0, f"check_invariants false: the same run completes ({r.returncode})")

# The keys these guarantees add reject bad values naming the key (exit 2).
for args, key in [(["--set", "stall_us=-1"], "stall_us"),
                  (["--set", "expect_unfinished=3"], "expect_unfinished"),
                  (["--set", "check_invariants=\"yes\""], "check_invariants"),
                  (["--set", "workload.warmup_iterations=-1"], "workload.warmup_iterations"),
                  (["--set", "topology.accelerators_per_host=7"], "topology.accelerators_per_host"),
                  (["--set", "topology.scale_up={\"gbps\": 100}"], "topology.scale_up"),
                  (["--set", "topology.accelerators_per_host=8", "--set", "topology.scale_up={\"gbps\": 0}"],
                   "topology.scale_up.gbps"),
                  (["--set", "topology.nic_tx_latency_ns=-5"], "topology.nic_tx_latency_ns"),
                  (["--set", "topology.accelerators_per_host=8", "--set", "workload.ranks_per_host=4"],
                   "workload.ranks_per_host")]:
    r = run([COLL] + args + ["--dry-run"])
    check(r.returncode == 2 and key in r.stderr, f"{args}: exit 2 naming {key} ({r.returncode}: {r.stderr.strip()[:200]})")

# A collective size's result does not depend on the sizes run before it (each size runs in a
# world of its own); warm-up iterations run before the timed ones, as in nccl-tests.
with tempfile.TemporaryDirectory() as tmp:
    for name, size in [("alltoall", 8388608), ("allreduce", 2097152)]:
        scen = os.path.join(ROOT, "scenarios", f"collectives-64gpu-{name}.json")
        times = []
        for sizes in [[size], [8, 32768, 524288, size]]:
            out = os.path.join(tmp, f"{name}-{len(sizes)}.json")
            r = run([scen, "--quiet", "--variant", "MetaRoCE", "--set", f"workload.sizes_bytes={json.dumps(sizes)}",
                     "--out", out])
            check(r.returncode == 0, f"{name} {sizes}: exit 0 ({r.stderr.strip()[:200]})")
            if r.returncode == 0:
                runs = json.load(open(out))["runs"]
                times.append([x["metrics"]["time_us"] for x in runs if x["metrics"]["size_bytes"] == size][0])
        if len(times) == 2:
            check(abs(times[0] - times[1]) <= 0.01 * times[0],
                  f"{name} {size} B: the same alone and after smaller sizes ({times})")
    scen = os.path.join(ROOT, "scenarios", "collectives-64gpu-allreduce.json")
    sim_us = []
    for warm in [0, 2]:
        out = os.path.join(tmp, f"warm{warm}.json")
        r = run([scen, "--quiet", "--variant", "MetaRoCE", "--set", "workload.sizes_bytes=[32768]",
                 "--set", f"workload.warmup_iterations={warm}", "--out", out])
        m = json.load(open(out))["runs"][0]
        sim_us.append(m["cost"]["simulated_us"])
        check(m["metrics"]["warmup_iterations"] == warm and m["metrics"]["completed"],
              f"warmup_iterations={warm} recorded and completed")
    check(sim_us[1] > 2 * sim_us[0] * 0.9, f"two warm-up iterations run before the timed one: {sim_us}")

# A collective's default table follows nccl-tests' layout (with the algorithm and NCCL's
# protocol), and its records carry nccl-tests' fields.
with tempfile.TemporaryDirectory() as tmp:
    scen = os.path.join(ROOT, "scenarios", "collectives-64gpu-allreduce.json")
    out = os.path.join(tmp, "t.json")
    r = run([scen, "--quiet", "--variant", "MetaRoCE", "--set", "workload.sizes_bytes=[1024]",
             "--set", "outputs={}", "--out", out])
    head = r.stdout.splitlines()[1].split() if r.returncode == 0 else []
    want = ["variant", "size_bytes", "count", "type", "redop", "root", "algorithm", "protocol",
            "time_us", "algbw_gbytes_per_s", "busbw_gbytes_per_s", "wrong", "completed"]
    check(head == want, f"nccl-tests layout: {head}")
    if r.returncode == 0:
        m = json.load(open(out))["runs"][0]["metrics"]
        check(m["count"] == 256 and m["type"] == "float" and m["redop"] == "sum" and m["root"] == -1
              and m["wrong"] == "N/A", f"nccl-tests fields: {m}")

if failures:
    print(f"{len(failures)} failed")
    sys.exit(1)
print("guarantees: all checks passed")
