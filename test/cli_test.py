#!/usr/bin/env python3
"""End-to-end checks of metaroce-sim's command line: bad input gives exit status 2, a
one-line message naming the key, and no output file; good input is deterministic.

usage: cli_test.py METAROCE_SIM REPO_ROOT
"""
import json
import os
import re
import subprocess
import sys
import tempfile

SIM, ROOT = sys.argv[1], sys.argv[2]
SCENARIO = os.path.join(ROOT, "scenarios", "fabric-ecmp-collisions.json")
STREAMS = os.path.join(ROOT, "scenarios", "multiplane-bidirectional.json")
JOB = os.path.join(ROOT, "scenarios", "job-moe-training-step.json")
COLL = os.path.join(ROOT, "scenarios", "collectives-64gpu-allreduce.json")
INCAST = os.path.join(ROOT, "scenarios", "incast.json")
failures = []


def run(args, cwd=ROOT):
    return subprocess.run([SIM] + args, cwd=cwd, capture_output=True, text=True, errors="replace",
                          timeout=600)


def write(tmp, name, obj):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def table_columns(scenario):
    """The columns outputs.table accepts for the scenario's workload kind (from the error)."""
    r = run([scenario, "--dry-run", "--set", 'outputs.table=["?"]'])
    m = re.search(r"outputs\.table\[0\]: must be one of (.*), got", r.stderr)
    return set(m.group(1).split(", ")) if m else set()


def check_columns(scenario, csv, what):
    """Every metric and counter of a run is a column outputs.table accepts."""
    with open(csv) as f:
        header = f.readline().strip().split(",")[2:]  # after scenario, variant
    allowed = table_columns(scenario)
    check(allowed and all(c in allowed for c in header),
          f"{what}: run has columns outputs.table rejects: "
          f"{[c for c in header if c not in allowed]}")


with open(SCENARIO) as f:
    base = json.load(f)

# Every metric and counter name the runner writes (some only with one transport, a victim,
# faults or a time series, so a run may not show them) is a column some table accepts.
# (The runner and its workloads, helper/run/scenario-runner.cc and helper/workload/*.cc.)
runner = ""
sources = [os.path.join("run", "scenario-runner.cc")] + sorted(
    os.path.join("workload", n) for n in os.listdir(os.path.join(ROOT, "helper", "workload")))
for name in sources:
    with open(os.path.join(ROOT, "helper", name)) as f:
        runner += f.read().split("ResultColumns(const std::string& workloadKind)")[0]
written = set(re.findall(r'(?:metrics|counters)\["([a-z_0-9]+)"\]', runner))
for block in re.findall(r"rec\.(?:metrics|counters) = \{(.*?)\};", runner, re.S):
    written |= set(re.findall(r'\{"([a-z_0-9]+)",', block))
accepted = set().union(*(table_columns(s) for s in (SCENARIO, STREAMS, COLL, JOB)))
check(len(written) > 50 and written <= accepted,
      f"runner writes columns no outputs.table accepts: {sorted(written - accepted)}")

