#include "communicator.h"

#include "collective-plan.h"
#include "model/core/fast-simulator-impl.h"
#include "model/transport/rdma-nic.h"
#include "model/transport/scale-up.h"

#include "ns3/abort.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>

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
        case CollectiveOp::Broadcast:
            return "broadcast";
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
                                 CollectiveOp::AllGather, CollectiveOp::AllToAll,
                                 CollectiveOp::Broadcast};
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
    if (op == CollectiveOp::Broadcast)
    {
        return 1; // nccl-tests: busbw = algbw
    }
    return op == CollectiveOp::AllReduce ? 2.0 * (n - 1) / n : static_cast<double>(n - 1) / n;
}

struct Communicator::Run
{
    CollectiveResult result;
    NcclProto protocol{NcclProto::Simple};
    int64_t sendNetPs{0}; //!< endpoint latency of a step sent over the network
    int64_t sendUpPs{0};  //!< ... over the scale-up domain
    int64_t recvNetPs{0}; //!< ... of a step received from the network
    std::vector<RankState> ranks;
    uint32_t ranksDone{0};
    bool lastUse{false};
    std::function<void(const CollectiveResult&)> done;
};

// ---------------------------------------------------------------- set-up

Communicator::Communicator(std::vector<uint32_t> ranks, const std::vector<Ptr<RdmaNic>>* nics,
                           QueuePairFactory qpFactory, CollectiveConfig cfg)
    : m_ranks(std::move(ranks))
    , m_layout(std::make_unique<HostLayout>())
    , m_nics(nics)
    , m_qpFactory(std::move(qpFactory))
    , m_cfg(cfg)
{
    // Transports whose QPs are not pinned to a port spray one QP over every plane and carry
    // channels as streams; pinned ones (RoCEv2) need a QP per channel.
    m_multiplexed = !m_qpFactory.Create()->IsPinned();
    for (uint32_t nic : m_ranks)
    {
        const ScaleUpFabric* su = m_cfg.scaleUp;
        m_layout->host.push_back(su != nullptr ? su->HostOf(nic) : nic);
        m_layout->local.push_back(su != nullptr ? su->LocalOf(nic) : 0);
    }
    for (uint32_t r = 0; r < Size(); ++r)
    {
        m_localRanks += IsLocal(r) ? 1 : 0;
    }
    m_userChannels = m_cfg.maxChannels;
    if (m_cfg.scaleUp != nullptr)
    {
        // What NCCL sees: this communicator's ranks per host (a group spread over hosts has
        // one); hosts holding unequal numbers count as one rank per node.
        const uint32_t hosts = static_cast<uint32_t>(m_layout->Groups().size());
        m_cfg.ranksPerHost = Size() % hosts == 0 ? Size() / hosts : 1;
    }
    if (m_cfg.maxChannels == 0)
    {
        // NCCL: channels per net peer = ceil(NIC bandwidth / 14 GB/s).
        m_cfg.maxChannels = DefaultChannels(NicBytesPerSecond());
    }
    if (Size() >= 2)
    {
        m_nccl = std::make_unique<const NcclCostModel>(MakeCostModel());
    }
}

uint32_t
Communicator::DefaultChannels(uint64_t nicBytesPerSecond)
{
    return static_cast<uint32_t>(
        std::max<uint64_t>(1, (nicBytesPerSecond + 14000000000ULL - 1) / 14000000000ULL));
}

Communicator::~Communicator()
{
    // Its QPs stay attached to their NICs (late duplicates find an open peer): they must no
    // longer report to this communicator.
    for (auto& [k, c] : m_conns)
    {
        for (uint32_t i = 0; i < c.nqp; ++i)
        {
            if (c.qps[i].rx)
            {
                c.qps[i].rx->SetReceiveHandler(nullptr);
            }
        }
    }
}

uint64_t
Communicator::NicBytesPerSecond() const
{
    RdmaNic* nic = NicOf(0);
    uint64_t bps = 0;
    for (uint32_t p = 0; p < nic->GetNPorts(); ++p)
    {
        bps += nic->GetPort(p)->GetDataRate().GetBitRate();
    }
    // A NIC serving several accelerators: each sees its share (assumption: NCCL's graph
    // search gives the accelerators of a shared NIC equal parts of it).
    uint64_t sharing = 0;
    for (const Ptr<RdmaNic>& n : *m_nics)
    {
        sharing += PeekPointer(n) == nic ? 1 : 0;
    }
    return bps / 8 / std::max<uint64_t>(1, sharing);
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
    if (Multiplexed(src, dst))
    {
        QpPair& p = c.Slot(0);
        p.txQpn = NicOf(src)->ReserveQpn();
        p.rxQpn = NicOf(dst)->ReserveQpn();
    }
    return c;
}

