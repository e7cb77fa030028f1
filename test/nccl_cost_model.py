#!/usr/bin/python3
"""An independent implementation of NCCL's algorithm/protocol cost model, written from the
published source, used to produce the expected table in test/test-nccl-cost-model.cc.

Source: NCCL v2.28.3-1 (the ncclTunerConstantsDefaults line of src/graph/tuning.cc):
ncclTopoTuneModel and ncclTopoGetAlgoTime in src/graph/tuning.cc, topoGetAlgoInfo in
src/enqueue.cc, thread limits and thresholds in src/include/device.h and comm.h. Only what
a fabric without NVLS/CollNet needs: Tree, Ring and PAT with LL, LL128 and Simple, for
all-reduce, all-gather and reduce-scatter.

  test/nccl_cost_model.py          a readable table of the picks
  test/nccl_cost_model.py --cpp    the rows pasted into test/test-nccl-cost-model.cc

The hardware defaults (Hopper, Intel hosts, one NIC per GPU, graph-search figures derived from
the NIC's rate) are the same assumptions model/collective/nccl-cost-model.h documents.
"""
import sys

TREE, RING, PAT = "tree", "ring", "pat"
LL, LL128, SIMPLE = "LL", "LL128", "Simple"
ALGOS = [TREE, RING, PAT]  # NCCL's algorithm index order (Tree 0, Ring 1, PAT 6)
PROTOS = [LL, LL128, SIMPLE]  # NCCL's protocol index order

# tuning.cc, ncclTunerConstantsDefaults (us)
BASE_LAT = {TREE: [6.8, 14.0, 8.4], RING: [6.6, 14.0, 8.4], PAT: [8.0, 8.0, 8.0]}
HW_LAT = {
    "nvlink": {TREE: [0.6, 1.25, 4.0], RING: [0.6, 1.9, 3.4], PAT: [0.0, 0.0, 4.0]},
    "pci": {TREE: [1.0, 1.9, 4.0], RING: [1.0, 2.5, 5.7], PAT: [0.0, 0.0, 4.0]},
    "net": {TREE: [5.0, 8.5, 14.0], RING: [2.7, 4.0, 14.0], PAT: [0.0, 0.0, 14.0]},
}
# rows: Volta/Intel, Ampere/AMD, Hopper, Blackwell; columns: 1 node, 2 nodes, more
LL_MAX_BWS = [[39.0, 39.0, 20.4], [87.7, 22.5, 19.0], [141.0, 45.0, 35.0], [282.0, 90.0, 70.0]]
PER_CH_MAX_RING_LL128 = {90: [36.7, 36.7, 36.7]}
PER_CH_MAX_TREE_LL128 = {90: [36.7, 36.7, 29.0]}
PER_CH_MAX_TREE = {90: [38.7, 41.4, 36.0]}
TREE_CORRECTION = {  # powers of two from 64 B
    LL: [1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0],
    LL128: [1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0],
    SIMPLE: [.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9],
}
# search.cc: the speeds (GB/s per channel) a Hopper graph search tries between nodes
SM90_SPEEDS_INTER = [48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
                     2.4, 1.2, 0.24, 0.12]
MAXCHANNELS = 64
# device.h / comm.h
MAX_THREADS = {LL: 512, LL128: 640, SIMPLE: 512}
THREAD_THRESHOLD = {LL: 8, LL128: 8, SIMPLE: 64}
PCI_BW = 12.0


def log2i(n):
    """NCCL's log2i on the host: floor(log2 n), -1 for 0."""
    return -1 if n <= 0 else n.bit_length() - 1


