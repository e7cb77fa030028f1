/*
 * A collective compiled into per-rank plans: for every rank, ordered send lists per (peer,
 * channel) whose messages may wait for given messages from peers, and the streams it expects.
 * The planners build them as NCCL's algorithms run on accelerator hosts: rings that chain
 * each host's accelerators and cross hosts once per channel, trees over hosts with chains
 * inside, PAT, and all-to-all in NCCL's peer schedule. Communicator runs the plans.
 */
#ifndef METAROCE_COLLECTIVE_PLAN_H
#define METAROCE_COLLECTIVE_PLAN_H

#include "communicator.h"

#include "ns3/abort.h"

#include <cstdint>
#include <vector>

namespace ns3
{
namespace metaroce
{

// A plan lives for every rank at once while its collective runs (an all-to-all over 100k
// ranks has 25 M queues), so it is held in flat per-rank arrays: no allocation per queue
// or per message.

/// One message a rank sends; it may go once deps[depBegin, depBegin + nDeps) have arrived.
struct SendOp // 16 bytes
{
    uint64_t bytes : 63;
    uint64_t reduce : 1;
    uint32_t depBegin;
    uint32_t nDeps;
};

/// A stream's identity at a rank: the peer and the channel.
inline uint64_t
StreamKey(uint32_t peer, uint32_t channel)
{
    return static_cast<uint64_t>(peer) << 32 | channel;
}

/// (in queue, message index) a send waits for.
struct Dep
{
    uint32_t in;
    uint32_t index;
};

struct OutQueue // 28 bytes: a rank of a 64-rank all-to-all has 252 of them
{
    uint32_t peer{0};
    uint16_t channel{0};
    bool active{false};
    bool unlimited{false}; //!< active from the start, outside the rank's p2p peer limit
    uint16_t window{1};
    uint16_t inflight{0};
    uint32_t opBegin{0}; //!< ops[opBegin, opBegin + nOps) of the rank, contiguous
    uint32_t nOps{0};
    uint32_t next{0}; //!< of nOps
    uint32_t acked{0};
};

/// A message stream a rank expects from a peer on a channel, and which messages arrived:
/// up to 64 in one inline word (most queues expect a few), more in an array.
class InQueue // 24 bytes
{
  public:
    InQueue(uint32_t peer, uint16_t channel, uint32_t expected)
        : m_peer(peer)
        , m_channel(channel)
        , m_expected(expected)
    {
        if (m_expected > 64)
        {
            m_bits.words = new uint64_t[(m_expected + 63) / 64]();
        }
    }

    InQueue(InQueue&& o) noexcept
        : m_peer(o.m_peer)
        , m_channel(o.m_channel)
        , m_expected(o.m_expected)
        , m_base(o.m_base)
        , m_bits(o.m_bits)
    {
        o.m_expected = 0; // the array, if any, is ours now
    }

    InQueue& operator=(InQueue&& o) noexcept
    {
        if (this != &o)
        {
            Free();
            m_peer = o.m_peer;
            m_channel = o.m_channel;
            m_expected = o.m_expected;
            m_base = o.m_base;
            m_bits = o.m_bits;
            o.m_expected = 0;
        }
        return *this;
    }

    InQueue(const InQueue&) = delete;
    InQueue& operator=(const InQueue&) = delete;

    ~InQueue() { Free(); }

    uint32_t Peer() const { return m_peer; }
    uint32_t Channel() const { return m_channel; }
    uint32_t Expected() const { return m_expected; }
    uint64_t Key() const { return StreamKey(m_peer, m_channel); }
    uint64_t Base() const { return m_base; }

    void SetBase(uint64_t base)
    {
        NS_ABORT_MSG_IF(base > UINT32_MAX, "collective: over 2^32 messages on one channel");
        m_base = static_cast<uint32_t>(base);
    }

    bool Test(uint64_t i) const
    {
        return ((m_expected > 64 ? m_bits.words[i >> 6] : m_bits.word) >> (i & 63)) & 1;
    }

    void Set(uint64_t i)
    {
        (m_expected > 64 ? m_bits.words[i >> 6] : m_bits.word) |= 1ULL << (i & 63);
    }

  private:
    void Free()
    {
        if (m_expected > 64)
        {
            delete[] m_bits.words;
        }
    }

    uint32_t m_peer;
    uint16_t m_channel;
    uint32_t m_expected;
    uint32_t m_base{0}; //!< the connection's messages on this channel before this collective

