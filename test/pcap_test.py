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

# Every pcap file is as safe as --out: a link, a FIFO or a folder where one goes is refused
# before anything runs (the link's target untouched), a name from the scenario never leaves
# the working folder, a name too long is refused up front, and a failed run leaves no file.
with tempfile.TemporaryDirectory() as tmp:
    base = ["--variant", "metaroce 1 MiB", "--set", "workload.messages_per_qp=1",
            "--pcap", "0:3", "--quiet"]
    out = os.path.join(tmp, "lab.json")
    pcap = os.path.join(tmp, "lab-metaroce_1_MiB-0-3.pcap")
    target = os.path.join(tmp, "precious")
    with open(target, "w") as f:
        f.write("keep me")
    os.symlink(target, pcap)
    r = subprocess.run([sim, scenario, "--out", out] + base, cwd=src, capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 2 and "--pcap" in r.stderr and "symbolic link" in r.stderr,
          f"pcap path a symlink: exit {r.returncode}: {r.stderr.strip()[:200]}")
    check(open(target).read() == "keep me", "the symlink's target is untouched")
    check(not os.path.exists(out), "nothing written when a pcap path is refused")
    os.unlink(pcap)
    os.mkfifo(pcap)
    r = subprocess.run([sim, scenario, "--out", out] + base, cwd=src, capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 2 and "not a regular file" in r.stderr,
          f"pcap path a FIFO: exit {r.returncode}: {r.stderr.strip()[:200]}")
    os.unlink(pcap)
    long_out = os.path.join(tmp, "x" * 240 + ".json")
    r = subprocess.run([sim, scenario, "--out", long_out] + base, cwd=src, capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 2 and "too long" in r.stderr,
          f"pcap name too long: exit {r.returncode}: {r.stderr.strip()[:200]}")
    # Without --out: the scenario's name, made safe, in the working folder.
    import json
    with open(scenario) as f:
        doc = json.load(f)
    doc["name"] = "../../escape/" + "y" * 300
    doc["topology"] = os.path.join(src, doc["topology"])
    work = os.path.join(tmp, "work")
    os.makedirs(work)
    scen = os.path.join(tmp, "s.json")
    with open(scen, "w") as f:
        json.dump(doc, f)
    r = subprocess.run([sim, scen] + base, cwd=work, capture_output=True, text=True, timeout=120)
    made = sorted(os.listdir(work))
    check(r.returncode == 0 and len(made) == 1 and made[0].endswith("-0-3.pcap") and
          "/" not in made[0] and not made[0].startswith("."),
          f"no --out: {made} in the working folder (exit {r.returncode}: {r.stderr[-200:]})")
    check(not os.path.exists(os.path.join(tmp, "escape")), "nothing outside the working folder")
    # Bad input after the check (a variant that does not exist) and a run that fails leave no
    # pcap file and no temporary behind.
    r = subprocess.run([sim, scenario, "--out", out] + base[:2] + ["--set", "workload.nope=1",
                       "--pcap", "0:3", "--quiet"], cwd=src, capture_output=True, text=True)
    check(r.returncode == 2 and os.listdir(tmp) == [x for x in os.listdir(tmp)
                                                     if x in ("precious", "work", "s.json")],
          f"bad input with --pcap leaves nothing: {os.listdir(tmp)}")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("pcap: all checks passed")
