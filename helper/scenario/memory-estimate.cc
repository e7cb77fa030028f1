#include "helper/scenario/memory-estimate.h"

#include "helper/scenario/json-reader.h"
#include "model/collective/collective-plan.h"
#include "model/collective/communicator.h"

#include "ns3/object-factory.h"
#include "ns3/type-id.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sys/resource.h>

namespace ns3
{
namespace metaroce
{

namespace
{
/// A switch port's share of the shared buffer as the topology sets it (else the default).
uint64_t
BufferPerPort(const TopologySpec& t)
{
    Ptr<const AttributeValue> v = t.SwitchAttribute("BufferPerPort");
    const auto* u = v ? dynamic_cast<const UintegerValue*>(PeekPointer(v)) : nullptr;
    return u != nullptr ? u->Get() : 323555;
}
} // namespace

namespace
{
// Per-object costs, in bytes of peak RSS, fitted to measured runs (Release build, tcmalloc on
// huge pages; cost.peak_rss_bytes, cost.build_peak_rss_bytes and cost.start_rss_bytes of
// metaroce-sim --out; RSS grows in 2 MiB steps, so each cost comes from runs that move it by
// tens of MB). The runs and the estimate against each are in results/memory-model.md.
//
// Fabric (build peak - start RSS; 7 fabrics from 1k x 2 planes to 8k x 8 planes, and the 100k
// x 8-plane build of results/bench.json, 1.60 M links: 1,999 MB): least squares gives
// 1,222 B per link (both ends' ports and the channel), 1,428 B per switch, 319 B per host
// node and 2.7 MB fixed, within 4% of every run.
constexpr double kPerLink = 1222;
constexpr double kPerSwitch = 1428;
constexpr double kPerHost = 319;
// What a run holds before its first object: start RSS 14.4-14.6 MB in every run, plus the
// fixed part above, plus 4 MB that installing the first NICs adds even on a 64-NIC fabric.
constexpr double kProcess = 22e6;
// RDMA NICs (peak - build peak of runs with one QP pair, 1k-8k NICs, 1-8 planes): 373 B per
// NIC and 402 B per NIC port.
constexpr double kPerNic = 373;
constexpr double kPerNicPort = 402;

/// What a transport's objects cost (measured on the 1,024-NIC, 8-plane fabric).
struct TransportCosts
{
    // A QP pair with one message (4 KiB) through it, from a stream workload's permutation
    // with 1, 16 and 64 QPs per flow (2k-131k QPs): MetaRoCE 3.86 KB, RoCEv2 2.53 KB, the
    // streams' own record of each pair included (rounded up, as the other costs). Since the QPs'
    // counters (and RoCEv2's sender state) moved out of line, 643 B less per RoCEv2 pair and
    // 130 B per MetaRoCE pair (64 QPs per flow, 65k pairs: RoCEv2 189.8 -> 147.7 MB above
    // the fabric, MetaRoCE 286.9 -> 278.4 MB).
    double streamPair;
    // A collective's QP pair that stays open (an all-to-all of 256 KiB on 128 and 256 ranks,
    // two iterations: 32k-65k pairs, the connection record and the plan included): MetaRoCE
    // 3.3-3.5 KB, RoCEv2 2.2-2.3 KB; since, 615 B and 130 B less per pair (256 ranks: RoCEv2
    // 141.4 -> 101.2 MB above the fabric, MetaRoCE 221.6 -> 213.1 MB). Once every peer of
    // an all-to-all ran at once, the same runs measured MetaRoCE at 4.0 KB (more pairs in
    // flight together); since its QPs shrank (attributes, receiver state and rare counters
    // out of line, smaller plane records), 3.2-3.4 KB again (128 and 256 ranks: 65.4 -> 54.8
    // MB and 261.5 -> 210.9 MB above the fabric, results identical), so it stays.
    double livePair;
    // A connection of a last-use collective that closes once done (the same all-to-all, one
    // iteration, 128-384 ranks: 16k-147k connections): 0.50 KB and 0.46 KB each, the plan
    // (about 80 B, counted apart here) included.
    double closedConn;
    // Data in flight: a sending QP's state grows with the bytes it may have outstanding
    // beyond one packet: `perByte` of them (streams of 64 KiB vs 4 KiB messages: MetaRoCE
    // +14.5 KB, RoCEv2 +4.1 KB per QP), up to `qpCap` (1 MiB messages: +49 KB, +15 KB).
    double perByte;
    double qpCap;
    // All of a NIC's, per NIC port: up to `portCapBase` + `portCapPerQp` for each QP it
    // sends on at once, at most `portCapMax`. MetaRoCE, measured: 6.2 KB with one QP per NIC
    // (1 MiB streams), 8.9 and 11.6 KB with four (tree all-reduce on 1k and 8k ranks, the
    // latter of results/bench.json), 13.9 KB with eight (streams), 27 KB with twelve
    // (all-to-all on 64 ranks, bench case 1b). RoCEv2, whose QPs are pinned one per channel:
    // 14.7 KB (streams), 22.6 KB (8k all-reduce), 31 KB (64-rank all-to-all) but 4 KB on the
    // 1k all-reduce: a flat 23 KB.
    double portCapBase;
    double portCapPerQp;
    double portCapMax;
    // MetaRoCE opens a path at its first packet, up to MinPaths, and keeps it (16 sequential
    // 4 KiB messages on 8 QPs per NIC: +3.3 KB per QP over one message).
    double perPath;
};

constexpr TransportCosts kMetaRoce{3800, 3400, 450, 0.23, 50e3, 5e3, 1.8e3, 30e3, 300};
constexpr TransportCosts kRoceV2{2000, 1750, 420, 0.065, 16e3, 23e3, 0, 23e3, 0};

// Raw traffic (no transport): a record per (flow, plane, entropy): 163 B (1k NICs x 8 planes,
// 1 vs 64 entropies per flow, 5 us: +84 MB for 516k more records). An endpoint per host is
// not measured apart (600 B assumed: under 1 MB at 1k NICs). Frames cost about 200 B each (an
// incast into a 64 MiB buffer: 10.5 MB more RSS for 211 MB more queued), and with no
// congestion control what is sent and not yet delivered piles up: at most what the NICs offer
// over the run, at most every port's share of its switch's buffer (the same 1k-NIC
// permutation, one entropy: 72 MB after 5 us, 173 MB after 50 us).
constexpr double kPerRawEndpoint = 600;
constexpr double kPerRawFlow = 170;
constexpr double kFrameBytesPerByte = 200.0 / 4096;

// A collective plan's records (sizes fixed by static_asserts in communicator.cc), plus a
// quarter for the allocator and vectors' slack.
constexpr double kSendOp = 16;
constexpr double kDep = 8;
constexpr double kOutQueue = 28 + 4; // and its waitList entry
constexpr double kInQueue = 24 + 4;  // and its waitStart entry
constexpr double kRankState = 200;
constexpr double kPlanSlack = 1.25;

/// A QP type's attribute as the run sets it, else its default.
uint64_t
QpAttribute(const TransportSpec& t, const std::string& name, uint64_t fallback)
{
    for (const auto& [k, v] : t.qpAttributes)
    {
        if (k == name)
        {
            try
            {
                return std::stoull(v);
            }
            catch (const std::exception&)
            {
                return fallback;
            }
        }
    }
    TypeId tid;
    TypeId::AttributeInformation info;
    if (!t.qpType.empty() && TypeId::LookupByNameFailSafe(t.qpType, &tid) &&
        tid.LookupAttributeByName(name, &info))
    {
        UintegerValue u;
        if (u.DeserializeFromString(info.initialValue->SerializeToString(info.checker),
                                    info.checker))
        {
            return u.Get();
        }
    }
    return fallback;
}

/// Whether the transport carries a connection's channels on one QP (MetaRoCE) rather than a
/// QP pinned to a port per channel (RoCEv2): the Communicator's own rule.
bool
Multiplexed(const TransportSpec& t)
{
    TypeId tid;
    if (t.qpType.empty() || !TypeId::LookupByNameFailSafe(t.qpType, &tid))
    {
        return t.kind != "rocev2";
    }
    ObjectFactory f;
    f.SetTypeId(tid);
    return !f.Create<QueuePair>()->IsPinned();
}

const TransportCosts&
CostsOf(const TransportSpec& t)
{
    return t.kind == "rocev2" ? kRoceV2 : kMetaRoce;
}

/// A sending QP's in-flight state for `outstanding` bytes it may have posted at once.
double
QpTraffic(const TransportCosts& c, double outstanding, double mtu)
{
    return std::min(c.qpCap, c.perByte * std::max(0.0, outstanding - mtu));
}

/// The in-flight state of all of a NIC's QPs, per NIC port, with `qpsPerNic` sending at once.
double
PortCap(const TransportCosts& c, double qpsPerNic)
{
    return std::min(c.portCapMax, c.portCapBase + c.portCapPerQp * std::max(1.0, qpsPerNic));
}

/// One collective on one communicator of k ranks, as Communicator::Start plans it.
struct CollectiveShape
{
    double planBytes{0};   //!< the plan of every rank
    double connections{0}; //!< (src, dst) connections the plan uses
    double pairsPerConn{1};
    double activeConns{0}; //!< connections that may carry data at one time
    double outstanding{0}; //!< bytes a connection may have posted at once
};

uint64_t
PartMax(uint64_t bytes, uint64_t parts)
{
    return parts == 0 ? bytes : (bytes + parts - 1) / parts;
}

CollectiveShape
ShapeOf(CollectiveOp op, CollectiveAlgorithm algo, uint64_t bytes, uint32_t k,
        uint64_t nicBytesPerSecond, const CollectiveConfig& cfgIn, bool multiplexed)
{
    CollectiveShape s;
    if (k < 2 || bytes == 0)
    {
        return s;
    }
    CollectiveConfig cfg = cfgIn;
    if (cfg.maxChannels == 0)
    {
        cfg.maxChannels = Communicator::DefaultChannels(nicBytesPerSecond);
    }
    const CollectiveChoice choice =
        Communicator::ChooseFor(op, algo, bytes, k, nicBytesPerSecond, cfg);
    algo = choice.algorithm;
    const double qpc = std::max<uint32_t>(1, cfg.qpsPerConnection);
    const uint32_t channels = choice.channels;
    double perRank = 0; // plan bytes of one rank
    if (algo == CollectiveAlgorithm::Ring)
    {
        // A broadcast's ring moves the whole channel's share once, in slices.
        const bool bcast = op == CollectiveOp::Broadcast;
        const double steps = op == CollectiveOp::AllReduce ? 2.0 * (k - 1) : bcast ? 1.0 : k - 1.0;
        uint64_t chBytes = PartMax(bytes, channels);
        uint64_t chunk = bcast ? chBytes : PartMax(chBytes, k);
        double slices =
            std::max<uint64_t>(1, PartMax(chunk, bcast ? cfg.treeChunkBytes : cfg.ringSliceBytes));
        double msgs = steps * slices;
        perRank = channels * (kInQueue + kOutQueue + msgs * (kSendOp + kDep));
        s.connections = k;
        s.pairsPerConn = multiplexed ? 1 : channels * std::min(qpc, msgs);
        s.activeConns = k;
        s.outstanding =
            channels * std::min<double>(cfg.ringSlicesInFlight, msgs) * PartMax(chunk, slices);
    }
    else if (algo == CollectiveAlgorithm::Tree)
    {
        const uint32_t perTree = std::max<uint32_t>(1, channels);
        uint64_t chBytes = PartMax(PartMax(bytes, 2), perTree);
        double chunks = std::max<uint64_t>(1, PartMax(chBytes, cfg.treeChunkBytes));
        // a node: in and out queues to its parent and two children, each chunk sent up once
        // (waiting for two children) and down twice (waiting for the parent)
        perRank = 2.0 * perTree *
                  (3 * kInQueue + 3 * kOutQueue + 3 * chunks * kSendOp + 4 * chunks * kDep);
        s.connections = 4.0 * (k - 1);
        s.pairsPerConn = multiplexed ? 1 : perTree * std::min(qpc, chunks);
        s.activeConns = s.connections;
        s.outstanding = perTree * std::min<double>(cfg.treeChunksInFlight, chunks) *
                        PartMax(chBytes, static_cast<uint64_t>(chunks));
    }
    else if (algo == CollectiveAlgorithm::Pat)
    {
        uint64_t chBytes = PartMax(bytes, channels);
        double steps = 0;
        double ops = 0;
        double deps = 0;
        double prev = 0;
        double maxOut = 0;
        for (uint64_t d = 1; d < k; d <<= 1)
        {
            uint64_t stepBytes = chBytes * std::min<uint64_t>(d, k - d) / k;
            double pieces = std::max<uint64_t>(1, PartMax(stepBytes, cfg.ringSliceBytes));
            ops += pieces;
            deps += pieces * prev;
            prev = pieces;
            ++steps;
            maxOut = std::max(maxOut, std::min<double>(cfg.ringSlicesInFlight, pieces) *
                                          PartMax(stepBytes, static_cast<uint64_t>(pieces)));
        }
        perRank = channels * (steps * (kInQueue + kOutQueue) + ops * kSendOp + deps * kDep);
        s.connections = static_cast<double>(k) * steps;
        s.pairsPerConn = multiplexed ? 1 : channels * qpc;
        s.activeConns = s.connections;
        s.outstanding = channels * maxOut;
    }
    else
    {
        // The plan's own split (PlanDirect), taking the ranks to be on several nodes.
        const uint32_t perPeerCh = P2pChannelsPerPeer(cfg.maxChannels, k, cfg);
        const P2pSplit split = SplitP2p(bytes / k, perPeerCh, k, true, cfg);
        const uint32_t nch = split.channels;
        uint64_t part = std::max<uint64_t>(1, std::min<uint64_t>(split.partBytes, bytes / k));
        uint64_t chunk = split.chunkBytes;
        double chunks = std::max<uint64_t>(1, PartMax(part, chunk));
        perRank = (k - 1.0) * nch * (kInQueue + kOutQueue + chunks * kSendOp);
        s.connections = static_cast<double>(k) * (k - 1);
        s.pairsPerConn = multiplexed ? 1 : nch * std::min(qpc, chunks);
        // A rank has up to p2pPeersInFlight x p2pChannels parts in flight (PlanDirect), each
        // with the proxy's share of NCCL_SHARED_STEPS chunks over a host's ranks.
        const double peers =
            static_cast<double>(cfg.p2pPeersInFlight) * cfg.p2pChannels / std::max(1u, nch);
        s.activeConns = static_cast<double>(k) * std::min<double>(k - 1, peers);
        const double batch =
            std::max(1u, std::min(cfg.p2pPeersInFlight, std::max(1u, cfg.ranksPerHost)));
        const double window = std::max(
            1.0, std::min<double>(cfg.p2pChunksInFlight, std::floor(cfg.p2pSharedSteps / batch)));
        s.outstanding = nch * std::min<double>(window, chunks) * std::min<double>(part, chunk);
    }
    s.planBytes = kPlanSlack * k * (kRankState + perRank);
    return s;
}

/// One communicator's collectives (run one after another), split by when the memory is held.
struct CommunicatorCost
{
    double planBytes{0};   //!< the largest plan: every plan is built when its collective starts
    double residual{0};    //!< held to the end: connections that stay open, records of closed ones
    double live{0};        //!< QPs of the connections in progress
    double traffic{0};     //!< their data in flight
    double activePairs{0}; //!< QP pairs sending at once
    double connections{0};
    double queuePairs{0};
};

CommunicatorCost
CostOfCommunicator(CollectiveOp op, CollectiveAlgorithm algo, const std::vector<uint64_t>& sizes,
                   uint32_t k, uint64_t nicBytesPerSecond, const CollectiveConfig& cfg,
                   const TransportSpec& t, bool lastUseOnly, double mtu)
{
    const TransportCosts& c = CostsOf(t);
    const bool multiplexed = Multiplexed(t);
    CollectiveConfig full = cfg;
    if (full.maxChannels == 0)
    {
        full.maxChannels = Communicator::DefaultChannels(nicBytesPerSecond);
    }
    CommunicatorCost tot;
    double traffic = 0;
    // Connections persist for the communicator's life: the union of every collective's.
    // Distinct algorithms mostly use distinct peers, so their connections add up (at worst
    // an overcount); the same algorithm at another size reuses its connections.
    std::vector<std::pair<CollectiveAlgorithm, CollectiveShape>> seen;
    for (uint64_t bytes : sizes)
    {
        CollectiveAlgorithm a = algo == CollectiveAlgorithm::Auto
                                    ? Communicator::SelectFor(op, bytes, k, nicBytesPerSecond, full)
                                    : algo;
        CollectiveShape s = ShapeOf(op, a, bytes, k, nicBytesPerSecond, cfg, multiplexed);
        tot.planBytes = std::max(tot.planBytes, s.planBytes);
        tot.activePairs = std::max(tot.activePairs, s.activeConns * s.pairsPerConn);
        if (s.pairsPerConn > 0)
        {
            traffic = std::max(traffic, s.activeConns * s.pairsPerConn *
                                            QpTraffic(c, s.outstanding / s.pairsPerConn, mtu));
        }
        bool found = false;
        for (auto& [sa, ss] : seen)
        {
            if (sa == a)
            {
                found = true;
                ss.connections = std::max(ss.connections, s.connections);
                ss.activeConns = std::max(ss.activeConns, s.activeConns);
                ss.pairsPerConn = std::max(ss.pairsPerConn, s.pairsPerConn);
            }
        }
        if (!found)
        {
            seen.emplace_back(a, s);
        }
    }
    tot.traffic = traffic;
    for (const auto& [a, s] : seen)
    {
        tot.connections += s.connections;
        tot.queuePairs += 2 * s.connections * s.pairsPerConn;
        if (lastUseOnly)
        {
            // Closed once done: only those in progress hold their QPs.
            tot.live += s.activeConns * s.pairsPerConn * c.livePair;
            tot.residual += (s.connections - s.activeConns) * c.closedConn;
        }
        else
        {
            tot.residual += s.connections * s.pairsPerConn * c.livePair;
        }
    }
    return tot;
}

/// Flows of a traffic pattern over n NICs (PatternFlows' counts).
double
PatternFlowCount(const PatternSpec& p, uint32_t n)
{
    if (p.pattern == "explicit")
    {
        return static_cast<double>(p.flows.size());
    }
    if (p.pattern == "pairs")
    {
        return n / 2;
    }
    if (p.pattern == "incast")
    {
        return std::min<double>(p.senders, n > 0 ? n - 1 : 0);
    }
    if (p.pattern == "all-to-all")
    {
        return static_cast<double>(n) * (n > 0 ? n - 1 : 0);
    }
    if (p.pattern == "random-peers")
    {
        return static_cast<double>(n) * p.peersPerNic;
    }
    return n;
}
} // namespace

nlohmann::json
MemoryEstimate::ToJson() const
{
    return {{"bytes", bytes},
            {"process_bytes", processBytes},
            {"fabric_bytes", fabricBytes},
            {"nic_bytes", nicBytes},
            {"workload_bytes", workloadBytes},
            {"plan_bytes", planBytes},
            {"traffic_bytes", trafficBytes},
            {"queue_pairs", queuePairs},
            {"connections", connections}};
}

MemoryEstimate
EstimatePeakMemory(const RunSpec& spec)
{
    MemoryEstimate e;
    const ClosGeometry& g = spec.topology.geometry;
    const double nics = g.TotalNics();
    const double nicPorts = nics * g.planes;
    // Switches and their ports as --dry-run counts them; every switch port and every NIC port
    // is one end of a link, and a NIC's link has one switch end.
    double switches = 0;
    double switchPorts = 0;
    for (uint32_t t = 0; t < g.tiers; ++t)
    {
        double n = static_cast<double>(g.SwitchesInTier(t)) * g.planes * g.sites;
        switches += n;
        switchPorts += n * g.PortsInTier(t);
    }
    const double links = (switchPorts + nicPorts) / 2;
    e.switches = static_cast<uint64_t>(switches);
    e.links = static_cast<uint64_t>(links);
    double process = kProcess;
    double fabric = links * kPerLink + switches * kPerSwitch + nics * kPerHost;
    double nicState = 0;
    double workload = 0;
    double plans = 0; // of workload
    double traffic = 0;
    double trafficCap = 0;
    double queuePairs = 0;
    double connections = 0;
    // What NCCL's cost model sees of a NIC: each accelerator's share of it.
    const uint64_t nicBytesPerSecond = spec.topology.AcceleratorBytesPerSecond();

    if (spec.workloadKind == "raw")
    {
        const RawWorkloadSpec& w = spec.raw;
        double flows = PatternFlowCount(w.who, g.TotalNics()) * w.planes.size() *
                       std::max<uint32_t>(1, w.entropiesPerFlow);
        nicState = nics * kPerRawEndpoint;
        workload = flows * kPerRawFlow;
        double bufferPerPort = static_cast<double>(BufferPerPort(spec.topology));
        double rateGbps = w.rateGbps > 0 ? w.rateGbps : spec.topology.nicPortGbps;
        double offered =
            nics * static_cast<double>(w.planes.size()) * rateGbps * 125 * spec.durationUs;
        traffic = std::min(switchPorts * bufferPerPort, offered) * kFrameBytesPerByte;
        trafficCap = traffic;
    }
    else
    {
        const TransportSpec& t = spec.transport;
        const TransportCosts& c = CostsOf(t);
        const double mtu = static_cast<double>(QpAttribute(t, "Mtu", 4096));
        nicState = nics * kPerNic + nicPorts * kPerNicPort;
        if (spec.workloadKind == "streams")
        {
            const StreamsWorkloadSpec& w = spec.streams;
            double flows = PatternFlowCount(w.who, g.TotalNics()) * (w.bidirectional ? 2 : 1);
            double pairs = flows * w.qpsPerFlow + (w.victim ? 1 : 0);
            double messages = pairs * static_cast<double>(w.messagesPerQp);
            double ahead = std::min<double>(w.outstandingPerQp, w.messagesPerQp);
            connections = pairs;
            queuePairs = 2 * pairs;
            // each completion time is kept (8 B, in a vector that doubles)
            workload = pairs * c.streamPair + messages * 16;
            double life = static_cast<double>(w.messagesPerQp) * w.messageBytes;
            // MinPaths 0: MinPathsPerPlane on each plane
            uint64_t minPaths = QpAttribute(t, "MinPaths", 1);
            if (minPaths == 0)
            {
                minPaths = QpAttribute(t, "MinPathsPerPlane", 12) * spec.topology.planes;
            }
            double paths = c.perPath > 0 ? std::min<double>(static_cast<double>(minPaths),
                                                            std::ceil(life / mtu))
                                         : 1;
            traffic =
                pairs * std::max(QpTraffic(c, ahead * static_cast<double>(w.messageBytes), mtu),
                                 c.perPath * std::max(0.0, paths - 1));
            trafficCap = nicPorts * PortCap(c, pairs / std::max(1.0, nics));
            if (w.victim)
            {
                traffic += QpTraffic(c, static_cast<double>(w.victimBytes), mtu);
            }
        }
        else if (spec.workloadKind == "collective")
        {
            const CollectiveWorkloadSpec& w = spec.collective;
            uint32_t k = w.ranks == 0 ? spec.topology.Accelerators() : w.ranks;
            if (w.placement == "explicit")
            {
                k = static_cast<uint32_t>(w.nics.size());
            }
            CollectiveConfig cfg;
            cfg.maxChannels = w.channels;
            cfg.qpsPerConnection = w.qpsPerConnection;
            cfg.ranksPerHost = w.ranksPerHost;
            cfg.protocol = NcclProtoOf(w.protocol);
            // Each size runs in a world of its own (fabric, NICs and QPs built anew), its
            // warm-up and timed iterations on one communicator: the largest size's counts.
            const bool lastUseOnly = w.warmupIterations + w.iterations <= 1;
            for (uint64_t size : w.sizes)
            {
                CommunicatorCost cc =
                    CostOfCommunicator(CollectiveOpOf(w.op), CollectiveAlgorithmOf(w.algorithm),
                                       {size}, k, nicBytesPerSecond, cfg, t, lastUseOnly, mtu);
                double cap = static_cast<double>(k) * g.planes * PortCap(c, cc.activePairs / k);
                double held = cc.planBytes + cc.residual + cc.live;
                double flying = std::min(cc.traffic, cap);
                if (held + flying > workload + traffic)
                {
                    workload = held;
                    plans = cc.planBytes;
                    traffic = flying;
                    trafficCap = cap;
                    connections = cc.connections;
                    queuePairs = cc.queuePairs;
                }
            }
        }
        else
        {
            const JobWorkloadSpec& job = spec.job;
            const uint32_t n = job.ranks == 0 ? spec.topology.Accelerators() : job.ranks;
            // Stages: a phase marked with_previous runs beside the one before it. Every
            // plan of a stage is built at its start, and connections stay (open, or as the
            // record of a closed one) for the job; but one phase's QPs in progress and data
            // in flight peak at another time than another's (the job of bench case 4 on
            // 1,024 NICs: its all-to-all phase alone 91 MB, its all-reduce alone 93 MB, both
            // at once 144 MB), so a stage holds the largest of them, not their sum.
            double residual = 0;
            double stagePlan = 0;
            double stageLive = 0; //!< of the phase with the most in progress
            double stageTraffic = 0;
            double peakPlan = 0;
            double peakLive = 0;
            double peakTraffic = 0;
            for (std::size_t p = 0; p < job.phases.size(); ++p)
            {
                const JobPhaseSpec& ph = job.phases[p];
                if (!ph.withPrevious)
                {
                    stagePlan = 0;
                    stageLive = 0;
                    stageTraffic = 0;
                }
                double groups = ph.groupSize == 0 ? 0 : n / ph.groupSize;
                CommunicatorCost cc =
                    CostOfCommunicator(CollectiveOpOf(ph.op), CollectiveAlgorithmOf(ph.algorithm),
                                       {ph.bytes}, ph.groupSize, nicBytesPerSecond,
                                       CollectiveConfig{}, t, job.iterations <= 1, mtu);
                residual += groups * cc.residual;
                connections += groups * cc.connections;
                queuePairs += groups * cc.queuePairs;
                stagePlan += groups * cc.planBytes;
                double cap = static_cast<double>(n) * g.planes *
                             PortCap(c, groups * cc.activePairs / std::max(1u, n));
                double traf = std::min(groups * cc.traffic, cap);
                if (groups * cc.live + traf > stageLive + stageTraffic)
                {
                    stageLive = groups * cc.live;
                    stageTraffic = traf;
                }
                if (stagePlan + stageLive + stageTraffic > peakPlan + peakLive + peakTraffic)
                {
                    peakPlan = stagePlan;
                    peakLive = stageLive;
                    peakTraffic = stageTraffic;
                }
            }
            workload = residual + peakPlan + peakLive;
            plans = peakPlan;
            traffic = peakTraffic;
            trafficCap = traffic;
        }
    }
    traffic = std::min(traffic, trafficCap);
    auto round = [](double x) { return static_cast<uint64_t>(std::ceil(std::max(0.0, x))); };
    e.processBytes = round(process);
    e.fabricBytes = round(fabric);
    e.nicBytes = round(nicState);
    e.workloadBytes = round(workload);
    e.planBytes = round(plans);
    e.trafficBytes = round(traffic);
    e.queuePairs = round(queuePairs);
    e.connections = round(connections);
    e.bytes = e.processBytes + e.fabricBytes + e.nicBytes + e.workloadBytes + e.trafficBytes;
    return e;
}

std::string
FormatBytes(uint64_t bytes)
{
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024 && u < 5)
    {
        v /= 1024;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
    return buf;
}

uint64_t
ParseMemorySize(const std::string& text, const std::string& option)
{
    auto bad = [&]()
    {
        return InputError(option + ": '" + text +
                          "' is not a memory size (BYTES, or a number with K, M, G or T)");
    };
    std::size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    {
        ++i;
    }
    std::string number = text.substr(0, i);
    std::string unit = text.substr(i);
    if (number.empty() || std::count(number.begin(), number.end(), '.') > 1 || number == ".")
    {
        throw bad();
    }
    for (char& ch : unit)
    {
        ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    }
    double scale = 1;
    if (!unit.empty())
    {
        const std::string units = "KMGT";
        std::size_t p = units.find(unit[0]);
        std::string rest = unit.substr(1);
        if (unit == "B")
        {
            p = std::string::npos;
        }
        else if (p == std::string::npos || !(rest.empty() || rest == "B" || rest == "IB"))
        {
            throw bad();
        }
        if (p != std::string::npos)
        {
            scale = std::pow(1024.0, static_cast<double>(p + 1));
        }
    }
    double v = std::stod(number) * scale;
    if (!(v >= 1))
    {
        throw InputError(option + ": '" + text + "' must be at least one byte");
    }
    // 2^64 - 1 (no limit) and 2^64 are the same double: both mean the largest count.
    constexpr double kTop = 18446744073709551616.0;
    if (v > kTop)
    {
        throw InputError(option + ": '" + text + "' is more than 2^64 - 1 bytes");
    }
    return v == kTop ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(v);
}

MemoryLimit
AvailableMemory()
{
    MemoryLimit l;
    std::ifstream in("/proc/meminfo");
    std::string key;
    uint64_t kb = 0;
    std::string unit;
    while (in >> key >> kb)
    {
        std::getline(in, unit);
        if (key == "MemAvailable:")
        {
            l.bytes = kb * 1024;
            l.source = "MemAvailable in /proc/meminfo";
            l.known = true;
            break;
        }
    }
    // The address-space limit (ulimit -v) binds first when what is left of it is smaller:
    // an allocation past it fails however much memory is free.
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    {
        uint64_t mapped = 0;
        std::ifstream status("/proc/self/status");
        std::string line;
        while (std::getline(status, line))
        {
            if (line.rfind("VmSize:", 0) == 0)
            {
                mapped = std::strtoull(line.c_str() + 7, nullptr, 10) * 1024;
                break;
            }
        }
        const uint64_t cap = static_cast<uint64_t>(as.rlim_cur);
        const uint64_t left = cap > mapped ? cap - mapped : 0;
        if (!l.known || left < l.bytes)
        {
            l.bytes = left;
            l.source = "the address-space limit (ulimit -v) less the " +
                       std::to_string(mapped >> 20) + " MiB already mapped";
            l.known = true;
        }
    }
    return l;
}

std::string
MemoryRefusal(const std::vector<RunSpec>& runs, const MemoryLimit& limit)
{
    if (!limit.known)
    {
        return "";
    }
    const RunSpec* worst = nullptr;
    uint64_t need = 0;
    for (const auto& r : runs)
    {
        uint64_t b = EstimatePeakMemory(r).bytes;
        if (b > need)
        {
            need = b;
            worst = &r;
        }
    }
    if (worst == nullptr || need <= limit.bytes)
    {
        return "";
    }
    return "variant '" + worst->variant + "' needs an estimated " + FormatBytes(need) + " (" +
           std::to_string(need) + " bytes) of memory, more than the limit of " +
           FormatBytes(limit.bytes) + " (" + std::to_string(limit.bytes) + " bytes, from " +
           limit.source + "); nothing was run";
}

std::string
EstimateLine(const RunSpec& run, const MemoryLimit& limit)
{
    std::string line = run.scenario + "/" + run.variant + ": estimated peak memory " +
                       FormatBytes(EstimatePeakMemory(run).bytes);
    if (limit.known)
    {
        line += " (limit " + FormatBytes(limit.bytes) + ", " + limit.source + ")";
    }
    return line;
}

namespace
{
const char* g_phase = "loading the scenario";
std::string g_phaseVariant;
} // namespace

void
SetRunPhase(const char* phase, const std::string& variant)
{
    g_phase = phase;
    g_phaseVariant = variant;
}

void
SetRunPhase(const char* phase)
{
    g_phase = phase;
}

const char*
RunPhase()
{
    return g_phase;
}

std::string
OutOfMemoryMessage(const std::vector<RunSpec>& runs)
{
    std::string m = std::string("out of memory while ") + g_phase;
    for (const auto& r : runs)
    {
        if (!g_phaseVariant.empty() && r.variant == g_phaseVariant)
        {
            m += " (variant '" + r.variant + "', estimated peak " +
                 FormatBytes(EstimatePeakMemory(r).bytes) + ")";
            break;
        }
    }
    return m;
}

} // namespace metaroce
} // namespace ns3
