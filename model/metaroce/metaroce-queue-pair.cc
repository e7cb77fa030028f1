#include "metaroce-queue-pair.h"

#include "metaroce-aimd.h"
#include "metaroce-rate-hint.h"
#include "model/core/fast-simulator-impl.h"
#include "model/transport/rdma-nic.h"

#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/enum.h"
#include "ns3/log.h"
#include "ns3/object-factory.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("MetaRoceQueuePair");
NS_OBJECT_ENSURE_REGISTERED(MetaRoceQueuePair);

TypeId
MetaRoceQueuePair::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::MetaRoceQueuePair")
            .SetParent<QueuePair>()
            .SetGroupName("MetaRoce")
            .AddConstructor<MetaRoceQueuePair>()
            .AddAttribute("MinPaths",
                          "Paths a connection opens at start and keeps at least. Assumption: "
                          "12, the scale-out path count on the OCP 2026 slide.",
                          UintegerValue(12), MakeUintegerAccessor(&MetaRoceQueuePair::m_minPaths),
                          MakeUintegerChecker<uint32_t>(1, 1024))
            .AddAttribute("MaxPaths",
                          "Most paths a connection may open (dynamic path count). Assumption: "
                          "64.",
                          UintegerValue(64), MakeUintegerAccessor(&MetaRoceQueuePair::m_maxPaths),
                          MakeUintegerChecker<uint32_t>(1, 4096))
            .AddAttribute("InitialPathWindow",
                          "Initial PWND of a path, in packets. Assumption: 16.", UintegerValue(16),
                          MakeUintegerAccessor(&MetaRoceQueuePair::m_initialWindow),
                          MakeUintegerChecker<uint32_t>(1, 256))
            .AddAttribute("PathWindowCap",
                          "Largest PWND in packets. Assumption: 128, half the 256-PSN SACK "
                          "bitmap, so a lost packet and everything sent in the RTT it takes to "
                          "detect it stay describable.",
                          UintegerValue(128),
                          MakeUintegerAccessor(&MetaRoceQueuePair::m_pathWindowCap),
                          MakeUintegerChecker<uint32_t>(1, 256))
            .AddAttribute("QpWindowCap",
                          "Cap on the QP's bytes in flight (QWND), in packets; 0: none.",
                          UintegerValue(0), MakeUintegerAccessor(&MetaRoceQueuePair::m_qpWindowCap),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("HintWindowGain",
                          "While the receiver's rate hint holds the QP below line rate, its "
                          "bytes in flight are capped at HintWindowGain x hint x base RTT, so "
                          "the senders of an incast together keep a bounded multiple of the "
                          "bandwidth-delay product in flight. Assumption: 2 (the hint's pacing "
                          "keeps the queue short; the window only bounds bursts).",
                          DoubleValue(2.0),
                          MakeDoubleAccessor(&MetaRoceQueuePair::m_hintWindowGain),
                          MakeDoubleChecker<double>(0.1, 100))
            .AddAttribute("PacingBurst",
                          "Packets a paced QP may send back to back after a stall (token-bucket "
                          "depth of its rate-hint pacing). Assumption: 2.",
                          UintegerValue(2), MakeUintegerAccessor(&MetaRoceQueuePair::m_pacingBurst),
                          MakeUintegerChecker<uint32_t>(0, 1024))
            .AddAttribute("AckInterval",
                          "Data packets per ACK on a path (ACK coalescing). A gap is "
                          "acknowledged at once. Assumption: 1.",
                          UintegerValue(1), MakeUintegerAccessor(&MetaRoceQueuePair::m_ackInterval),
                          MakeUintegerChecker<uint32_t>(1, 64))
            .AddAttribute("AckDelay",
                          "With coalescing, the longest an ACK waits for more packets. "
                          "Assumption: 1 us.",
                          TimeValue(MicroSeconds(1)),
                          MakeTimeAccessor(&MetaRoceQueuePair::m_ackDelay),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("RtoMin",
                          "Floor of a path's retransmission timeout (srtt + 4 rttvar). "
                          "Assumption: 100 us, the in-datacentre floor of UET's model.",
                          TimeValue(MicroSeconds(100)),
                          MakeTimeAccessor(&MetaRoceQueuePair::m_rtoMin),
                          MakeTimeChecker(MicroSeconds(1)))
            .AddAttribute("InitialRto",
                          "Timeout of a path before any RTT sample on the connection. "
                          "Assumption: 5 ms (above a 1.5 ms scale-across RTT).",
                          TimeValue(MilliSeconds(5)),
                          MakeTimeAccessor(&MetaRoceQueuePair::m_initialRto),
                          MakeTimeChecker(MicroSeconds(1)))
            .AddAttribute(
                "PathFailTimeouts", "Consecutive timeouts that retire a path. Assumption: 3.",
                UintegerValue(3), MakeUintegerAccessor(&MetaRoceQueuePair::m_pathFailTimeouts),
                MakeUintegerChecker<uint32_t>(1, 100))
            .AddAttribute("PlaneFailPaths",
                          "Paths of one plane retired in a row (no ACK from the plane between) "
                          "that make the plane avoided and probed. Assumption: 2.",
                          UintegerValue(2),
                          MakeUintegerAccessor(&MetaRoceQueuePair::m_planeFailPaths),
                          MakeUintegerChecker<uint32_t>(1, 100))
            .AddAttribute(
                "ProbeInterval", "Time between probes of an avoided plane. Assumption: 500 us.",
                TimeValue(MicroSeconds(500)), MakeTimeAccessor(&MetaRoceQueuePair::m_probeInterval),
                MakeTimeChecker(MicroSeconds(1)))
            .AddAttribute("IdleTimeout",
                          "A path that sent nothing this long closes, down to MinPaths. "
                          "Assumption: 1 ms.",
                          TimeValue(MilliSeconds(1)),
                          MakeTimeAccessor(&MetaRoceQueuePair::m_idleTimeout),
                          MakeTimeChecker(MicroSeconds(1)))
            .AddAttribute("GrowPaths",
                          "Open more paths while every window is at PathWindowCap, the sender "
                          "is window-limited and no ECN was seen for an RTT.",
                          BooleanValue(true), MakeBooleanAccessor(&MetaRoceQueuePair::m_growPaths),
                          MakeBooleanChecker())
            .AddAttribute("OpenPathsOnFirstUse",
                          "Open a plane's share of MinPaths when the plane first has data to "
                          "send, instead of all MinPaths at the connection's first message "
                          "(an unused path costs 8 bytes either way: its state is made at its "
                          "first send). Paths get other entropies and the QP window counts "
                          "only the opened paths, so results differ from the default. "
                          "Assumption: false.",
                          BooleanValue(false),
                          MakeBooleanAccessor(&MetaRoceQueuePair::m_openOnFirstUse),
                          MakeBooleanChecker())
            .AddAttribute("SprayPolicy", "How a chunk picks among a plane's eligible paths.",
                          EnumValue(ROUND_ROBIN), MakeEnumAccessor(&MetaRoceQueuePair::m_policy),
                          MakeEnumChecker(ROUND_ROBIN, "RoundRobin", LEAST_LOADED, "LeastLoaded",
                                          LOWEST_RTT, "LowestRtt"))
            .AddAttribute("CongestionControl", "Window controller (an RdmaCongestionOps TypeId).",
                          TypeIdValue(MetaRoceAimd::GetTypeId()),
                          MakeTypeIdAccessor(&MetaRoceQueuePair::m_ccType), MakeTypeIdChecker())
            .AddTraceSource("PlaneState",
                            "A plane was avoided (false) or taken back into use (true).",
                            MakeTraceSourceAccessor(&MetaRoceQueuePair::m_planeTrace),
                            "ns3::metaroce::MetaRoceQueuePair::PlaneStateTracedCallback");
    return tid;
}

MetaRoceQueuePair::MetaRoceQueuePair()
    : m_ackDelay(MicroSeconds(1))
    , m_rtoMin(MicroSeconds(100))
    , m_initialRto(MilliSeconds(5))
    , m_probeInterval(MicroSeconds(500))
    , m_idleTimeout(MilliSeconds(1))
{
}

MetaRoceQueuePair::~MetaRoceQueuePair() = default;

Ptr<QueuePair>
MetaRoceQueuePair::Clone() const
{
    NS_ASSERT_MSG(GetNic() == nullptr, "only a QP never attached is a prototype");
    // A never-attached QP holds only its configuration: a member-wise copy is a fresh QP.
    return CopyObject<MetaRoceQueuePair>(this);
}

void
MetaRoceQueuePair::DoDispose()
{
    m_ackFlush.Cancel();
    m_hint = nullptr;
    if (m_tx != nullptr)
    {
        m_tx->timer.Cancel();
        m_tx->paceEvent.Cancel();
        if (m_tx->ccOps)
        {
            m_tx->ccOps->Dispose();
        }
        m_tx.reset();
    }
    QueuePair::DoDispose();
}

const MetaRoceQueuePair::PathCounters&
MetaRoceQueuePair::GetPathCounters() const
{
    static const PathCounters none;
    return m_tx ? m_tx->pc : none;
}

// ---------------------------------------------------------------- set-up and paths

void
MetaRoceQueuePair::EnsureInit()
{
    if (m_tx != nullptr)
    {
        return;
    }
    m_tx.reset(new Sender());
    m_tx->rng.Seed(Mix64(static_cast<uint64_t>(m_nic->GetNicId()) << 24 | m_qpn));
    uint32_t planes = m_nic->GetNPorts();
    m_tx->planes.resize(planes);
    double line = 0;
    for (uint32_t p = 0; p < planes; ++p)
    {
        line += static_cast<double>(m_nic->GetPort(p)->GetDataRate().GetBitRate());
        m_tx->planes[p].linkUp = m_nic->IsPortUp(p);
    }
    m_tx->cc.lineRateBps = line;
    m_tx->cc.rateBps = line;
    m_tx->cc.mtu = m_mtu;
    m_tx->cc.onRateChange = [this]() { WakeAll(); };
    m_tx->ccOps = NewCongestionOps(m_ccType);
    m_tx->ccOps->Init(m_tx->cc);
    m_hint = MetaRoceRateHint::Of(m_nic);
    // Exact-size path table: a QP that never grows keeps no spare capacity (millions of
    // QPs). The paths opened here share one initial state (virginBody, virginCc) until
    // their first use.
    FreshPath(m_tx->virginBody, m_tx->virginCc, PATH_ACTIVE);
    if (!m_openOnFirstUse)
    {
        m_tx->heads.reserve(std::min(m_minPaths, m_maxPaths));
    }
    for (uint32_t i = 0; i < m_minPaths && i < m_maxPaths; ++i)
    {
        if (m_openOnFirstUse)
        {
            ++m_tx->planes[LeastPopulatedPlane()].owed; // opened by the plane's first PullFrame
        }
        else
        {
            OpenPath(LeastPopulatedPlane(), PATH_ACTIVE, true, true);
        }
    }
}

void
MetaRoceQueuePair::OpenOwed(uint32_t plane, bool wake)
{
    Plane& pl = m_tx->planes[plane];
    m_tx->heads.reserve(m_tx->heads.size() + pl.owed); // exact-size tables
    m_tx->bodies.reserve(m_tx->bodies.size() + pl.owed);
    m_tx->cc.paths.reserve(m_tx->cc.paths.size() + pl.owed);
    while (pl.owed > 0)
    {
        --pl.owed; // first: a wake may pull this plane at once
        OpenPath(plane, PATH_ACTIVE, wake);
    }
}

void
MetaRoceQueuePair::OpenOwedPaths()
{
    for (uint32_t p = 0; p < m_tx->planes.size(); ++p)
    {
        OpenOwed(p, true);
    }
}

bool
MetaRoceQueuePair::PlaneUsable(uint32_t plane) const
{
    return m_tx->planes[plane].linkUp && !m_tx->planes[plane].avoided;
}

uint32_t
MetaRoceQueuePair::LeastPopulatedPlane() const
{
    uint32_t best = 0;
    uint32_t bestCount = std::numeric_limits<uint32_t>::max();
    for (uint32_t p = 0; p < m_tx->planes.size(); ++p)
    {
        if (!PlaneUsable(p))
        {
            continue;
        }
        uint32_t n = m_tx->planes[p].owed;
        for (uint16_t i : m_tx->planes[p].paths)
        {
            n += m_tx->heads[i].state == PATH_ACTIVE ? 1 : 0;
        }
        if (n < bestCount)
        {
            best = p;
            bestCount = n;
        }
    }
    return best;
}

uint32_t
MetaRoceQueuePair::OpenPath(uint32_t plane, PathState state, bool wake, bool virgin)
{
    uint32_t slot = static_cast<uint32_t>(m_tx->heads.size());
    for (uint32_t i = 0; i < m_tx->heads.size(); ++i)
    {
        if (m_tx->heads[i].state == PATH_RETIRED)
        {
            slot = i;
            break;
        }
    }
    if (slot == m_tx->heads.size())
    {
        m_tx->heads.emplace_back();
    }
    PathHead& hd = m_tx->heads[slot];
    hd.epoch = static_cast<uint8_t>(hd.epoch + 1);
    hd.plane = static_cast<uint8_t>(plane);
    hd.state = state;
    // A fresh UDP source port: a new ECMP route, with its own PSN space from 0.
    hd.entropy = static_cast<uint16_t>(49152 + m_tx->rng.Next() % 16384);
    if (virgin)
    {
        NS_ASSERT(hd.body == 0 && state == PATH_ACTIVE);
    }
    else
    {
        uint32_t d = Dense(slot);
        FreshPath(m_tx->bodies[d], m_tx->cc.paths[d], state);
    }
    m_tx->planes[plane].paths.push_back(static_cast<uint16_t>(slot));
    ++m_tx->pc.pathsOpened;
    if (wake)
    {
        Wake(plane);
    }
    return slot;
}

void
MetaRoceQueuePair::FreshPath(SPath& p, CcPath& c, PathState state) const
{
    p.recs.Release();
    p = SPath();
    int64_t now = NowPs();
    p.lastSendPs = now;
    p.lastProgressPs = now;
    p.nextProbePs = now;
    c = CcPath();
    c.maxCwndBytes = static_cast<double>(m_pathWindowCap) * m_mtu;
    c.cwndBytes = std::min(
        c.maxCwndBytes, static_cast<double>(state == PATH_PROBING ? 1 : m_initialWindow) * m_mtu);
}

uint32_t
MetaRoceQueuePair::Dense(uint32_t i)
{
    PathHead& hd = m_tx->heads[i];
    if (hd.body == 0)
    {
        // First write: the path leaves the shared initial state. Exact growth (most
        // connections touch one or two paths).
        m_tx->bodies.reserve(m_tx->bodies.size() + 1);
        m_tx->cc.paths.reserve(m_tx->cc.paths.size() + 1);
        m_tx->bodies.push_back(m_tx->virginBody);
        m_tx->cc.paths.push_back(m_tx->virginCc);
        hd.body = static_cast<uint16_t>(m_tx->bodies.size());
    }
    return hd.body - 1u;
}

void
MetaRoceQueuePair::MoveInflightToRetx(uint32_t i)
{
    if (m_tx->heads[i].body == 0)
    {
        return; // never sent anything
    }
    SPath& p = m_tx->bodies[m_tx->heads[i].body - 1];
    for (uint32_t k = 0; k < p.recs.Size(); ++k)
    {
        TxRecord& r = p.recs.At(k);
        if (r.state == REC_INFLIGHT)
        {
            r.state = REC_LOST;
            if (r.msg != kProbe)
            {
                m_tx->retx.PushBack({r.msg, r.pkt});
            }
        }
    }
    m_tx->cc.paths[m_tx->heads[i].body - 1].inflightBytes = 0;
}

void
MetaRoceQueuePair::AdvanceBase(uint32_t i)
{
    if (m_tx->heads[i].body == 0)
    {
        return;
    }
    SPath& p = m_tx->bodies[m_tx->heads[i].body - 1];
    while (!p.recs.Empty() && p.recs.Front().state != REC_INFLIGHT)
    {
        p.recs.PopFront();
        ++p.cumAck;
    }
}

void
MetaRoceQueuePair::RetirePath(uint32_t i)
{
    PathHead& hd = m_tx->heads[i];
    if (hd.state == PATH_RETIRED)
    {
        return;
    }
    MoveInflightToRetx(i);
    if (hd.body != 0)
    {
        m_tx->bodies[hd.body - 1].recs.Release();
    }
    hd.state = PATH_RETIRED;
    auto& list = m_tx->planes[hd.plane].paths;
    list.erase(std::remove(list.begin(), list.end(), static_cast<uint16_t>(i)), list.end());
    ++m_tx->pc.pathsRetired;
}

uint32_t
MetaRoceQueuePair::GetActivePaths() const
{
    uint32_t n = 0;
    if (m_tx == nullptr)
    {
        return 0;
    }
    for (const auto& p : m_tx->heads)
    {
        n += p.state == PATH_ACTIVE ? 1 : 0;
    }
    return n;
}

uint32_t
MetaRoceQueuePair::GetActivePathsOnPlane(uint32_t plane) const
{
    uint32_t n = 0;
    if (m_tx != nullptr && plane < m_tx->planes.size())
    {
        for (uint16_t i : m_tx->planes[plane].paths)
        {
            n += m_tx->heads[i].state == PATH_ACTIVE ? 1 : 0;
        }
    }
    return n;
}

double
MetaRoceQueuePair::GetQpWindowBytes() const
{
    double w = 0;
    for (uint32_t i = 0; m_tx != nullptr && i < m_tx->heads.size(); ++i)
    {
        if (m_tx->heads[i].state == PATH_ACTIVE)
        {
            w += Cc(i).cwndBytes;
        }
    }
    return w;
}

bool
MetaRoceQueuePair::IsPlaneAvoided(uint32_t plane) const
{
    return m_tx != nullptr && plane < m_tx->planes.size() &&
           (m_tx->planes[plane].avoided || !m_tx->planes[plane].linkUp);
}

MetaRoceQueuePair::PathView
MetaRoceQueuePair::GetPath(uint32_t i) const
{
    const PathHead& p = m_tx->heads[i];
    const CcPath& c = Cc(i);
    return {p.plane,     p.entropy,       p.epoch, static_cast<PathState>(p.state),
            c.cwndBytes, c.inflightBytes, c.srttPs};
}

// ---------------------------------------------------------------- sending

void
MetaRoceQueuePair::OnPosted()
{
    EnsureInit();
    WakeAll();
}

void
MetaRoceQueuePair::Wake(uint32_t plane)
{
    if (m_nic != nullptr && plane < m_tx->planes.size() && m_tx->planes[plane].linkUp)
    {
        m_nic->NotifyReady(this, plane);
    }
}

void
MetaRoceQueuePair::WakeAll()
{
    for (uint32_t p = 0; p < m_tx->planes.size(); ++p)
    {
        Wake(p);
    }
}

void
MetaRoceQueuePair::PacingWake()
{
    WakeAll();
}

bool
MetaRoceQueuePair::Eligible(uint32_t i) const
{
    const PathHead& hd = m_tx->heads[i];
    if (hd.state != PATH_ACTIVE)
    {
        return false;
    }
    if (hd.body == 0)
    {
        return true; // nothing sent yet on this path
    }
    const SPath& p = m_tx->bodies[hd.body - 1];
    const CcPath& c = m_tx->cc.paths[hd.body - 1];
    if (p.psnNext - p.cumAck >= kSackBits)
    {
        return false; // the receiver's bitmap could not describe more
    }
    return c.inflightBytes == 0 || c.inflightBytes + m_mtu <= c.cwndBytes;
}

int32_t
MetaRoceQueuePair::SelectPath(uint32_t plane, int64_t now) const
{
    const Plane& pl = m_tx->planes[plane];
    const std::size_t n = pl.paths.size();
    int32_t best = -1;
    double bestScore = 0;
    for (std::size_t k = 0; k < n; ++k)
    {
        // Round robin starts after the last path used; the others scan all.
        uint16_t i = pl.paths[(pl.rr + k) % n];
        if (!Eligible(i))
        {
            continue;
        }
        if (m_policy == ROUND_ROBIN)
        {
            return i;
        }
        const CcPath& c = Cc(i);
        double score = m_policy == LEAST_LOADED ? static_cast<double>(c.inflightBytes) / c.cwndBytes
                                                : static_cast<double>(c.srttPs);
        if (best < 0 || score < bestScore)
        {
            best = i;
            bestScore = score;
        }
    }
    return best;
}

bool
MetaRoceQueuePair::NextChunk(uint64_t& msg, uint32_t& pkt, bool& retx)
{
    while (!m_tx->retx.Empty())
    {
        auto [m, k] = m_tx->retx.Front();
        m_tx->retx.PopFront();
        if (m < m_sendQueueBase || Msg(m).ackedPkts.test(k))
        {
            continue; // acknowledged meanwhile
        }
        msg = m;
        pkt = k;
        retx = true;
        return true;
    }
    while (m_tx->txMsg - m_sendQueueBase < m_sendQueue.Size())
    {
        SendMessage& m = Msg(m_tx->txMsg);
        if (m.nextPkt < m.packets)
        {
            if (m.ackedPkts.empty())
            {
                m.ackedPkts.resize(m.packets);
            }
            msg = m_tx->txMsg;
            pkt = m.nextPkt++;
            retx = false;
            return true;
        }
        ++m_tx->txMsg;
    }
    return false;
}

bool
MetaRoceQueuePair::QpWindowOpen() const
{
    bool hinted = m_tx->cc.rateBps < m_tx->cc.lineRateBps && m_tx->qpMinRttPs > 0;
    if (m_qpWindowCap == 0 && !hinted)
    {
        return true;
    }
    uint64_t inflight = 0;
    for (const auto& c : m_tx->cc.paths)
    {
        inflight += c.inflightBytes;
    }
    if (inflight == 0)
    {
        return true;
    }
    double cap = m_qpWindowCap != 0 ? static_cast<double>(m_qpWindowCap) * m_mtu : 1e300;
    if (hinted)
    {
        cap = std::min(cap, m_hintWindowGain * m_tx->cc.rateBps / 8e12 *
                                static_cast<double>(m_tx->qpMinRttPs));
    }
    if (!hinted)
    {
        return static_cast<double>(inflight + m_mtu) <= cap;
    }
    return static_cast<double>(inflight) < cap; // a partial packet of the hinted cap rounds up
}

bool
MetaRoceQueuePair::HasData()
{
    while (!m_tx->retx.Empty())
    {
        auto [m, k] = m_tx->retx.Front();
        if (m >= m_sendQueueBase && !Msg(m).ackedPkts.test(k))
        {
            return true;
        }
        m_tx->retx.PopFront();
    }
    if (m_tx->txMsg < m_sendQueueBase)
    {
        m_tx->txMsg = m_sendQueueBase;
    }
    while (m_tx->txMsg - m_sendQueueBase < m_sendQueue.Size())
    {
        const SendMessage& m = Msg(m_tx->txMsg);
        if (m.nextPkt < m.packets)
        {
            return true;
        }
        ++m_tx->txMsg;
    }
    return false;
}

PullResult
MetaRoceQueuePair::PullFrame(uint32_t port, FabricFrame& out)
{
    if (m_tx == nullptr && m_sendQueue.Empty())
    {
        return PullResult::Nothing; // released after its last use
    }
    EnsureInit();
    Plane& pl = m_tx->planes[port];
    if (!pl.linkUp)
    {
        return PullResult::Nothing;
    }
    int64_t now = NowPs();
    RdmaHeaderData h;
    h.opcode = RdmaOpcode::PathData;
    h.destQpn = m_remoteQpn;
    h.timestampPs = now;
    uint32_t payload = 0;
    uint32_t slot = 0;
    TxRecord rec{};
    if (pl.avoided)
    {
        // Probe the plane with an empty packet, one at a time, while there is work.
        int32_t probe = -1;
        for (uint16_t i : pl.paths)
        {
            if (m_tx->heads[i].state != PATH_PROBING)
            {
                continue;
            }
            AdvanceBase(i); // a probe that timed out is resolved: another may go
            if (Body(i).recs.Empty() && now >= Body(i).nextProbePs)
            {
                probe = i;
            }
        }
        if (probe < 0 || !HasData())
        {
            return PullResult::Nothing;
        }
        slot = static_cast<uint32_t>(probe);
        m_tx->bodies[Dense(slot)].nextProbePs = now + m_probeInterval.GetPicoSeconds();
        rec = {kProbe, now, 0, 0, REC_INFLIGHT};
        h.msgBytes = 0;
        h.flags |= RdmaHeader::kFlagProbe;
        ++m_tx->pc.probesSent;
    }
    else
    {
        if (!HasData())
        {
            return PullResult::Nothing;
        }
        if (m_tx->cc.rateBps < m_tx->cc.lineRateBps && now < m_tx->paceVirtPs)
        {
            if (!IsPending(m_tx->paceEvent))
            {
                m_tx->paceEvent = Simulator::Schedule(PicoSeconds(m_tx->paceVirtPs - now),
                                                      &MetaRoceQueuePair::PacingWake, this);
            }
            return PullResult::Nothing;
        }
        if (!QpWindowOpen())
        {
            return PullResult::Nothing; // an ACK will reopen it
        }
        OpenOwed(port, false); // this plane's first data opens its share of the paths
        int32_t s = SelectPath(port, now);
        if (s < 0)
        {
            m_tx->windowLimited = true;
            return PullResult::Nothing;
        }
        slot = static_cast<uint32_t>(s);
        uint64_t msg = 0;
        uint32_t pkt = 0;
        bool retx = false;
        NextChunk(msg, pkt, retx);
        const SendMessage& m = Msg(msg);
        uint64_t offset = static_cast<uint64_t>(pkt) * m_mtu;
        payload = static_cast<uint32_t>(std::min<uint64_t>(m_mtu, m.bytes - offset));
        h.stream = m.stream;
        h.msgId = m.seq;
        h.offset = offset;
        h.msgBytes = static_cast<uint32_t>(m.bytes);
        if (retx)
        {
            h.flags |= RdmaHeader::kFlagRetransmit;
            ++m_counters.retransmittedPackets;
            m_retransmitTrace(Body(slot).psnNext, slot);
        }
        rec = {msg, now, pkt, payload, REC_INFLIGHT};
        pl.rr = static_cast<uint32_t>(
            (std::find(pl.paths.begin(), pl.paths.end(), static_cast<uint16_t>(slot)) -
             pl.paths.begin()) +
            1);
        ++m_counters.dataPacketsSent;
    }
    uint32_t d = Dense(slot);
    SPath& p = m_tx->bodies[d];
    CcPath& c = m_tx->cc.paths[d];
    AdvanceBase(slot);
    h.path = static_cast<uint16_t>(slot);
    h.epoch = m_tx->heads[slot].epoch;
    h.psn = p.psnNext++;
    // The receiver may forget PSNs below this: their data was acknowledged or resent.
    h.ackBase = p.cumAck;
    if (c.inflightBytes == 0 && p.recs.Empty())
    {
        p.lastProgressPs = now; // the timer counts from the first packet outstanding
    }
    p.recs.PushBack(std::move(rec));
    c.inflightBytes += payload;
    p.lastSendPs = now;
    out = MakeFrame(h, payload, m_tx->heads[slot].entropy, true);
    if (m_tx->cc.rateBps < m_tx->cc.lineRateBps)
    {
        // Token bucket: a sender that paused (window closed) may catch up by PacingBurst
        // packets, so a fair share is not lost to momentary stalls.
        int64_t gap = static_cast<int64_t>(out.wireBytes * 8e12 / m_tx->cc.rateBps);
        m_tx->paceVirtPs =
            std::max(m_tx->paceVirtPs, now - static_cast<int64_t>(m_pacingBurst) * gap) + gap;
    }
    ArmTimer(now + RtoPs(slot));
    if (pl.avoided)
    {
        return PullResult::Sent;
    }
    bool more = HasData() && SelectPath(port, now) >= 0 && QpWindowOpen() &&
                (m_tx->cc.rateBps >= m_tx->cc.lineRateBps || m_tx->paceVirtPs <= now);
    return more ? PullResult::More : PullResult::Sent;
}

// ---------------------------------------------------------------- timers and health

int64_t
MetaRoceQueuePair::RtoPs(uint32_t i) const
{
    const CcPath& c = Cc(i);
    if (m_tx->heads[i].state == PATH_PROBING)
    {
        return m_probeInterval.GetPicoSeconds();
    }
    int64_t srtt = c.srttPs > 0 ? c.srttPs : m_tx->qpSrttPs;
    if (srtt <= 0)
    {
        return m_initialRto.GetPicoSeconds();
    }
    int64_t var = c.srttPs > 0 ? Body(i).rttvarPs : srtt / 2;
    return std::max(m_rtoMin.GetPicoSeconds(), srtt + 4 * var);
}

void
MetaRoceQueuePair::ArmTimer(int64_t at)
{
    if (IsPending(m_tx->timer) && m_tx->timerAtPs <= at)
    {
        return;
    }
    m_tx->timer.Cancel();
    m_tx->timerAtPs = at;
    m_tx->timer =
        Simulator::Schedule(PicoSeconds(at - NowPs()), &MetaRoceQueuePair::Housekeeping, this);
}

void
MetaRoceQueuePair::ArmTimerForDeadlines()
{
    int64_t next = std::numeric_limits<int64_t>::max();
    for (uint32_t i = 0; i < m_tx->heads.size(); ++i)
    {
        if (m_tx->heads[i].state != PATH_RETIRED && Cc(i).inflightBytes > 0)
        {
            next = std::min(next, Body(i).lastProgressPs + RtoPs(i));
        }
    }
    if (next != std::numeric_limits<int64_t>::max())
    {
        ArmTimer(std::max(next, NowPs() + 1));
    }
}

void
MetaRoceQueuePair::Housekeeping()
{
    int64_t now = NowPs();
    m_tx->timerAtPs = -1;
    int64_t next = std::numeric_limits<int64_t>::max();
    bool work = HasData() || !m_sendQueue.Empty();
    uint32_t active = GetActivePaths();
    for (uint32_t i = 0; i < m_tx->heads.size(); ++i)
    {
        // (p is not used after a call that may open paths: that may move it)
        const uint8_t state = m_tx->heads[i].state;
        const SPath& p = Body(i);
        if (state == PATH_RETIRED)
        {
            continue;
        }
        bool outstanding =
            Cc(i).inflightBytes > 0 || (state == PATH_PROBING && !p.recs.Empty() &&
                                        p.recs.At(p.recs.Size() - 1).state == REC_INFLIGHT);
        if (outstanding)
        {
            int64_t deadline = p.lastProgressPs + RtoPs(i);
            if (now >= deadline)
            {
                PathTimeout(i, now);
                if (m_tx->heads[i].state != PATH_RETIRED)
                {
                    next = std::min(next, now + RtoPs(i));
                }
            }
            else
            {
                next = std::min(next, deadline);
            }
        }
        else if (state == PATH_ACTIVE && active > m_minPaths)
        {
            int64_t idleAt = p.lastSendPs + m_idleTimeout.GetPicoSeconds();
            if (now >= idleAt)
            {
                RetirePath(i);
                --active;
                ++m_tx->pc.pathsClosedIdle;
            }
            else if (work)
            {
                next = std::min(next, idleAt);
            }
        }
        else if (state == PATH_PROBING && work)
        {
            if (now >= p.nextProbePs)
            {
                Wake(m_tx->heads[i].plane);
                next = std::min(next, now + m_probeInterval.GetPicoSeconds());
            }
            else
            {
                next = std::min(next, p.nextProbePs);
            }
        }
        else if (state == PATH_DRAINING)
        {
            RetirePath(i);
        }
    }
    if (m_releaseWanted && SenderIdle())
    {
        // Its connection retired while resent copies were in flight; they are answered now.
        ReleaseState();
        return;
    }
    if (next != std::numeric_limits<int64_t>::max())
    {
        ArmTimer(std::max(next, now + 1));
    }
}

void
MetaRoceQueuePair::PathTimeout(uint32_t i, int64_t now)
{
    uint32_t d = Dense(i);
    SPath& p = m_tx->bodies[d];
    ++m_counters.timeouts;
    MoveInflightToRetx(i);
    p.lastProgressPs = now;
    if (m_tx->heads[i].state == PATH_PROBING)
    {
        return; // the plane is still silent: probe again at the next interval
    }
    m_tx->ccOps->OnTimeout(m_tx->cc, d);
    ++p.consecutiveTimeouts;
    if (p.consecutiveTimeouts >= m_pathFailTimeouts)
    {
        uint32_t plane = m_tx->heads[i].plane;
        Plane& pl = m_tx->planes[plane];
        ++pl.retiredInRow;
        RetirePath(i);
        if (pl.retiredInRow >= m_planeFailPaths && !pl.avoided)
        {
            AvoidPlane(plane, now);
        }
        else
        {
            OpenPath(plane); // new entropy: maybe a working route in the same plane
        }
    }
    WakeAll();
}

uint32_t
MetaRoceQueuePair::LeavePlane(uint32_t plane, int64_t now)
{
    ++m_tx->pc.planeFailovers;
    m_tx->pc.lastPlaneAvoidedPs = now;
    if (m_tx->pc.firstPlaneAvoidedPs < 0)
    {
        m_tx->pc.firstPlaneAvoidedPs = now;
    }
    m_planeTrace(plane, false);
    Plane& pl = m_tx->planes[plane];
    uint32_t lost = pl.owed; // paths owed here open on the other planes instead
    pl.owed = 0;
    OpenOwedPaths();
    for (uint16_t i : std::vector<uint16_t>(pl.paths.begin(), pl.paths.end()))
    {
        lost += m_tx->heads[i].state == PATH_ACTIVE ? 1 : 0;
        RetirePath(i);
    }
    return lost;
}

void
MetaRoceQueuePair::AvoidPlane(uint32_t plane, int64_t now)
{
    Plane& pl = m_tx->planes[plane];
    pl.avoided = true;
    uint32_t lost = LeavePlane(plane, now);
    // Keep the connection's path count: replacements go to the usable planes.
    bool any = false;
    for (uint32_t p = 0; p < m_tx->planes.size(); ++p)
    {
        any = any || PlaneUsable(p);
    }
    for (uint32_t k = 0; k < std::max(lost, 1u) && any; ++k)
    {
        OpenPath(LeastPopulatedPlane());
    }
    if (pl.linkUp)
    {
        uint32_t probe = OpenPath(plane, PATH_PROBING);
        m_tx->bodies[Dense(probe)].nextProbePs = now + m_probeInterval.GetPicoSeconds();
        ArmTimer(now + m_probeInterval.GetPicoSeconds());
    }
    WakeAll();
}

void
MetaRoceQueuePair::PlaneUsable(uint32_t plane, int64_t now)
{
    Plane& pl = m_tx->planes[plane];
    pl.avoided = false;
    pl.retiredInRow = 0;
    ++m_tx->pc.planeRecoveries;
    m_tx->pc.lastPlaneRecoveredPs = now;
    m_planeTrace(plane, true);
    for (uint16_t i : pl.paths)
    {
        if (m_tx->heads[i].state == PATH_PROBING)
        {
            m_tx->heads[i].state = PATH_ACTIVE;
            m_tx->cc.paths[Dense(i)].cwndBytes = static_cast<double>(m_initialWindow) * m_mtu;
        }
    }
    Rebalance();
    WakeAll();
}

void
MetaRoceQueuePair::Rebalance()
{
    // Even spread over the usable planes: open paths on planes below the mean and let the
    // surplus of the others drain (no data is cut off in flight).
    OpenOwedPaths();
    uint32_t usable = 0;
    uint32_t total = 0;
    for (uint32_t p = 0; p < m_tx->planes.size(); ++p)
    {
        if (PlaneUsable(p))
        {
            ++usable;
            total += GetActivePathsOnPlane(p);
        }
    }
    if (usable == 0)
    {
        return;
    }
    total = std::max(total, m_minPaths);
    uint32_t floorShare = total / usable;
    for (uint32_t p = 0; p < m_tx->planes.size(); ++p)
    {
        while (PlaneUsable(p) && GetActivePathsOnPlane(p) < floorShare)
        {
            OpenPath(p);
        }
    }
    for (uint32_t p = 0; p < m_tx->planes.size(); ++p)
    {
        uint32_t have = GetActivePathsOnPlane(p);
        for (uint16_t i : m_tx->planes[p].paths)
        {
            if (have <= floorShare + 1 || GetActivePaths() <= total)
            {
                break;
            }
            if (m_tx->heads[i].state == PATH_ACTIVE)
            {
                m_tx->heads[i].state = PATH_DRAINING;
                --have;
            }
        }
    }
    ArmTimer(NowPs() + m_rtoMin.GetPicoSeconds());
}

void
MetaRoceQueuePair::NotifyPortState(uint32_t port, bool up)
{
    if (m_tx == nullptr || port >= m_tx->planes.size())
    {
        return;
    }
    int64_t now = NowPs();
    Plane& pl = m_tx->planes[port];
    if (!up)
    {
        // The NIC sees its own link fail: no need to wait for timeouts.
        pl.linkUp = false;
        uint32_t lost = LeavePlane(port, now);
        for (uint32_t k = 0; k < lost; ++k)
        {
            OpenPath(LeastPopulatedPlane());
        }
        WakeAll();
    }
    else
    {
        pl.linkUp = true;
        PlaneUsable(port, now);
    }
}

void
MetaRoceQueuePair::MaybeGrow(int64_t now)
{
    if (!m_growPaths || !m_tx->windowLimited)
    {
        return;
    }
    uint32_t active = GetActivePaths();
    if (active >= m_maxPaths || now - m_tx->lastGrowPs < m_tx->qpSrttPs)
    {
        return;
    }
    if (m_tx->lastEcnPs >= 0 && now - m_tx->lastEcnPs < m_tx->qpSrttPs)
    {
        return; // the network pushes back: more paths would only add aggression
    }
    double cap = static_cast<double>(m_pathWindowCap) * m_mtu;
    for (uint32_t i = 0; i < m_tx->heads.size(); ++i)
    {
        if (m_tx->heads[i].state == PATH_ACTIVE && Cc(i).cwndBytes < 0.9 * cap)
        {
            return; // some path can still grow its own window
        }
    }
    // Every window is at its cap: open as many paths as the bandwidth-delay product of the
    // QP's rate needs (QWND / per-path cap), within MaxPaths.
    double bdp = m_tx->cc.rateBps / 8e12 * static_cast<double>(m_tx->qpMinRttPs); // base RTT
    uint32_t target = static_cast<uint32_t>(std::ceil(bdp / cap));
    target = std::min(target, m_maxPaths);
    OpenOwedPaths();
    for (uint32_t k = active; k < target; ++k)
    {
        OpenPath(LeastPopulatedPlane());
        ++m_tx->pc.pathsGrown;
    }
    m_tx->lastGrowPs = now;
    m_tx->windowLimited = false;
}

// ---------------------------------------------------------------- receiving

void
MetaRoceQueuePair::Receive(uint32_t port, FabricFrame& frame, const RdmaHeaderData& h)
{
    if (h.opcode == RdmaOpcode::PathData)
    {
        // Receiving needs only the NIC's rate hint: a QP that only receives (one direction
        // of a collective's connection) never builds paths, planes or congestion state.
        if (!m_hint)
        {
            m_hint = MetaRoceRateHint::Of(m_nic);
        }
        ReceiveData(port, frame, h);
    }
    else if (h.opcode == RdmaOpcode::PathAck && m_tx != nullptr)
    {
        // (no sender state: released after its last use, so the ACK is a stale one)
        ReceiveAck(port, h);
    }
}

void
MetaRoceQueuePair::PrepareReceive(const RdmaFields& h, uint32_t stage) const
{
    bool ack = h.opcode == RdmaOpcode::PathAck;
    if (stage == 0)
    {
        // The lines of this object that Receive reads (the first is in cache).
        __builtin_prefetch(&m_counters);
        __builtin_prefetch(&m_nic);
        __builtin_prefetch(&m_ackInterval);
        if (ack)
        {
            __builtin_prefetch(&m_tx);
        }
        else
        {
            PrefetchPlacement();
            __builtin_prefetch(&m_rx);
        }
        return;
    }
    if (ack)
    {
        if (m_tx == nullptr)
        {
            return;
        }
        if (stage == 1)
        {
            PrefetchRange(m_tx.get(), sizeof(Sender));
        }
        else if (h.path < m_tx->heads.size())
        {
            // The path's head, and the first path state (most connections have one or two).
            __builtin_prefetch(&m_tx->heads[h.path]);
            PrefetchRange(m_tx->bodies.data(), sizeof(SPath));
            __builtin_prefetch(m_tx->cc.paths.data());
        }
        return;
    }
    if (stage == 1)
    {
        if (h.path < m_rxSlot.size())
        {
            __builtin_prefetch(&m_rxSlot[h.path]);
        }
        __builtin_prefetch(PeekPointer(m_hint));
        __builtin_prefetch(m_rx.data());
    }
    else if (const RPath* r = RxPath(h.path))
    {
        PrefetchRange(r, sizeof(RPath));
    }
}

void
MetaRoceQueuePair::PreparePull(uint32_t port, uint32_t stage) const
{
    if (stage == 0)
    {
        __builtin_prefetch(&m_counters);
        __builtin_prefetch(&m_nic);
        __builtin_prefetch(&m_pathWindowCap);
        __builtin_prefetch(&m_tx);
    }
    else if (m_tx != nullptr)
    {
        PrefetchRange(m_tx.get(), sizeof(Sender));
    }
}

void
MetaRoceQueuePair::ReceiveData(uint32_t port, FabricFrame& frame, const RdmaHeaderData& h)
{
    m_hint->OnData(this);
    if (h.path >= m_rxSlot.size())
    {
        m_rxSlot.resize(h.path + 1u, 0);
    }
    if (m_rxSlot[h.path] == 0)
    {
        // Exact growth: most connections see a few paths, and there are millions of them.
        m_rx.reserve(m_rx.size() + 1);
        m_rx.emplace_back();
        m_rxSlot[h.path] = static_cast<uint16_t>(m_rx.size());
    }
    RPath& r = m_rx[m_rxSlot[h.path] - 1];
    if (!r.init || static_cast<int8_t>(h.epoch - r.epoch) > 0)
    {
        r = RPath();
        r.init = true;
        r.epoch = h.epoch;
    }
    bool current = r.epoch == h.epoch;
    bool gap = false;
    if (current)
    {
        r.port = static_cast<uint8_t>(port);
        r.entropy = frame.entropy;
        r.lastTsPs = h.timestampPs;
        if (frame.ecn == ECN_CE)
        {
            r.ecn = true;
            ++m_counters.ecnMarkedReceived;
        }
        if (h.ackBase > r.cum)
        {
            // The sender gave up on PSNs below ackBase (lost, resent elsewhere): slide past.
            uint32_t d = h.ackBase - r.cum;
            bool baseReceived = d - 1 < kSackBits && r.above.Test(d - 1);
            r.above.ShiftRight(d);
            r.cum = h.ackBase;
            if (baseReceived)
            {
                bool next;
                do
                {
                    next = r.above.Test(0);
                    r.above.ShiftRight1();
                    ++r.cum;
                } while (next);
            }
        }
        uint32_t x = h.psn;
        if (x == r.cum)
        {
            bool next;
            do
            {
                next = r.above.Test(0);
                r.above.ShiftRight1();
                ++r.cum;
            } while (next);
        }
        else if (x > r.cum && x - r.cum - 1 < kSackBits)
        {
            r.above.Set(x - r.cum - 1);
            gap = true; // a hole below x: the sender must hear of it now
        }
        ++r.unacked;
    }
    uint32_t payload = PayloadOf(frame, h);
    if ((h.flags & RdmaHeader::kFlagProbe) == 0)
    {
        Place(h, payload, true);
    }
    if (!current)
    {
        return; // an older epoch's packet: placed if new, its path state is gone
    }
    r.probe = (h.flags & RdmaHeader::kFlagProbe) != 0;
    if (r.unacked >= m_ackInterval || gap || r.probe)
    {
        SendPathAck(h.path);
    }
    else if (!IsPending(m_ackFlush))
    {
        m_ackFlush = Simulator::Schedule(m_ackDelay, &MetaRoceQueuePair::FlushAcks, this);
    }
}

void
MetaRoceQueuePair::FlushAcks()
{
    for (uint32_t i = 0; i < m_rxSlot.size(); ++i)
    {
        const RPath* r = RxPath(i);
        if (r != nullptr && r->init && r->unacked > 0)
        {
            SendPathAck(i);
        }
    }
}

void
MetaRoceQueuePair::SendPathAck(uint32_t pathId)
{
    RPath& r = *RxPath(pathId);
    RdmaHeaderData a;
    a.opcode = RdmaOpcode::PathAck;
    a.destQpn = m_remoteQpn;
    a.psn = r.cum;
    a.path = static_cast<uint16_t>(pathId);
    a.epoch = r.epoch;
    a.sack = r.above.w;
    a.timestampPs = r.lastTsPs;
    a.flags = (r.ecn ? RdmaHeader::kFlagEcnEcho : 0) | (r.probe ? RdmaHeader::kFlagProbe : 0);
    a.rateHintMbps = static_cast<uint32_t>(std::min(m_hint->HintBps() / 1e6, 4.0e9));
    r.ecn = false;
    r.unacked = 0;
    ++m_counters.acksSent;
    m_nic->SendControl(r.port, MakeFrame(a, 0, r.entropy, false));
}

uint64_t
MetaRoceQueuePair::AckChunk(const TxRecord& r)
{
    if (r.msg == kProbe)
    {
        return 0;
    }
    if (r.msg < m_sendQueueBase || Msg(r.msg).ackedPkts.test(r.pkt))
    {
        ++m_counters.spuriousRetransmissions; // two copies of this chunk arrived
        return 0;
    }
    SendMessage& m = Msg(r.msg);
    m.ackedPkts.set(r.pkt);
    ++m.ackedCount;
    m.ackedBytes += r.payload;
    if (m.ackedCount == m.packets)
    {
        MarkSent(m);
    }
    return r.payload;
}

void
MetaRoceQueuePair::ReceiveAck(uint32_t port, const RdmaHeaderData& h)
{
    if (h.path >= m_tx->heads.size())
    {
        ++m_tx->pc.staleAcks;
        return;
    }
    const PathHead& hd = m_tx->heads[h.path];
    if (hd.state == PATH_RETIRED || hd.epoch != h.epoch || h.psn > Body(h.path).psnNext)
    {
        ++m_tx->pc.staleAcks; // an ACK of a path that was retired or renumbered since
        return;
    }
    const uint32_t plane = hd.plane;
    int64_t now = NowPs();
    // The path's state by index, afresh at each use: acknowledging a message may post the
    // next one, and the NIC may pull it at once and give another path its own state (which
    // can move this one). A TxRecord& stays valid: the ring's storage does not move.
    const uint32_t d = Dense(h.path);
    auto P = [this, d]() -> SPath& { return m_tx->bodies[d]; };
    auto C = [this, d]() -> CcPath& { return m_tx->cc.paths[d]; };
    uint64_t acked = 0;
    bool probeAcked = false;
    // Acknowledging may post and pull (see P above), which may grow this path's record ring
    // or pop its front: a record is marked by its PSN after AckChunk, not through a reference.
    auto take = [&](TxRecord r, uint32_t psn, bool inRing)
    {
        if (r.state == REC_INFLIGHT)
        {
            C().inflightBytes -= r.payload;
        }
        if (r.state != REC_ACKED)
        {
            probeAcked = probeAcked || r.msg == kProbe;
            acked += AckChunk(r);
            if (inRing && psn >= P().cumAck)
            {
                P().recs.At(psn - P().cumAck).state = REC_ACKED;
            }
        }
    };
    // Everything below the cumulative PSN arrived.
    while (P().cumAck < h.psn)
    {
        TxRecord r = P().recs.PopFront();
        ++P().cumAck;
        take(r, 0, false);
    }
    AdvanceBase(h.path);
    // SACKed packets above it; any hole below the highest one is a loss.
    int64_t highest = -1;
    for (uint32_t word = 0; word < 4; ++word)
    {
        // Only the set bits: most ACKs carry none (in-order arrival).
        for (uint64_t bits = h.sack[word]; bits != 0; bits &= bits - 1)
        {
            uint32_t psn = h.psn + 1 + word * 64 + static_cast<uint32_t>(__builtin_ctzll(bits));
            if (psn >= P().psnNext)
            {
                break;
            }
            if (psn >= P().cumAck)
            {
                take(P().recs.At(psn - P().cumAck), psn, true);
            }
            highest = psn;
        }
    }
    uint32_t lost = 0;
    for (int64_t psn = std::max(h.psn, P().cumAck); psn < highest; ++psn)
    {
        TxRecord& r = P().recs.At(static_cast<uint32_t>(psn - P().cumAck));
        if (r.state == REC_INFLIGHT)
        {
            r.state = REC_LOST;
            C().inflightBytes -= r.payload;
            if (r.msg != kProbe)
            {
                m_tx->retx.PushBack({r.msg, r.pkt});
            }
            ++lost;
        }
    }
    AdvanceBase(h.path);
    // RTT from the echoed timestamp (RFC 6298 smoothing).
    // (not from a probe: an empty packet's RTT is shorter than a data packet's)
    int64_t rtt =
        h.timestampPs > 0 && (h.flags & RdmaHeader::kFlagProbe) == 0 ? now - h.timestampPs : -1;
    if (rtt > 0)
    {
        if (C().srttPs == 0)
        {
            C().srttPs = rtt;
            P().rttvarPs = rtt / 2;
        }
        else
        {
            P().rttvarPs = (3 * P().rttvarPs + std::abs(C().srttPs - rtt)) / 4;
            C().srttPs = (7 * C().srttPs + rtt) / 8;
        }
        C().minRttPs = C().minRttPs == 0 ? rtt : std::min(C().minRttPs, rtt);
        const bool firstSample = m_tx->qpSrttPs == 0;
        m_tx->qpSrttPs = firstSample ? rtt : (7 * m_tx->qpSrttPs + rtt) / 8;
        m_tx->qpMinRttPs = m_tx->qpMinRttPs == 0 ? rtt : std::min(m_tx->qpMinRttPs, rtt);
        if (firstSample)
        {
            // Everything sent so far armed the timer with InitialRto: a first window lost
            // after this (a tail, or a whole path) would wait for it, not for the RTO now known.
            ArmTimerForDeadlines();
        }
    }
    P().consecutiveTimeouts = 0;
    P().lastProgressPs = now;
    Plane& pl = m_tx->planes[plane];
    pl.retiredInRow = 0;
    bool ecn = (h.flags & RdmaHeader::kFlagEcnEcho) != 0;
    if (ecn)
    {
        m_tx->lastEcnPs = now;
    }
    if (probeAcked && pl.avoided)
    {
        PlaneUsable(plane, now);
    }
    // The congestion control indexes cc.paths: it gets the path's dense index.
    if (m_tx->heads[h.path].state == PATH_ACTIVE)
    {
        m_tx->ccOps->OnAck(m_tx->cc, d, acked, rtt, ecn);
        if (lost > 0)
        {
            m_tx->pc.lossesDetected += lost;
            m_tx->ccOps->OnLoss(m_tx->cc, d, lost);
        }
    }
    if (h.rateHintMbps != 0)
    {
        m_tx->ccOps->OnRateHint(m_tx->cc, h.rateHintMbps * 1e6);
    }
    if (m_tx->heads[h.path].state == PATH_DRAINING && m_tx->cc.paths[d].inflightBytes == 0)
    {
        RetirePath(h.path);
    }
    MaybeGrow(now);
    if (m_sendQueue.Empty())
    {
        ReleaseIdle();
    }
    if (lost > 0)
    {
        WakeAll();
    }
    else
    {
        Wake(plane);
    }
}

bool
MetaRoceQueuePair::ReleaseState()
{
    // Probes are counted with the sender state, which goes below: remember them.
    m_sentCopies = m_sentCopies || m_counters.retransmittedPackets > 0 ||
                   (m_tx != nullptr && m_tx->pc.probesSent > 0);
    if (m_tx != nullptr)
    {
        if (!SenderIdle())
        {
            m_releaseWanted = true;
            return false;
        }
        m_releaseWanted = false;
        m_tx->timer.Cancel();
        m_tx->paceEvent.Cancel();
        m_tx.reset();
    }
    if (!IsPending(m_ackFlush))
    {
        std::vector<RPath>().swap(m_rx);
        std::vector<uint16_t>().swap(m_rxSlot);
    }
    return !HasReleasableState() && !IsPending(m_ackFlush) && m_sendQueue.Empty() &&
           GetPendingReceives() == 0 && !m_sentCopies;
}

bool
MetaRoceQueuePair::SenderIdle() const
{
    bool idle = m_sendQueue.Empty() && m_tx->retx.Empty();
    for (const CcPath& c : m_tx->cc.paths)
    {
        idle = idle && c.inflightBytes == 0;
    }
    return idle;
}

void
MetaRoceQueuePair::ReleaseIdle()
{
    // Millions of connections of an all-to-all finish one by one: an idle QP keeps its
    // paths' state but not the storage of empty queues (it comes back with the next post).
    m_sendQueue.Release();
    if (m_tx->retx.Empty())
    {
        m_tx->retx.Release();
    }
    for (SPath& p : m_tx->bodies)
    {
        if (p.recs.Empty())
        {
            p.recs.Release();
        }
    }
}

} // namespace metaroce
} // namespace ns3