with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "out.json")

    def mutated(fn):
        j = json.loads(json.dumps(base))
        fn(j)
        return write(tmp, "bad.json", j)

    # (arguments, text the one-line error must contain)
    bad = [
        (lambda: [mutated(lambda j: j.update(duration_us=-5))], "duration_us"),
        (lambda: [mutated(lambda j: j.update(durations_us=5))], "durations_us: unknown key"),
        (lambda: [mutated(lambda j: (j.pop("workload"), j.pop("variants")))],
         "workload: missing"),
        (lambda: [mutated(lambda j: j["workload"].update(kind="bogus"))], "workload.kind"),
        (lambda: [mutated(lambda j: j["workload"].update(pattern=3))], "workload.pattern"),
        (lambda: [mutated(lambda j: j["workload"].update(rate_gbps=1000))], "workload.rate_gbps"),
        (lambda: [mutated(lambda j: j["workload"].update(planes=[9]))], "workload.planes"),
        (lambda: [mutated(lambda j: j.update(topology="topologies/none.json"))],
         "cannot open file"),
        (lambda: [mutated(lambda j: j.update(topology={"kind": "fpf", "nics": 4}))],
         "topology.switch_radix: missing"),
        (lambda: [mutated(lambda j: j.update(faults=[{"kind": "plane_down", "plane": 8,
                                                     "at_us": 1}]))], "faults[0].plane"),
        (lambda: [mutated(lambda j: j.update(faults=[{"kind": "plane_down", "plane": 1,
                                                     "at_us": 5, "until_us": 2}]))],
         "faults[0].until_us"),
        (lambda: [mutated(lambda j: j.update(variants=[{"name": "x", "set": {
            "workload.entropies_per_flow": 0}}]))], "workload.entropies_per_flow"),
        (lambda: [mutated(lambda j: j.update(seed="one"))], "seed"),
        (lambda: [write(tmp, "bad.json", "{ not json")], "not valid JSON"),
        (lambda: [SCENARIO, "--set", "topology.planes=0"], "topology.planes"),
        (lambda: [SCENARIO, "--set", "workload.nonsense=1"], "workload.nonsense: unknown key"),
        (lambda: [SCENARIO, "--set", "novalue"], "expected key.path=value"),
        (lambda: [SCENARIO, "--bogus"], "--bogus: unknown option"),
        (lambda: [SCENARIO, "--tie-order", "random"], "--tie-order: expected scheduled or node"),
        (lambda: [SCENARIO, "--out", "/nonexistent-dir/x.json"], "--out"),
        (lambda: [SCENARIO, "--out", os.path.join(symlink_loop(), "x.json")], "--out:"),
        (lambda: [], "no scenario file"),
        (lambda: [STREAMS, "--set", "transport.attributes.Bogus=1"],
         "transport.attributes.Bogus: not an attribute"),
        (lambda: [STREAMS, "--set", "transport.attributes.MinPaths=0"],
         "transport.attributes.MinPaths"),
        (lambda: [STREAMS, "--set", "transport.congestion_control=cubic"],
         "transport.congestion_control"),
        (lambda: [STREAMS, "--set", "transport.kind=tcp"], "transport.kind"),
        (lambda: [JOB, "--set", "workload.job.phases.0.group_size=7"],
         "workload.job.phases[0].group_size: must divide"),
        (lambda: [JOB, "--set", "workload.job.phases.0.algorithm=tree"],
         "workload.job.phases[0].algorithm"),
        (lambda: [JOB, "--set", "workload.job.phases.0.with_previous=true"],
         "workload.job.phases[0].with_previous"),
        (lambda: [JOB, "--set", "workload.job=scenarios/jobs/none.json"], "cannot open file"),
        (lambda: [STREAMS, "--set", "outputs.steady_from_us=100"], "outputs.steady_from_us: needs"),
        (lambda: [COLL, "--set", "outputs.timeseries_bin_us=10", "--set",
                  "outputs.steady_from_us=100"], "outputs.steady_from_us: needs"),
        (lambda: [COLL, "--set", "workload.algorithm=pat"], "workload.algorithm"),
        (lambda: [COLL, "--set", "workload.placement=explicit", "--set", "workload.nics=[1,1]"],
         "workload.nics"),
        (lambda: [COLL, "--set", "workload.ranks_per_host=7"], "workload.ranks_per_host"),
        (lambda: [STREAMS, "--set", "workload.flows.0.dst=0"], "workload.flows[0].dst"),
        (lambda: [STREAMS, "--set", "faults=[{\"kind\":\"plane_down\",\"plane\":1,"
                  "\"at_us\":1,\"scope\":\"half\"}]"], "faults[0].scope"),
        (lambda: [os.path.join(tmp, "missing.json")], "cannot open file"),
        (lambda: [SCENARIO, "--variant", "no-such-variant"], "--variant: no variant"),
        (lambda: [SCENARIO, "--variant"], "--variant: needs a value"),
        # A number beyond a double's range (nlohmann's out_of_range).
        (lambda: [write(tmp, "bad.json", open(SCENARIO).read().replace(
            '"duration_us": ', '"duration_us": 1e400, "x": ', 1))], "duration_us: not valid JSON"),
        # A directory where a file is expected: the scenario, the topology, the job.
        (lambda: [tmp], "it is a directory"),
        (lambda: [mutated(lambda j: j.update(topology=tmp))], "topology: cannot open file"),
        (lambda: [JOB, "--set", "workload.job=" + tmp], "workload.job: cannot open file"),
        # Topology paths the file system refuses: a loop of symbolic links, a component longer
        # than NAME_MAX, a path longer than PATH_MAX.
        (lambda: [mutated(lambda j: j.update(topology=symlink_loop()))],
         "topology: cannot open file"),
        (lambda: [mutated(lambda j: j.update(topology=os.path.join(tmp, "a" * 300)))],
         "topology: cannot open file"),
        (lambda: [mutated(lambda j: j.update(topology=os.path.join(tmp, "a/" * 3000)))],
         "topology: cannot open file"),
        # A --set value that is not UTF-8 (the scenario is written out as JSON).
        (lambda: [SCENARIO, "--set", b"name=\xff"], "name: the value is not valid UTF-8"),
        (lambda: [SCENARIO, "--set", b"\xff=1"], "key path is not valid UTF-8"),
        # Nesting deep enough to exhaust the stack of a recursive parser or printer, in a file
        # and in a --set value (a single argument is at most 128 KiB).
        (lambda: [write(tmp, "bad.json", open(SCENARIO).read().replace(
            '"workload": {', '"workload": {"planes": ' + "[" * 100000 + "]" * 100000 + ",", 1))],
         "workload.planes[0][0]"),
        (lambda: [SCENARIO, "--set", "workload.planes=" + "[" * 60000 + "]" * 60000],
         "nested deeper than 64 levels"),
        (lambda: [SCENARIO, "--set", "a." * 10000 + "b=1"], "more than 64 levels of keys"),
        # ns-3 aborts on these attribute values instead of rejecting them.
        (lambda: [STREAMS, "--set", "transport.attributes.RtoMin=5xs"],
         "transport.attributes.RtoMin: '5xs' is not a valid value"),
        (lambda: [STREAMS, "--set", "transport.attributes.MinPaths=abc"],
         "transport.attributes.MinPaths: 'abc' is not a valid value"),
        (lambda: [STREAMS, "--set", "transport.attributes.Mtu=99999999999999999999"],
         "transport.attributes.Mtu"),
        (lambda: [STREAMS, "--set", "transport.cc_attributes.AdditiveIncrease=1.5x"],
         "transport.cc_attributes.AdditiveIncrease: '1.5x' is not a valid value"),
        (lambda: [STREAMS, "--set", "transport.cc_attributes.AdditiveIncrease=nan"],
         "transport.cc_attributes.AdditiveIncrease: 'nan' is not a valid value"),
        # The receiver's rate-hint tracker: MetaRoCE's attributes only.
        (lambda: [INCAST, "--set", "transport.hint_attributes.Utilisation=0.9"],
         "transport.hint_attributes.Utilisation: not an attribute of ns3::metaroce::MetaRoceRateHint"),
        (lambda: [INCAST, "--set", "transport.hint_attributes.Utilization=2"],
         "transport.hint_attributes.Utilization: '2' is not a valid value"),
        (lambda: [INCAST, "--variant", "rocev2 PFC only", "--set",
                  "transport.hint_attributes.Utilization=0.9"],
         "transport.hint_attributes: rate hints are MetaRoCE's; this transport is rocev2"),
        # ...and this one was silently replaced by the transport's congestion control.
        (lambda: [STREAMS, "--set", "transport.attributes.CongestionControl=ns3::Object"],
         "transport.attributes.CongestionControl: set by transport.congestion_control"),
        # An element of a list is named by its index.
        (lambda: [COLL, "--set", "workload.sizes_bytes=[1,2,3,-1]"],
         "workload.sizes_bytes[3]: must be a whole number in 0..1099511627776, got -1"),
        (lambda: [COLL, "--set", "workload.placement=explicit", "--set", "workload.nics=[1,2,1]"],
         "workload.nics[2]: NIC 1 already runs rank 0"),
        (lambda: [SCENARIO, "--set", "workload.planes=[0,9]"], "workload.planes[1]:"),
        # NCCL_PROTO as a workload key; all-to-all has no protocol to force.
        (lambda: [COLL, "--set", "workload.protocol=LL64"],
         "workload.protocol: must be one of auto, LL, LL128, Simple"),
        (lambda: [COLL, "--set", "workload.op=alltoall", "--set", "workload.protocol=LL"],
         "workload.protocol: all-to-all runs NCCL's p2p path"),
        # PXN forwards all-to-all traffic inside a host: nothing to forward on a flat fabric.
        (lambda: [COLL, "--set", "workload.op=alltoall", "--set", "workload.pxn=true"],
         "workload.pxn: forwards all-to-all traffic between accelerators of a host"),
        # A NIC serves accelerators of one host, and a host's NICs divide the fabric's.
        (lambda: [mutated(lambda j: j.update(topology=shared_topology(3, 64)))],
         "accelerators_per_nic: must divide accelerators_per_host (8)"),
        (lambda: [mutated(lambda j: j.update(topology=shared_topology(2, 30)))],
         "accelerators_per_nic: a host has 4 NICs, which must divide nics (30)"),
        # A topology's endpoint latencies: numbers of ns, known keys only.
        (lambda: [mutated(lambda j: j.update(topology=endpoint_topology({"doorbell_ns": -1})))],
         "endpoint.doorbell_ns: must be a number"),
        (lambda: [mutated(lambda j: j.update(topology=endpoint_topology({"door_ns": 1})))],
         "endpoint.door_ns"),
        # One spelling of key paths in every message: a.b[0].c.
        (lambda: [STREAMS, "--set", "faults=[{\"kind\":\"loss\",\"rate\":0.1}]",
                  "--set", "faults.0.rate=2"], "faults[0].rate: must be a number"),
        (lambda: [STREAMS, "--set", "faults=[{\"kind\":\"loss\",\"rate\":0.1}]",
                  "--set", "faults.3.rate=2"], "--set: faults[3]: index out of range"),
        (lambda: [STREAMS, "--set", "faults[0].rate=2"], "--set: faults: not present"),
        (lambda: [mutated(lambda j: j.update(faults=[{"kind": "loss", "rate": 0.1}], variants=[
            {"name": "x", "set": {"faults.0.rate": 2}}]))], "faults[0].rate: must be a number"),
        (lambda: [mutated(lambda j: j.update(faults=[{"kind": "loss", "rate": 0.1}], variants=[
            {"name": "x", "set": {"faults.2.rate": 2}}]))],
         "variants[0].set: faults[2]: index out of range"),
        # outputs.table: a column a run of this workload kind never has, or "".
        (lambda: [SCENARIO, "--set", "outputs.table=[\"delivery_ratio\",\"\"]"],
         "outputs.table[1]: must be one of offered_goodput_gbps, delivered_goodput_gbps"),
        (lambda: [SCENARIO, "--set", "outputs.table=[\"goodput_gbps\"]"],
         "outputs.table[0]: must be one of"),
        (lambda: [JOB, "--set", "outputs.table=[\"phase\",\"size_bytes\"]"],
         "outputs.table[1]: must be one of phase, op, bytes"),
        # Variants are selected before they are validated, but a name must still exist.
        (lambda: [two_variants(), "--variant", "nope"], "--variant: no variant 'nope'"),
        (lambda: [two_variants(), "--variant", "broken"],
         "variant 'broken': workload.entropies_per_flow"),
        (lambda: [mutated(lambda j: j.update(variants=[{"name": "x"}, {"name": "x"}]))],
         "variants[1].name: \"x\" is also the name of variants[0]"),
    ]

    def shared_topology(per_nic, nics):
        topo = json.load(open(os.path.join(ROOT, "topologies", "fpf-8plane-64-hosts8.json")))
        topo.update(accelerators_per_nic=per_nic, nics=nics)
        return write(tmp, "shared-topology.json", topo)

    def endpoint_topology(endpoint):
        topo = json.load(open(os.path.join(ROOT, "topologies", "fpf-8plane-64.json")))
        topo["endpoint"] = endpoint
        return write(tmp, "endpoint-topology.json", topo)

    def symlink_loop():
        loop = os.path.join(tmp, "loop.json")
        if not os.path.islink(loop):
            os.symlink(loop, loop)
        return loop

    def two_variants():
        return mutated(lambda j: j.update(variants=[
            {"name": "good", "set": {"workload.entropies_per_flow": 4}},
            {"name": "broken", "set": {"workload.entropies_per_flow": 0}}]))

    for make_args, needle in bad:
        args = make_args()
        if "--out" not in args:
            args = args + ["--out", out]
        r = run(args + ["--quiet"])
        first = r.stderr.strip().splitlines()[0] if r.stderr.strip() else ""
        check(r.returncode == 2, f"{args}: exit {r.returncode}, expected 2 ({r.stderr.strip()})")
        check(needle in first, f"{args}: error line {first!r} does not name {needle!r}")
        check(not os.path.exists(out), f"{args}: left an output file behind")
        check("Traceback" not in r.stderr and "terminate" not in r.stderr, f"{args}: crashed")

    # An unreadable topology file (root reads it anyway: then run as nobody, from a folder
    # nobody may enter).
    shared = tempfile.mkdtemp(prefix="cli-unreadable-")
    try:
        os.chmod(shared, 0o755)
        secret = write(shared, "topology.json", open(os.path.join(
            ROOT, "topologies", "fpf-8plane-64.json")).read())
        os.chmod(secret, 0)
        scen = mutated(lambda j: j.update(topology=secret))
        os.rename(scen, os.path.join(shared, "scenario.json"))
        os.chmod(os.path.join(shared, "scenario.json"), 0o644)
        user = 65534 if os.getuid() == 0 else None
        r = subprocess.run([SIM, os.path.join(shared, "scenario.json"), "--dry-run"],
                           capture_output=True, text=True, timeout=60, user=user)
        check(r.returncode == 2 and "topology: cannot open file" in r.stderr and
              "Permission denied" in r.stderr, f"unreadable topology: exit {r.returncode}, "
              f"{r.stderr.strip()}")
    finally:
        for f in os.listdir(shared):
            os.remove(os.path.join(shared, f))
        os.rmdir(shared)

    # --variant A runs A even when another variant of the file is invalid.
    r = run([two_variants(), "--variant", "good", "--dry-run"])
    check(r.returncode == 0 and '"variant": "good"' in r.stdout and "broken" not in r.stdout,
          f"--variant good with a broken sibling: exit {r.returncode}, {r.stderr.strip()}")
    # A key path in the a.b[0].c form reaches the same key as a.b.0.c.
    r = run([STREAMS, "--dry-run", "--set", "workload.flows[0].src=1",
             "--set", "workload.flows.0.dst=0"])
    flows = json.loads(r.stdout.split("\n}\n")[0] + "\n}")["resolved"]["workload"]["flows"] \
        if r.returncode == 0 else None
    check(flows == [{"src": 1, "dst": 0}],
          f"--set a[0].b: exit {r.returncode}, {r.stderr.strip()}")

    # A rate-hint attribute reaches the receivers of its run, and only of its run: a lower
    # Utilization leaves the incast a shorter queue; the next variant is back at the default.
    o = os.path.join(tmp, "hint.json")
    hinted = "metaroce, rate hints"
    r = run([INCAST, "--quiet", "--variant", hinted, "--out", o])
    dflt = json.load(open(o))["runs"][0]["metrics"] if r.returncode == 0 else {}
    scen = json.load(open(INCAST))
    v = next(x for x in scen["variants"] if x["name"] == hinted)
    low = dict(v, name="low", set={"transport.hint_attributes": {"Utilization": 0.9}})
    mixed = write(tmp, "hint-mixed.json", dict(scen, variants=[low, v]))
    r = run([mixed, "--quiet", "--out", o])
    runs = {x["variant"]: x["metrics"] for x in json.load(open(o))["runs"]} \
        if r.returncode == 0 else {}
    check(dflt and runs and runs["low"]["steady_queue_bytes"] < 0.5 * dflt["steady_queue_bytes"]
          and all(runs[hinted][k] == dflt[k] for k in ("completion_us", "steady_queue_bytes")),
          f"hint_attributes: exit {r.returncode} {r.stderr.strip()}; default {dflt}, runs {runs}")

    # --dry-run's picks are the run's, also when accelerators share a NIC (each sees its share).
    shared = shared_topology(2, 32)
    args = [COLL, "--set", "topology=" + shared, "--set", "workload.sizes_bytes=[8388608]",
            "--variant", "MetaRoCE"]
    r = run(args + ["--dry-run"])
    picks = json.loads(r.stdout)["collective_choices"] if r.returncode == 0 else []
    o = os.path.join(tmp, "shared-run.json")
    r2 = run(args + ["--quiet", "--out", o])
    ran = json.load(open(o))["runs"][0]["metrics"] if r2.returncode == 0 else {}
    check(len(picks) == 1 and picks[0]["channels"] == ran.get("channels") and
          picks[0]["protocol"] == ran.get("protocol"),
          f"dry-run picks {picks} differ from the run's {ran.get('channels')} channels "
          f"({r.stderr.strip()} {r2.stderr.strip()})")

    # --dry-run resolves and reports the fabric without running it.
    r = run([SCENARIO, "--dry-run", "--set", "duration_us=10"])
    check(r.returncode == 0, f"--dry-run exit {r.returncode}: {r.stderr}")
    check('"switches": 128' in r.stdout, "--dry-run reports the fabric's switch count")

    # Every shipped scenario is valid (the bench's 100k job is only run with --large). A dry
    # run refuses what would not fit as the run does: the limit here is set above any.
    r = run([SCENARIO, "--dry-run", "--max-memory", "1M"])
    check(r.returncode == 2 and "nothing was run" in r.stderr,
          f"--dry-run of a run that does not fit: exit {r.returncode}: {r.stderr.strip()}")
    for sub in ("", "bench"):
        d = os.path.join(ROOT, "scenarios", sub)
        for name in sorted(os.listdir(d)):
            if name.endswith(".json"):
                r = run([os.path.join(d, name), "--dry-run", "--max-memory", "1T"])
                check(r.returncode == 0, f"{sub}/{name}: --dry-run exit {r.returncode}: {r.stderr}")

    # Same scenario and seed: byte-identical CSV, identical JSON but for the cost blocks.
    outs = []
    for i in range(2):
        o = os.path.join(tmp, f"run{i}.json")
        r = run([SCENARIO, "--quiet", "--set", "duration_us=20", "--out", o])
        check(r.returncode == 0, f"good run exit {r.returncode}: {r.stderr}")
        outs.append(o)
    if all(os.path.exists(o) for o in outs):
        csv = [open(o[:-5] + ".csv", "rb").read() for o in outs]
        check(csv[0] == csv[1], "CSV differs between identical runs")
        js = [json.load(open(o)) for o in outs]
        for j in js:
            for run_ in j["runs"]:
                run_.pop("cost")
        check(js[0] == js[1], "JSON (without cost) differs between identical runs")
        check(js[0]["schema_version"] == 1, "schema_version is 1")
        check_columns(SCENARIO, outs[0][:-5] + ".csv", "raw")
        check(len(js[0]["runs"]) == 4, "one record per variant")
    # --tie-order node: a valid order of same-instant events of its own (metaroce-sim-mpi's),
    # said in the cost block; the same frames, other ECN draws.
    o = os.path.join(tmp, "node.json")
    r = run([SCENARIO, "--quiet", "--set", "duration_us=20", "--tie-order", "node", "--out", o])
    check(r.returncode == 0, f"--tie-order node: exit {r.returncode}: {r.stderr}")
    if os.path.exists(o) and os.path.exists(outs[0]):
        node = json.load(open(o))["runs"]
        sched = json.load(open(outs[0]))["runs"]
        check(node[0]["cost"]["tie_order"] == "node" and sched[0]["cost"]["tie_order"] ==
              "scheduled", f"tie order in cost: {node[0]['cost'].get('tie_order')}")
        check(all(a["counters"]["packets_sent"] == b["counters"]["packets_sent"]
                  for a, b in zip(node, sched)), "--tie-order node: packets sent differ")
    # --variant runs only the named variants, with the same results as in the full run.
    if os.path.exists(outs[0]):
        full = json.load(open(outs[0]))["runs"]
        name = full[-1]["variant"]
        o4 = os.path.join(tmp, "one.json")
        r = run([SCENARIO, "--quiet", "--set", "duration_us=20", "--variant", name, "--out", o4])
        check(r.returncode == 0, f"--variant exit {r.returncode}: {r.stderr}")
        if os.path.exists(o4):
            one = json.load(open(o4))["runs"]
            check([x["variant"] for x in one] == [name], "--variant ran other variants")
            check(one[0]["metrics"] == full[-1]["metrics"],
                  "--variant changed the variant's results")
    def env_case(name, var, good, bad, needle):
        """var=good gives the default run's results; var=bad is exit 2 naming `needle`."""
        env = dict(os.environ, **{var: good})
        out = os.path.join(tmp, name + ".json")
        r = subprocess.run([SIM, SCENARIO, "--quiet", "--set", "duration_us=20", "--out", out],
                           cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
        check(r.returncode == 0, f"{var}={good} exit {r.returncode}: {r.stderr}")
        if os.path.exists(out) and os.path.exists(outs[0]):
            check(open(out[:-5] + ".csv").read() == open(outs[0][:-5] + ".csv").read(),
                  f"{var}={good} gives other results than the default")
        env[var] = bad
        out = os.path.join(tmp, name + "-bad.json")
        r = subprocess.run([SIM, SCENARIO, "--quiet", "--set", "duration_us=20", "--out", out],
                           cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
        check(r.returncode == 2 and needle in r.stderr and not os.path.exists(out),
              f"{var}={bad}: exit {r.returncode}, {r.stderr.strip()}")

    # Another scheduler (NS_GLOBAL_VALUE, as in ns-3) gives the same results; an unknown one
    # is bad input.
    env_case("quad", "NS_GLOBAL_VALUE", "SchedulerType=ns3::metaroce::QuadHeapScheduler",
             "SchedulerType=ns3::NoSuchScheduler", "SchedulerType")
    # So does ns-3's own simulator implementation in place of the module's.
    env_case("default-impl", "NS_GLOBAL_VALUE",
             "SimulatorImplementationType=ns3::DefaultSimulatorImpl",
             "SimulatorImplementationType=ns3::MapScheduler", "SimulatorImplementationType")
    # The huge-page heap changes no result; a value other than 0 or 1 is bad input. (The
    # sanitizer build has its own allocator and no such switch.)
    if b"METAROCE_HUGE_PAGES" in open(SIM, "rb").read():
        env_case("small-pages", "METAROCE_HUGE_PAGES", "0", "yes", "METAROCE_HUGE_PAGES")
    # Another seed gives other results.
    o3 = os.path.join(tmp, "seed2.json")
    run([SCENARIO, "--quiet", "--set", "duration_us=20", "--set", "seed=2", "--out", o3])
    if os.path.exists(o3) and os.path.exists(outs[0]):
        check(open(o3[:-5] + ".csv").read() != open(outs[0][:-5] + ".csv").read(),
              "seed 2 gives the same results as seed 1")

# Streams over both transports: every byte delivered, nothing left unfinished.
o = os.path.join(tempfile.gettempdir(), f"cli-streams-{os.getpid()}.json")
r = run([STREAMS, "--quiet", "--out", o])
check(r.returncode == 0, f"streams run exit {r.returncode}: {r.stderr}")
if os.path.exists(o):
    for run_ in json.load(open(o))["runs"]:
        m, c = run_["metrics"], run_["counters"]
        check(m["messages_completed"] == m["messages_total"], f"{run_['variant']}: unfinished")
        check(c["qps_unfinished"] == 0, f"{run_['variant']}: QPs left with work")
        check(m["goodput_gbps"] > 1000, f"{run_['variant']}: bidirectional goodput "
              f"{m['goodput_gbps']} Gb/s")
    check_columns(STREAMS, o[:-5] + ".csv", "streams")
    os.remove(o)
    os.remove(o[:-5] + ".csv")

# A job: concurrent phases finish, the iteration covers its phases, both transports run.
o = os.path.join(tempfile.gettempdir(), f"cli-job-{os.getpid()}.json")
r = run([JOB, "--quiet", "--out", o, "--set", "workload.job.iterations=1",
         "--set", "workload.job.phases.0.bytes=262144", "--set", "workload.job.phases.1.bytes=524288",
         "--set", "workload.job.phases.2.bytes=262144"])
check(r.returncode == 0, f"job run exit {r.returncode}: {r.stderr}")
if os.path.exists(o):
    runs = json.load(open(o))["runs"]
    check(len(runs) == 6, f"job: 3 phases x 2 variants expected, got {len(runs)} records")
    for run_ in runs:
        m = run_["metrics"]
        check(m["iterations_completed"] == 1, f"job {run_['variant']} {m['phase']}: unfinished")
        check(m["iteration_us"] >= m["time_us"] > 0, f"job {m['phase']}: times {m}")
    # ep-alltoall and dp-allreduce run together, fsdp-allgather after them
    meta = [x["metrics"] for x in runs if x["variant"] == "MetaRoCE"]
    check(abs(meta[0]["iteration_us"] - (max(meta[0]["time_us"], meta[1]["time_us"])
                                         + meta[2]["time_us"])) < 1.0, "job: stage timing")
    check_columns(JOB, o[:-5] + ".csv", "job")
    os.remove(o)
    os.remove(o[:-5] + ".csv")

# A collective's records carry only columns its table may name.
o = os.path.join(tempfile.gettempdir(), f"cli-coll-{os.getpid()}.json")
r = run([COLL, "--quiet", "--out", o, "--set", "workload.sizes_bytes=[4096]"])
check(r.returncode == 0, f"collective run exit {r.returncode}: {r.stderr}")
if os.path.exists(o):
    check_columns(COLL, o[:-5] + ".csv", "collective")
    os.remove(o)
    os.remove(o[:-5] + ".csv")

# A bad input's error is one line (the README's promise), an option's pointing at --help.
r = run([SCENARIO, "--set", "topology.planes=0", "--quiet"])
check(r.returncode == 2 and r.stderr.count("\n") == 1, f"bad input in one line: {r.stderr!r}")
r = run([SCENARIO, "--bogus"])
check(r.returncode == 2 and r.stderr.count("\n") == 1 and "--help" in r.stderr,
      f"bad option in one line: {r.stderr!r}")

# The address-space limit (ulimit -v) is a memory limit too: a run that fits in free memory
# but not in what the limit leaves is refused before it is built, naming the limit.
import resource
big = os.path.join(ROOT, "scenarios", "bench", "case3-allreduce-8k.json")
r = subprocess.run([SIM, big, "--dry-run", "--quiet"], capture_output=True, text=True,
                   timeout=120, preexec_fn=lambda: resource.setrlimit(
                       resource.RLIMIT_AS, (1500 << 20, 1500 << 20)))
check(r.returncode == 2 and "ulimit -v" in r.stderr,
      f"ulimit -v below the estimate: exit {r.returncode}: {r.stderr.strip()[-300:]}")

# Smaller edges of the command line: an empty --out names no file (it ran and wrote nothing);
# --max-memory of 2^64 - 1 is the largest limit, not "less than a byte"; a scenario that is a
# FIFO nobody writes to is an error at once, not a hang.
r = run([SCENARIO, "--out", "", "--quiet"])
check(r.returncode == 2 and "--out" in r.stderr, f"--out '': exit {r.returncode}: {r.stderr}")
r = run([SCENARIO, "--out=", "--quiet"])
check(r.returncode == 2 and "--out" in r.stderr, f"--out=: exit {r.returncode}: {r.stderr}")
r = run([SCENARIO, "--dry-run", "--max-memory", "18446744073709551615"])
check(r.returncode == 0, f"--max-memory 2^64-1: exit {r.returncode}: {r.stderr}")
r = run([SCENARIO, "--dry-run", "--max-memory", "1e30"])
check(r.returncode == 2 and "--max-memory" in r.stderr, f"--max-memory 1e30: {r.stderr}")
with tempfile.TemporaryDirectory() as tmp:
    fifo = os.path.join(tmp, "fifo.json")
    os.mkfifo(fifo)
    try:
        r = subprocess.run([SIM, fifo, "--quiet"], capture_output=True, text=True, timeout=20)
        check(r.returncode == 2 and "pipe" in r.stderr, f"FIFO scenario: {r.stderr.strip()}")
    except subprocess.TimeoutExpired:
        check(False, "a FIFO scenario with no writer hangs")

# A file named by mistake where JSON or a trace belongs (a key or password file): exit 2 naming
# the file and the position, never a word of its content.
with tempfile.TemporaryDirectory() as tmp:
    secret = os.path.join(tmp, "credentials")
    with open(secret, "w") as f:
        f.write('"S3CRET-user admin:S3CRET-password" S3CRET-more\nS3CRET line two\n')
    half = os.path.join(tmp, "half.json")
    with open(half, "w") as f:
        f.write('{"name": "x", "topology": "S3CRET-t" S3CRETkey }')
    topo = os.path.join(ROOT, "topologies", "fpf-8plane-64.json")
    docs = {
        "scenario": None,
        "half scenario": None,
        "topology": {"name": "x", "topology": secret, "seed": 1, "duration_us": 10,
                     "workload": {"kind": "raw", "pattern": "pairs"}},
        "job": {"name": "x", "topology": topo, "seed": 1, "duration_us": 10,
                "workload": {"kind": "job", "job": secret}},
    }
    for fmt in ("auto", "pytorch-profiler", "nccl-log"):
        docs[f"trace {fmt}"] = {"name": "x", "topology": topo, "seed": 1, "duration_us": 10,
                                "transport": {"kind": "metaroce"},
                                "workload": {"kind": "trace", "file": secret, "format": fmt}}
    for what, doc in docs.items():
        path = secret if what == "scenario" else half if what == "half scenario" else \
            write(tmp, "s.json", doc)
        r = run([path, "--quiet"])
        check(r.returncode == 2 and "S3CRET" not in r.stderr + r.stdout,
              f"{what} not JSON: exit {r.returncode}, message {r.stderr.strip()!r}")

# Loss bursts: a loss fault holds from at_us until until_us (without them, from the start to
# the end, as before); where loss faults overlap, the later one in the file applies. Raw
# traffic on the lab for 40 us; 100% loss leaves nothing, so the delivery ratio reads the time
# the loss held.
with tempfile.TemporaryDirectory() as tmp:
    lab = {"name": "loss-burst", "topology": "topologies/fpf-8x100g-lab.json", "seed": 1,
           "duration_us": 40, "workload": {"kind": "raw", "pattern": "pairs"}}
    full, burst, ends = {"kind": "loss", "rate": 1.0}, {"kind": "loss", "rate": 1.0,
                                                        "at_us": 10, "until_us": 30}, \
        {"kind": "loss", "rate": 0.0, "until_us": 20}

    def ratio(faults):
        o = os.path.join(tmp, "loss.json")
        r = run([write(tmp, "loss-in.json", dict(lab, faults=faults)), "--quiet", "--out", o])
        check(r.returncode == 0, f"loss {faults}: exit {r.returncode}: {r.stderr}")
        return json.load(open(o))["runs"][0]["metrics"]["delivery_ratio"] if \
            r.returncode == 0 else -1

    check(ratio([]) == 1.0, "no loss fault: every frame delivered")
    check(ratio([full]) == 0.0, "a loss fault without until_us holds to the end")
    got = ratio([burst])
    check(0.4 < got < 0.6, f"a 20 us burst of 40 us: delivery ratio {got}, expected ~0.5")
    got = ratio([full, ends])
    check(0.4 < got < 0.6, f"a later fault (0% until 20 us) over an earlier 100%: {got}")
    check(ratio([ends, full]) == 0.0, "an earlier fault under a later one that holds throughout")
    # Where the loss applies: a NIC's own links, switch to switch, or between sites only.
    check(ratio([dict(full, links="nic")]) == 0.0, "loss on the NICs' links only")
    check(ratio([dict(full, links="fabric")]) == 0.0, "loss on switch-to-switch links only")
    sites = dict(lab, topology="topologies/scale-across-2site-150km.json", duration_us=2000)
    for dst, want in ((1, 1.0), (16, 0.0)):
        o = os.path.join(tmp, "long.json")
        doc = dict(sites, workload={"kind": "raw", "pattern": "explicit",
                                    "flows": [{"src": 0, "dst": dst}]},
                   faults=[dict(full, links="long")])
        r = run([write(tmp, "long-in.json", doc), "--quiet", "--out", o])
        got = json.load(open(o))["runs"][0]["metrics"]["delivery_ratio"] if \
            r.returncode == 0 else -1
        check(got == want, f"loss on the long links only, 0 -> {dst}: delivery {got}, want {want}")
    r = run([write(tmp, "long-bad.json", dict(lab, faults=[dict(full, links="long")])), "--quiet"])
    check(r.returncode == 2 and "faults[0].links" in r.stderr,
          f"long-link loss on one site: exit {r.returncode}: {r.stderr.strip()}")
    bad = write(tmp, "loss-bad.json", dict(lab, faults=[dict(burst, until_us=10)]))
    r = run([bad, "--quiet"])
    check(r.returncode == 2 and "faults[0].until_us" in r.stderr,
          f"loss until_us <= at_us: exit {r.returncode}: {r.stderr.strip()}")
    # A transport recovers once a total loss ends: every message completes after it.
    st = {"name": "loss-recovery", "topology": "topologies/fpf-8x100g-lab.json", "seed": 1,
          "duration_us": 100000, "transport": {"kind": "metaroce"},
          "workload": {"kind": "streams", "pattern": "explicit", "flows": [{"src": 0, "dst": 1}],
                       "message_bytes": 65536, "messages_per_qp": 4, "outstanding_per_qp": 2},
          "faults": [{"kind": "loss", "rate": 1.0, "until_us": 200}],
          "variants": [{"name": "metaroce", "set": {}},
                       {"name": "rocev2", "set": {"transport.kind": "rocev2",
                                                  "topology.switch.pfc": True}}]}
    o = os.path.join(tmp, "recovery.json")
    r = run([write(tmp, "recovery-in.json", st), "--quiet", "--out", o])
    check(r.returncode == 0, f"recovery after a loss burst: exit {r.returncode}: {r.stderr}")
    if r.returncode == 0:
        for run_ in json.load(open(o))["runs"]:
            m = run_["metrics"]
            check(m["messages_completed"] == m["messages_total"] and m["completion_us"] > 200,
                  f"{run_['variant']} after a loss burst: {m}")

# The drain rule (after a completed run every QP ends with nothing unacknowledged) on a fault
# that takes the last ACK: one 4 KiB RoCEv2 message between two NICs on one plane; the plane
# fails just after the receiver completes it (taken from a run without faults), while its
# ACK is on the way; RoCEv2 resends after its 4 ms RTO. A fault in force to the end keeps the
# ACK away for good (not a violation); a fault that ends counts the drain from its end; on a
# whole fabric the rule still holds.
with tempfile.TemporaryDirectory() as tmp:
    two = {"name": "last-ack", "seed": 1, "duration_us": 100000,
           "topology": {"name": "two", "kind": "clos", "nics": 2, "switch_radix": 4,
                        "nic_port_gbps": 100, "nic_link_delay_ns": 25,
                        "fabric_link_delay_ns": 500},
           "transport": {"kind": "rocev2"},
           "workload": {"kind": "streams", "pattern": "explicit", "flows": [{"src": 0, "dst": 1}],
                        "message_bytes": 4096}}
    o = os.path.join(tmp, "clean.json")
    r = run([write(tmp, "last-ack.json", two), "--quiet", "--out", o])
    done_us = json.load(open(o))["runs"][0]["metrics"]["completion_us"] if r.returncode == 0 \
        else 1.0
    check(r.returncode == 0, f"last ACK, no fault: exit {r.returncode}: {r.stderr.strip()}")
    at = round(done_us + 0.05, 3)
    down = {"kind": "plane_down", "plane": 0, "at_us": at}
    for faults, extra, code, what in (
            ([down], {}, 0, "the plane down to the end"),
            ([dict(down, until_us=9000)], {}, 0, "the plane back at 9 ms (RTOs at 4 and 8 ms "
                                                 "fail, 12 ms succeeds)"),
            ([{"kind": "loss", "rate": 1.0, "at_us": at}], {}, 0, "total loss to the end"),
            ([dict(down, until_us=100)], {"stall_us": 2000}, 4, "the plane back at 100 us, the "
                                                              "drain 2 ms, the RTO 4 ms")):
        r = run([write(tmp, "last-ack.json", dict(two, faults=faults, **extra)), "--quiet"])
        check(r.returncode == code, f"last ACK lost, {what}: exit {r.returncode}, expected "
                                    f"{code}: {r.stderr.strip()}")
        if code == 4:
            check("unacknowledged" in r.stderr and "NIC 0 QP 1" in r.stderr,
                  f"the drain rule's message: {r.stderr.strip()}")

# The all-to-all pattern: every ordered pair of NICs, one flow each (8 NICs: 56 flows).
o = os.path.join(tempfile.gettempdir(), f"cli-a2a-{os.getpid()}.json")
r = run([os.path.join(ROOT, "scenarios", "alltoall-256.json"), "--quiet", "--variant", "metaroce",
         "--set", "topology.nics=8", "--set", "workload.message_bytes=8192", "--out", o])
check(r.returncode == 0, f"all-to-all run exit {r.returncode}: {r.stderr}")
if os.path.exists(o):
    run0 = json.load(open(o))["runs"][0]
    check(run0["metrics"]["messages_total"] == 56 and run0["metrics"]["messages_completed"] == 56,
          f"all-to-all on 8 NICs: {run0['metrics']['messages_total']} flows, expected 56")
    os.remove(o)
    os.remove(o[:-5] + ".csv")

# A run's memory figures are its own: started by a parent that holds 256 MiB, its RSS at the
# start is still the simulator's (getrusage's peak would carry the parent's over exec).
ballast = b"\x01" * (256 << 20)
o = os.path.join(tempfile.gettempdir(), f"cli-rss-{os.getpid()}.json")
r = run([SCENARIO, "--quiet", "--set", "duration_us=5", "--out", o])
del ballast
check(r.returncode == 0, f"rss run exit {r.returncode}: {r.stderr}")
if os.path.exists(o):
    cost = json.load(open(o))["runs"][0]["cost"]
    check(cost["start_rss_bytes"] < (128 << 20) and
          cost["build_peak_rss_bytes"] >= cost["start_rss_bytes"],
          f"memory figures include the parent's: {cost['start_rss_bytes']} B at the start")
    os.remove(o)
    os.remove(o[:-5] + ".csv")

print("cli: all checks passed" if not failures else f"cli: {len(failures)} checks failed")
sys.exit(1 if failures else 0)
