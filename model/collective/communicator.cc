#include "communicator.h"

#include "model/core/fast-simulator-impl.h"
#include "model/transport/rdma-nic.h"

#include "ns3/abort.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cmath>

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("Communicator");

std::string
ToString(CollectiveOp op)
{
    switch (op)
    {
        case CollectiveOp::AllReduce:
            return "allreduce";
        case CollectiveOp::ReduceScatter:
            return "reducescatter";
        case CollectiveOp::AllGather:
            return "allgather";
        case CollectiveOp::AllToAll:
            return "alltoall";
    }
    return "?";
}

std::string
ToString(CollectiveAlgorithm a)
{
    switch (a)
    {
        case CollectiveAlgorithm::Auto:
            return "auto";
        case CollectiveAlgorithm::Ring:
            return "ring";
        case CollectiveAlgorithm::Tree:
            return "tree";
        case CollectiveAlgorithm::Direct:
            return "direct";
        case CollectiveAlgorithm::Pat:
            return "pat";
    }
    return "?";
}

namespace
{
constexpr CollectiveOp kOps[] = {CollectiveOp::AllReduce, CollectiveOp::ReduceScatter,
                                 CollectiveOp::AllGather, CollectiveOp::AllToAll};
constexpr CollectiveAlgorithm kAlgorithms[] = {
    CollectiveAlgorithm::Auto, CollectiveAlgorithm::Ring, CollectiveAlgorithm::Tree,
    CollectiveAlgorithm::Direct, CollectiveAlgorithm::Pat};

template <typename T, std::size_t N>
std::vector<std::string>
NamesOf(const T (&all)[N])
{
    std::vector<std::string> names;
    for (T e : all)
    {
        names.push_back(ToString(e));
    }
    return names;
}

template <typename T, std::size_t N>
T
ValueOf(const T (&all)[N], const std::string& name)
{
    for (T e : all)
    {
        if (ToString(e) == name)
        {
            return e;
        }
    }
    NS_ABORT_MSG("unknown collective name '" << name << "'");
    return all[0];
}
} // namespace

std::vector<std::string>
CollectiveOpNames()
{
    return NamesOf(kOps);
}

std::vector<std::string>
CollectiveAlgorithmNames()
{
    return NamesOf(kAlgorithms);
}

CollectiveOp
CollectiveOpOf(const std::string& name)
{
    return ValueOf(kOps, name);
}

CollectiveAlgorithm
CollectiveAlgorithmOf(const std::string& name)
{
    return ValueOf(kAlgorithms, name);
}

double
BusBwFactor(CollectiveOp op, uint32_t n)
{
    if (n <= 1)
    {
        return 0;
    }
    return op == CollectiveOp::AllReduce ? 2.0 * (n - 1) / n : static_cast<double>(n - 1) / n;
}

// ---------------------------------------------------------------- internal structures

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

namespace
{
/// Activates out queues in order while the rank has room (NCCL's p2p peers in flight).
void
ActivateQueues(RankState& rs)
{
    while (rs.nextToActivate < rs.out.size() && rs.active < rs.activeLimit)
    {
        rs.out[rs.nextToActivate++].active = true;
        ++rs.active;
    }
}
} // namespace

struct Communicator::Run
{
    CollectiveResult result;
    std::vector<RankState> ranks;
    uint32_t ranksDone{0};
    bool lastUse{false};
    std::function<void(const CollectiveResult&)> done;
};

// ---------------------------------------------------------------- set-up

Communicator::Communicator(std::vector<uint32_t> ranks, const std::vector<Ptr<RdmaNic>>* nics,
                           QueuePairFactory qpFactory, CollectiveConfig cfg)
    : m_ranks(std::move(ranks))
    , m_nics(nics)
    , m_qpFactory(std::move(qpFactory))
    , m_cfg(cfg)
{
    // Transports whose QPs are not pinned to a port spray one QP over every plane and carry
    // channels as streams; pinned ones (RoCEv2) need a QP per channel.
    TypeId::AttributeInformation info;
    m_multiplexed = !m_qpFactory.GetTypeId().LookupAttributeByName("Port", &info);
    if (m_cfg.maxChannels == 0)
    {
        // NCCL: channels per net peer = ceil(NIC bandwidth / 14 GB/s).
        m_cfg.maxChannels = static_cast<uint32_t>(
            std::max<uint64_t>(1, (NicBytesPerSecond() + 14000000000ULL - 1) / 14000000000ULL));
    }
}

Communicator::~Communicator() = default;

uint64_t
Communicator::NicBytesPerSecond() const
{
    RdmaNic* nic = NicOf(0);
    uint64_t bps = 0;
    for (uint32_t p = 0; p < nic->GetNPorts(); ++p)
    {
        bps += nic->GetPort(p)->GetDataRate().GetBitRate();
    }
    return bps / 8;
}

