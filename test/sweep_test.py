#!/usr/bin/python3
"""scripts/sweep end to end: a grid runs, resumes without redoing finished points, and bad
input exits 2 before anything runs.

usage: sweep_test.py METAROCE_SIM REPO_ROOT
"""
import csv
import os
import shutil
import subprocess
import sys
import tempfile

SIM, ROOT = sys.argv[1], sys.argv[2]
SWEEP = os.path.join(ROOT, "scripts", "sweep")
SCEN = os.path.join(ROOT, "scenarios", "fabric-ecmp-collisions.json")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def sweep(out, *extra):
    return subprocess.run([SWEEP, SCEN, "--sim", SIM, "--out", out, "-j", "2",
                           "--set", "duration_us=5",
                           "--grid", "workload.entropies_per_flow=1,4",
                           "--grid", "seed=1,2", *extra],
                          capture_output=True, text=True, timeout=600)


tmp = tempfile.mkdtemp(prefix="sweep-test-")
try:
    out = os.path.join(tmp, "s")
    r = sweep(out)
    check(r.returncode == 0, f"sweep failed: {r.stderr}")
    rows = list(csv.DictReader(open(os.path.join(out, "sweep.csv"))))
    check(len(rows) == 4 * 4, f"expected 16 rows (4 points x 4 variants), got {len(rows)}")
    check(set(rows[0]) >= {"workload.entropies_per_flow", "seed", "variant"}, "grid columns")
    # Resume: nothing to do; then one point lost is redone alone.
    r = sweep(out)
    check("4 already done, running 0" in r.stderr, f"resume: {r.stderr.splitlines()[:1]}")
    pts = sorted(os.listdir(os.path.join(out, "points")))
    os.remove(os.path.join(out, "points", [p for p in pts if p.endswith(".json")][0]))
    r = sweep(out)
    check("3 already done, running 1" in r.stderr, f"partial resume: {r.stderr.splitlines()[:1]}")
    # Job list for a scheduler.
    jobs = os.path.join(tmp, "jobs.txt")
    r = sweep(os.path.join(tmp, "e"), "--emit-jobs", jobs)
    check(r.returncode == 0 and len(open(jobs).read().splitlines()) == 4, "--emit-jobs")
    # Bad grid key: exit 2, nothing written.
    bad = os.path.join(tmp, "bad")
    r = subprocess.run([SWEEP, SCEN, "--sim", SIM, "--out", bad, "--grid", "workload.nope=1,2"],
                       capture_output=True, text=True)
    check(r.returncode == 2 and "workload.nope" in r.stderr, f"bad grid: {r.returncode} {r.stderr}")
    check(not os.path.exists(bad), "bad grid left output behind")
finally:
    shutil.rmtree(tmp)
print("sweep: all checks passed" if not failures else f"sweep: {len(failures)} checks failed")
sys.exit(1 if failures else 0)
