#!/usr/bin/env python3
"""MetaRoCE's efficiency at its defaults, end to end through metaroce-sim, from each run's own
counters: a permutation on the non-blocking 64-NIC fabric against its line-rate bound; one QP
with one message outstanding at a time across 1.5 ms (a sender that runs dry between
messages) completes without a single retransmission and runs at what its window allows; one
800G connection across 1.5 ms reaches line rate; the scale-out window of a plane's connection
stays within the slide's ~75 packets.

usage: efficiency_test.py METAROCE_SIM REPO_ROOT
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

SIM, ROOT = sys.argv[1], sys.argv[2]
DEMO = os.path.join(ROOT, "scenarios", "demo.json")
ACROSS = os.path.join(ROOT, "scenarios", "scale-across-one.json")
# Measured at these defaults: 0.77 (it was 0.35 before paths were counted per plane). The
# goal of 0.9 is not reached for 8 MiB, about 10 RTTs: what is left is ECMP imbalance of the
# paths across the spines, which the windows do not undo in so few RTTs (the same run on one
# switch per plane reaches 0.95; results/fidelity.md F6 says so).
PERMUTATION_FLOOR = 0.75
# 64 MiB each: measured 0.91 at the defaults (0.92 before HintStart; seeds 2 and 3 gave
# 0.92-0.93 then); 0.72 with the connection's increase a fixed packet per RTT
# (IncreaseBdpFraction 0).
LONG_PERMUTATION_FLOOR = 0.90
# The scale-across scenario against RoCEv2: 0.88 at the defaults (0.71 before HintStart).
ACROSS_FLOOR = 0.85
failures = []
passes = []


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what)
    (passes if cond else failures).append(what)


def run(tmp, name, scenario, variant, *sets):
    out = os.path.join(tmp, name + ".json")
    r = subprocess.run([SIM, scenario, "--quiet", "--variant", variant, "--out", out] +
                       [a for s in sets for a in ("--set", s)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    check(r.returncode == 0, f"{name}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    with open(out) as f:
        return json.load(f)["runs"][0], out




def permutation(tmp, name, floor, *sets):
    """A permutation of the demo's fabric against its line-rate bound (payload plus headers
    at 8 x 100G: the ACKs' share of the links and the path's latency count against it)."""
    d, _ = run(tmp, name, DEMO, "MetaRoCE", *sets)
    m, c, t = d["metrics"], d["counters"], d["parameters"]["topology"]
    line_bps = t["planes"] * t["nic_port_gbps"] * 1e9
    qp_bytes = m["bytes_completed"] / c["qps"]
    wire = qp_bytes * c["data_frame_wire_bytes"] / 4096  # payload plus headers
    bound_us = wire * 8 / line_bps * 1e6
    eff = bound_us / m["completion_us"]
    check(m["messages_completed"] == m["messages_total"], f"{name}: every message done")
    check(eff >= floor, f"{name}: {eff:.3f} of the line-rate bound ({bound_us:.1f} us / "
          f"{m['completion_us']:.1f} us), at least {floor}")
    return d


with tempfile.TemporaryDirectory() as tmp:
    # 1. The permutation: 64 NICs of 8 x 100G, 8 MiB each (~10 RTTs), no loss; and 64 MiB
    # each (~100 RTTs), where the connections' windows have time to share the spines fairly.
    d = permutation(tmp, "permutation 8 MiB", PERMUTATION_FLOOR)
    permutation(tmp, "permutation 64 MiB", LONG_PERMUTATION_FLOOR,
                "workload.message_bytes=8388608")
    m, t = d["metrics"], d["parameters"]["topology"]
    # The scale-out window of one plane's connection (the reading of the slide's table).
    per_plane = m["mean_qwnd_packets"] / t["planes"]
    check(per_plane <= 75, f"scale-out window {per_plane:.1f} packets a plane, at most ~75")

    # 2. One QP, one 16 MiB message at a time, 1.5 ms, lossless: the sender is idle for an
    # RTT between messages.
    d, _ = run(tmp, "dry", ACROSS, "MaxPaths 64", "workload.message_bytes=16777216",
               "workload.messages_per_qp=4", "workload.outstanding_per_qp=1",
               "expect_unfinished=false")
    m, c = d["metrics"], d["counters"]
    check(m["messages_completed"] == 4 and m["ended_by"] == "completed",
          f"dry sender: {m['messages_completed']} of 4 messages, ended by {m['ended_by']}")
    check(c["retransmitted_packets"] == 0 and c["timeouts"] == 0,
          f"dry sender: {c['retransmitted_packets']} retransmissions, {c['timeouts']} timeouts")

    # 3. The same QP with one 1 GiB message: MaxPaths 64 x PathWindowCap 128 packets is
    # its window, so it runs at that window over the path's RTT.
    d, out = run(tmp, "window", ACROSS, "MaxPaths 64", "workload.message_bytes=1073741824",
                 "workload.messages_per_qp=1", "workload.outstanding_per_qp=1",
                 "duration_us=30000", "outputs.steady_from_us=15000", "outputs.flows=true")
    m, c = d["metrics"], d["counters"]
    with open(out[:-5] + "-paths.csv") as f:
        rtt_us = min(float(r["srtt_us"]) for r in csv.DictReader(f) if float(r["srtt_us"]) > 0)
    allowed = 64 * 128 * 4096 * 8 / (rtt_us * 1e-6) / 1e9
    check(c["retransmitted_packets"] == 0, "1 GiB at 1.5 ms: no retransmission")
    check(m["steady_goodput_gbps"] >= 0.95 * allowed,
          f"1 GiB at 1.5 ms: {m['steady_goodput_gbps']:.1f} Gb/s, the window allows "
          f"{allowed:.1f} (RTT {rtt_us:.1f} us)")

    # 4. One 800G connection across 1.5 ms at the defaults (no MaxPaths of the scenario).
    with open(ACROSS) as f:
        sc = json.load(f)
    sc["variants"] = [{"name": "defaults", "set": {}}]
    sc["topology"] = os.path.join(ROOT, sc["topology"])
    defaults = os.path.join(tmp, "defaults.json")
    with open(defaults, "w") as f:
        json.dump(sc, f)
    d, _ = run(tmp, "line", defaults, "defaults", "duration_us=40000",
               "outputs.steady_from_us=25000")
    m = d["metrics"]
    check(m["steady_goodput_gbps"] >= 0.95 * 800,
          f"800G at 1.5 ms: {m['steady_goodput_gbps']:.1f} Gb/s over "
          f"{m['max_active_paths']} paths, at least 95% of 800")

    # 5. The shipped scale-across scenario: eight ~100G connections across 1.5 ms against
    # RoCEv2's 8 QPs at line rate from the start. Measured 663.5 vs 755.3 Gb/s (533.4
    # without HintStart); what is left is MetaRoCE's first RTT at 2 packets a path
    # (results/fidelity.md F7: with a first window of a BDP, 752.5).
    out = os.path.join(tmp, "across.json")
    r = subprocess.run([SIM, os.path.join(ROOT, "scenarios", "scale-across.json"), "--quiet",
                        "--out", out], cwd=ROOT, capture_output=True, text=True, timeout=600)
    check(r.returncode == 0, f"scale-across: exit {r.returncode}")
    with open(out) as f:
        g = {x["variant"]: x["metrics"]["goodput_gbps"] for x in json.load(f)["runs"]}
    meta, roce = g["metaroce, dynamic paths"], g["rocev2 (8 QPs, one per plane)"]
    check(meta >= ACROSS_FLOOR * roce,
          f"scale-across: MetaRoCE {meta:.1f} Gb/s, RoCEv2 {roce:.1f}: at least "
          f"{ACROSS_FLOOR} of it")

    # 6. One NIC, two connections 100x apart: to a NIC in the building and to one 150 km
    # away, one 1 MiB message at a time each. The near one's RTT must not time out the far
    # one before its first ACK: at the defaults nothing is resent; with NicRttTimeout the far
    # QP's early timeouts back off and never retire its paths (before: a stall).
    mix = {
        "name": "mixed-rtt", "topology": os.path.join(ROOT, "topologies",
                                                      "scale-across-2site-150km.json"),
        "seed": 1, "duration_us": 30000, "transport": {"kind": "metaroce"},
        "workload": {"kind": "streams", "pattern": "explicit",
                     "flows": [{"src": 0, "dst": 1}, {"src": 0, "dst": 16}],
                     "qps_per_flow": 1, "message_bytes": 1048576, "messages_per_qp": 4,
                     "outstanding_per_qp": 1},
        "variants": [{"name": "defaults", "set": {}},
                     {"name": "nic rtt", "set": {"transport.attributes.NicRttTimeout": True}}]}
    mixed = os.path.join(tmp, "mixed.json")
    with open(mixed, "w") as f:
        json.dump(mix, f)
    for variant in ("defaults", "nic rtt"):
        d, _ = run(tmp, "mixed " + variant.replace(" ", "-"), mixed, variant)
        m, c = d["metrics"], d["counters"]
        check(m["messages_completed"] == 8 and m["ended_by"] == "completed",
              f"mixed RTTs, {variant}: {m['messages_completed']} of 8 messages, ended by "
              f"{m['ended_by']}")
        if variant == "defaults":
            check(c["retransmitted_packets"] == 0 and c["timeouts"] == 0,
                  f"mixed RTTs, defaults: {c['retransmitted_packets']} retransmissions, "
                  f"{c['timeouts']} timeouts")

print(f"{len(passes)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