bool
Communicator::SameHost(uint32_t a, uint32_t b) const
{
    return m_cfg.scaleUp != nullptr && m_cfg.scaleUp->SameHost(m_ranks[a], m_ranks[b]);
}

Communicator::QpPair&
Communicator::OpenQp(Conn& c, uint32_t src, uint32_t dst, uint32_t i)
{
    RdmaNic* a = NicOf(src);
    RdmaNic* b = NicOf(dst);
    uint32_t planes = a->GetNPorts();
    // On several processes each end is made by the process that simulates its NIC.
    const bool txHere = IsLocal(src);
    const bool rxHere = IsLocal(dst);
    Ptr<QueuePair> qa;
    Ptr<QueuePair> qb;
    const ScaleUpFabric* su = m_cfg.scaleUp;
    if (SameHost(src, dst))
    {
        NS_ABORT_MSG_IF(!txHere || !rxHere,
                        "collective: a host's accelerators are simulated by different processes");
        // Same host: over the scale-up domain, never through the NICs' ports.
        auto [sa, sb] = su->hosts[su->HostOf(m_ranks[src])]->Connect(su->LocalOf(m_ranks[src]),
                                                                     su->LocalOf(m_ranks[dst]));
        qa = sa;
        qb = sb;
    }
    else
    {
        qa = txHere ? m_qpFactory.Create() : nullptr;
        qb = rxHere ? m_qpFactory.Create() : nullptr;
    }
    const bool scaleUp = (qa && DynamicCast<ScaleUpQueuePair>(qa) != nullptr) ||
                         (qb && DynamicCast<ScaleUpQueuePair>(qb) != nullptr);
    if (!m_multiplexed && !scaleUp)
    {
        // A pinned QP per channel: channels spread over the planes, as NCCL spreads
        // channels over NICs.
        // Channels spread over the planes as NCCL gives each channel its own NIC port. With
        // hosts, a ring's or tree's NIC carries every acceleratorsPerHost-th channel (those
        // whose hop leaves the host through it): the channel / perHost term keeps those on
        // distinct planes too, while all-to-all's consecutive channels stay spread.
        uint32_t channel = i / m_cfg.qpsPerConnection;
        uint32_t perHost = m_cfg.scaleUp != nullptr ? m_cfg.scaleUp->acceleratorsPerHost : 1;
        uint32_t plane = (channel + (perHost > 1 ? channel / perHost : 0) + src) % planes;
        if (qa)
        {
            qa->PinToPort(plane);
        }
        if (qb)
        {
            qb->PinToPort(plane);
        }
        if (qa)
        {
            qa->SetEntropy(
                static_cast<uint16_t>(49152 + (src * 7919 + dst * 104729 + i * 31) % 16384));
        }
        if (qb)
        {
            qb->SetEntropy(
                static_cast<uint16_t>(49152 + (dst * 7919 + src * 104729 + i * 31) % 16384));
        }
    }
    QpPair& p = c.Slot(i);
    if (p.txQpn == 0)
    {
        p.txQpn = a->ReserveQpn();
        p.rxQpn = b->ReserveQpn();
    }
    uint32_t qa_n = p.txQpn;
    uint32_t qb_n = p.rxQpn;
    if (qa)
    {
        a->AttachQueuePair(qa_n, qa);
    }
    if (qb)
    {
        b->AttachQueuePair(qb_n, qb);
    }
    if (qa)
    {
        qa->Connect(b->GetNicId(), qb_n);
    }
    if (qb)
    {
        qb->Connect(a->GetNicId(), qa_n);
    }
    p.tx = qa;
    p.rx = qb;
    m_qps += (qa ? 1 : 0) + (qb ? 1 : 0);
    if (!qb)
    {
        return p; // the receiving end is another process's
    }
    // The receive side of the connection reports (channel, message index) upwards.
    if (Multiplexed(src, dst))
    {
        // 16 bytes of capture: std::function keeps it inline (one QP per peer, millions)
        uint64_t ends = static_cast<uint64_t>(src) << 32 | dst;
        qb->SetReceiveHandler(
            [this, ends](const RdmaCompletion& rc) {
                Arrived(static_cast<uint32_t>(ends), static_cast<uint32_t>(ends >> 32), rc.stream,
                        rc.seq);
            });
        return p;
    }
    uint32_t q = m_cfg.qpsPerConnection;
    qb->SetReceiveHandler([this, src, dst, i, q](const RdmaCompletion& rc)
                          { Arrived(dst, src, i / q, static_cast<uint64_t>(rc.seq) * q + i % q); });
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

void
Communicator::RetireSender(uint32_t src, uint32_t dst)
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
        if (c.qps[i].tx)
        {
            quiet = c.qps[i].tx->ReleaseState() && quiet;
        }
    }
    for (uint32_t i = 0; quiet && i < c.nqp; ++i)
    {
        QpPair& p = c.qps[i];
        if (p.tx)
        {
            m_closedTx.Add(p.tx->GetCounters());
            NicOf(src)->DetachQueuePair(p.txQpn);
            p.tx = nullptr;
        }
    }
    m_retiredSenders.push_back({src, dst, quiet});
}

