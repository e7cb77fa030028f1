#include "nccl-cost-model.h"

#include "communicator.h"

#include "ns3/abort.h"

#include <algorithm>
#include <cmath>
#include <memory>

namespace ns3
{
namespace metaroce
{

std::string
ToString(NcclAlgo a)
{
    switch (a)
    {
        case NcclAlgo::Tree:
            return "tree";
        case NcclAlgo::Ring:
            return "ring";
        case NcclAlgo::Pat:
            return "pat";
    }
    return "?";
}

std::string
ToString(NcclProto p)
{
    switch (p)
    {
        case NcclProto::LL:
            return "LL";
        case NcclProto::LL128:
            return "LL128";
        case NcclProto::Simple:
            return "Simple";
    }
    return "?";
}

namespace
{
constexpr NcclAlgo kAlgos[] = {NcclAlgo::Tree, NcclAlgo::Ring, NcclAlgo::Pat};
constexpr NcclProto kProtos[] = {NcclProto::LL, NcclProto::LL128, NcclProto::Simple};

int
A(NcclAlgo a)
{
    return static_cast<int>(a);
}

int
P(NcclProto p)
{
    return static_cast<int>(p);
}

// ncclTunerConstantsDefaults (tuning.cc), in us, [algorithm][protocol] for Tree, Ring, PAT.
constexpr double kBaseLatencyUs[3][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {8.0, 8.0, 8.0}};
// hwLatencies: [NVLink, PCI, network][algorithm][protocol].
enum Hw
{
    kNvlink,
    kPci,
    kNet
};

constexpr double kHwLatencyUs[3][3][3] = {
    {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 4.0}},
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 4.0}},
    {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}, {0, 0, 14.0}},
};
// Per-channel caps (GB/s), [1 node, 2 nodes, more]. llMaxBws rows: single node by GPU
// (Volta, Ampere, Hopper), multi-node by CPU (Intel, AMD).
constexpr double kLlMaxBwsIntel[3] = {39.0, 39.0, 20.4};
constexpr double kLlMaxBwsAmd[3] = {87.7, 22.5, 19.0};
constexpr double kLlMaxBwsHopper[3] = {141.0, 45.0, 35.0};
// Hopper rows of perChMaxRingLL128Bws, perChMaxTreeLL128Bws, perChMaxTreeBws; Volta and
// Ampere share theirs.
constexpr double kRingLl128Hopper[3] = {36.7, 36.7, 36.7};
constexpr double kTreeLl128Hopper[3] = {36.7, 36.7, 29.0};
constexpr double kTreeHopper[3] = {38.7, 41.4, 36.0};
constexpr double kRingLl128Older[3] = {20.0, 20.0, 20.0};
constexpr double kTreeLl128Older[3] = {20.0, 20.0, 20.0};
constexpr double kTreeVolta[3] = {26.5, 18.5, 10.0};
constexpr double kTreeAmpere[3] = {24.0, 23.6, 17.8};
constexpr double kLlMaxBwsVolta[3] = {39.0, 39.0, 20.4};
constexpr double kLlMaxBwsAmpere[3] = {87.7, 22.5, 19.0};

// treeCorrectionFactor (tuning.cc): [protocol][log2(bytes / 64)], 64 B to 256 MiB.
constexpr int kTreeCorrections = 23;
constexpr double kTreeCorrection[3][kTreeCorrections] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7,  .7,  .7,  .6, .5,
     .4,  .4,  .5,  .6,  .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7,  .6, .6,
     .6,  .6,  .6,  .6,  .8,  .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};

// search.cc: the speeds a Hopper search tries between nodes, GB/s per channel.
constexpr double kSm90SpeedsInter[] = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                       15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
constexpr uint32_t kMaxChannels = 64; // MAXCHANNELS
constexpr double kPciBw = 12.0;       // PCI_BW (topo.h): Ring/Simple's thread count below it
// NCCL_{LL,LL128,SIMPLE}_MAX_NTHREADS and NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD.
constexpr uint64_t kMaxThreads[3] = {512, 640, 512};
constexpr uint64_t kThreadThreshold[3] = {8, 8, 64};

/// NCCL's host log2i: floor(log2 n), -1 for 0.
int
Log2i(uint64_t n)
{
    int l = -1;
    while (n != 0)
    {
        n >>= 1;
        ++l;
    }
    return l;
}
} // namespace