    union Bits
    {
        uint64_t word;
        uint64_t* words;
    } m_bits{0};
};

static_assert(sizeof(SendOp) == 16 && sizeof(OutQueue) == 28 && sizeof(InQueue) == 24,
              "plan records grew");

struct RankState
{
    std::vector<OutQueue> out;
    std::vector<SendOp> ops;
    std::vector<Dep> deps;
    //! sorted by (peer, channel) once the plan is built, so an arrival finds its queue by
    //! binary search
    std::vector<InQueue> in;
    //! waitList[waitStart[i] .. waitStart[i + 1]): the out queues (ascending) with a message
    //! that waits for in queue i; an arrival re-examines only those, not every queue of the
    //! rank (all-to-all has hundreds)
    std::vector<uint32_t> waitStart;
    std::vector<uint32_t> waitList;
    std::size_t nextToActivate{0};
    uint32_t activeLimit{UINT32_MAX};
    uint32_t active{0};
    uint64_t pending{0}; //!< sends not acked + receives not arrived
    uint64_t sentBytes{0};
    bool done{false};
    int64_t donePs{0};
};

/// Activates out queues in order while the rank has room (NCCL's p2p peers in flight);
/// unlimited ones (active from their making) take no room.
inline void
ActivateQueues(RankState& rs)
{
    while (rs.nextToActivate < rs.out.size())
    {
        OutQueue& q = rs.out[rs.nextToActivate];
        if (!q.unlimited)
        {
            if (rs.active >= rs.activeLimit)
            {
                break;
            }
            q.active = true;
            ++rs.active;
        }
        ++rs.nextToActivate;
    }
}

/// Where the ranks of a communicator live: host[r] and local[r] (the accelerator's index in
/// its host); one rank per host is the flat case.
struct HostLayout
{
    std::vector<uint32_t> host;
    std::vector<uint32_t> local;

    /// Every rank alone on its host (or no host information).
    bool Flat() const;
    /// The ranks grouped by host (hosts in order of their first rank), each host's ranks by
    /// local index.
    std::vector<std::vector<uint32_t>> Groups() const;
};

/// The ring of channel `ch`: every host's ranks in a chain rotated by the channel (so the
/// channels leave and enter each host through different accelerators, hence NICs), the hosts
/// in order; the flat case is 0, 1, ..., k-1 on every channel.
std::vector<uint32_t> RingOrder(const HostLayout& layout, uint32_t ch);

/// One tree of a double binary tree: parent[r] (-1 at the root) and each rank's children.
struct TreeShape
{
    std::vector<int32_t> parent;
    std::vector<std::vector<uint32_t>> kids;
};

/// Tree t (0 or 1) of channel ch: flat, a heap-ordered binary tree over the ranks (t = 1 its
/// mirror); with hosts, a binary tree over hosts (t = 1 mirrored) whose host nodes are their
/// first accelerator in the channel's chain, the others hanging below it in a chain (NCCL's
/// treeIntra), so at most 3 children.
TreeShape MakeTree(const HostLayout& layout, uint32_t t, uint32_t ch);

/// NCCL's p2p peer order for rank r of k.
std::vector<uint32_t> PeerSchedule(uint32_t r, uint32_t k);

void PlanRing(std::vector<RankState>& ranks, CollectiveOp op, uint64_t bytes, uint32_t channels,
              const CollectiveConfig& cfg, const HostLayout& layout);
/// Ring broadcast from rank 0: per channel the ring from rank 0 on, each rank forwarding
/// every slice to the next as it arrives; the last rank of the ring sends nothing.
void PlanBroadcast(std::vector<RankState>& ranks, uint64_t bytes, uint32_t channels,
                   const CollectiveConfig& cfg, const HostLayout& layout);
void PlanTree(std::vector<RankState>& ranks, uint64_t bytes, uint32_t channels,
              const CollectiveConfig& cfg, const HostLayout& layout);
void PlanPat(std::vector<RankState>& ranks, CollectiveOp op, uint64_t bytes, uint32_t channels,
             const CollectiveConfig& cfg);
/// How NCCL splits one p2p send of `bytes` (enqueue.cc: scheduleP2pTasksToPlan and
/// addP2pToPlan; Simple, as on network connections, which have no LL buffers by default).
struct P2pSplit
{
    uint32_t channels{1};   //!< parts, one per channel (the last ones may be empty)
    uint64_t partBytes{0};  //!< ncclP2pPartBounds: ceil(bytes / channels) rounded up to 4 KiB
    uint64_t chunkBytes{0}; //!< the proxy's step: the p2p chunk, /4 under one, /2 under eight
};

/// `perPeerCh` channels per peer (the connections made, NCCL's p2pnChannelsPerPeer) over a
/// communicator of `ranks` ranks on one or several nodes: the operation starts on as few
/// channels as give each part at least half a chunk (an eighth on one node), at most those
/// whose `ranks` fit in the p2p channels, and doubles them while a part exceeds a chunk (32 on
/// one node), up to perPeerCh.
P2pSplit SplitP2p(uint64_t bytes, uint32_t perPeerCh, uint32_t ranks, bool multiNode,
                  const CollectiveConfig& cfg);
/// Bytes of part `i` of a split (0 for a part beyond the data).
uint64_t P2pPartBytes(const P2pSplit& s, uint64_t bytes, uint32_t i);
/// NCCL's channels per net peer (ncclTopoComputeP2pChannels): maxChannels halved until
/// channels x ceil(peers / 8) fit in the p2p channels.
uint32_t P2pChannelsPerPeer(uint32_t maxChannels, uint32_t ranks, const CollectiveConfig& cfg);

/// With cfg.pxn and hosts, a send to a peer on another host and another local index goes
/// over the scale-up domain to the sender's host-mate on the peer's index (NCCL's PXN), which
/// forwards each chunk as it arrives through its own NIC.
void PlanDirect(std::vector<RankState>& ranks, uint64_t bytes, uint32_t maxChannels,
                const CollectiveConfig& cfg, const HostLayout& layout);
/// Compacts a rank's plan, sorts its in queues for lookup and lists each in queue's waiters.
void FinishPlan(RankState& rs);

} // namespace metaroce
} // namespace ns3

#endif