void
Communicator::RetireReceivers(const std::vector<Retired>& done)
{
    for (const Retired& d : done)
    {
        if (d.src >= Size() || d.dst >= Size() || IsLocal(d.src) || !IsLocal(d.dst))
        {
            continue;
        }
        auto it = m_conns.find(std::make_pair(d.src, d.dst));
        if (it == m_conns.end())
        {
            continue;
        }
        Conn& c = it->second;
        bool quiet = d.senderQuiet;
        for (uint32_t i = 0; i < c.nqp; ++i)
        {
            if (c.qps[i].rx)
            {
                quiet = c.qps[i].rx->ReleaseState() && quiet;
            }
        }
        for (uint32_t i = 0; quiet && i < c.nqp; ++i)
        {
            QpPair& p = c.qps[i];
            if (p.rx)
            {
                p.rx->SetReceiveHandler(nullptr);
                NicOf(d.dst)->DetachQueuePair(p.rxQpn);
                p.rx = nullptr;
            }
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

// The plans (ring, tree, PAT, direct) are built in collective-plan.cc; the algorithm,
// protocol and channels are chosen in nccl-cost-model.cc.

// ---------------------------------------------------------------- engine

void
Communicator::Start(CollectiveOp op, CollectiveAlgorithm algo, uint64_t bytes,
                    std::function<void(const CollectiveResult&)> done, bool lastUse)
{
    NS_ABORT_MSG_IF(m_run && m_run->ranksDone < m_localRanks,
                    "Communicator::Start: the previous collective has not finished");
    const CollectiveChoice choice = Choose(op, algo, bytes);
    algo = choice.algorithm;
    NS_ABORT_MSG_IF(algo == CollectiveAlgorithm::Tree && op != CollectiveOp::AllReduce,
                    "tree is an all-reduce algorithm");
    NS_ABORT_MSG_IF(algo == CollectiveAlgorithm::Direct && op != CollectiveOp::AllToAll,
                    "direct is the all-to-all algorithm");
    NS_ABORT_MSG_IF(algo == CollectiveAlgorithm::Pat && op != CollectiveOp::AllGather &&
                        op != CollectiveOp::ReduceScatter,
                    "PAT runs all-gather and reduce-scatter");
    NS_ABORT_MSG_IF(op == CollectiveOp::AllToAll && algo != CollectiveAlgorithm::Direct,
                    "all-to-all runs with the direct algorithm");
    NS_ABORT_MSG_IF(op == CollectiveOp::Broadcast && algo != CollectiveAlgorithm::Ring,
                    "broadcast runs on the ring");
    m_run = std::make_unique<Run>();
    Run& run = *m_run;
    run.done = std::move(done);
    run.lastUse = lastUse;
    run.result.op = op;
    run.result.algorithm = algo;
    run.result.protocol = choice.protocol;
    run.result.ncclModelUs = choice.modelUs;
    run.result.bytes = bytes;
    run.result.ranks = Size();
    run.result.startPs = NowPs();
    run.ranks.resize(Size());
    const uint32_t channels = choice.channels;
    run.result.channels = channels;
    run.protocol = choice.protocol;
    run.sendNetPs = m_cfg.endpoint.SendPs(true);
    run.sendUpPs = m_cfg.endpoint.SendPs(false);
    run.recvNetPs = m_cfg.endpoint.ReceivePs(choice.protocol);
    // LL and LL128 move a step of their own buffer at a time, NCCL_STEPS in flight.
    CollectiveConfig pc = m_cfg;
    if (uint64_t step = ProtocolStepDataBytes(choice.protocol))
    {
        pc.ringSliceBytes = step;
        pc.ringSlicesInFlight = kNcclSteps;
        pc.treeChunkBytes = step;
        pc.treeChunksInFlight = kNcclSteps;
    }
    if (Size() > 1 && bytes > 0)
    {
        if (op == CollectiveOp::Broadcast)
        {
            PlanBroadcast(run.ranks, bytes, channels, pc, *m_layout);
        }
        else if (algo == CollectiveAlgorithm::Ring)
        {
            PlanRing(run.ranks, op, bytes, channels, pc, *m_layout);
        }
        else if (algo == CollectiveAlgorithm::Tree)
        {
            PlanTree(run.ranks, bytes, channels, pc, *m_layout);
        }
        else if (algo == CollectiveAlgorithm::Pat)
        {
            PlanPat(run.ranks, op, bytes, channels, pc);
        }
        else
        {
            PlanDirect(run.ranks, bytes, m_cfg.maxChannels, pc, *m_layout);
        }
    }
    // Bases: indices continue where each connection's previous collective ended. The
    // connections are made (and their QPNs reserved) in plan order. On several processes a
    // connection with neither end here gets no record: its QPNs are only counted, at its
    // first visit in that order (its sender's out queues or its receiver's in queues,
    // whichever rank comes first), as Connection would reserve them.
    NS_ABORT_MSG_IF(m_cfg.isLocal && m_started,
                    "Communicator: on several processes a communicator runs one collective");
    m_started = true;
    std::vector<bool> seen(m_cfg.isLocal ? Size() : 0);
    std::vector<uint32_t> touched;
    auto firstVisit = [&](uint32_t peer)
    {
        if (seen[peer])
        {
            return false;
        }
        seen[peer] = true;
        touched.push_back(peer);
        return true;
    };
    auto forget = [&]()
    {
        for (uint32_t p : touched)
        {
            seen[p] = false;
        }
        touched.clear();
    };
    for (uint32_t r = 0; r < Size(); ++r)
    {
        RankState& rs = run.ranks[r];
        const bool here = IsLocal(r);
        for (const auto& q : rs.out)
        {
            if (here || IsLocal(q.peer))
            {
                Conn& c = Connection(r, q.peer);
                c.openQueues += lastUse && q.nOps > 0 ? 1 : 0;
            }
            else if (Multiplexed(r, q.peer) && r < q.peer && firstVisit(q.peer))
            {
                NicOf(r)->ReserveQpn();
                NicOf(q.peer)->ReserveQpn();
            }
            rs.pending += q.nOps;
            run.result.messages += q.nOps;
        }
        forget();
        for (auto& q : rs.in)
        {
            if (here || IsLocal(q.Peer()))
            {
                q.SetBase(Connection(q.Peer(), r).Sent(q.Channel()));
            }
            else if (Multiplexed(q.Peer(), r) && r < q.Peer() && firstVisit(q.Peer()))
            {
                NicOf(q.Peer())->ReserveQpn();
                NicOf(r)->ReserveQpn();
            }
            rs.pending += q.Expected();
        }
        forget();
        if (here)
        {
            FinishPlan(rs);
        }
    }
    if (m_cfg.isLocal)
    {
        PrepareRemoteConnections(run);
    }
    for (uint32_t r = 0; r < Size(); ++r)
    {
        RankState& rs = run.ranks[r];
        if (!IsLocal(r))
        {
            rs = RankState(); // another process's rank: its plan is kept there
            rs.done = true;
            continue;
        }
        ActivateQueues(rs);
    }
    for (uint32_t r = 0; r < Size(); ++r)
    {
        if (!IsLocal(r))
        {
            continue;
        }
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
Communicator::PrepareRemoteConnections(Run& run)
{
    const uint32_t perConn = m_cfg.qpsPerConnection;
    // The QPs a (peer, channel) queue uses: one multiplexed QP, or the pinned ones its
    // messages are dealt to round-robin from the connection's count `base` on.
    auto indices = [&](uint32_t src, uint32_t dst, uint32_t channel, uint64_t base, uint64_t n)
    {
        std::vector<uint32_t> out;
        if (Multiplexed(src, dst))
        {
            out.push_back(0);
            return out;
        }
        for (uint64_t j = 0; j < std::min<uint64_t>(perConn, n); ++j)
        {
            out.push_back(channel * perConn + static_cast<uint32_t>((base + j) % perConn));
        }
        return out;
    };
    // Every process reserves the same QPNs in the same order, whichever ends it simulates.
    for (uint32_t r = 0; r < Size(); ++r)
    {
        for (const auto& q : run.ranks[r].out)
        {
            if (q.nOps == 0)
            {
                continue;
            }
            if (!IsLocal(r) && !IsLocal(q.peer))
            {
                // no record here (Start): counted only, from the connection's first message
                const bool mux = Multiplexed(r, q.peer);
                for (std::size_t n = indices(r, q.peer, q.channel, 0, q.nOps).size(); !mux && n > 0;
                     --n)
                {
                    NicOf(r)->ReserveQpn();
                    NicOf(q.peer)->ReserveQpn();
                }
                continue;
            }
            Conn& c = Connection(r, q.peer);
            for (uint32_t i : indices(r, q.peer, q.channel, c.Sent(q.channel), q.nOps))
            {
                QpPair& p = c.Slot(i);
                if (p.txQpn == 0)
                {
                    p.txQpn = NicOf(r)->ReserveQpn();
                    p.rxQpn = NicOf(q.peer)->ReserveQpn();
                }
            }
        }
    }
    // A receiver here whose sender is elsewhere: its QPs exist before the first frame, and
    // the connection counts the messages the sender's process issues.
    for (uint32_t r = 0; r < Size(); ++r)
    {
        if (!IsLocal(r))
        {
            continue;
        }
        for (auto& q : run.ranks[r].in)
        {
            if (IsLocal(q.Peer()) || q.Expected() == 0)
            {
                continue;
            }
            Conn& c = Connection(q.Peer(), r);
            for (uint32_t i : indices(q.Peer(), r, q.Channel(), q.Base(), q.Expected()))
            {
                QpPair* p = c.Find(i);
                if (p == nullptr || !p->rx)
                {
                    OpenQp(c, q.Peer(), r, i);
                }
            }
            c.Advance(q.Channel(), q.Expected());
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
        const bool mux = Multiplexed(r, q.peer);
        const uint32_t qpc = m_cfg.qpsPerConnection;
        uint32_t i = mux ? 0 : q.channel * qpc + static_cast<uint32_t>(index % qpc);
        QpPair* pair = c.Find(i);
        Ptr<QueuePair> qp = pair != nullptr && pair->tx ? pair->tx : OpenQp(c, r, q.peer, i).tx;
        uint16_t stream = mux ? static_cast<uint16_t>(q.channel) : 0;
        // The protocol's lines go on the wire; the kernel's and proxy's work comes first.
        uint64_t bytes = ProtocolWireBytes(run.protocol, op.bytes);
        int64_t delayPs =
            m_layout->host[r] == m_layout->host[q.peer] ? run.sendUpPs : run.sendNetPs;
        if (op.reduce && m_cfg.reducePsPerByte > 0)
        {
            delayPs += static_cast<int64_t>(op.bytes * m_cfg.reducePsPerByte);
        }
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
        if (delayPs > 0)
        {
            Simulator::Schedule(PicoSeconds(delayPs), send);
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
        rs.active -= q.unlimited ? 0 : 1;
        ActivateQueues(rs);
        if (run.lastUse)
        {
            Conn& c = Connection(r, q.peer);
            if (--c.openQueues == 0)
            {
                // Everything it carries was acknowledged, so also received. From a fresh
                // event: this one runs inside the QP's own ACK processing.
                const bool split = !IsLocal(q.peer); // the receiver is another process's
                if (split || c.Releasable())
                {
                    uint32_t peer = q.peer;
                    Simulator::ScheduleNow(
                        [this, alive = std::weak_ptr<char>(m_alive), r, peer, split]()
                        {
                            if (!alive.expired())
                            {
                                split ? RetireSender(r, peer) : Retire(r, peer);
                            }
                        });
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
Communicator::Arrived(uint32_t r, uint32_t src, uint32_t channel, uint64_t index)
{
    if (!m_run)
    {
        return;
    }
    if (m_run->recvNetPs > 0 && m_layout->host[r] != m_layout->host[src])
    {
        Simulator::Schedule(PicoSeconds(m_run->recvNetPs),
                            [this, alive = std::weak_ptr<char>(m_alive), r, src, channel, index]()
                            {
                                if (!alive.expired() && m_run)
                                {
                                    OnReceived(*m_run, r, src, channel, index);
                                }
                            });
        return;
    }
    OnReceived(*m_run, r, src, channel, index);
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
    if (++run.ranksDone == m_localRanks)
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
            [this, alive = std::weak_ptr<char>(m_alive), ended = &run]()
            {
                if (alive.expired() || m_run.get() != ended)
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
