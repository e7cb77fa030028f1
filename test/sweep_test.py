#!/usr/bin/python3
"""scripts/sweep end to end: a grid runs and resumes without redoing finished points; damaged
or missing outputs are run again; a point's id follows the --sets, the scenario's content and
the build; points with different columns combine by column name; the runs die with the sweep
(kill -9, SIGTERM, SIGINT); one sweep per folder; exit 3 for unfinished work and 1 for a failed
point; bad input exits 2 before anything runs; --emit-jobs lines run one point each.

usage: sweep_test.py METAROCE_SIM REPO_ROOT
"""
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SIM, ROOT = sys.argv[1], sys.argv[2]
SWEEP = os.path.join(ROOT, "scripts", "sweep")
SCEN = os.path.join(ROOT, "scenarios", "fabric-ecmp-collisions.json")
failures = []

# A stand-in for metaroce-sim, fast and scriptable through --set fake.*: fake.sleep seconds,
# then exit fake.exit (1 writes nothing; 0 and 3 write two runs); fake.cols names the CSV
# columns (':'-separated), whose values are COLUMN:TAG:RUN; fake.pids is a folder where each
# run leaves a file named by its pid; fake.tag=bad is rejected by --dry-run.
FAKE = r'''#!/usr/bin/python3
import json, os, sys, time
args = sys.argv[1:]
sets = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--set")
tag = sets.get("fake.tag", "x")
if "--dry-run" in args:
    if tag == "bad":
        sys.exit(print("metaroce-sim: error: fake.tag: 'bad' is not allowed", file=sys.stderr) or 2)
    print(json.dumps({"scenario": open(args[0]).read(), "set": sets}, sort_keys=True))
    sys.exit(0)
if "fake.pids" in sets:
    open(os.path.join(sets["fake.pids"], str(os.getpid())), "w").close()
time.sleep(float(sets.get("fake.sleep", 0)))
status = int(sets.get("fake.exit", 0))
if status == 1:
    sys.exit(print("metaroce-sim: failed: fake failure", file=sys.stderr) or 1)
out = args[args.index("--out") + 1]
cols = sets.get("fake.cols", "a:b").split(":")
runs = [{"variant": "v%d" % i, "metrics": {c: "%s:%s:%d" % (c, tag, i) for c in cols}}
        for i in range(2)]
json.dump({"runs": runs}, open(out, "w"))
with open(out[:-5] + ".csv", "w") as f:
    f.write(",".join(["scenario", "variant"] + cols) + "\n")
    for r in runs:
        f.write(",".join(["fake", r["variant"]] + [r["metrics"][c] for c in cols]) + "\n")
if status == 3:
    print("metaroce-sim: warning: 1 of 2 messages unfinished", file=sys.stderr)
sys.exit(status)
'''


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def sweep(out, *extra, scen=SCEN):
    return subprocess.run([SWEEP, scen, "--sim", SIM, "--out", out, "-j", "2",
                           "--set", "duration_us=5",
                           "--grid", "workload.entropies_per_flow=1,4",
                           "--grid", "seed=1,2", *extra],
                          capture_output=True, text=True, timeout=600)


def fake_args(out, *extra):
    return [SWEEP, fake_scen, "--sim", fake_sim, "--out", out, "-j", "2", *extra]


def fake_sweep(out, *extra):
    return subprocess.run(fake_args(out, *extra), capture_output=True, text=True, timeout=60)


