/*
 * NCCL-style collectives over either transport, driven only by message completions.
 *
 * A Communicator is an ordered set of ranks (one accelerator = one NIC each) with persistent
 * connections between the pairs its algorithms use. A collective is compiled into, for every
 * rank, ordered send lists per (peer, channel) whose entries may wait for a given message to
 * have arrived from some peer (the data they forward or reduce). The engine posts a send as
 * soon as its dependency is met and its connection has a free slot (a bounded number of
 * slices in flight per connection, as NCCL's FIFO of NCCL_STEPS buffers). No global oracle:
 * every decision is a rank's, on its own completions.
 *
 * Ranks on one host (CollectiveConfig::scaleUp) reach each other over the host's scale-up
 * domain (ScaleUpQueuePair), the others over the network through their own NICs.
 *
 * Connections: MetaRoCE multiplexes a communicator's channels as streams of one QP per peer;
 * RoCEv2 opens QpsPerConnection QPs per (peer, channel) and deals messages round-robin over
 * them (NCCL_IB_QPS_PER_CONNECTION, NCCL_IB_SPLIT_DATA_ON_QPS = 0).
 */
#ifndef METAROCE_COMMUNICATOR_H
#define METAROCE_COMMUNICATOR_H

#include "model/transport/queue-pair.h"
#include "nccl-cost-model.h"
#include "nccl-protocol.h"