NcclCostModel::NcclCostModel(uint32_t ranks, uint32_t nodes, const NcclHardware& hw)
    : m_ranks(ranks)
    , m_nodes(nodes)
    , m_hw(hw)
{
    NS_ABORT_MSG_IF(ranks < 1 || nodes < 1 || ranks % nodes != 0,
                    "NcclCostModel: " << nodes << " nodes do not divide " << ranks << " ranks");
    NS_ABORT_MSG_IF(hw.searchChannels == 0 || hw.channels == 0 || !(hw.bwIntraGBps > 0) ||
                        !(hw.bwInterGBps > 0) || hw.netOverheadUs < 0,
                    "NcclCostModel: hardware not resolved (NcclCostModel::Resolve)");
}

NcclHardware
NcclCostModel::Resolve(NcclHardware hw, double nicGBps, uint32_t ranksPerNode)
{
    NS_ABORT_MSG_IF(!(nicGBps > 0) || ranksPerNode == 0, "NcclCostModel::Resolve: no NIC");
    if (hw.netOverheadUs < 0)
    {
        hw.netOverheadUs = hw.amdCpu ? 2.0 : 1.0; // getNetOverhead
    }
    uint32_t perNic = 1;
    double bw = kSm90SpeedsInter[std::size(kSm90SpeedsInter) - 1];
    if (nicGBps >= 48.0)
    {
        perNic = 2 * static_cast<uint32_t>(nicGBps / 48.0);
        bw = 24.0;
    }
    else
    {
        for (double s : kSm90SpeedsInter)
        {
            if (s <= nicGBps)
            {
                bw = s;
                break;
            }
        }
        if (bw >= 25.0)
        {
            perNic = 2;
            bw /= 2;
        }
    }
    if (hw.searchChannels == 0)
    {
        hw.searchChannels = std::min(kMaxChannels / 2, ranksPerNode * perNic);
    }
    if (!(hw.bwInterGBps > 0))
    {
        hw.bwInterGBps = bw;
    }
    if (!(hw.bwIntraGBps > 0))
    {
        hw.bwIntraGBps = hw.bwInterGBps;
    }
    if (hw.channels == 0)
    {
        hw.channels = std::min(kMaxChannels, 2 * hw.searchChannels);
    }
    return hw;
}

bool
NcclCostModel::Considered(NcclFunc f, NcclAlgo a, NcclProto p) const
{
    // ncclTopoTuneModel: all-reduce runs every algorithm but PAT; all-gather and
    // reduce-scatter run Ring (and NVLS/CollNet, off here) and PAT, which is Simple only.
    if (f == NcclFunc::AllReduce)
    {
        return a != NcclAlgo::Pat;
    }
    if (f == NcclFunc::Broadcast)
    {
        return a == NcclAlgo::Ring;
    }
    return a == NcclAlgo::Ring || (a == NcclAlgo::Pat && p == NcclProto::Simple);
}

bool
NcclCostModel::Enabled(NcclAlgo a, NcclProto p) const
{
    if (p == NcclProto::LL128 && !(m_hw.ll128Allowed && m_hw.computeCapability >= 70))
    {
        return false;
    }
    // ncclPatEnable: SM60+, one GPU per node, host-driven network.
    if (a == NcclAlgo::Pat)
    {
        return m_hw.computeCapability >= 60 && m_nodes == m_ranks;
    }
    return true;
}

