#include "communicator.h"

#include "model/transport/rdma-nic.h"

#include "ns3/abort.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

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

/// One message a rank sends: `deps` are (in-queue, index) pairs that must have arrived.
struct SendOp
{
    uint64_t bytes{0};
    std::vector<std::pair<uint32_t, uint64_t>> deps;
    bool reduce{false};
};

struct OutQueue // 64 bytes: a rank of a 64-rank all-to-all has 252 of them
{
    uint32_t peer{0};
    uint32_t channel{0};
    uint32_t window{1};
    uint32_t inflight{0};
    std::vector<SendOp> ops;
    uint32_t next{0};
    bool active{false};
    uint64_t acked{0};
    uint64_t base{0};
};

/// Which messages of an in queue arrived: up to 64 inline (most queues expect a few).
class Arrivals
{
  public:
    void Assign(uint64_t n)
    {
        m_word = 0;
        m_words.reset(n > 64 ? new uint64_t[(n + 63) / 64]() : nullptr);
    }

    bool Test(uint64_t i) const { return ((m_words ? m_words[i >> 6] : m_word) >> (i & 63)) & 1; }

    void Set(uint64_t i) { (m_words ? m_words[i >> 6] : m_word) |= 1ULL << (i & 63); }

  private:
    uint64_t m_word{0};
    std::unique_ptr<uint64_t[]> m_words;
};

struct InQueue // 48 bytes
{
    uint32_t peer{0};
    uint32_t channel{0};
    uint64_t expected{0};
    uint64_t received{0};
    uint64_t base{0};
    Arrivals got;
};