#include "ns3/abort.h"
#include "ns3/callback.h"
#include "ns3/nstime.h"
#include "ns3/object-factory.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ns3
{
namespace metaroce
{

class RdmaNic;
struct ScaleUpFabric;
struct HostLayout;

enum class CollectiveOp
{
    AllReduce,
    ReduceScatter,
    AllGather,
    AllToAll,
    Broadcast //!< from rank 0 of the communicator, as a ring pipeline (NCCL: Ring only)
};

enum class CollectiveAlgorithm
{
    Auto,
    Ring,
    Tree,   //!< double binary tree (all-reduce)
    Direct, //!< direct sends with NCCL's peer schedule (all-to-all)
    Pat     //!< parallel aggregated trees: log2(n) steps (all-gather, reduce-scatter)
};

std::string ToString(CollectiveOp op);
std::string ToString(CollectiveAlgorithm a);
/// Every name ToString gives, in declaration order (the scenario files' choices).
std::vector<std::string> CollectiveOpNames();
std::vector<std::string> CollectiveAlgorithmNames();
/// The inverse of ToString; aborts on a name it does not give (callers validate first).
CollectiveOp CollectiveOpOf(const std::string& name);
CollectiveAlgorithm CollectiveAlgorithmOf(const std::string& name);
/// nccl-tests' bus bandwidth factor of an operation over n ranks.
double BusBwFactor(CollectiveOp op, uint32_t n);

/// Tunables, with NCCL's defaults (reference: collectives.md section 1.1).
struct CollectiveConfig
{
    uint32_t maxChannels{0};          //!< 0: ceil(NIC bandwidth / 14 GB/s) as NCCL per net peer
    uint64_t ringSliceBytes{1 << 20}; //!< Simple: 2 x 512 KiB steps
    uint32_t ringSlicesInFlight{4};   //!< NCCL_STEPS / sliceSteps
    uint64_t treeChunkBytes{512 << 10};
    uint32_t treeChunksInFlight{8};
    uint64_t p2pChunkBytes{128 << 10}; //!< NCCL_P2P_NET_CHUNKSIZE
    uint32_t p2pChunksInFlight{8};     //!< NCCL_STEPS: a p2p connection's steps in flight
    //! NCCL_MAX_DEV_WORK_P2P_PER_BATCH: sends a channel's batch runs at once (every channel
    //! runs its batch at the same time)
    uint32_t p2pPeersInFlight{8};
    uint32_t p2pChannels{32}; //!< p2p channels of a communicator (NCCL's usual 32)
    //! NCCL_SHARED_STEPS: a network proxy's chunks in flight, shared by the sends of a batch
    uint32_t p2pSharedSteps{16};
    uint32_t qpsPerConnection{1}; //!< RoCEv2 only
    //! all-to-all with hosts: forward over the scale-up domain to the rail of the peer
    //! (NCCL's PXN); off: every rank sends through its own NIC
    bool pxn{false};
    double reducePsPerByte{0}; //!< optional reduction time
    uint32_t ranksPerHost{1};  //!< ranks sharing a host, as NCCL's cost model sees them
    //! accelerator hosts: ranks on one host talk over its scale-up domain, and the planners
    //! build NCCL's host-aware rings and trees (null: every rank alone on its host)
    const ScaleUpFabric* scaleUp{nullptr};
    /// What NCCL's cost model assumes of the hardware; zero fields are derived from the
    /// NICs (NcclCostModel::Resolve).
    NcclHardware nccl;
    /// NCCL_PROTO: the protocol every collective runs with; unset, NCCL's cost model picks.
    std::optional<NcclProto> protocol;
    /// The latency a step meets at its endpoints (NcclEndpoint's attributes when made).
    EndpointLatency endpoint{NcclEndpoint::Defaults()};
    /// A simulation over several processes: whether this process simulates the NIC of an
    /// accelerator. Only those ranks get QPs and collective state here; a collective ends
    /// (its callback runs) when they are done, with their part of the result. Null: every
    /// rank is simulated here.
    std::function<bool(uint32_t accelerator)> isLocal;
};

/// What a collective runs: the algorithm, the protocol (its wire format, step size and
/// endpoint latency: nccl-protocol.h), the model's estimate and the channels per rank.
struct CollectiveChoice
{
    CollectiveAlgorithm algorithm{CollectiveAlgorithm::Ring};
    NcclProto protocol{NcclProto::Simple};
    double modelUs{-1}; //!< NCCL's estimate of the pick, us; < 0: none (all-to-all)
    uint32_t channels{1};
};

/// What one finished collective reports.
struct CollectiveResult
{
    CollectiveOp op;
    CollectiveAlgorithm algorithm;
    NcclProto protocol{NcclProto::Simple}; //!< what ran
    double ncclModelUs{-1};                //!< NCCL's estimate; < 0: none
    uint64_t bytes{0};
    uint32_t ranks{0};
    uint32_t channels{0};
    int64_t startPs{0};
    int64_t endPs{0};
    int64_t fastestRankPs{0}; //!< earliest rank to finish
    uint64_t messages{0};
    uint64_t wireBytesPerRank{0}; //!< data bytes the busiest rank sent (before the protocol)
};

class Communicator
{
  public:
    /// ranks[i] = the accelerator of rank i, nics[a] the NIC serving accelerator a (one per
    /// accelerator, or a NIC several accelerators share); qpFactory makes the transport.
    Communicator(std::vector<uint32_t> ranks, const std::vector<Ptr<RdmaNic>>* nics,
                 QueuePairFactory qpFactory, CollectiveConfig cfg);
    ~Communicator();

    uint32_t Size() const { return static_cast<uint32_t>(m_ranks.size()); }
    const CollectiveConfig& Config() const { return m_cfg; }

    /// Runs a collective of `bytes` (nccl-tests' S) now; `done` gets the result.
    /// lastUse: no collective follows on this communicator, so each connection's QPs drop
    /// their transport state (QueuePair::ReleaseState) as soon as it has sent its last
    /// message: memory then holds the connections in progress, not all of them (an
    /// all-to-all over 100k ranks has 12.6 M QPs), and done connections close. Results
    /// are the same either way: a connection that retransmitted or probed stays open, as
    /// a copy still in flight would be acknowledged again.
    void Start(CollectiveOp op, CollectiveAlgorithm algo, uint64_t bytes,
               std::function<void(const CollectiveResult&)> done, bool lastUse = false);

    /// The algorithm "auto" picks: NCCL's cost model (nccl-cost-model.h).
    CollectiveAlgorithm Select(CollectiveOp op, uint64_t bytes) const;
    /// The algorithm (auto resolved), NCCL's protocol and estimate for it, and the channels
    /// per rank NCCL's model gives that size. Defined with the model, in nccl-cost-model.cc.
    CollectiveChoice Choose(CollectiveOp op, CollectiveAlgorithm algo, uint64_t bytes) const;
    /// NCCL's cost model of this communicator (ranksPerHost ranks per node; 2 ranks or more).
    const NcclCostModel& CostModel() const { return *m_nccl; }

    /// Choose without a communicator: for `ranks` ranks on NICs of `nicBytesPerSecond` (what
    /// a run's memory estimate needs before anything is built).
    static CollectiveChoice ChooseFor(CollectiveOp op, CollectiveAlgorithm algo, uint64_t bytes,
                                      uint32_t ranks, uint64_t nicBytesPerSecond,
                                      const CollectiveConfig& cfg);
    static CollectiveAlgorithm SelectFor(CollectiveOp op, uint64_t bytes, uint32_t ranks,
                                         uint64_t nicBytesPerSecond, const CollectiveConfig& cfg);
    /// NCCL's channels per net peer when CollectiveConfig::maxChannels is 0.
    static uint32_t DefaultChannels(uint64_t nicBytesPerSecond);

    /// The ranks this process simulates (CollectiveConfig::isLocal; all without it).
    uint32_t LocalRanks() const { return m_localRanks; }

    /// A connection whose ends are on two processes, done after its last use.
    struct Retired
    {
        uint32_t src;
        uint32_t dst;
        bool senderQuiet; //!< the sender's QPs released everything and closed
    };

    /// On several processes: the connections to another process's ranks whose senders here
    /// finished their last use since the last call. Their sending QPs released their state
    /// (and closed if quiet) when their last message was acknowledged, as on one process;
    /// the receiving ends are the other process's, which learns of it between time windows
    /// (RetireReceivers) and releases them then: a process cannot see another's ACK.
    std::vector<Retired> TakeRetiredSenders() { return std::move(m_retiredSenders); }
    /// Releases (and, if both ends are quiet, closes) the receiving QPs here of `done`'s
    /// connections from other processes' ranks.
    void RetireReceivers(const std::vector<Retired>& done);

    /// QPs the communicator opened so far.
    uint64_t QueuePairs() const { return m_qps; }
    /// Visit every sending QP that is open (for counters).
    void ForEachQp(const std::function<void(const Ptr<QueuePair>&)>& f) const;
    /// The counters of every sending QP, open or closed.
    QueuePair::Counters SendCounters() const;

  private:
    /// One QP of a connection at each end, and their QPNs (the QPs exist from their first
    /// message until the connection closes).
    struct QpPair
    {
        Ptr<QueuePair> tx; //!< null until the first message, and once closed
        Ptr<QueuePair> rx;
        uint32_t txQpn{0};
        uint32_t rxQpn{0};
        uint32_t index{0}; //!< which of the connection's QPs (pinned: channel x QPs per channel)
    };

    /// The QPs between two ranks, in one direction of use (src sends, dst receives). 40
    /// bytes: a 100k-rank all-to-all plans 6.3 M of them.
    struct Conn
    {
        //! one (multiplexed) or pinned ones for the channels used so far
        std::unique_ptr<QpPair[]> qps;
        uint32_t nqp{0};        //!< entries in qps
        uint32_t openQueues{0}; //!< out queues of a last-use run not done yet
        //! (channel << 48 | messages issued over the connection's life) for the channels
        //! used so far: a connection uses a few of the communicator's channels
        std::vector<uint64_t> sent;

        /// Messages issued on `channel` so far.
        uint64_t Sent(uint32_t channel) const
        {
            const uint64_t* e = const_cast<Conn*>(this)->SentEntry(channel);
            return e != nullptr ? *e & kCountMask : 0;
        }

        /// Counts one more message on `channel`; returns its index there.
        uint64_t Issue(uint32_t channel)
        {
            uint64_t* e = SentEntry(channel);
            if (e == nullptr)
            {
                sent.reserve(sent.size() + 1); // exact growth
                sent.push_back(static_cast<uint64_t>(channel) << kCountBits);
                e = &sent.back();
            }
            NS_ABORT_MSG_IF((*e & kCountMask) == kCountMask, "connection: message count");
            return (*e)++ & kCountMask;
        }

        uint64_t* SentEntry(uint32_t channel)
        {
            for (uint64_t& e : sent)
            {
                if (e >> kCountBits == channel)
                {
                    return &e;
                }
            }
            return nullptr;
        }

        /// Counts n messages on `channel` that another process's rank issues (a receiver
        /// here reads their indices from the count as the sender's process does).
        void Advance(uint32_t channel, uint64_t n)
        {
            if (n == 0)
            {
                return;
            }
            uint64_t* e = SentEntry(channel);
            if (e == nullptr)
            {
                sent.reserve(sent.size() + 1);
                sent.push_back(static_cast<uint64_t>(channel) << kCountBits);
                e = &sent.back();
            }
            NS_ABORT_MSG_IF((*e & kCountMask) + n > kCountMask, "connection: message count");
            *e += n;
        }

        QpPair* Find(uint32_t index)
        {
            for (uint32_t i = 0; i < nqp; ++i)
            {
                if (qps[i].index == index)
                {
                    return &qps[i];
                }
            }
            return nullptr;
        }

        /// The entry of QP `index`, added if absent (exact growth: most have one or four).
        QpPair& Slot(uint32_t index)
        {
            if (QpPair* p = Find(index))
            {
                return *p;
            }
            std::unique_ptr<QpPair[]> grown(new QpPair[nqp + 1]);
            for (uint32_t i = 0; i < nqp; ++i)
            {
                grown[i] = std::move(qps[i]);
            }
            qps = std::move(grown);
            qps[nqp].index = index;
            return qps[nqp++];
        }

        /// Whether any QP is open.
        bool Open() const
        {
            for (uint32_t i = 0; i < nqp; ++i)
            {
                if (qps[i].tx || qps[i].rx)
                {
                    return true;
                }
            }
            return false;
        }

        /// Whether an open QP holds state to release, or may close.
        bool Releasable() const
        {
            for (uint32_t i = 0; i < nqp; ++i)
            {
                if (qps[i].tx && (qps[i].tx->HasReleasableState() ||
                                  (qps[i].rx && qps[i].rx->HasReleasableState())))
                {
                    return true;
                }
            }
            return false;
        }

        static constexpr int kCountBits = 48; // channels are below 2^16 (AddOut checks)
        static constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;
    };

    struct Plan;
    struct Run;

    RdmaNic* NicOf(uint32_t rank) const { return PeekPointer((*m_nics)[m_ranks[rank]]); }
    Conn& Connection(uint32_t src, uint32_t dst);
    /// Whether two ranks share a host (their connection crosses its scale-up domain).
    bool SameHost(uint32_t a, uint32_t b) const;
    /// Whether the connection from src to dst is one QP carrying channels as streams: over
    /// the network, if the transport's QPs are not pinned; over the scale-up domain, always,
    /// whatever the network transport (its QP runs each stream as a channel of its own, as
    /// NCCL's P2P transport gives each channel a connection: scale-up.h).
    bool Multiplexed(uint32_t src, uint32_t dst) const
    {
        return m_multiplexed || SameHost(src, dst);
    }
    /// Opens QP pair i of a connection (at its first message).
    QpPair& OpenQp(Conn& c, uint32_t src, uint32_t dst, uint32_t i);
    /// Whether this process simulates rank r's NIC.
    bool IsLocal(uint32_t r) const { return !m_cfg.isLocal || m_cfg.isLocal(m_ranks[r]); }
    /// On several processes: reserves the QPNs of the pinned QPs a collective will use (in
    /// plan order, as every process does alike: one process reserves them at their first
    /// message, which another process does not see) and opens the receiving QPs of this
    /// process's ranks before their first frame arrives.
    void PrepareRemoteConnections(Run& run);
    /// A last-use connection is done: its QPs release their state and, if nothing of
    /// theirs is pending, close.
    void Retire(uint32_t src, uint32_t dst);
    /// Retire for a connection whose receiver is another process's: the sending end only.
    void RetireSender(uint32_t src, uint32_t dst);
    /// Posts what every out queue of `rank` may send now (at the start).
    void Post(Run& run, uint32_t rank);
    /// Posts what out queue `qi` may send now.
    void PostQueue(Run& run, uint32_t rank, uint32_t qi);
    void OnSent(Run& run, uint32_t rank, uint32_t qi);
    void OnReceived(Run& run, uint32_t rank, uint32_t src, uint32_t channel, uint64_t index);
    /// A message arrived from src: the kernel sees it now, or after the protocol's receive
    /// latency when it crossed the network.
    void Arrived(uint32_t rank, uint32_t src, uint32_t channel, uint64_t index);
    void Finish(Run& run, uint32_t rank);
    uint64_t NicBytesPerSecond() const;
    NcclCostModel MakeCostModel() const;

    std::vector<uint32_t> m_ranks;
    std::unique_ptr<HostLayout> m_layout; //!< where each rank lives
    const std::vector<Ptr<RdmaNic>>* m_nics;
    QueuePairFactory m_qpFactory;
    CollectiveConfig m_cfg;
    bool m_multiplexed; //!< one QP per peer carrying channels as streams (MetaRoCE)
    std::unique_ptr<const NcclCostModel> m_nccl;           //!< null below 2 ranks
    std::map<std::pair<uint32_t, uint32_t>, Conn> m_conns; //!< nodes: stable references
    std::unique_ptr<Run> m_run;
    uint32_t m_userChannels{0}; //!< CollectiveConfig::maxChannels as given (0: NCCL's rules)
    //! events of this communicator's own hold a weak reference: one that runs after the
    //! communicator is gone (a program that stops the simulator at a collective's end and
    //! destroys it) does nothing, instead of touching freed memory
    std::shared_ptr<char> m_alive{std::make_shared<char>()};
    uint64_t m_qps{0};
    uint32_t m_localRanks{0};
    bool m_started{false}; //!< a collective ran
    std::vector<Retired> m_retiredSenders;
    QueuePair::Counters m_closedTx; //!< of the sending QPs closed so far
};

} // namespace metaroce
} // namespace ns3

#endif