void
Communicator::ForEachQp(const std::function<void(const Ptr<QueuePair>&)>& f) const
{
    for (const auto& [k, c] : m_conns)
    {
        for (uint32_t i = 0; i < c.nqp; ++i)
        {
            if (c.qps[i].tx)
            {
                f(c.qps[i].tx);
            }
        }
    }
}

Communicator::Conn&
Communicator::Connection(uint32_t src, uint32_t dst)
{
    auto key = std::make_pair(src, dst);
    auto it = m_conns.find(key);
    if (it != m_conns.end())
    {
        return it->second;
    }
    // The QPs themselves come at the first message that uses them (OpenQp): a 100k-rank
    // all-to-all plans 12.6 M QPs, a fraction in use at once. A multiplexed QP's number seeds
    // its random streams, so it is reserved now, in the order QPs were always numbered;
    // pinned QPs (one per channel, most of them never used) get theirs when they open.
    Conn& c = m_conns[key];
    if (m_multiplexed)
    {
        QpPair& p = c.Slot(0);
        p.txQpn = NicOf(src)->ReserveQpn();
        p.rxQpn = NicOf(dst)->ReserveQpn();
    }
    return c;
}

Communicator::QpPair&
Communicator::OpenQp(Conn& c, uint32_t src, uint32_t dst, uint32_t i)
{
    RdmaNic* a = NicOf(src);
    RdmaNic* b = NicOf(dst);
    uint32_t planes = a->GetNPorts();
    Ptr<QueuePair> qa = m_qpFactory.Create();
    Ptr<QueuePair> qb = m_qpFactory.Create();
    if (!m_multiplexed)
    {
        // A pinned QP per channel: channels spread over the planes, as NCCL spreads
        // channels over NICs.
        uint32_t channel = i / m_cfg.qpsPerConnection;
        uint32_t plane = (channel + src) % planes;
        qa->SetAttribute("Port", UintegerValue(plane));
        qb->SetAttribute("Port", UintegerValue(plane));
        qa->SetAttribute("Entropy",
                         UintegerValue(49152 + (src * 7919 + dst * 104729 + i * 31) % 16384));
        qb->SetAttribute("Entropy",
                         UintegerValue(49152 + (dst * 7919 + src * 104729 + i * 31) % 16384));
    }
    QpPair& p = c.Slot(i);
    if (p.txQpn == 0)
    {
        p.txQpn = a->ReserveQpn();
        p.rxQpn = b->ReserveQpn();
    }
    uint32_t qa_n = p.txQpn;
    uint32_t qb_n = p.rxQpn;
    a->AttachQueuePair(qa_n, qa);
    b->AttachQueuePair(qb_n, qb);
    qa->Connect(m_ranks[dst], qb_n);
    qb->Connect(m_ranks[src], qa_n);
    p.tx = qa;
    p.rx = qb;
    m_qps += 2;
    // The receive side of the connection reports (channel, message index) upwards.
    if (m_multiplexed)
    {
        // 16 bytes of capture: std::function keeps it inline (one QP per peer, millions)
        uint64_t ends = static_cast<uint64_t>(src) << 32 | dst;
        qb->SetReceiveHandler(
            [this, ends](const RdmaCompletion& rc)
            {
                if (m_run)
                {
                    OnReceived(*m_run, static_cast<uint32_t>(ends),
                               static_cast<uint32_t>(ends >> 32), rc.stream, rc.seq);
                }
            });
        return p;
    }
    uint32_t q = m_cfg.qpsPerConnection;
    qb->SetReceiveHandler(
        [this, src, dst, i, q](const RdmaCompletion& rc)
        {
            if (m_run)
            {
                OnReceived(*m_run, dst, src, i / q, static_cast<uint64_t>(rc.seq) * q + i % q);
            }
        });
    return p;
}

void
Communicator::Retire(uint32_t src, uint32_t dst)
{
    auto it = m_conns.find(std::make_pair(src, dst));
    if (it == m_conns.end())
    {
        return;
    }
    Conn& c = it->second;
    bool quiet = true;
    for (uint32_t i = 0; i < c.nqp; ++i)
    {
        for (const Ptr<QueuePair>& qp : {c.qps[i].tx, c.qps[i].rx})
        {
            if (qp)
            {
                quiet = qp->ReleaseState() && quiet;
            }
        }
    }
    if (!quiet)
    {
        return; // it keeps its QPs (and their memory)
    }
    // Closed: frames that still arrive (late duplicates under loss) find no QP and are
    // dropped, where an open connection would have acknowledged them again.
    RdmaNic* a = NicOf(src);
    RdmaNic* b = NicOf(dst);
    for (uint32_t i = 0; i < c.nqp; ++i)
    {
        QpPair& p = c.qps[i];
        if (p.tx)
        {
            m_closedTx.Add(p.tx->GetCounters());
            a->DetachQueuePair(p.txQpn);
            b->DetachQueuePair(p.rxQpn);
            p.tx = nullptr;
            p.rx = nullptr;
        }
    }
}

