/*
 * NCCL's choice of algorithm and protocol ("auto"), as NCCL's own cost model makes it.
 *
 * Source: NCCL v2.28.3-1 (the ncclTunerConstantsDefaults generation of the tuner), as
 * published in zhanglin496/nccl-2.28.3-1 @ 850a18f5a2d15a77525bb671b12ee03bc1d4b951 (a copy
 * of that release). The constants and formulas are cited by the NCCL symbol they come from:
 *   src/graph/tuning.cc   ncclTunerConstantsDefaults (latencies, per-channel bandwidth caps),
 *                         ncclTopoTuneModel (bandwidth and latency of every algorithm and
 *                         protocol, which are enabled), ncclTopoGetAlgoTime (time of one
 *                         operation: tree correction factors, ring plateau), ncclPatEnable,
 *                         getNetOverhead;
 *   src/enqueue.cc        topoGetAlgoInfo (the argmin and its tie rule, channel trimming),
 *                         ncclGetAlgoInfo (bytes = the larger of send and receive buffers);
 *   src/include/device.h  NCCL_{SIMPLE,LL,LL128}_MAX_NTHREADS, MAXCHANNELS;
 *   src/include/comm.h    NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD;
 *   src/graph/topo.h      PCI_BW; src/graph/search.cc sm90SpeedArrayInter.
 * The code is this module's own. NCCL computes in float; this model in double, so a pick
 * could differ only where two estimates agree to about 1e-7.
 *
 * In scope: Tree, Ring and PAT with LL, LL128 and Simple, for all-reduce, all-gather and
 * reduce-scatter. The CollNet algorithms and multi-node NVLS need in-network reduction
 * (collnetEnable), which these fabrics do not have; assumption: no NVSwitch multicast either,
 * so single-node NVLS and NVLS-Tree are off too. All-to-all is NCCL's p2p path, outside
 * this model.
 *
 * Every input NCCL reads from hardware detection is a field of NcclHardware with a default
 * labelled "assumption" and the figure it stands for.
 */