NcclEstimate
NcclCostModel::Estimate(NcclFunc f, NcclAlgo a, NcclProto p, uint64_t bytes) const
{
    const uint32_t n = m_ranks;
    const uint32_t nodes = m_nodes;
    const double ppn = static_cast<double>(n) / nodes;
    const bool allReduce = f == NcclFunc::AllReduce;
    const uint32_t nsteps = allReduce ? 2 * (n - 1) : f == NcclFunc::Broadcast ? n : n - 1;
    const int col = nodes <= 2 ? static_cast<int>(nodes) - 1 : 2;
    const uint32_t cc = m_hw.computeCapability;
    const double llMaxBw = nodes == 1 ? (cc >= 90   ? kLlMaxBwsHopper[col]
                                         : cc >= 80 ? kLlMaxBwsAmpere[col]
                                                    : kLlMaxBwsVolta[col])
                                      : (m_hw.amdCpu ? kLlMaxBwsAmd[col] : kLlMaxBwsIntel[col]);
    const double ringLl128Cap = cc >= 90 ? kRingLl128Hopper[col] : kRingLl128Older[col];
    const double treeLl128Cap = cc >= 90 ? kTreeLl128Hopper[col] : kTreeLl128Older[col];
    const double treeCap = cc >= 90   ? kTreeHopper[col]
                           : cc >= 80 ? kTreeAmpere[col]
                                      : kTreeVolta[col];
    const double ch = m_hw.searchChannels;

    // Bandwidth: busBw of the graph, refined per algorithm and protocol, then algbw.
    double bus = ch * (nodes <= 2 ? m_hw.bwIntraGBps : m_hw.bwInterGBps);
    if (a == NcclAlgo::Ring && p == NcclProto::LL)
    {
        bus = std::min(llMaxBw, bus * 0.5);
    }
    if (a == NcclAlgo::Ring && p == NcclProto::LL128)
    {
        bus = std::min(bus * 0.92, ch * ringLl128Cap);
    }
    if (a == NcclAlgo::Tree && allReduce)
    {
        bus = std::min(bus * 0.92, ch * treeCap);
    }
    if (a == NcclAlgo::Tree && p == NcclProto::LL)
    {
        bus = std::min(bus / 3.8, llMaxBw);
    }
    if (a == NcclAlgo::Tree && p == NcclProto::LL128)
    {
        bus = std::min(bus * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), ch * treeLl128Cap);
    }
    if (a == NcclAlgo::Tree && m_hw.treePatternTree)
    {
        bus *= 0.85;
    }
    if (a == NcclAlgo::Pat)
    {
        bus *= 0.75;
    }
    // Bus to algorithm bandwidth: the ring's n / nsteps, the tree's 1/2; PAT keeps busBw.
    if (a == NcclAlgo::Ring)
    {
        bus *= static_cast<double>(n) / nsteps;
    }
    else if (allReduce)
    {
        bus *= 0.5;
    }

    // Latency. With one GPU per node every network step is exposed: the tree's network
    // latency stands for every algorithm.
    double lat = kBaseLatencyUs[A(a)][P(p)];
    double intra = kHwLatencyUs[m_hw.nvlink && ppn > 1 ? kNvlink : kPci][A(a)][P(p)];
    double inter = kHwLatencyUs[kNet][ppn == 1 ? A(NcclAlgo::Tree) : A(a)][P(p)] +
                   m_hw.netLatencyUs * (p == NcclProto::Simple ? 2 : 1); // + flush
    if (a == NcclAlgo::Ring && f == NcclFunc::Broadcast)
    {
        // A pipeline, not steps: one hop's latency when every channel runs the same ring
        // (NCCL's sameChannels; assumption: the graph search finds such rings here).
        lat +=
            kHwLatencyUs[nodes == 1 ? (m_hw.nvlink && ppn > 1 ? kNvlink : kPci) : kNet][A(a)][P(p)];
    }
    else if (a == NcclAlgo::Ring)
    {
        // Inter-node rings still launch a network post per step.
        double overhead = nodes > 1 ? m_hw.netOverheadUs * (p == NcclProto::Simple ? 3 : 1) : 0;
        intra = std::max(intra, overhead);
        uint32_t interSteps = nodes == 1 ? 0 : (allReduce ? 2 * (nodes - 1) : nodes - 1);
        lat += (nsteps - interSteps) * intra + interSteps * inter;
    }
    else if (a == NcclAlgo::Tree)
    {
        lat += 2 * ((n / nodes - 1) * intra + Log2i(nodes) * inter);
    }
    else
    {
        lat += Log2i(nodes) * (inter / 3.5) + n * 2.8;
    }

    NcclEstimate e;
    e.algo = a;
    e.proto = p;
    e.enabled = Enabled(a, p);
    e.latencyUs = lat;
    e.bandwidthGBps = bus;
    // ncclTopoGetAlgoTime, one operation (latCount 1).
    double bw = bus;
    int logSize = Log2i(bytes >> 6);
    if (a == NcclAlgo::Tree && allReduce && logSize >= 0 && logSize < kTreeCorrections)
    {
        bw *= kTreeCorrection[P(p)][logSize];
    }
    if (a == NcclAlgo::Ring && p == NcclProto::Simple && nodes > 1 && allReduce &&
        bytes / (uint64_t{m_hw.channels} * n) >= 64)
    {
        lat *= cc < 80 ? 1.9 : 1.4; // the ring's plateau
    }
    e.timeUs = lat + bytes / (1000 * bw);
    return e;
}

std::vector<NcclEstimate>
NcclCostModel::Estimates(NcclFunc f, uint64_t bytes) const
{
    std::vector<NcclEstimate> out;
    for (NcclAlgo a : kAlgos)
    {
        for (NcclProto p : kProtos)
        {
            if (Considered(f, a, p))
            {
                out.push_back(Estimate(f, a, p, bytes));
            }
        }
    }
    return out;
}