QueuePair::Counters
Communicator::SendCounters() const
{
    QueuePair::Counters sum = m_closedTx;
    ForEachQp([&sum](const Ptr<QueuePair>& q) { sum.Add(q->GetCounters()); });
    return sum;
}

uint32_t
Communicator::ChannelsFor(uint64_t bytes) const
{
    // NCCL trims channels for small messages: a channel wants 512 threads x 64 B (Simple).
    uint64_t c = std::max<uint64_t>(1, bytes / (512 * 64));
    return static_cast<uint32_t>(std::min<uint64_t>(c, m_cfg.maxChannels));
}

CollectiveAlgorithm
Communicator::Select(CollectiveOp op, uint64_t bytes) const
{
    if (op == CollectiveOp::AllToAll)
    {
        return CollectiveAlgorithm::Direct;
    }
    if (Size() < 3)
    {
        return CollectiveAlgorithm::Ring;
    }
    // NCCL's model counts network steps between hosts; PAT needs one rank per host. (Every
    // rank here has its own NIC: ranksPerHost only changes how the choice is made.)
    const double ppn = m_cfg.ranksPerHost;
    const double nodes = std::max(1.0, Size() / ppn);
    if (op != CollectiveOp::AllReduce && m_cfg.ranksPerHost > 1)
    {
        return CollectiveAlgorithm::Ring;
    }
    if (op != CollectiveOp::AllReduce)
    {
        // One rank per host (every rank has its own NIC here): NCCL weighs PAT against ring.
        // Ring: (n-1) steps at 14 us, algbw = busbw x n / (n-1). PAT: log2(n) x 14 / 3.5 us
        // + 2.8 us x n, algbw = busbw x 0.75 x n / (n-1) (tuning.cc).
        const double n = Size();
        const double bw = static_cast<double>(NicBytesPerSecond()) * n / (n - 1);
        double ring = 8.4e-6 + (n - 1) * 14e-6 + bytes / bw;
        double pat = 8e-6 + std::log2(n) * 14e-6 / 3.5 + 2.8e-6 * n + bytes / (0.75 * bw);
        return pat < ring ? CollectiveAlgorithm::Pat : CollectiveAlgorithm::Ring;
    }
    // NCCL's model (Simple protocol, one rank per host): time = latency x steps + bytes / bw.
    // Ring: 2(n-1) network steps at 14 us, x1.4 "ring plateau" when multi-node; algbw =
    // busbw x n / (2(n-1)). Tree: 2 log2(n) steps; algbw = busbw / 2.
    const double lat = 14e-6;
    const double n = Size();
    const double bw = static_cast<double>(NicBytesPerSecond());
    const double intra = 3.4e-6; // NVLink step latency (Simple)
    double ring = 1.4 * (8.4e-6 + 2 * (nodes - 1) * lat + 2 * (n - nodes) * intra) +
                  bytes / (bw * n / (2 * (n - 1)));
    double tree = 8.4e-6 + 2 * ((ppn - 1) * intra + std::log2(nodes) * lat) + bytes / (bw * 0.5);
    return tree < ring ? CollectiveAlgorithm::Tree : CollectiveAlgorithm::Ring;
}

// ---------------------------------------------------------------- plans