#ifndef METAROCE_NCCL_COST_MODEL_H
#define METAROCE_NCCL_COST_MODEL_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ns3
{
namespace metaroce
{

/// The collectives NCCL's tuning model covers here.
enum class NcclFunc
{
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast
};

/// In NCCL's index order (NCCL_ALGO_TREE 0, RING 1, PAT 6): ties go to the lower index.
enum class NcclAlgo
{
    Tree,
    Ring,
    Pat
};

/// In NCCL's index order (NCCL_PROTO_LL 0, LL128 1, SIMPLE 2).
enum class NcclProto
{
    LL,
    LL128,
    Simple
};

std::string ToString(NcclAlgo a);  //!< "tree", "ring", "pat"
std::string ToString(NcclProto p); //!< "LL", "LL128", "Simple" (NCCL's names)

/// What NCCL's topology detection and graph search would report. A zero means "derive it"
/// (NcclCostModel::Resolve).
struct NcclHardware
{
    /// assumption: Hopper H100 (sm90) everywhere: selects the Hopper rows of the per-channel
    /// caps, the 1.4 ring plateau (1.9 before Ampere), and allows LL128 and PAT.
    uint32_t computeCapability{90};
    /// assumption: Intel x86 hosts: NCCL's net overhead 1 us per network step (2 us on AMD)
    /// and the "Intel" row of llMaxBws for multi-node LL.
    bool amdCpu{false};
    /// NCCL_NET_OVERHEAD in us; < 0: from the CPU vendor as above.
    double netOverheadUs{-1};
    /// assumption: the net plugin reports no extra latency (graph latencyInter = 0, as IB).
    double netLatencyUs{0};
    /// Channels of the ring and tree graphs (graph->nChannels); 0: derived from the NIC.
    uint32_t searchChannels{0};
    /// Per-channel bandwidths of the graphs (bwIntra, bwInter), GB/s; 0: derived.
    double bwIntraGBps{0};
    double bwInterGBps{0};
    /// Channels of the communicator (comm->nChannels after ncclTopoPostset duplicates the
    /// search channels); 0: 2 x searchChannels, at most MAXCHANNELS = 64.
    uint32_t channels{0};
    /// assumption: each NIC sits on its GPU's PCIe switch and GPUs of a node share NVLink
    /// (typeInter <= PATH_PXN, typeIntra <= PATH_NVB): NCCL enables LL128 on Hopper.
    bool ll128Allowed{true};
    /// assumption: the GPUs of a node talk over NVLink (HGX H100: typeIntra = NVL), which
    /// sets the intra-node step latencies; false: PCIe.
    bool nvlink{true};
    /// assumption: the tree graph search finds a balanced tree, not NCCL_TOPO_PATTERN_TREE
    /// (which would cost the tree 15% of its bandwidth).
    bool treePatternTree{false};
};

/// One (algorithm, protocol) pair NCCL considers for a collective.
struct NcclEstimate
{
    NcclAlgo algo;
    NcclProto proto;
    bool enabled{false};     //!< NCCL would use it (a disabled pair has bandwidth 0)
    double latencyUs{0};     //!< ncclTopoTuneModel's latency (before the ring plateau)
    double bandwidthGBps{0}; //!< its algorithm bandwidth (before the tree correction)
    double timeUs{-1};       //!< ncclTopoGetAlgoTime (the formula, also for disabled pairs)
};

/// What NCCL would run.
struct NcclPick
{
    NcclAlgo algo{NcclAlgo::Ring};
    NcclProto proto{NcclProto::Simple};
    double timeUs{0};     //!< the model's estimate
    uint32_t channels{1}; //!< topoGetAlgoInfo's nMaxChannels for that size
};

class NcclCostModel
{
  public:
    /// ranks over nodes (ranks per node = ranks / nodes, which must divide); hw resolved.
    NcclCostModel(uint32_t ranks, uint32_t nodes, const NcclHardware& hw);

    /// Fills hw's zero fields for a node of ranksPerNode GPUs, each with its own NIC of
    /// nicGBps (GB/s). assumption: NCCL's Hopper graph search gives each NIC the fastest
    /// sm90 inter-node speed step at or below its rate (48, 45, 42, 40, 30, 24, 22, 20, 17.5,
    /// 15, 12, ... GB/s); a step of 25 GB/s or more is split into two channels at half speed
    /// (ncclTopoCompute's duplication), and a NIC of n x 48 GB/s carries 2n channels of 24
    /// GB/s. A node has its NICs' channels, at most MAXCHANNELS / 2 = 32; intra equals inter,
    /// as the search sets them for multi-node graphs. E.g. DGX H100 (8 x 400G = 8 x 50 GB/s):
    /// 16 channels of 24 GB/s, 32 communicator channels, as NCCL reports on those systems;
    /// an 8 x 100G NIC (100 GB/s): 4 channels of 24 GB/s per GPU.
    static NcclHardware Resolve(NcclHardware hw, double nicGBps, uint32_t ranksPerNode);

    uint32_t Ranks() const { return m_ranks; }
    uint32_t Nodes() const { return m_nodes; }
    const NcclHardware& Hardware() const { return m_hw; }

    /// Every pair NCCL considers for f (all-reduce: Tree and Ring x 3 protocols; all-gather
    /// and reduce-scatter: Ring x 3 and PAT/Simple), in NCCL's order.
    std::vector<NcclEstimate> Estimates(NcclFunc f, uint64_t bytes) const;
    /// NCCL's argmin over the enabled pairs.
    NcclPick Pick(NcclFunc f, uint64_t bytes) const;
    /// The pick with the algorithm forced (NCCL_ALGO=a): NCCL's best protocol for it. If no
    /// protocol of a is enabled (PAT with several ranks per node), its Simple formula.
    NcclPick Pick(NcclFunc f, uint64_t bytes, NcclAlgo a) const;
    /// The pick with the algorithm and/or protocol forced (NCCL_ALGO, NCCL_PROTO): the best
    /// enabled pair that matches; if none is enabled, the forced pair's formula (Ring and
    /// Simple standing in for what is not forced).
    NcclPick Pick(NcclFunc f, uint64_t bytes, std::optional<NcclAlgo> a,
                  std::optional<NcclProto> p) const;
    /// topoGetAlgoInfo's channel count for a and p at this size.
    uint32_t Channels(NcclAlgo a, NcclProto p, uint64_t bytes) const;
    /// topoGetAlgoInfo's loop over a list in NCCL's order: the first strictly smallest
    /// non-negative time among the enabled entries; nullptr if none.
    static const NcclEstimate* Argmin(const std::vector<NcclEstimate>& e);

  private:
    bool Considered(NcclFunc f, NcclAlgo a, NcclProto p) const;
    bool Enabled(NcclAlgo a, NcclProto p) const;
    NcclEstimate Estimate(NcclFunc f, NcclAlgo a, NcclProto p, uint64_t bytes) const;

    uint32_t m_ranks;
    uint32_t m_nodes;
    NcclHardware m_hw;
};

} // namespace metaroce
} // namespace ns3

#endif