const NcclEstimate*
NcclCostModel::Argmin(const std::vector<NcclEstimate>& e)
{
    const NcclEstimate* best = nullptr;
    for (const NcclEstimate& x : e)
    {
        if (x.enabled && x.timeUs >= 0 && (best == nullptr || x.timeUs < best->timeUs))
        {
            best = &x;
        }
    }
    return best;
}

uint32_t
NcclCostModel::Channels(NcclAlgo a, NcclProto p, uint64_t bytes) const
{
    // PAT's thread count is never set by ncclTopoTuneModel (0), so the trimming loop leaves
    // it every channel.
    if (a == NcclAlgo::Pat)
    {
        return m_hw.channels;
    }
    uint64_t nt = kMaxThreads[P(p)];
    if (a == NcclAlgo::Ring && p == NcclProto::Simple &&
        m_hw.bwIntraGBps * m_hw.searchChannels <= kPciBw)
    {
        nt = 256;
    }
    uint64_t threshold = kThreadThreshold[P(p)];
    if (a == NcclAlgo::Ring && p == NcclProto::LL)
    {
        threshold *= m_ranks;
    }
    uint64_t nc = m_hw.channels;
    while (nc >= 2 && bytes < nc * nt * threshold)
    {
        --nc;
    }
    return static_cast<uint32_t>(nc);
}

NcclPick
NcclCostModel::Pick(NcclFunc f, uint64_t bytes) const
{
    std::vector<NcclEstimate> e = Estimates(f, bytes);
    const NcclEstimate* best = Argmin(e);
    NS_ABORT_MSG_IF(best == nullptr, "NcclCostModel: no algorithm/protocol available");
    return {best->algo, best->proto, best->timeUs, Channels(best->algo, best->proto, bytes)};
}

NcclPick
NcclCostModel::Pick(NcclFunc f, uint64_t bytes, NcclAlgo a) const
{
    return Pick(f, bytes, std::optional<NcclAlgo>(a), std::nullopt);
}

NcclPick
NcclCostModel::Pick(NcclFunc f, uint64_t bytes, std::optional<NcclAlgo> a,
                    std::optional<NcclProto> p) const
{
    std::vector<NcclEstimate> only;
    for (const NcclEstimate& x : Estimates(f, bytes))
    {
        if ((!a || x.algo == *a) && (!p || x.proto == *p))
        {
            only.push_back(x);
        }
    }
    if (const NcclEstimate* best = Argmin(only))
    {
        return {best->algo, best->proto, best->timeUs, Channels(best->algo, best->proto, bytes)};
    }
    const NcclAlgo fa = a.value_or(NcclAlgo::Ring);
    const NcclProto fp = p.value_or(NcclProto::Simple);
    NcclEstimate s = Estimate(f, fa, fp, bytes);
    return {fa, fp, s.timeUs, Channels(fa, fp, bytes)};
}

// ---------------------------------------------------------------- the communicator's choice

namespace
{
NcclFunc
FuncOf(CollectiveOp op)
{
    return op == CollectiveOp::AllReduce   ? NcclFunc::AllReduce
           : op == CollectiveOp::AllGather ? NcclFunc::AllGather
           : op == CollectiveOp::Broadcast ? NcclFunc::Broadcast
                                           : NcclFunc::ReduceScatter;
}

/// The Simple protocol's per-channel minimum (512 threads x 64 B), NCCL's trimming for Simple.
uint64_t
SimpleChannels(uint64_t bytes)
{
    return std::max<uint64_t>(1, bytes / (512 * 64));
}
} // namespace

NcclCostModel
Communicator::MakeCostModel() const
{
    const uint32_t ppn = m_cfg.ranksPerHost;
    NS_ABORT_MSG_IF(ppn == 0 || Size() % ppn != 0,
                    "Communicator: ranksPerHost " << ppn << " does not divide " << Size());
    NcclHardware hw = NcclCostModel::Resolve(m_cfg.nccl, NicBytesPerSecond() / 1e9, ppn);
    return NcclCostModel(Size(), Size() / ppn, hw);
}

