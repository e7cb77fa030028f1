#!/usr/bin/env python3
"""metaroce-sim's memory estimate end to end: --dry-run shows it, it grows with the fabric, a
run that cannot fit is refused before anything is built (exit 2, nothing written), --max-memory
sets the limit, and a small run's estimate is near its measured peak.

usage: memory_test.py METAROCE_SIM REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

SIM, ROOT = sys.argv[1], sys.argv[2]
DEMO = os.path.join(ROOT, "scenarios", "demo.json")
failures = []


def run(args, timeout=120):
    return subprocess.run([SIM] + args, cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def dry_run(args):
    """The JSON documents --dry-run prints, one per variant."""
    r = run(args + ["--dry-run"])
    check(r.returncode == 0, f"{args} --dry-run: exit {r.returncode}: {r.stderr.strip()}")
    docs, dec, s, i = [], json.JSONDecoder(), r.stdout, 0
    while i < len(s.rstrip()):
        doc, i = dec.raw_decode(s, i)
        docs.append(doc)
        while i < len(s) and s[i].isspace():
            i += 1
    return docs


def estimate(args):
    return dry_run(args)[0]["estimated_peak_memory_bytes"]


# --dry-run shows the figure, in bytes and for people, for every variant.
docs = dry_run([DEMO])
check(len(docs) >= 2, f"demo --dry-run: {len(docs)} variants")
for d in docs:
    b = d.get("estimated_peak_memory_bytes")
    check(isinstance(b, int) and b > 10 << 20, f"{d['variant']}: estimated bytes {b}")
    check(d.get("estimated_peak_memory", "").endswith("iB"),
          f"{d['variant']}: human figure {d.get('estimated_peak_memory')}")

# The estimate grows with the NICs and with the planes.
big = ["--set", "topology.switch_radix=512", "--variant", "MetaRoCE"]
by_nics = [estimate([DEMO, "--set", f"topology.nics={n}"] + big) for n in (1024, 4096, 16384)]
check(by_nics[0] < by_nics[1] < by_nics[2], f"estimate by NICs 1k, 4k, 16k: {by_nics}")
by_planes = [estimate([DEMO, "--set", "topology.nics=4096", "--set", f"topology.planes={p}"] + big)
             for p in (1, 2, 4, 8)]
check(all(a < b for a, b in zip(by_planes, by_planes[1:])),
      f"estimate by planes 1, 2, 4, 8: {by_planes}")

with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "out.json")

    # The 4M-NIC, 16-plane fabric cannot fit: refused at once, before anything is built.
    r = run([DEMO, "--set", "topology.nics=4194304", "--set", "topology.planes=16",
             "--set", "topology.switch_radix=512", "--out", out], timeout=60)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2, f"4M NICs x 16 planes: exit {r.returncode}, expected 2 ({r.stderr})")
    check(len(lines) == 1 and "estimated" in r.stderr and "MemAvailable" in r.stderr,
          f"4M NICs x 16 planes: one line naming the estimate and the limit: {r.stderr}")
    check("bad_alloc" not in r.stderr, f"4M NICs: {r.stderr}")
    check(os.listdir(tmp) == [], f"4M NICs: wrote {os.listdir(tmp)}")

    # --max-memory sets the limit (and wins over MemAvailable).
    r = run([DEMO, "--max-memory", "1M", "--out", out])
    check(r.returncode == 2 and "1.0 MiB" in r.stderr and "--max-memory" in r.stderr and
          len(r.stderr.strip().splitlines()) == 1,
          f"--max-memory 1M: exit {r.returncode}: {r.stderr}")
    check(os.listdir(tmp) == [], f"--max-memory 1M: wrote {os.listdir(tmp)}")
    for bad in ["lots", "12X", "0", "-5", "1.2.3G", ""]:
        r = run([DEMO, "--max-memory", bad, "--out", out])
        first = r.stderr.strip().splitlines()[0] if r.stderr.strip() else ""
        check(r.returncode == 2 and "--max-memory" in first,
              f"--max-memory '{bad}': exit {r.returncode}: {r.stderr.strip()}")
    r = run([DEMO, "--max-memory"])
    check(r.returncode == 2 and "--max-memory" in r.stderr, f"--max-memory alone: {r.stderr}")
    check(os.listdir(tmp) == [], f"bad --max-memory: wrote {os.listdir(tmp)}")

    # A small run: its estimate is printed before it builds (not with --quiet) and is within
    # 0.8-2x of the peak it measured. Large enough (tens of MB) that RSS's 2 MiB steps do not
    # decide it; one variant per process, as peak RSS is the process's.
    small = {
        "name": "memory-check",
        "topology": {"kind": "fpf", "nics": 1024, "planes": 8, "switch_radix": 512},
        "seed": 1,
        "duration_us": 1e6,
        "transport": {"kind": "metaroce"},
        "workload": {"kind": "streams", "pattern": "permutation", "qps_per_flow": 8,
                     "message_bytes": 4096, "messages_per_qp": 1},
        "variants": [{"name": "metaroce", "set": {}},
                     {"name": "rocev2", "set": {"transport.kind": "rocev2",
                                                "transport.congestion_control": "none"}},
                     {"name": "alltoall", "set": {"workload": {
                         "kind": "collective", "op": "alltoall", "ranks": 256,
                         "sizes_bytes": [262144]}}}],
    }
    path = os.path.join(tmp, "small.json")
    with open(path, "w") as f:
        json.dump(small, f)
    for v in ["metaroce", "rocev2", "alltoall"]:
        est = estimate([path, "--variant", v])
        r = run([path, "--variant", v, "--out", out])
        check(r.returncode == 0, f"small {v}: exit {r.returncode}: {r.stderr}")
        check("memory-check/" + v + ": estimated peak memory" in r.stderr,
              f"small {v}: no estimate line: {r.stderr}")
        if r.returncode == 0:
            peak = json.load(open(out))["runs"][0]["cost"]["peak_rss_bytes"]
            ratio = est / peak
            print(f"small {v}: estimate {est / 2**20:.1f} MiB, measured {peak / 2**20:.1f} MiB, "
                  f"ratio {ratio:.2f}")
            check(0.8 <= ratio <= 2.0, f"small {v}: estimate {est} vs peak {peak}: {ratio:.2f}")
    r = run([path, "--variant", "metaroce", "--quiet", "--out", out])
    check(r.returncode == 0 and "estimated" not in r.stderr, f"--quiet: {r.stderr}")

print("memory: all checks passed" if not failures else f"memory: {len(failures)} checks failed")
sys.exit(1 if failures else 0)