namespace
{
/// Splits `bytes` into `parts` sizes that differ by at most one byte.
uint64_t
PartOf(uint64_t bytes, uint64_t parts, uint64_t i)
{
    return bytes / parts + (i < bytes % parts ? 1 : 0);
}

/// A new in queue. Planners never expect two streams from the same (peer, channel): the
/// plan check (CheckPlan) aborts if one did.
uint32_t
AddIn(RankState& r, uint32_t peer, uint32_t channel, uint64_t expected)
{
    NS_ABORT_MSG_IF(expected > UINT32_MAX, "collective plan: too many messages in one stream");
    NS_ABORT_MSG_IF(channel > UINT16_MAX, "collective plan: channel out of range");
    r.in.emplace_back(peer, static_cast<uint16_t>(channel), static_cast<uint32_t>(expected));
    return static_cast<uint32_t>(r.in.size() - 1);
}

/// A new out queue; AddOp then appends its messages (a queue's are contiguous).
void
AddOut(RankState& r, uint32_t peer, uint32_t channel, uint32_t window)
{
    NS_ABORT_MSG_IF(channel > UINT16_MAX, "collective plan: channel out of range");
    NS_ABORT_MSG_IF(window == 0 || window > UINT16_MAX, "collective plan: window out of range");
    NS_ABORT_MSG_IF(r.ops.size() >= UINT32_MAX, "collective plan: too many messages");
    OutQueue q;
    q.peer = peer;
    q.channel = static_cast<uint16_t>(channel);
    q.window = static_cast<uint16_t>(window);
    q.opBegin = static_cast<uint32_t>(r.ops.size());
    r.out.push_back(q);
}

/// A message of the last out queue; AddDep then appends what it waits for.
void
AddOp(RankState& r, uint64_t bytes, bool reduce)
{
    NS_ABORT_MSG_IF(r.ops.size() >= UINT32_MAX || r.deps.size() >= UINT32_MAX,
                    "collective plan: too many messages");
    SendOp op;
    op.bytes = bytes;
    op.reduce = reduce;
    op.depBegin = static_cast<uint32_t>(r.deps.size());
    op.nDeps = 0;
    r.ops.push_back(op);
    ++r.out.back().nOps;
}

void
AddDep(RankState& r, uint32_t in, uint64_t index)
{
    NS_ABORT_MSG_IF(index > UINT32_MAX, "collective plan: too many messages in one stream");
    r.deps.push_back(Dep{in, static_cast<uint32_t>(index)});
    ++r.ops.back().nDeps;
}

/// Ring reduce-scatter / all-gather / all-reduce: each rank sends to the next and receives from
/// the previous; per channel, steps x slices messages; a step's slice forwards the slice the
/// previous step received.
void
PlanRing(std::vector<RankState>& ranks, CollectiveOp op, uint64_t bytes, uint32_t channels,
         const CollectiveConfig& cfg)
{
    const uint32_t k = static_cast<uint32_t>(ranks.size());
    const uint32_t steps = op == CollectiveOp::AllReduce ? 2 * (k - 1) : k - 1;
    for (uint32_t ch = 0; ch < channels; ++ch)
    {
        uint64_t chBytes = PartOf(bytes, channels, ch);
        uint64_t chunkMax = (chBytes + k - 1) / k;
        uint64_t slices =
            std::max<uint64_t>(1, (chunkMax + cfg.ringSliceBytes - 1) / cfg.ringSliceBytes);
        for (uint32_t r = 0; r < k; ++r)
        {
            uint32_t next = (r + 1) % k;
            uint32_t prev = (r + k - 1) % k;
            RankState& rs = ranks[r];
            uint32_t in = AddIn(rs, prev, ch, static_cast<uint64_t>(steps) * slices);
            AddOut(rs, next, ch, cfg.ringSlicesInFlight);
            for (uint32_t s = 0; s < steps; ++s)
            {
                // The chunk rank r handles at step s: reduce-scatter sends (r - s), all-gather
                // (r + 1 - s') after it; the index only sizes the chunk.
                uint32_t chunk = (r + 2 * k - s) % k;
                uint64_t chunkBytes = PartOf(chBytes, k, chunk);
                for (uint64_t j = 0; j < slices; ++j)
                {
                    AddOp(rs, PartOf(chunkBytes, slices, j),
                          op != CollectiveOp::AllGather &&
                              s < (op == CollectiveOp::AllReduce ? k - 1 : steps) && s > 0);
                    if (s > 0)
                    {
                        AddDep(rs, in, (s - 1) * slices + j);
                    }
                }
            }
        }
    }
}

/// Double binary tree all-reduce: two trees, each half the data; a heap-ordered binary tree
/// over the ranks and its mirror, so a leaf of one is interior in the other. Reduce up to the
/// root chunk by chunk, then broadcast down.
void
PlanTree(std::vector<RankState>& ranks, uint64_t bytes, uint32_t channels,
         const CollectiveConfig& cfg)
{
    const uint32_t k = static_cast<uint32_t>(ranks.size());
    // NCCL runs tree 0 on channels [0, n) and tree 1 on [n, 2n).
    uint32_t perTree = std::max<uint32_t>(1, channels);
    for (uint32_t t = 0; t < 2; ++t)
    {
        auto rankOf = [&](uint32_t node) { return t == 0 ? node : k - 1 - node; };
        uint64_t treeBytes = PartOf(bytes, 2, t);
        for (uint32_t c = 0; c < perTree; ++c)
        {
            uint32_t ch = t * perTree + c;
            uint64_t chBytes = PartOf(treeBytes, perTree, c);
            uint64_t chunks =
                std::max<uint64_t>(1, (chBytes + cfg.treeChunkBytes - 1) / cfg.treeChunkBytes);
            for (uint32_t node = 0; node < k; ++node)
            {
                uint32_t r = rankOf(node);
                RankState& rs = ranks[r];
                std::vector<uint32_t> kids;
                for (uint32_t kid : {2 * node + 1, 2 * node + 2})
                {
                    if (kid < k)
                    {
                        kids.push_back(rankOf(kid));
                    }
                }
                std::vector<uint32_t> fromKids;
                for (uint32_t kid : kids)
                {
                    fromKids.push_back(AddIn(rs, kid, ch, chunks));
                }
                int32_t fromParent = -1;
                if (node > 0)
                {
                    uint32_t parent = rankOf((node - 1) / 2);
                    fromParent = static_cast<int32_t>(AddIn(rs, parent, ch, chunks));
                    AddOut(rs, parent, ch, cfg.treeChunksInFlight);
                    for (uint64_t j = 0; j < chunks; ++j)
                    {
                        AddOp(rs, PartOf(chBytes, chunks, j), !kids.empty());
                        for (uint32_t q : fromKids)
                        {
                            AddDep(rs, q, j);
                        }
                    }
                }
                for (uint32_t kid : kids)
                {
                    AddOut(rs, kid, ch, cfg.treeChunksInFlight);
                    for (uint64_t j = 0; j < chunks; ++j)
                    {
                        AddOp(rs, PartOf(chBytes, chunks, j), false);
                        if (fromParent >= 0)
                        {
                            AddDep(rs, static_cast<uint32_t>(fromParent), j);
                        }
                        else
                        {
                            for (uint32_t q : fromKids) // the root: once the chunk is reduced
                            {
                                AddDep(rs, q, j);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// PAT-like all-gather / reduce-scatter over log2(k) steps (Bruck's algorithm, any k): at
/// distance d = 1, 2, 4, ... an all-gather step sends everything gathered so far (min(d, k-d)
/// blocks of S/k) to rank r - d and receives as much from r + d; a reduce-scatter runs the
/// same steps in reverse order and direction, each step reducing before it forwards. A step
/// waits for the whole message of the step before it.
void
PlanPat(std::vector<RankState>& ranks, CollectiveOp op, uint64_t bytes, uint32_t channels,
        const CollectiveConfig& cfg)
{
    const uint32_t k = static_cast<uint32_t>(ranks.size());
    std::vector<uint32_t> dists;
    for (uint32_t d = 1; d < k; d <<= 1)
    {
        dists.push_back(d);
    }
    if (op == CollectiveOp::ReduceScatter)
    {
        std::reverse(dists.begin(), dists.end());
    }
    for (uint32_t ch = 0; ch < channels; ++ch)
    {
        uint64_t chBytes = PartOf(bytes, channels, ch);
        for (uint32_t r = 0; r < k; ++r)
        {
            RankState& rs = ranks[r];
            int32_t prevIn = -1;
            uint64_t prevPieces = 0;
            for (uint32_t d : dists)
            {
                bool ag = op == CollectiveOp::AllGather;
                uint32_t to = ag ? (r + k - d) % k : (r + d) % k;
                uint32_t from = ag ? (r + d) % k : (r + k - d) % k;
                uint64_t blocks = std::min<uint64_t>(d, k - d);
                uint64_t stepBytes = chBytes * blocks / k;
                uint64_t pieces = std::max<uint64_t>(1, (stepBytes + cfg.ringSliceBytes - 1) /
                                                            cfg.ringSliceBytes);
                AddOut(rs, to, ch, cfg.ringSlicesInFlight);
                for (uint64_t j = 0; j < pieces; ++j)
                {
                    AddOp(rs, PartOf(stepBytes, pieces, j), !ag && prevIn >= 0);
                    for (uint64_t q = 0; prevIn >= 0 && q < prevPieces; ++q)
                    {
                        AddDep(rs, static_cast<uint32_t>(prevIn), q);
                    }
                }
                // The matching receive: this step's message from `from` (distances 1, 2, 4, ...
                // are distinct modulo k, so every step has its own peers).
                prevIn = static_cast<int32_t>(AddIn(rs, from, ch, pieces));
                prevPieces = pieces;
            }
        }
    }
}

/// NCCL's p2p peer order for rank r of k: groups of 8 ranks, group deltas in NCCL's
/// quadratic sequence, then local deltas 0..7.
std::vector<uint32_t>
PeerSchedule(uint32_t r, uint32_t k)
{
    const uint32_t g = 8;
    uint32_t nGroups = (k + g - 1) / g;
    uint32_t pow2 = 1;
    while (pow2 < nGroups)
    {
        pow2 <<= 1;
    }
    std::vector<uint32_t> order;
    uint32_t delta = 0;
    for (uint32_t round = 0, seen = 0; seen < nGroups; ++round)
    {
        if (delta < nGroups)
        {
            ++seen;
            for (uint32_t d = 0; d < g; ++d)
            {
                uint32_t group = (r / g + delta) % nGroups;
                uint32_t peer = group * g + (r % g + d) % g;
                if (peer < k && peer != r)
                {
                    order.push_back(peer);
                }
            }
        }
        delta = (delta + round + 1) % pow2;
    }
    // Ranks a partial last group made unreachable through the pattern are appended.
    std::vector<bool> have(k, false);
    for (uint32_t p : order)
    {
        have[p] = true;
    }
    for (uint32_t p = 0; p < k; ++p)
    {
        if (p != r && !have[p])
        {
            order.push_back(p);
        }
    }
    return order;
}

/// All-to-all: S / k bytes to every peer in NCCL's schedule, each peer's share split over
/// NCCL's channels per peer, in 128 KiB chunks (smaller for small messages), at most
/// p2pPeersInFlight peers at a time.
void
PlanDirect(std::vector<RankState>& ranks, uint64_t bytes, uint32_t maxChannels,
           const CollectiveConfig& cfg)
{
    const uint32_t k = static_cast<uint32_t>(ranks.size());
    // NCCL: channels per net peer, halved until channelsPerPeer x ceil(peers / 8) fits the
    // p2p channels.
    uint32_t perPeerCh = maxChannels;
    while (perPeerCh > 1 && perPeerCh * ((k - 1 + 7) / 8) > cfg.p2pChannels)
    {
        perPeerCh /= 2;
    }
    uint64_t perPeer = bytes / k;
    for (uint32_t r = 0; r < k; ++r)
    {
        RankState& rs = ranks[r];
        rs.activeLimit = cfg.p2pPeersInFlight * perPeerCh;
        for (uint32_t peer : PeerSchedule(r, k))
        {
            for (uint32_t c = 0; c < perPeerCh; ++c)
            {
                // Peers start on different channels, so a rank's peers use every channel.
                uint32_t ch = (peer + c) % maxChannels;
                uint64_t part = PartOf(perPeer, perPeerCh, c);
                uint64_t chunk = cfg.p2pChunkBytes;
                if (part < cfg.p2pChunkBytes)
                {
                    chunk = cfg.p2pChunkBytes / 4;
                }
                else if (part < 8 * cfg.p2pChunkBytes)
                {
                    chunk = cfg.p2pChunkBytes / 2;
                }
                uint64_t chunks = std::max<uint64_t>(1, (part + chunk - 1) / chunk);
                AddOut(rs, peer, ch, cfg.p2pChunksInFlight);
                for (uint64_t j = 0; j < chunks; ++j)
                {
                    AddOp(rs, PartOf(part, chunks, j), false);
                }
                AddIn(ranks[peer], r, ch, chunks);
            }
        }
    }
}
/// Compacts a rank's plan (it lives as long as the collective, for every rank), sorts its in
/// queues for lookup and lists each in queue's waiters.
void
FinishPlan(RankState& rs)
{
    rs.out.shrink_to_fit();
    rs.ops.shrink_to_fit();
    rs.deps.shrink_to_fit();
    const std::size_t nIn = rs.in.size();
    std::vector<uint64_t> keys;
    keys.reserve(rs.out.size());
    for (const auto& q : rs.out)
    {
        keys.push_back(StreamKey(q.peer, q.channel));
    }
    std::sort(keys.begin(), keys.end());
    NS_ABORT_MSG_IF(std::adjacent_find(keys.begin(), keys.end()) != keys.end(),
                    "collective plan: two out queues for one peer and channel");
    // In queues sorted by (peer, channel); what waits for them follows.
    std::vector<uint32_t> order(nIn);
    for (uint32_t i = 0; i < nIn; ++i)
    {
        order[i] = i;
    }
    std::sort(order.begin(), order.end(),
              [&rs](uint32_t a, uint32_t b) { return rs.in[a].Key() < rs.in[b].Key(); });
    std::vector<InQueue> sorted;
    sorted.reserve(nIn);
    std::vector<uint32_t> where(nIn);
    for (uint32_t i = 0; i < nIn; ++i)
    {
        NS_ABORT_MSG_IF(i > 0 && rs.in[order[i]].Key() == sorted.back().Key(),
                        "collective plan: two in queues for one peer and channel");
        where[order[i]] = i;
        sorted.push_back(std::move(rs.in[order[i]]));
    }
    rs.in.swap(sorted);
    for (auto& d : rs.deps)
    {
        d.in = where[d.in];
    }
    // Waiters, in two passes (count, then fill) so the lists take exact room.
    std::vector<uint32_t> last(nIn, UINT32_MAX);
    rs.waitStart.assign(nIn + 1, 0);
    for (int pass = 0; pass < 2; ++pass)
    {
        std::vector<uint32_t> fill;
        if (pass == 1)
        {
            for (std::size_t i = 0; i < nIn; ++i)
            {
                rs.waitStart[i + 1] += rs.waitStart[i];
            }
            rs.waitList.resize(rs.waitStart.back());
            fill.assign(rs.waitStart.begin(), rs.waitStart.end() - 1);
            last.assign(nIn, UINT32_MAX);
        }
        for (uint32_t qi = 0; qi < rs.out.size(); ++qi)
        {
            const OutQueue& q = rs.out[qi];
            for (uint32_t o = q.opBegin; o < q.opBegin + q.nOps; ++o)
            {
                const SendOp& op = rs.ops[o];
                for (uint32_t d = op.depBegin; d < op.depBegin + op.nDeps; ++d)
                {
                    uint32_t in = rs.deps[d].in;
                    if (last[in] == qi)
                    {
                        continue;
                    }
                    last[in] = qi;
                    if (pass == 0)
                    {
                        ++rs.waitStart[in + 1];
                    }
                    else
                    {
                        rs.waitList[fill[in]++] = qi;
                    }
                }
            }
        }
    }
}
} // namespace

// ---------------------------------------------------------------- engine

void
Communicator::Start(CollectiveOp op, CollectiveAlgorithm algo, uint64_t bytes,
                    std::function<void(const CollectiveResult&)> done, bool lastUse)
{
    NS_ABORT_MSG_IF(m_run && m_run->ranksDone < Size(),
                    "Communicator::Start: the previous collective has not finished");
    if (algo == CollectiveAlgorithm::Auto)
    {
        algo = Select(op, bytes);
    }
    NS_ABORT_MSG_IF(algo == CollectiveAlgorithm::Tree && op != CollectiveOp::AllReduce,
                    "tree is an all-reduce algorithm");
    NS_ABORT_MSG_IF(algo == CollectiveAlgorithm::Direct && op != CollectiveOp::AllToAll,
                    "direct is the all-to-all algorithm");
    NS_ABORT_MSG_IF(algo == CollectiveAlgorithm::Pat && op != CollectiveOp::AllGather &&
                        op != CollectiveOp::ReduceScatter,
                    "PAT runs all-gather and reduce-scatter");
    NS_ABORT_MSG_IF(op == CollectiveOp::AllToAll && algo != CollectiveAlgorithm::Direct,
                    "all-to-all runs with the direct algorithm");
    m_run = std::make_unique<Run>();
    Run& run = *m_run;
    run.done = std::move(done);
    run.lastUse = lastUse;
    run.result.op = op;
    run.result.algorithm = algo;
    run.result.bytes = bytes;
    run.result.ranks = Size();
    run.result.startPs = NowPs();
    run.ranks.resize(Size());
    uint32_t channels = ChannelsFor(bytes);
    run.result.channels = channels;
    if (Size() > 1 && bytes > 0)
    {
        if (algo == CollectiveAlgorithm::Ring)
        {
            PlanRing(run.ranks, op, bytes, channels, m_cfg);
        }
        else if (algo == CollectiveAlgorithm::Tree)
        {
            PlanTree(run.ranks, bytes, channels, m_cfg);
        }
        else if (algo == CollectiveAlgorithm::Pat)
        {
            PlanPat(run.ranks, op, bytes, channels, m_cfg);
        }
        else
        {
            PlanDirect(run.ranks, bytes, m_cfg.maxChannels, m_cfg);
        }
    }
    // Bases: indices continue where each connection's previous collective ended. The
    // connections are made (and their QPNs reserved) in plan order.
    for (uint32_t r = 0; r < Size(); ++r)
    {
        RankState& rs = run.ranks[r];
        for (const auto& q : rs.out)
        {
            Conn& c = Connection(r, q.peer);
            c.openQueues += lastUse && q.nOps > 0 ? 1 : 0;
            rs.pending += q.nOps;
            run.result.messages += q.nOps;
        }
        for (auto& q : rs.in)
        {
            q.SetBase(Connection(q.Peer(), r).Sent(q.Channel()));
            rs.pending += q.Expected();
        }
        FinishPlan(rs);
    }
    for (uint32_t r = 0; r < Size(); ++r)
    {
        RankState& rs = run.ranks[r];
        ActivateQueues(rs);
    }
    for (uint32_t r = 0; r < Size(); ++r)
    {
        if (run.ranks[r].pending == 0)
        {
            Finish(run, r);
        }
        else
        {
            Post(run, r);
        }
    }
}

void
Communicator::Post(Run& run, uint32_t r)
{
    for (uint32_t qi = 0; qi < run.ranks[r].out.size(); ++qi)
    {
        PostQueue(run, r, qi);
    }
}

// After Post, every queue is blocked (window full, a dependency missing, inactive or done),
// and only its own completions, its activation or an awaited arrival unblock it; so the
// handlers below re-examine just those queues, in ascending order as a full scan would.
void
Communicator::PostQueue(Run& run, uint32_t r, uint32_t qi)
{
    RankState& rs = run.ranks[r];
    OutQueue& q = rs.out[qi];
    if (!q.active)
    {
        return;
    }
    while (q.inflight < q.window && q.next < q.nOps)
    {
        const SendOp& op = rs.ops[q.opBegin + q.next];
        bool ready = true;
        for (uint32_t d = op.depBegin; d < op.depBegin + op.nDeps; ++d)
        {
            ready = ready && rs.in[rs.deps[d].in].Test(rs.deps[d].index);
        }
        if (!ready)
        {
            break;
        }
        ++q.next;
        ++q.inflight;
        rs.sentBytes += op.bytes;
        Conn& c = Connection(r, q.peer);
        uint64_t index = c.Issue(q.channel);
        // One QP carrying channels as streams, or a pinned one per channel (and index).
        uint32_t i = m_multiplexed ? 0
                                   : q.channel * m_cfg.qpsPerConnection +
                                         static_cast<uint32_t>(index % m_cfg.qpsPerConnection);
        QpPair* pair = c.Find(i);
        Ptr<QueuePair> qp = pair != nullptr && pair->tx ? pair->tx : OpenQp(c, r, q.peer, i).tx;
        uint16_t stream = m_multiplexed ? static_cast<uint16_t>(q.channel) : 0;
        uint64_t bytes = op.bytes;
        auto send = [this, qp, bytes, stream, r, qi]()
        {
            qp->PostSend(bytes, stream,
                         [this, r, qi](const RdmaCompletion&)
                         {
                             if (m_run)
                             {
                                 OnSent(*m_run, r, qi);
                             }
                         });
        };
        if (op.reduce && m_cfg.reducePsPerByte > 0)
        {
            Simulator::Schedule(PicoSeconds(static_cast<int64_t>(bytes * m_cfg.reducePsPerByte)),
                                send);
        }
        else
        {
            send();
        }
    }
}

void
Communicator::OnSent(Run& run, uint32_t r, uint32_t qi)
{
    RankState& rs = run.ranks[r];
    OutQueue& q = rs.out[qi];
    --q.inflight;
    ++q.acked;
    --rs.pending;
    std::size_t firstNew = rs.nextToActivate;
    if (q.acked == q.nOps && q.active)
    {
        q.active = false;
        --rs.active;
        ActivateQueues(rs);
        if (run.lastUse)
        {
            Conn& c = Connection(r, q.peer);
            if (--c.openQueues == 0)
            {
                // Everything it carries was acknowledged, so also received. From a fresh
                // event: this one runs inside the QP's own ACK processing.
                if (c.Releasable())
                {
                    Simulator::ScheduleNow(&Communicator::Retire, this, r, q.peer);
                }
            }
        }
    }
    if (rs.pending == 0)
    {
        Finish(run, r);
        return;
    }
    // qi is active or done, so it precedes every queue activated just now.
    PostQueue(run, r, qi);
    for (std::size_t n = firstNew; n < rs.nextToActivate; ++n)
    {
        PostQueue(run, r, static_cast<uint32_t>(n));
    }
}

void
Communicator::OnReceived(Run& run, uint32_t r, uint32_t src, uint32_t channel, uint64_t index)
{
    RankState& rs = run.ranks[r];
    const uint64_t key = StreamKey(src, channel);
    auto it = std::lower_bound(rs.in.begin(), rs.in.end(), key,
                               [](const InQueue& q, uint64_t k) { return q.Key() < k; });
    NS_ABORT_MSG_IF(it == rs.in.end() || it->Key() != key,
                    "collective: a message nobody expected arrived");
    const uint32_t qin = static_cast<uint32_t>(it - rs.in.begin());
    InQueue& q = *it;
    uint64_t i = index - q.Base();
    NS_ABORT_MSG_IF(i >= q.Expected() || q.Test(i), "collective: message index out of plan");
    q.Set(i);
    --rs.pending;
    if (rs.pending == 0)
    {
        Finish(run, r);
        return;
    }
    for (uint32_t w = rs.waitStart[qin]; w < rs.waitStart[qin + 1]; ++w)
    {
        PostQueue(run, r, rs.waitList[w]);
    }
}

void
Communicator::Finish(Run& run, uint32_t r)
{
    RankState& rs = run.ranks[r];
    if (rs.done)
    {
        return;
    }
    rs.done = true;
    rs.donePs = NowPs();
    run.result.wireBytesPerRank = std::max(run.result.wireBytesPerRank, rs.sentBytes);
    if (run.ranksDone == 0)
    {
        run.result.fastestRankPs = rs.donePs;
    }
    if (++run.ranksDone == Size())
    {
        run.result.endPs = rs.donePs;
        // Reported from a fresh event: the callback may start the next collective, which
        // replaces this run.
        if (run.done)
        {
            Simulator::ScheduleNow([done = run.done, res = run.result]() { done(res); });
        }
        // The plan is not needed once every rank is done (late completions find no run and
        // are ignored), nor, after a last use, the connections that closed.
        Simulator::ScheduleNow(
            [this, ended = &run]()
            {
                if (m_run.get() != ended)
                {
                    return; // the next collective started meanwhile
                }
                bool last = m_run->lastUse;
                m_run.reset();
                for (auto it = m_conns.begin(); last && it != m_conns.end();)
                {
                    it = it->second.Open() ? std::next(it) : m_conns.erase(it);
                }
            });
    }
}

} // namespace metaroce
} // namespace ns3