namespace
{
/// The choice of Communicator::Choose for a communicator of `size` ranks whose cost model is
/// `model` (null when size < 2) and whose ranks run at most maxChannels channels.
CollectiveChoice
ChooseWith(const NcclCostModel* model, uint32_t size, uint32_t maxChannels, uint32_t userChannels,
           std::optional<NcclProto> proto, CollectiveOp op, CollectiveAlgorithm algo,
           uint64_t bytes)
{
    CollectiveChoice c;
    c.algorithm = algo;
    if (op == CollectiveOp::AllToAll)
    {
        // NCCL's p2p path: Simple over the network (no LL buffers on net connections unless
        // NCCL_ALLOC_P2P_NET_LL_BUFFERS); the direct planner sets its own channels per peer.
        c.algorithm = CollectiveAlgorithm::Direct;
        c.channels = static_cast<uint32_t>(std::min<uint64_t>(SimpleChannels(bytes), maxChannels));
        return c;
    }
    const bool valid = algo == CollectiveAlgorithm::Auto || algo == CollectiveAlgorithm::Ring ||
                       (algo == CollectiveAlgorithm::Tree && op == CollectiveOp::AllReduce) ||
                       (algo == CollectiveAlgorithm::Pat && op != CollectiveOp::AllReduce &&
                        op != CollectiveOp::Broadcast);
    if (size < 2 || !valid)
    {
        // One rank: NCCL runs Ring/Simple at no cost. An invalid forced choice is refused by
        // Start.
        c.algorithm = algo == CollectiveAlgorithm::Auto ? CollectiveAlgorithm::Ring : algo;
        c.modelUs = size < 2 ? 0 : -1;
        c.channels = static_cast<uint32_t>(std::min<uint64_t>(SimpleChannels(bytes), maxChannels));
        return c;
    }
    std::optional<NcclAlgo> forced;
    if (algo != CollectiveAlgorithm::Auto)
    {
        forced = algo == CollectiveAlgorithm::Tree  ? NcclAlgo::Tree
                 : algo == CollectiveAlgorithm::Pat ? NcclAlgo::Pat
                                                    : NcclAlgo::Ring;
    }
    const NcclPick p = model->Pick(FuncOf(op), bytes, forced, proto);
    c.algorithm = p.algo == NcclAlgo::Tree  ? CollectiveAlgorithm::Tree
                  : p.algo == NcclAlgo::Pat ? CollectiveAlgorithm::Pat
                                            : CollectiveAlgorithm::Ring;
    c.protocol = p.proto;
    c.modelUs = p.timeUs;
    // The engine runs at most maxChannels per rank. NCCL's model leaves PAT every channel and
    // its work scheduler then spreads a small PAT by traffic, which is not modelled:
    // assumption: PAT keeps Simple's per-channel minimum.
    uint64_t channels = p.algo == NcclAlgo::Pat ? SimpleChannels(bytes) : p.channels;
    // Rings and trees run on the communicator's channels as NCCL's graph search sets them (64
    // for 8 GPUs each with a NIC of several ports, so every port carries a channel's hop),
    // not on the per-peer p2p rule that bounds all-to-all; channels set by the user win.
    const uint32_t cap = userChannels != 0 ? userChannels : model->Hardware().channels;
    c.channels = static_cast<uint32_t>(std::min<uint64_t>(channels, cap));
    return c;
}
} // namespace

CollectiveChoice
Communicator::Choose(CollectiveOp op, CollectiveAlgorithm algo, uint64_t bytes) const
{
    return ChooseWith(m_nccl.get(), Size(), m_cfg.maxChannels, m_userChannels, m_cfg.protocol, op,
                      algo, bytes);
}

CollectiveChoice
Communicator::ChooseFor(CollectiveOp op, CollectiveAlgorithm algo, uint64_t bytes, uint32_t ranks,
                        uint64_t nicBytesPerSecond, const CollectiveConfig& cfg)
{
    const uint32_t maxChannels =
        cfg.maxChannels != 0 ? cfg.maxChannels : DefaultChannels(nicBytesPerSecond);
    std::unique_ptr<NcclCostModel> model;
    const uint32_t ppn = cfg.ranksPerHost;
    if (ranks >= 2 && ppn != 0 && ranks % ppn == 0)
    {
        NcclHardware hw = NcclCostModel::Resolve(cfg.nccl, nicBytesPerSecond / 1e9, ppn);
        model = std::make_unique<NcclCostModel>(ranks, ranks / ppn, hw);
    }
    return ChooseWith(model.get(), model ? ranks : std::min<uint32_t>(ranks, 1), maxChannels,
                      cfg.maxChannels, cfg.protocol, op, algo, bytes);
}

CollectiveAlgorithm
Communicator::SelectFor(CollectiveOp op, uint64_t bytes, uint32_t ranks, uint64_t nicBytesPerSecond,
                        const CollectiveConfig& cfg)
{
    return ChooseFor(op, CollectiveAlgorithm::Auto, bytes, ranks, nicBytesPerSecond, cfg).algorithm;
}

CollectiveAlgorithm
Communicator::Select(CollectiveOp op, uint64_t bytes) const
{
    return Choose(op, CollectiveAlgorithm::Auto, bytes).algorithm;
}

} // namespace metaroce
} // namespace ns3