def table(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def point_files(out, ext):
    """The points' files named *EXT (*.json: the results, not the sidecars)."""
    d = os.path.join(out, "points")
    return sorted(os.path.join(d, p) for p in os.listdir(d)
                  if p.endswith(ext) and (ext == ".meta.json" or not p.endswith(".meta.json")))


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead
    except FileNotFoundError:
        return False


def wait_for_runs(pids, n, proc):
    end = time.time() + 15
    while time.time() < end and proc.poll() is None and len(os.listdir(pids)) < n:
        time.sleep(0.05)
    return [int(p) for p in os.listdir(pids)]


def all_gone(pids, within):
    end = time.time() + within
    while time.time() < end and any(alive(p) for p in pids):
        time.sleep(0.05)
    return not any(alive(p) for p in pids)


started = []  # every fake run seen, killed at the end whatever happened
tmp = tempfile.mkdtemp(prefix="sweep-test-")
fake_sim = os.path.join(tmp, "fake-bin", "metaroce-sim")
fake_scen = os.path.join(tmp, "fake.json")
out = os.path.join(tmp, "s")  # the real sweep, shared by the first sections
full = None  # its sweep.csv, undamaged


def setup():
    os.makedirs(os.path.dirname(fake_sim))
    with open(fake_sim, "w") as f:
        f.write(FAKE)
    os.chmod(fake_sim, 0o755)
    with open(fake_scen, "w") as f:
        f.write("{}\n")


# --- A grid runs; resuming does nothing; a point whose JSON is lost is redone alone.
def grid_and_resume():
    global full
    r = sweep(out)
    check(r.returncode == 0, f"sweep failed: {r.stderr}")
    rows = list(csv.DictReader(open(os.path.join(out, "sweep.csv"))))
    check(len(rows) == 4 * 4, f"expected 16 rows (4 points x 4 variants), got {len(rows)}")
    check(set(rows[0]) >= {"workload.entropies_per_flow", "seed", "variant"}, "grid columns")
    full = table(os.path.join(out, "sweep.csv"))
    r = sweep(out)
    check("4 already done, running 0" in r.stderr, f"resume: {r.stderr.splitlines()[:1]}")
    os.remove(point_files(out, ".json")[0])
    r = sweep(out)
    check("3 already done, running 1" in r.stderr, f"partial resume: {r.stderr.splitlines()[:1]}")


# --- Damaged outputs are run again, and sweep.csv comes out whole each time.
def damaged_outputs():
    def damage(what, edit):
        edit()
        r = sweep(out)
        check(r.returncode == 0 and "3 already done, running 1" in r.stderr
              and "running it again" in r.stderr,
              f"{what}: not run again: exit {r.returncode} {r.stderr[-600:]}")
        got = table(os.path.join(out, "sweep.csv"))
        check(got == full, f"{what}: sweep.csv differs from the undamaged sweep's")

    csv0 = point_files(out, ".csv")[0]

    def truncate(n):
        data = open(csv0).read()
        open(csv0, "w").write(data[:len(data) - n])

    damage("truncated CSV (mid row)", lambda: truncate(30))
    damage("CSV without its last row",
           lambda: open(csv0, "w").write("".join(open(csv0).readlines()[:-1])))
    damage("missing CSV", lambda: os.remove(csv0))
    damage("empty CSV", lambda: open(csv0, "w").close())
    damage("JSON cut short", lambda: open(point_files(out, ".json")[0], "r+").truncate(100))
    meta0 = point_files(out, ".meta.json")[0]
    meta = json.load(open(meta0))
    damage("sidecar for another id",
           lambda: open(meta0, "w").write(json.dumps(dict(meta, id="0" * 16))))
    damage("missing sidecar", lambda: os.remove(meta0))


# --- The id covers every --set, the scenario's resolved content (topology file included; not
# the file's path) and the build. --emit-jobs shows the ids without running anything.
def point_id():
    def ids(*extra, scen=SCEN):
        jobs = os.path.join(tmp, "ids.txt")
        r = sweep(os.path.join(tmp, "ids"), "--emit-jobs", jobs, *extra, scen=scen)
        check(r.returncode == 0, f"--emit-jobs {extra} {scen}: {r.stderr}")
        return set(re.findall(r"([0-9a-f]{12,})\.(?:job\.)?json", open(jobs).read()))

    base = ids()
    check(len(base) == 4, f"4 points, ids {base}")
    check(not base & ids("--set", "workload.payload_bytes=1024"), "an extra --set kept the ids")
    topo = os.path.join(tmp, "topo.json")
    shutil.copy(os.path.join(ROOT, "topologies", "fpf-8plane-64.json"), topo)
    scen2 = os.path.join(tmp, "copy.json")
    doc = json.load(open(SCEN))
    doc["topology"] = topo
    json.dump(doc, open(scen2, "w"))
    check(ids(scen=scen2) == base, "the same content elsewhere changed the ids")
    doc["workload"]["payload_bytes"] = 2048
    json.dump(doc, open(scen2, "w"))
    check(not base & ids(scen=scen2), "an edited scenario kept the ids")
    doc = json.load(open(topo))
    doc["nic_link_delay_ns"] = 50
    json.dump(doc, open(topo, "w"))
    doc = json.load(open(SCEN))
    doc["topology"] = topo
    json.dump(doc, open(scen2, "w"))
    check(not base & ids(scen=scen2), "an edited topology file kept the ids")
    # The build: runs again after the executable or its library changes.
    fo = os.path.join(tmp, "build")
    r = fake_sweep(fo, "--grid", "fake.tag=1,2")
    check(r.returncode == 0 and "running 2" in r.stderr, f"fake sweep: {r.stderr}")
    with open(fake_sim, "a") as f:
        f.write("# rebuilt\n")
    r = fake_sweep(fo, "--grid", "fake.tag=1,2")
    check("0 already done, running 2" in r.stderr, f"a new executable reused points: {r.stderr}")
    open(os.path.join(os.path.dirname(fake_sim), "libmetaroce.so"), "w").write("lib")
    r = fake_sweep(fo, "--grid", "fake.tag=1,2")
    check("0 already done, running 2" in r.stderr, f"a new library reused points: {r.stderr}")
    r = fake_sweep(fo, "--grid", "fake.tag=1,2")
    check("2 already done, running 0" in r.stderr, f"build hash not stable: {r.stderr}")
    # Extra --sets into the same folder: every point runs again.
    r = fake_sweep(fo, "--grid", "fake.tag=1,2", "--set", "fake.cols=a:c")
    check("0 already done, running 2" in r.stderr, f"an extra --set reused points: {r.stderr}")


# --- Points with different columns: the union, by name, nothing shifted.
def column_union():
    tk = os.path.join(tmp, "kinds")
    r = subprocess.run([SWEEP, os.path.join(ROOT, "scenarios", "multiplane-bidirectional.json"),
                        "--sim", SIM, "--out", tk, "--set", "workload.qps_per_flow=1",
                        "--grid", "transport.kind=metaroce,rocev2"],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"transport.kind grid: {r.stderr}")
    header, rows = table(os.path.join(tk, "sweep.csv"))
    check(all(len(row) == len(header) for row in rows), "rows and header differ in length")
    union = {"transport.kind", "set"}
    expect = []
    for kind in ("metaroce", "rocev2"):
        meta = [json.load(open(m)) for m in point_files(tk, ".meta.json")]
        pid = [m["id"] for m in meta if m["inputs"]["grid"] == [["transport.kind", kind]]][0]
        h, rs = table(os.path.join(tk, "points", pid + ".csv"))
        union |= set(h)
        expect += [dict(zip(h, row), **{"transport.kind": kind, "set": "workload.qps_per_flow=1"})
                   for row in rs]
    check(set(header) == union and len(header) == len(union), f"header is not the union: {header}")
    got = [{c: v for c, v in zip(header, row) if v != ""} for row in rows]
    check(got == [{c: v for c, v in e.items() if v != ""} for e in expect],
          "sweep.csv values are not the points' values under the same columns")
    fc = os.path.join(tmp, "cols")
    r = fake_sweep(fc, "--grid", "fake.cols=a:b,c:b:d")
    header, rows = table(os.path.join(fc, "sweep.csv"))
    check(header == ["fake.cols", "set", "scenario", "variant", "a", "b", "c", "d"],
          f"union: {header}")
    check(all(v == "" or v.startswith(c + ":")
              for row in rows for c, v in zip(header[4:], row[4:])),
          f"a value under another column: {rows}")
    # The sweep's --set is a column: sweeps that differ only there give different rows.
    fs = os.path.join(tmp, "sets")
    r = fake_sweep(fs, "--grid", "fake.cols=a:b", "--set", "fake.sleep=0")
    header, rows = table(os.path.join(fs, "sweep.csv"))
    check(r.returncode == 0 and rows and all(row[header.index("set")] == "fake.sleep=0"
                                             for row in rows),
          f"--set column: {r.stderr} {header} {rows}")


# --- The runs die with the sweep: kill -9, SIGTERM, SIGINT.
def runs_die_with_sweep():
    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
        pids = os.path.join(tmp, f"pids-{sig.name}")
        os.makedirs(pids)
        ko = os.path.join(tmp, f"kill-{sig.name}")
        p = subprocess.Popen(fake_args(ko, "--set", "fake.sleep=30", "--set", f"fake.pids={pids}",
                                       "--grid", "fake.tag=1,2,3"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            runs = wait_for_runs(pids, 2, p)
            started.extend(runs)
            check(len(runs) == 2, f"{sig.name}: expected 2 runs going, saw {len(runs)}")
            if sig == signal.SIGTERM:
                # One sweep per folder: a second one is refused, naming the folder.
                r = fake_sweep(ko, "--grid", "fake.tag=1,2,3")
                check(r.returncode == 2 and ko in r.stderr,
                      f"second sweep: {r.returncode} {r.stderr}")
                check(not os.path.exists(os.path.join(ko, "sweep.csv")),
                      "second sweep wrote sweep.csv")
            p.send_signal(sig)
            err = p.communicate(timeout=10)[1]
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        check(p.returncode == -sig, f"{sig.name}: sweep exit {p.returncode} {err}")
        check(all_gone(runs, 2.0), f"{sig.name}: runs still going after the sweep ended")


# --- Exit statuses: 3 when a point left work unfinished, 1 when one failed.
def exit_statuses():
    fe = os.path.join(tmp, "exits")
    r = fake_sweep(fe, "--grid", "fake.exit=0,3")
    check(r.returncode == 3 and "1 point left work unfinished" in r.stderr,
          f"unfinished: exit {r.returncode} {r.stderr}")
    check(len(table(os.path.join(fe, "sweep.csv"))[1]) == 4, "unfinished point's rows missing")
    r = fake_sweep(fe, "--grid", "fake.exit=0,3")
    check(r.returncode == 3 and "2 already done, running 0" in r.stderr
          and "1 point left work unfinished" in r.stderr, f"unfinished, resumed: {r.stderr}")
    r = fake_sweep(fe, "--grid", "fake.exit=0,1,3")
    check(r.returncode == 1 and "1 point failed" in r.stderr and "fake failure" in r.stderr,
          f"failed point: exit {r.returncode} {r.stderr}")
    check(len(table(os.path.join(fe, "sweep.csv"))[1]) == 4, "done points' rows missing")
    r = fake_sweep(fe, "--grid", "fake.exit=0,1,3")
    check(r.returncode == 1 and "2 already done, running 1" in r.stderr,
          f"failed, resumed: {r.stderr}")


# --- Job list for a scheduler: one line per point, each runs its point for the sweep.
def emit_jobs():
    jobs = os.path.join(tmp, "jobs.txt")
    eo = os.path.join(tmp, "e")
    grid = ("--grid", "fake.tag=1,2,3")
    r = fake_sweep(eo, *grid, "--emit-jobs", jobs)
    lines = open(jobs).read().splitlines() if os.path.exists(jobs) else []
    check(r.returncode == 0 and len(lines) == 3, f"--emit-jobs: {r.stderr}")
    check(not os.path.exists(os.path.join(eo, "sweep.csv")), "--emit-jobs ran the sweep")
    if lines:
        r = subprocess.run(lines[0], shell=True, capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"job line: exit {r.returncode} {r.stderr}")
        r = subprocess.run(lines[0], shell=True, capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and "already done" in r.stderr, f"job line again: {r.stderr}")
    # The Slurm array script: one task per line; task 2 runs the second point (a dry run of
    # the array without Slurm: its #SBATCH lines are comments to bash).
    sbatch = jobs + ".sbatch"
    text = open(sbatch).read() if os.path.exists(sbatch) else ""
    check("#SBATCH --array=1-3\n" in text, f"sbatch script: {text!r}")
    r = subprocess.run(["bash", sbatch], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, SLURM_ARRAY_TASK_ID="2"))
    check(r.returncode == 0, f"sbatch task 2: exit {r.returncode} {r.stderr}")
    r = subprocess.run(["bash", sbatch], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, SLURM_ARRAY_TASK_ID="4"))
    check(r.returncode == 2 and "no line 4" in r.stderr, f"sbatch task 4: {r.stderr}")
    r = fake_sweep(eo, *grid)
    check(r.returncode == 0 and "2 already done, running 1" in r.stderr,
          f"after a job line and an array task: {r.stderr}")
    # The README's GNU parallel recipe: a dry run prints the lines as they are; a real one runs
    # every point, which the sweep then combines without running anything.
    po = os.path.join(tmp, "p")
    pjobs = os.path.join(tmp, "pjobs.txt")
    r = fake_sweep(po, *grid, "--emit-jobs", pjobs)
    plines = open(pjobs).read().splitlines() if os.path.exists(pjobs) else []
    with open(pjobs) as f:
        r = subprocess.run(["parallel", "--will-cite", "--dry-run", "-k", "-j", "2"], stdin=f,
                           capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and r.stdout.splitlines() == plines,
          f"parallel --dry-run: {r.returncode} {r.stdout!r} {r.stderr}")
    with open(pjobs) as f:
        r = subprocess.run(["parallel", "--will-cite", "-j", "2"], stdin=f, capture_output=True,
                           text=True, timeout=120)
    check(r.returncode == 0, f"parallel: exit {r.returncode} {r.stderr}")
    r = fake_sweep(po, *grid)
    check(r.returncode == 0 and "3 already done, running 0" in r.stderr,
          f"after parallel ran the lines: {r.stderr}")
    r = fake_sweep(eo, *grid, "--emit-jobs", jobs)
    with open(fake_sim, "a") as f:
        f.write("# rebuilt again\n")
    lines = open(jobs).read().splitlines()
    r = subprocess.run(lines[0], shell=True, capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "changed since --emit-jobs" in r.stderr,
          f"job line after a rebuild: {r.returncode} {r.stderr}")


# --- Shell metacharacters in every emitted path stay text: the job lines (run by a shell)
# and the Slurm script (no eval) run the points and nothing else.
def emit_jobs_quoting():
    nasty = "o5 $(touch PWNED1) `touch PWNED2` 'q\" ; touch PWNED3 &"
    base = os.path.join(tmp, "quoting")
    os.makedirs(base)
    eo = os.path.join(base, nasty)
    jobs = os.path.join(base, nasty + " jobs.txt")
    grid = ("--grid", "fake.tag=1,2")
    r = fake_sweep(eo, *grid, "--emit-jobs", jobs)
    check(r.returncode == 0, f"--emit-jobs into {nasty!r}: {r.stderr}")
    lines = open(jobs).read().splitlines() if os.path.exists(jobs) else []
    if lines:
        r = subprocess.run(lines[0], shell=True, cwd=base, capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == 0, f"quoted job line: exit {r.returncode} {r.stderr}")
        r = subprocess.run(["bash", jobs + ".sbatch"], cwd=base, capture_output=True,
                           text=True, timeout=60, env=dict(os.environ, SLURM_ARRAY_TASK_ID="2"))
        check(r.returncode == 0, f"quoted sbatch task 2: exit {r.returncode} {r.stderr}")
    pwned = [n for n in os.listdir(base) if n.startswith("PWNED")] + \
        [n for n in os.listdir(os.getcwd()) if n.startswith("PWNED")]
    check(not pwned, f"a path's shell text ran: {pwned}")
    r = fake_sweep(eo, *grid)
    check(r.returncode == 0 and "2 already done, running 0" in r.stderr,
          f"after the quoted line and task: {r.stderr}")
    r = fake_sweep(os.path.join(base, "a\nb"), *grid, "--emit-jobs", jobs)
    check(r.returncode == 2 and "line break" in r.stderr, f"--out with a newline: {r.stderr}")


# --- Bad input: exit 2, nothing written, nothing run.
def bad_input():
    bad = os.path.join(tmp, "bad")
    r = subprocess.run([SWEEP, SCEN, "--sim", SIM, "--out", bad, "--grid", "workload.nope=1,2"],
                       capture_output=True, text=True)
    check(r.returncode == 2 and "workload.nope" in r.stderr, f"bad grid: {r.returncode} {r.stderr}")
    check(not os.path.exists(bad), "bad grid left output behind")
    pids = os.path.join(tmp, "pids-bad")
    os.makedirs(pids)
    r = fake_sweep(bad, "--set", f"fake.pids={pids}", "--grid", "fake.tag=1,2,bad")
    check(r.returncode == 2 and "fake.tag" in r.stderr and "'bad'" in r.stderr,
          f"bad last point: {r.returncode} {r.stderr}")
    check(not os.path.exists(bad) and not os.listdir(pids), "bad last point: something ran")
    r = fake_sweep(bad, "--grid", "fake.tag=1,2,1")
    check(r.returncode == 2 and "fake.tag" in r.stderr and "twice" in r.stderr,
          f"repeated value: {r.returncode} {r.stderr}")


try:
    setup()
    for section in (grid_and_resume, damaged_outputs, point_id, column_union,
                    runs_die_with_sweep, exit_statuses, emit_jobs, emit_jobs_quoting, bad_input):
        try:
            section()
        except Exception as e:  # one broken section does not hide the others' results
            check(False, f"{section.__name__}: {type(e).__name__}: {e}")
finally:
    for pid in started:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(tmp)
print("sweep: all checks passed" if not failures else f"sweep: {len(failures)} checks failed")
sys.exit(1 if failures else 0)
