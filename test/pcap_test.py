#!/usr/bin/python3
"""The runner's --pcap: the lab scenario's link of NIC 0 on plane 3, written under MetaRoCE and
RoCEv2, opens in tshark and every frame decodes as RoCEv2 (UDP 4791, InfiniBand BTH) in both
directions; bad --pcap values are input errors.

  pcap_test.py METAROCE_SIM SOURCE_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile

sim, src = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


tshark = shutil.which("tshark")
if tshark is None:
    print("FAIL tshark is not installed (scripts/setup installs it)")
    sys.exit(1)

scenario = os.path.join(src, "scenarios", "multiplane-throughput.json")
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "lab.json")
    r = subprocess.run([sim, scenario, "--variant", "metaroce 1 MiB", "--variant", "rocev2 1 MiB",
                        "--set", "workload.messages_per_qp=1", "--pcap", "0:3", "--out", out,
                        "--quiet"], cwd=src, capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"the run succeeds (exit {r.returncode}: {r.stderr.strip()[:300]})")
    # Data, ACKs: RDMA WRITE Only (10) and Acknowledge (17) for RoCEv2; MetaRoCE's own path
    # opcodes (0x40 data, 0x41 path ACK) for MetaRoCE.
    for variant, data_op, ack_op in (("metaroce_1_MiB", 0x40, 0x41), ("rocev2_1_MiB", 0x0a, 0x11)):
        path = os.path.join(tmp, f"lab-{variant}-0-3.pcap")
        check(os.path.exists(path), f"{os.path.basename(path)} written")
        if not os.path.exists(path):
            continue
        t = subprocess.run([tshark, "-r", path, "-T", "fields", "-E", "separator=,",
                            "-e", "udp.dstport", "-e", "ip.src", "-e", "infiniband.bth.opcode",
                            "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn"],
                           capture_output=True, text=True, timeout=120)
        check(t.returncode == 0, f"{variant}: tshark reads the file ({t.stderr.strip()[:200]})")
        rows = [line.split(",") for line in t.stdout.splitlines() if line]
        check(len(rows) > 100, f"{variant}: {len(rows)} frames")
        check(all(row[0] == "4791" for row in rows), f"{variant}: every frame is UDP to 4791")
        check(all(row[2] != "" for row in rows),
              f"{variant}: every frame decodes an InfiniBand BTH opcode")
        ops = {int(row[2], 0) for row in rows if row[2]}
        check(data_op in ops and ack_op in ops,
              f"{variant}: data and ACK opcodes {data_op:#x}, {ack_op:#x} among {sorted(ops)}")
        check({row[1] for row in rows} == {"10.0.0.0", "10.0.0.1"},
              f"{variant}: both directions of the link (NIC 0's and NIC 1's frames)")
        check(all(row[3] != "" and row[4] != "" for row in rows),
              f"{variant}: destination QP and PSN decoded")
    for bad in ("9:0", "0:8", "0", "a:b", "1:2:3"):
        r = subprocess.run([sim, scenario, "--pcap", bad, "--out", out, "--quiet"], cwd=src,
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and "--pcap" in r.stderr,
              f"--pcap {bad}: exit 2 naming --pcap (got {r.returncode}: {r.stderr.strip()[:120]})")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("pcap: all checks passed")