def hopper_graph(nic_gbps, ranks_per_node):
    """Assumed graph-search result: per NIC, the fastest sm90 speed step at or below its rate;
    steps of 25 GB/s or more are split into two channels at half the speed (channel
    duplication); a node's channels are its NICs' (at most MAXCHANNELS/2); the communicator
    then doubles them (at most MAXCHANNELS)."""
    if nic_gbps >= 48.0:
        per_nic, bw = 2 * int(nic_gbps // 48.0), 24.0
    else:
        bw = next((s for s in SM90_SPEEDS_INTER if s <= nic_gbps), SM90_SPEEDS_INTER[-1])
        per_nic = 1
        if bw >= 25.0:
            per_nic, bw = 2, bw / 2
    search = min(MAXCHANNELS // 2, ranks_per_node * per_nic)
    return {"search": search, "bw_intra": bw, "bw_inter": bw,
            "channels": min(MAXCHANNELS, 2 * search)}


class Model:
    def __init__(self, ranks, nodes, nic_gbps=100.0, amd_cpu=False, cc=90, ll128=True,
                 net_latency_us=0.0, tree_pattern=False):
        self.ranks, self.nodes = ranks, nodes
        self.ppn = ranks / nodes
        g = hopper_graph(nic_gbps, ranks // nodes)
        self.search, self.bw_intra, self.bw_inter = g["search"], g["bw_intra"], g["bw_inter"]
        self.channels = g["channels"]
        self.amd, self.cc, self.ll128 = amd_cpu, cc, ll128
        self.net_latency, self.tree_pattern = net_latency_us, tree_pattern
        self.net_overhead = 2.0 if amd_cpu else 1.0

    def considered(self, func, algo, proto):
        if func == "allreduce":
            return algo in (TREE, RING)
        return algo == RING or (algo == PAT and proto == SIMPLE)

    def enabled(self, func, algo, proto):
        if proto == LL128 and not (self.ll128 and self.cc >= 70):
            return False
        if algo == PAT:
            return self.cc >= 60 and self.nodes == self.ranks
        return True

    def table(self, func, algo, proto):
        """(latency us, algorithm bandwidth GB/s) of ncclTopoTuneModel."""
        n, nodes, p = self.ranks, self.nodes, PROTOS.index(proto)
        nsteps = 2 * (n - 1) if func == "allreduce" else n - 1
        col = nodes - 1 if nodes <= 2 else 2
        ll_max = LL_MAX_BWS[2 if nodes == 1 else (1 if self.amd else 0)][col]
        bus = self.search * (self.bw_intra if nodes <= 2 else self.bw_inter)
        if algo == RING and proto == LL:
            bus = min(ll_max, bus * 0.5)
        if algo == RING and proto == LL128:
            bus = min(bus * 0.92, self.search * PER_CH_MAX_RING_LL128[self.cc][col])
        if algo == TREE and func == "allreduce":
            bus = min(bus * 0.92, self.search * PER_CH_MAX_TREE[self.cc][col])
        if algo == TREE and proto == LL:
            bus = min(bus / 3.8, ll_max)
        if algo == TREE and proto == LL128:
            bus = min(bus * (7.0 / 9.0 if nodes == 1 else 120.0 / 128.0),
                      self.search * PER_CH_MAX_TREE_LL128[self.cc][col])
        if algo == TREE and self.tree_pattern:
            bus *= 0.85
        if algo == PAT:
            bus *= 0.75
        if algo == RING:
            bus *= n / nsteps
        elif func == "allreduce":
            bus *= 0.5
        lat = BASE_LAT[algo][p]
        intra = HW_LAT["nvlink" if self.ppn > 1 else "pci"][algo][p]
        inter = HW_LAT["net"][TREE if self.ppn == 1 else algo][p] + self.net_latency
        if proto == SIMPLE:
            inter += self.net_latency
        if algo == RING:
            overhead = self.net_overhead * (3 if proto == SIMPLE else 1) if nodes > 1 else 0.0
            intra = max(intra, overhead)
            ninter = 0 if nodes == 1 else (2 * (nodes - 1) if func == "allreduce" else nodes - 1)
            lat += (nsteps - ninter) * intra + ninter * inter
        elif algo == TREE:
            lat += 2 * ((n // nodes - 1) * intra + log2i(nodes) * inter)
        else:
            lat += log2i(nodes) * (inter / 3.5) + n * 2.8
        return lat, bus

    def time(self, func, algo, proto, nbytes):
        """ncclTopoGetAlgoTime (one operation)."""
        lat, bw = self.table(func, algo, proto)
        ls = log2i(nbytes >> 6)
        if algo == TREE and func == "allreduce" and 0 <= ls < 23:
            bw *= TREE_CORRECTION[proto][ls]
        if (algo == RING and proto == SIMPLE and self.nodes > 1 and func == "allreduce"
                and nbytes // (self.channels * self.ranks) >= 64):
            lat *= 1.9 if self.cc < 80 else 1.4
        return lat + nbytes / (1000.0 * bw)

    def pick(self, func, nbytes):
        """topoGetAlgoInfo: the first strictly smaller time in (algorithm, protocol) order."""
        best = None
        for a in ALGOS:
            for p in PROTOS:
                if not self.considered(func, a, p) or not self.enabled(func, a, p):
                    continue
                t = self.time(func, a, p, nbytes)
                if best is None or t < best[2]:
                    best = (a, p, t)
        return best

    def nchannels(self, algo, proto, nbytes):
        """topoGetAlgoInfo's channel trimming (PAT's thread count is never set: no trimming)."""
        if algo == PAT:
            return self.channels
        nt = MAX_THREADS[proto]
        if algo == RING and proto == SIMPLE and self.bw_intra * self.search <= PCI_BW:
            nt = 256
        thr = THREAD_THRESHOLD[proto] * (self.ranks if algo == RING and proto == LL else 1)
        nc = self.channels
        while nbytes < nc * nt * thr and nc >= 2:
            nc -= 1
        return nc


SHAPES = [(64, 64), (64, 8), (1024, 128)]  # (ranks, nodes): 64 x 1, 8 x 8, 128 x 8 GPUs
SIZES = [8, 1024, 32768, 1 << 20, 32 << 20, 1 << 30]
FUNCS = ["allreduce", "allgather", "reducescatter"]


def main():
    cpp = "--cpp" in sys.argv[1:]
    for ranks, nodes in SHAPES:
        m = Model(ranks, nodes)
        for func in FUNCS:
            for s in SIZES:
                a, p, t = m.pick(func, s)
                c = m.nchannels(a, p, s)
                if cpp:
                    print(f'    {{"{func}", {ranks}, {nodes}, {s}ULL, "{a}", "{p}", {c}, {t!r}}},')
                else:
                    print(f"{ranks:5d} ranks {nodes:4d} nodes {func:13s} {s:11d} B  {a:4s} {p:6s}"
                          f" {c:3d} ch  {t:10.2f} us")


if __name__ == "__main__":
    main()