struct RankState
{
    std::vector<OutQueue> out;
    std::vector<InQueue> in;
    //! InKey(peer, channel) -> in queue while the plan is built
    std::unordered_map<uint64_t, uint32_t> inIndex;
    //! the same, sorted, once built: 16 bytes an entry (all-to-all at 100k ranks has 25 M)
    std::vector<std::pair<uint64_t, uint32_t>> inSorted;
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
uint64_t
InKey(uint32_t peer, uint32_t channel)
{
    return static_cast<uint64_t>(peer) << 32 | channel;
}

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
        for (const auto& q : c.tx)
        {
            if (q)
            {
                f(q);
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
    // QPNs now, in the order QPs were always numbered; the QPs themselves at the first
    // message (OpenQps): a 100k-rank all-to-all plans 12.6 M QPs, a fraction in use at once.
    uint32_t nqp = m_multiplexed ? 1 : m_cfg.maxChannels * 2 * m_cfg.qpsPerConnection;
    Conn& c = m_conns[key];
    c.tx.resize(nqp);
    c.rx.resize(nqp);
    c.qpn.reserve(2 * nqp);
    RdmaNic* a = NicOf(src);
    RdmaNic* b = NicOf(dst);
    for (uint32_t i = 0; i < nqp; ++i)
    {
        c.qpn.push_back(a->ReserveQpn());
        c.qpn.push_back(b->ReserveQpn());
    }
    return c;
}

void
Communicator::OpenQps(Conn& c, uint32_t src, uint32_t dst)
{
    RdmaNic* a = NicOf(src);
    RdmaNic* b = NicOf(dst);
    uint32_t planes = a->GetNPorts();
    for (uint32_t i = 0; i < c.tx.size(); ++i)
    {
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
        uint32_t qa_n = c.qpn[2 * i];
        uint32_t qb_n = c.qpn[2 * i + 1];
        a->AttachQueuePair(qa_n, qa);
        b->AttachQueuePair(qb_n, qb);
        qa->Connect(m_ranks[dst], qb_n);
        qb->Connect(m_ranks[src], qa_n);
        c.tx[i] = qa;
        c.rx[i] = qb;
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
            continue;
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
    }
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
    for (uint32_t i = 0; i < c.tx.size(); ++i)
    {
        for (const Ptr<QueuePair>& qp : {c.tx[i], c.rx[i]})
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
    for (uint32_t i = 0; i < c.tx.size(); ++i)
    {
        if (c.tx[i])
        {
            m_closedTx.Add(c.tx[i]->GetCounters());
            a->DetachQueuePair(c.qpn[2 * i]);
            b->DetachQueuePair(c.qpn[2 * i + 1]);
            c.tx[i] = nullptr;
            c.rx[i] = nullptr;
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

uint32_t
AddIn(RankState& r, uint32_t peer, uint32_t channel, uint64_t expected)
{
    uint64_t key = InKey(peer, channel);
    auto it = r.inIndex.find(key);
    if (it != r.inIndex.end())
    {
        r.in[it->second].expected += expected;
        return it->second;
    }
    InQueue q;
    q.peer = peer;
    q.channel = channel;
    q.expected = expected;
    r.in.push_back(std::move(q));
    r.inIndex[key] = static_cast<uint32_t>(r.in.size() - 1);
    return static_cast<uint32_t>(r.in.size() - 1);
}

OutQueue&
AddOut(RankState& r, uint32_t peer, uint32_t channel, uint32_t window)
{
    for (auto& q : r.out)
    {
        if (q.peer == peer && q.channel == channel)
        {
            return q;
        }
    }
    OutQueue q;
    q.peer = peer;
    q.channel = channel;
    q.window = window;
    r.out.push_back(std::move(q));
    return r.out.back();
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
            OutQueue& out = AddOut(rs, next, ch, cfg.ringSlicesInFlight);
            for (uint32_t s = 0; s < steps; ++s)
            {
                // The chunk rank r handles at step s: reduce-scatter sends (r - s), all-gather
                // (r + 1 - s') after it; the index only sizes the chunk.
                uint32_t chunk = (r + 2 * k - s) % k;
                uint64_t chunkBytes = PartOf(chBytes, k, chunk);
                for (uint64_t j = 0; j < slices; ++j)
                {
                    SendOp op2;
                    op2.bytes = PartOf(chunkBytes, slices, j);
                    op2.reduce = op != CollectiveOp::AllGather &&
                                 s < (op == CollectiveOp::AllReduce ? k - 1 : steps) && s > 0;
                    if (s > 0)
                    {
                        op2.deps.emplace_back(in, (s - 1) * slices + j);
                    }
                    out.ops.push_back(std::move(op2));
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
                    OutQueue& up = AddOut(rs, parent, ch, cfg.treeChunksInFlight);
                    for (uint64_t j = 0; j < chunks; ++j)
                    {
                        SendOp op;
                        op.bytes = PartOf(chBytes, chunks, j);
                        op.reduce = !kids.empty();
                        for (uint32_t q : fromKids)
                        {
                            op.deps.emplace_back(q, j);
                        }
                        up.ops.push_back(std::move(op));
                    }
                }
                for (uint32_t kid : kids)
                {
                    OutQueue& down = AddOut(rs, kid, ch, cfg.treeChunksInFlight);
                    for (uint64_t j = 0; j < chunks; ++j)
                    {
                        SendOp op;
                        op.bytes = PartOf(chBytes, chunks, j);
                        if (fromParent >= 0)
                        {
                            op.deps.emplace_back(static_cast<uint32_t>(fromParent), j);
                        }
                        else
                        {
                            for (uint32_t q : fromKids) // the root: once the chunk is reduced
                            {
                                op.deps.emplace_back(q, j);
                            }
                        }
                        down.ops.push_back(std::move(op));
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
                OutQueue& out = AddOut(rs, to, ch, cfg.ringSlicesInFlight);
                for (uint64_t j = 0; j < pieces; ++j)
                {
                    SendOp o;
                    o.bytes = PartOf(stepBytes, pieces, j);
                    o.reduce = !ag && prevIn >= 0;
                    for (uint64_t q = 0; prevIn >= 0 && q < prevPieces; ++q)
                    {
                        o.deps.emplace_back(static_cast<uint32_t>(prevIn), q);
                    }
                    out.ops.push_back(std::move(o));
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
                OutQueue& out = AddOut(rs, peer, ch, cfg.p2pChunksInFlight);
                for (uint64_t j = 0; j < chunks; ++j)
                {
                    SendOp op;
                    op.bytes = PartOf(part, chunks, j);
                    out.ops.push_back(std::move(op));
                }
                AddIn(ranks[peer], r, ch, chunks);
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
    run.result.startPs = Simulator::Now().GetPicoSeconds();
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
    // Bases: indices continue where each connection's previous collective ended.
    for (uint32_t r = 0; r < Size(); ++r)
    {
        RankState& rs = run.ranks[r];
        for (auto& q : rs.out)
        {
            Conn& c = Connection(r, q.peer);
            q.base = c.Sent(q.channel);
            c.openQueues += lastUse && !q.ops.empty() ? 1 : 0;
            rs.pending += q.ops.size();
            run.result.messages += q.ops.size();
        }
        for (auto& q : rs.in)
        {
            Conn& c = Connection(q.peer, r);
            q.base = c.Sent(q.channel);
            q.got.Assign(q.expected);
            rs.pending += q.expected;
        }
        // Compact the plan: it lives as long as the collective, for every rank.
        rs.out.shrink_to_fit();
        rs.in.shrink_to_fit();
        rs.inSorted.assign(rs.inIndex.begin(), rs.inIndex.end());
        std::sort(rs.inSorted.begin(), rs.inSorted.end());
        std::unordered_map<uint64_t, uint32_t>().swap(rs.inIndex);
        // Waiters, in two passes (count, then fill) so the lists take exact room.
        std::vector<uint32_t> last(rs.in.size(), UINT32_MAX);
        rs.waitStart.assign(rs.in.size() + 1, 0);
        for (int pass = 0; pass < 2; ++pass)
        {
            std::vector<uint32_t> fill;
            if (pass == 1)
            {
                for (std::size_t i = 0; i < rs.in.size(); ++i)
                {
                    rs.waitStart[i + 1] += rs.waitStart[i];
                }
                rs.waitList.resize(rs.waitStart.back());
                fill.assign(rs.waitStart.begin(), rs.waitStart.end() - 1);
                last.assign(rs.in.size(), UINT32_MAX);
            }
            for (uint32_t qi = 0; qi < rs.out.size(); ++qi)
            {
                for (const SendOp& op : rs.out[qi].ops)
                {
                    for (const auto& dep : op.deps)
                    {
                        if (last[dep.first] == qi)
                        {
                            continue;
                        }
                        last[dep.first] = qi;
                        if (pass == 0)
                        {
                            ++rs.waitStart[dep.first + 1];
                        }
                        else
                        {
                            rs.waitList[fill[dep.first]++] = qi;
                        }
                    }
                }
            }
        }
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
    while (q.inflight < q.window && q.next < q.ops.size())
    {
        const SendOp& op = q.ops[q.next];
        bool ready = true;
        for (const auto& [in, idx] : op.deps)
        {
            ready = ready && rs.in[in].got.Test(idx);
        }
        if (!ready)
        {
            break;
        }
        ++q.next;
        ++q.inflight;
        rs.sentBytes += op.bytes;
        Conn& c = Connection(r, q.peer);
        uint64_t index = c.Sent(q.channel)++;
        if (!c.tx[0])
        {
            OpenQps(c, r, q.peer);
        }
        Ptr<QueuePair> qp;
        uint16_t stream = 0;
        if (m_multiplexed)
        {
            qp = c.tx[0];
            stream = static_cast<uint16_t>(q.channel);
        }
        else
        {
            uint32_t qpc = m_cfg.qpsPerConnection;
            qp = c.tx[q.channel * qpc + index % qpc];
        }
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
    if (q.acked == q.ops.size() && q.active)
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
                if (c.tx[0]->HasReleasableState() || c.rx[0]->HasReleasableState())
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
    const uint64_t key = InKey(src, channel);
    auto it =
        std::lower_bound(rs.inSorted.begin(), rs.inSorted.end(), std::make_pair(key, uint32_t{0}));
    NS_ABORT_MSG_IF(it == rs.inSorted.end() || it->first != key,
                    "collective: a message nobody expected arrived");
    const uint32_t qin = it->second;
    InQueue& q = rs.in[qin];
    uint64_t i = index - q.base;
    NS_ABORT_MSG_IF(i >= q.expected || q.got.Test(i), "collective: message index out of plan");
    q.got.Set(i);
    ++q.received;
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
    rs.donePs = Simulator::Now().GetPicoSeconds();
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
                    it = it->second.tx[0] ? std::next(it) : m_conns.erase(it);
                }
            });
    }
}

} // namespace metaroce
} // namespace ns3
