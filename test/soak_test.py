#!/usr/bin/env python3
"""Checks scripts/soak's own machinery on two small scenarios: its results are deterministic;
a violation, a crash and a healing scenario left unfinished each fail the soak (exit 1), are
named in the report and are written as standalone scenario files that the simulator accepts;
bad options are exit 2. The failures come from a wrapper around the simulator, which breaks
chosen runs and passes the rest through.

usage: soak_test.py METAROCE_SIM REPO_ROOT
"""
import json
import os
import stat
import subprocess
import sys
import tempfile

SIM, ROOT = os.path.abspath(sys.argv[1]), sys.argv[2]
SOAK = os.path.join(ROOT, "scripts", "soak")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def soak(tmp, name, *args, sim=SIM):
    out = os.path.join(tmp, name)
    r = subprocess.run([sys.executable, SOAK, "--quick", "--scenarios", "2", "--quiet",
                        "--sim", sim, "--work", os.path.join(tmp, name + "-work"), "--out", out,
                        *args], capture_output=True, text=True, timeout=600)
    summary = os.path.join(out, "summary.json")
    return r, (json.load(open(summary)) if os.path.exists(summary) else None)


WRAPPER = """#!{python}
import json, os, sys
args = sys.argv[1:]
if "--dry-run" not in args:
    case = json.load(open(args[0]))["name"].rsplit("-", 1)[-1]
    variant = args[args.index("--variant") + 1]
    if (case, variant) == ("c001", "RoCEv2 PFC"):
        print("metaroce-sim: invariant violated: soak/x: at 1.5 us: switch (site 0, plane 0, "
              "tier 0, index 0): 3 frames in, 2 out, 0 dropped, 0 queued (rule: in = out + "
              "dropped + queued)", file=sys.stderr)
        sys.exit(4)
    if (case, variant) == ("c000", "MetaRoCE"):
        os.kill(os.getpid(), 9)
    if (case, variant) == ("c000", "RoCEv2 PFC+DCQCN"):
        args += ["--set", "duration_us=1"]  # c000 heals: it must finish
os.execv({sim!r}, [{sim!r}] + args)
"""

with tempfile.TemporaryDirectory() as tmp:
    # Deterministic: the same seed gives the same summary but for the wall times.
    r1, s1 = soak(tmp, "a")
    r2, s2 = soak(tmp, "b")
    check(r1.returncode == 0, f"clean soak: exit {r1.returncode}: {r1.stdout}{r1.stderr}")
    if s1 and s2:
        check(s1["runs"] == 6 and s1["results"]["completed"] + s1["results"][
            "unfinished_expected"] == 6, f"clean soak results: {s1['results']}")
        check(sum(s1["faults_injected"].values()) > 0, "no fault injected")
        w1, w2 = s1.pop("wall"), s2.pop("wall")
        check(s1 == s2, "two soaks of one seed differ beyond their wall times")
        check(len(w1["runs_s"]) == 6, "wall time of every run kept apart")
        check(s1["cases"][0]["heals"] and not s1["cases"][1]["heals"],
              "the quick mode's first scenario heals, its second does not")
    else:
        check(False, "no summary.json written")
    r3, s3 = soak(tmp, "c", "--seed", "2")
    check(s3 and s1 and s3["cases"] != s1["cases"], "another seed gives the same scenarios")

    # A violation, a crash and an unfinished healing scenario.
    wrapper = os.path.join(tmp, "sim-wrapper")
    with open(wrapper, "w") as f:
        f.write(WRAPPER.format(python=sys.executable, sim=SIM))
    os.chmod(wrapper, os.stat(wrapper).st_mode | stat.S_IEXEC)
    r, s = soak(tmp, "broken", sim=wrapper)
    check(r.returncode == 1, f"broken runs: exit {r.returncode}, expected 1: {r.stderr}")
    if s:
        res = s["results"]
        check(res["violation"] == 1 and res["other_failure"] == 1 and
              res["unfinished_unexpected"] == 1, f"broken runs counted as {res}")
        byrun = {(c["case"], x["variant"]): x for c in s["cases"] for x in c["runs"]}
        v = byrun[("c001", "RoCEv2 PFC")]
        check(v["status"] == "violation" and "rule: in = out + dropped + queued" in v["message"],
              f"violation: {v}")
        check(byrun[("c000", "MetaRoCE")]["status"] == "other_failure" and
              "signal 9" in byrun[("c000", "MetaRoCE")]["message"], "crash not reported")
        check(byrun[("c000", "RoCEv2 PFC+DCQCN")]["status"] == "unfinished_unexpected",
              "a healing scenario left unfinished is not a failure")
        check(len(s["failures"]) == 3, f"failures listed: {s['failures']}")
        for fl in s["failures"]:
            path = os.path.join(tmp, "broken", fl["file"])
            check(os.path.exists(path), f"failing case file {fl['file']} missing")
            check(os.path.basename(path) in r.stdout, f"report does not name {fl['file']}")
            if os.path.exists(path):
                sc = json.load(open(path))
                check([v["name"] for v in sc["variants"]] == [fl["variant"]],
                      f"{fl['file']}: holds other variants")
                d = subprocess.run([SIM, path, "--dry-run"], capture_output=True, text=True)
                check(d.returncode == 0, f"{fl['file']} is not a valid scenario: {d.stderr}")
        # The failing case reruns by itself (with the wrapper's override, unfinished again).
        fl = next(x for x in s["failures"] if x["status"] == "unfinished_unexpected")
        d = subprocess.run([SIM, os.path.join(tmp, "broken", fl["file"]), "--quiet",
                            "--set", "duration_us=1"], capture_output=True, text=True)
        check(d.returncode == 3, f"rerun of {fl['file']}: exit {d.returncode}")
    else:
        check(False, "broken runs: no summary.json")

    # Bad options: exit 2, one line naming the option.
    for args, needle in ((["--scenarios", "0"], "--scenarios"), (["-j", "0"], "-j"),
                         (["--budget-s", "-1"], "--budget-s"), (["--sim", "/nonexistent"],
                                                                "--sim")):
        sim = [] if "--sim" in args else ["--sim", SIM]
        r = subprocess.run([sys.executable, SOAK, *sim, *args, "--work",
                            os.path.join(tmp, "bad-work")], capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == 2 and needle in r.stderr, f"{args}: exit {r.returncode}: {r.stderr}")

print("soak: all checks passed" if not failures else f"soak: {len(failures)} checks failed")
sys.exit(1 if failures else 0)
