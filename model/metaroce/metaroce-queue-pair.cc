#include "metaroce-queue-pair.h"

#include "metaroce-aimd.h"
#include "metaroce-nic-rtt.h"
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

namespace
{
/// Reads and sets one field of a QP's attribute block (MetaRoceQueuePair::Attributes) as
/// an attribute of value type V.
template <class V, class T> class QpAttributeAccessor : public AttributeAccessor
{
  public:
    explicit QpAttributeAccessor(T MetaRoceQueuePair::Attributes::*field)
        : m_field(field)
    {
    }

    bool Set(ObjectBase* object, const AttributeValue& value) const override
    {
        auto* qp = dynamic_cast<MetaRoceQueuePair*>(object);
        const auto* v = dynamic_cast<const V*>(&value);
        T t{};
        if (qp == nullptr || v == nullptr || !v->GetAccessor(t))
        {
            return false;
        }
        qp->MutableAttrs().*m_field = t;
        return true;
    }

    bool Get(const ObjectBase* object, AttributeValue& value) const override
    {
        const auto* qp = dynamic_cast<const MetaRoceQueuePair*>(object);
        auto* v = dynamic_cast<V*>(&value);
        if (qp == nullptr || v == nullptr)
        {
            return false;
        }
        v->Set(qp->Attrs().*m_field);
        return true;
    }

    bool HasGetter() const override { return true; }

    bool HasSetter() const override { return true; }

  private:
    T MetaRoceQueuePair::Attributes::*m_field;
};

template <class V, class T>
Ptr<const AttributeAccessor>
MakeQpAttributeAccessor(T MetaRoceQueuePair::Attributes::*field)
{
    return Ptr<const AttributeAccessor>(new QpAttributeAccessor<V, T>(field), false);
}
} // namespace

TypeId
MetaRoceQueuePair::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::MetaRoceQueuePair")
            .SetParent<QueuePair>()
            .SetGroupName("MetaRoce")
            .AddConstructor<MetaRoceQueuePair>()
            .AddAttribute(
                "MinPaths",
                "Paths a connection opens at start and keeps at least; 0: "
                "MinPathsPerPlane on each of the NIC's planes.",
                UintegerValue(0),
                MakeQpAttributeAccessor<UintegerValue>(&MetaRoceQueuePair::Attributes::minPaths),
                MakeUintegerChecker<uint32_t>(0, 1024))
            .AddAttribute(
                "MinPathsPerPlane",
                "With MinPaths 0, paths a connection opens on each plane. Assumption: 12, "
                "the slide's scale-out path count read as one plane's connection of the "
                "lab's 8 x 100G NIC (results/fidelity.md, the reading of the table): with "
                "12 for all eight planes, a plane had one or two paths and one ECMP "
                "collision took a plane's share (a 64-NIC permutation at 34% of line "
                "rate).",
                UintegerValue(12),
                MakeQpAttributeAccessor<UintegerValue>(
                    &MetaRoceQueuePair::Attributes::minPathsPerPlane),
                MakeUintegerChecker<uint32_t>(1, 128))
            .AddAttribute(
                "MaxPaths",
                "Most paths a connection may open (dynamic path count); 0: "
                "MaxPathsPerPlane on each of the NIC's planes.",
                UintegerValue(0),
                MakeQpAttributeAccessor<UintegerValue>(&MetaRoceQueuePair::Attributes::maxPaths),
                MakeUintegerChecker<uint32_t>(0, 4096))
            .AddAttribute("MaxPathsPerPlane",
                          "With MaxPaths 0, most paths a connection may open on each plane's "
                          "share. Assumption: 64, above the slide's 30-50 for a plane's 100G "
                          "connection at 1.5 ms (4,600 packets of bandwidth-delay product over "
                          "PathWindowCap 128: 36 paths).",
                          UintegerValue(64),
                          MakeQpAttributeAccessor<UintegerValue>(
                              &MetaRoceQueuePair::Attributes::maxPathsPerPlane),
                          MakeUintegerChecker<uint32_t>(1, 512))
            .AddAttribute(
                "InitialPathWindow",
                "Initial PWND of a path, in packets. Assumption: 2 (96 paths of an 8-plane "
                "NIC start with the 192 packets that 12 paths of 16 did: a QP's first "
                "burst into an incast is unchanged; 24 packets a plane, within the "
                "slide's ~75).",
                UintegerValue(2),
                MakeQpAttributeAccessor<UintegerValue>(
                    &MetaRoceQueuePair::Attributes::initialWindow),
                MakeUintegerChecker<uint32_t>(1, 256))
            .AddAttribute("PathWindowCap",
                          "Largest PWND in packets. Assumption: 128, half the 256-PSN SACK "
                          "bitmap, so a lost packet and everything sent in the RTT it takes to "
                          "detect it stay describable.",
                          UintegerValue(128),
                          MakeQpAttributeAccessor<UintegerValue>(
                              &MetaRoceQueuePair::Attributes::pathWindowCap),
                          MakeUintegerChecker<uint32_t>(1, 256))
            .AddAttribute(
                "QpWindowCap", "Cap on the QP's bytes in flight (QWND), in packets; 0: none.",
                UintegerValue(0),
                MakeQpAttributeAccessor<UintegerValue>(&MetaRoceQueuePair::Attributes::qpWindowCap),
                MakeUintegerChecker<uint32_t>())
            .AddAttribute(
                "QpWindowBdps",
                "The paths' windows together (QWND) stop growing at this many "
                "bandwidth-delay products of the NIC's line rate over the QP's lowest "
                "RTT; 0: no such cap. Assumption: 2 (the slide's scale-out ~75 packets "
                "against a plane's 100G x 15 us of 46, and its 3,500-7,000 at 1.5 ms "
                "against 4,600: the window covers the path's BDP with room for "
                "queues, not a fixed count; the per-path cap then sets the path count "
                "at long RTTs).",
                DoubleValue(2.0),
                MakeQpAttributeAccessor<DoubleValue>(&MetaRoceQueuePair::Attributes::qpWindowBdps),
                MakeDoubleChecker<double>(0.0, 1000))
            .AddAttribute("HintWindowGain",
                          "While the receiver's rate hint holds the QP below line rate, its "
                          "bytes in flight are capped at HintWindowGain x hint x base RTT, so "
                          "the senders of an incast together keep a bounded multiple of the "
                          "bandwidth-delay product in flight. Assumption: 2 (the hint's pacing "
                          "keeps the queue short; the window only bounds bursts).",
                          DoubleValue(2.0),
                          MakeQpAttributeAccessor<DoubleValue>(
                              &MetaRoceQueuePair::Attributes::hintWindowGain),
                          MakeDoubleChecker<double>(0.1, 100))
            .AddAttribute(
                "PacingBurst",
                "Packets a paced QP may send back to back after a stall (token-bucket "
                "depth of its rate-hint pacing). Assumption: 2.",
                UintegerValue(2),
                MakeQpAttributeAccessor<UintegerValue>(&MetaRoceQueuePair::Attributes::pacingBurst),
                MakeUintegerChecker<uint32_t>(0, 1024))
            .AddAttribute(
                "AckInterval",
                "Data packets per ACK on a path (ACK coalescing). A gap is "
                "acknowledged at once. Assumption: 1.",
                UintegerValue(1),
                MakeQpAttributeAccessor<UintegerValue>(&MetaRoceQueuePair::Attributes::ackInterval),
                MakeUintegerChecker<uint32_t>(1, 64))
            .AddAttribute(
                "AckDelay",
                "With coalescing, the longest an ACK waits for more packets. "
                "Assumption: 1 us.",
                TimeValue(MicroSeconds(1)),
                MakeQpAttributeAccessor<TimeValue>(&MetaRoceQueuePair::Attributes::ackDelay),
                MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute(
                "RtoMin",
                "Floor of the margin a path's retransmission timeout allows above its "
                "smoothed RTT: RTO = srtt + max(4 rttvar, RtoMin). Assumption: 100 us, "
                "the in-datacentre floor of UET's model (a floor on the whole RTO instead "
                "lets it shrink to srtt on a steady 1.5 ms path, where rttvar decays to "
                "zero, and every ACK a little late is a timeout).",
                TimeValue(MicroSeconds(100)),
                MakeQpAttributeAccessor<TimeValue>(&MetaRoceQueuePair::Attributes::rtoMin),
                MakeTimeChecker(MicroSeconds(1)))
            .AddAttribute(
                "TailLossRtts",
                "Tail-loss rule: a packet still unacknowledged on its path is lost "
                "(sent again at once, a loss to the path's congestion control) when a "
                "packet the QP sent after it was acknowledged, on any path, or the QP "
                "has nothing more to send, and this many of its path's smoothed RTTs "
                "plus one RTT variation have passed since it was sent. The last "
                "packets of a path have no later packet on that path whose SACK would "
                "reveal a gap; the QP's other paths are the evidence. 0: off (only "
                "the path's RTO recovers a tail). Assumption: 2.5 (the seeds name "
                "SACK-based loss detection, not how a tail is found; in a lossless "
                "run of 4,032 connections, planes-connections.json, 2 resends ~3,000 "
                "packets needlessly, 2.5 ~1,000, 3 ~400, but 3 leaves a third of the "
                "256-NIC all-to-all's losses to timeouts, 2.5 8%).",
                DoubleValue(2.5),
                MakeQpAttributeAccessor<DoubleValue>(&MetaRoceQueuePair::Attributes::tailLossRtts),
                MakeDoubleChecker<double>(0, 1000))
            .AddAttribute(
                "FirstRttWindow",
                "Packets a QP may have in flight before its first ACK (which brings "
                "its first RTT sample and rate hint); 0: no cap but the paths' "
                "initial windows (MinPaths x InitialPathWindow, 192 packets on 8 planes). N "
                "senders starting together toward one receiver put at most N x "
                "FirstRttWindow packets into its port's queue; the price is the "
                "first RTT of every QP whose message is larger (rate hints then "
                "pace it). Assumption: 0 (the seeds are silent; 16 cuts the 16-to-1 "
                "incast's peak queue from 2.6 MB to 1.0 MB but slows a 64-rank "
                "all-to-all of 16 MiB by a third).",
                UintegerValue(0),
                MakeQpAttributeAccessor<UintegerValue>(
                    &MetaRoceQueuePair::Attributes::firstRttWindow),
                MakeUintegerChecker<uint32_t>(0, 65536))
            .AddAttribute(
                "NicRttTimeout",
                "A connection without any RTT sample of its own (all its first "
                "packets lost) times out from the lowest RTT its NIC's other "
                "connections measured (srtt + max(4 x srtt/2, RtoMin)) rather "
                "than InitialRto, doubling with each timeout up to InitialRto; "
                "these early timeouts resend but do not count toward "
                "PathFailTimeouts. Assumption: false (the NIC's RTT is a guess "
                "for a new destination: a cross-site QP on a NIC whose other QPs "
                "are in the building would resend its first window ~7 times "
                "before its first ACK, 1.5 ms away).",
                BooleanValue(false),
                MakeQpAttributeAccessor<BooleanValue>(&MetaRoceQueuePair::Attributes::nicRttForRto),
                MakeBooleanChecker())
            .AddAttribute(
                "InitialRto",
                "Timeout of a path before any RTT sample on the connection. "
                "Assumption: 5 ms (above a 1.5 ms scale-across RTT).",
                TimeValue(MilliSeconds(5)),
                MakeQpAttributeAccessor<TimeValue>(&MetaRoceQueuePair::Attributes::initialRto),
                MakeTimeChecker(MicroSeconds(1)))
            .AddAttribute("PathFailTimeouts",
                          "Consecutive timeouts that retire a path. Assumption: 3.",
                          UintegerValue(3),
                          MakeQpAttributeAccessor<UintegerValue>(
                              &MetaRoceQueuePair::Attributes::pathFailTimeouts),
                          MakeUintegerChecker<uint32_t>(1, 100))
            .AddAttribute("PlaneFailPaths",
                          "Paths of one plane retired in a row (no ACK from the plane between) "
                          "that make the plane avoided and probed. Assumption: 2.",
                          UintegerValue(2),
                          MakeQpAttributeAccessor<UintegerValue>(
                              &MetaRoceQueuePair::Attributes::planeFailPaths),
                          MakeUintegerChecker<uint32_t>(1, 100))
            .AddAttribute(
                "ProbeInterval", "Time between probes of an avoided plane. Assumption: 500 us.",
                TimeValue(MicroSeconds(500)),
                MakeQpAttributeAccessor<TimeValue>(&MetaRoceQueuePair::Attributes::probeInterval),
                MakeTimeChecker(MicroSeconds(1)))
            .AddAttribute(
                "IdleTimeout",
                "A path that sent nothing this long closes, down to MinPaths. "
                "Assumption: 1 ms.",
                TimeValue(MilliSeconds(1)),
                MakeQpAttributeAccessor<TimeValue>(&MetaRoceQueuePair::Attributes::idleTimeout),
                MakeTimeChecker(MicroSeconds(1)))
            .AddAttribute(
                "GrowPaths",
                "Open more paths while every window is at PathWindowCap, the sender "
                "is window-limited and no ECN was seen for an RTT.",
                BooleanValue(true),
                MakeQpAttributeAccessor<BooleanValue>(&MetaRoceQueuePair::Attributes::growPaths),
                MakeBooleanChecker())
            .AddAttribute("OpenPathsOnFirstUse",
                          "Open a plane's share of MinPaths when the plane first has data to "
                          "send, instead of all MinPaths at the connection's first message "
                          "(an unused path costs 8 bytes either way: its state is made at its "
                          "first send). Paths get other entropies and the QP window counts "
                          "only the opened paths. Assumption: true (with 12 paths a plane, a "
                          "one-packet message would otherwise hold 96 path entries).",
                          BooleanValue(true),
                          MakeQpAttributeAccessor<BooleanValue>(
                              &MetaRoceQueuePair::Attributes::openOnFirstUse),
                          MakeBooleanChecker())
            .AddAttribute(
                "SprayPolicy",
                "How a chunk picks among a plane's eligible paths: RoundRobin, "
                "LeastLoaded (the lowest share of its window in flight) or LowestRtt. "
                "Assumption: LeastLoaded (the talk: traffic is spread evenly over the paths; "
                "a path whose ECMP route collides has its window cut by ECN and so its "
                "share filled sooner: 64-NIC permutation 123 us with RoundRobin, 111 with "
                "LeastLoaded).",
                EnumValue(LEAST_LOADED),
                MakeQpAttributeAccessor<EnumValue>(&MetaRoceQueuePair::Attributes::policy),
                MakeEnumChecker(ROUND_ROBIN, "RoundRobin", LEAST_LOADED, "LeastLoaded", LOWEST_RTT,
                                "LowestRtt"))
            .AddAttribute(
                "CongestionControl", "Window controller (an RdmaCongestionOps TypeId).",
                TypeIdValue(MetaRoceAimd::GetTypeId()),
                MakeQpAttributeAccessor<TypeIdValue>(&MetaRoceQueuePair::Attributes::ccType),
                MakeTypeIdChecker())
            .AddTraceSource("PlaneState",
                            "A plane was avoided (false) or taken back into use (true).",
                            MakeLazyTraceSourceAccessor<QueuePair>(&QueuePairTraces::planeState),
                            "ns3::metaroce::MetaRoceQueuePair::PlaneStateTracedCallback")
            .AddTraceSource("QpWindow",
                            "QWND: the sum of the windows of the paths that take data, in "
                            "bytes (after each ACK, loss, timeout or path change).",
                            MakeLazyTraceSourceAccessor<QueuePair>(&QueuePairTraces::window),
                            "ns3::TracedValueCallback::Double")
            .AddTraceSource("Rate",
                            "The QP's pacing rate in bit/s (the receiver's rate hint; the line "
                            "rate when unpaced).",
                            MakeLazyTraceSourceAccessor<QueuePair>(&QueuePairTraces::rate),
                            "ns3::TracedValueCallback::Double")
            .AddTraceSource("PathWindow",
                            "A path's window (PWND) changed: (path, old bytes, new bytes); a "
                            "path that takes no data (retired, draining, probing) counts 0.",
                            MakeLazyTraceSourceAccessor<QueuePair>(&QueuePairTraces::pathWindow),
                            "ns3::metaroce::QueuePair::PathWindowTracedCallback")
            .AddTraceSource("PathRtt", "A path's smoothed RTT after a sample: (path, old, new).",
                            MakeLazyTraceSourceAccessor<QueuePair>(&QueuePairTraces::pathRtt),
                            "ns3::metaroce::QueuePair::PathRttTracedCallback")
            .AddTraceSource("PathEvent",
                            "A path opened, grew the path count, retired, closed idle, sent a "
                            "probe or timed out: (path, plane, PathEvent).",
                            MakeLazyTraceSourceAccessor<QueuePair>(&QueuePairTraces::pathEvent),
                            "ns3::metaroce::QueuePair::PathEventTracedCallback");
    return tid;
}

MetaRoceQueuePair::MetaRoceQueuePair()
    : m_attrs(Create<Attributes>())
{
}

MetaRoceQueuePair::Attributes&
MetaRoceQueuePair::MutableAttrs()
{
    if (m_attrs->GetReferenceCount() > 1)
    {
        m_attrs = Create<Attributes>(*m_attrs);
    }
    return *m_attrs;
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
    if (m_rx != nullptr)
    {
        m_rx->ackFlush.Cancel();
    }
    m_hint = nullptr;
    if (m_tx != nullptr)
    {
        m_tx->timer.Cancel();
        m_tx->paceEvent.Cancel();
        m_tx.reset(); // its congestion control may serve other QPs (Fork): not disposed
    }
    QueuePair::DoDispose();
}

MetaRoceQueuePair::PathCounters
MetaRoceQueuePair::GetPathCounters() const
{
    return m_tx ? m_tx->paths.Counters() : PathCounters();
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
    MetaRocePathManager::Config cfg;
    cfg.rtoMinPs = m_attrs->rtoMin.GetPicoSeconds();
    cfg.initialRtoPs = m_attrs->initialRto.GetPicoSeconds();
    cfg.probeIntervalPs = m_attrs->probeInterval.GetPicoSeconds();
    cfg.idleTimeoutPs = m_attrs->idleTimeout.GetPicoSeconds();
    cfg.tailLossRtts = m_attrs->tailLossRtts;
    cfg.nicRttForRto = m_attrs->nicRttForRto;
    m_tx->nicRtt = MetaRoceNicRtt::Of(m_nic);
    const uint32_t planes = m_nic->GetNPorts();
    cfg.minPaths = m_attrs->minPaths != 0 ? m_attrs->minPaths : m_attrs->minPathsPerPlane * planes;
    cfg.maxPaths = m_attrs->maxPaths != 0 ? m_attrs->maxPaths : m_attrs->maxPathsPerPlane * planes;
    cfg.initialWindow = m_attrs->initialWindow;
    cfg.pathWindowCap = m_attrs->pathWindowCap;
    cfg.pathFailTimeouts = m_attrs->pathFailTimeouts;
    cfg.planeFailPaths = m_attrs->planeFailPaths;
    cfg.mtu = m_mtu;
    cfg.growPaths = m_attrs->growPaths;
    cfg.openOnFirstUse = m_attrs->openOnFirstUse;
    std::vector<bool> linkUp(planes);
    double line = 0;
    for (uint32_t p = 0; p < planes; ++p)
    {
        line += static_cast<double>(m_nic->GetPort(p)->GetDataRate().GetBitRate());
        linkUp[p] = m_nic->IsPortUp(p);
    }
    m_tx->paths.Start(cfg, this, Mix64(static_cast<uint64_t>(m_nic->GetNicId()) << 24 | m_qpn),
                      linkUp, &m_tx->nicRtt->minRttPs);
    CcState& cc = m_tx->paths.Window();
    cc.lineRateBps = line;
    cc.rateBps = line;
    cc.mtu = m_mtu;
    cc.onRateChange = [this]()
    {
        if (m_traces)
        {
            m_traces->rate = m_tx->paths.Window().rateBps;
        }
        WakeAll();
    };
    m_tx->ccOps = NewCongestionOps(m_attrs->ccType);
    m_tx->ccOps->Init(cc);
    m_hint = MetaRoceRateHint::Of(m_nic);
    m_tx->paths.OpenInitialPaths();
    if (m_traces)
    {
        TraceWindows();
        m_traces->rate = cc.rateBps;
    }
}

void
MetaRoceQueuePair::InitTraces(QueuePairTraces& t)
{
    t.window = GetQpWindowBytes();
    t.rate = GetRateBps();
    for (uint32_t i = 0; i < GetNPathSlots(); ++i)
    {
        const PathView v = GetPath(i);
        t.lastPathWindow.push_back(v.state == PATH_ACTIVE ? v.cwndBytes : 0);
    }
}

void
MetaRoceQueuePair::TraceWindows()
{
    QueuePairTraces& t = *m_traces;
    double qwnd = 0;
    for (uint32_t i = 0; i < GetNPathSlots(); ++i)
    {
        const PathHead& hd = m_tx->paths.Head(i);
        const double w = hd.state == PATH_ACTIVE ? m_tx->paths.Cc(i).cwndBytes : 0;
        qwnd += w;
        if (i >= t.lastPathWindow.size())
        {
            t.lastPathWindow.resize(i + 1, 0);
        }
        if (w != t.lastPathWindow[i])
        {
            const double old = t.lastPathWindow[i];
            t.lastPathWindow[i] = w;
            t.pathWindow(i, old, w);
        }
    }
    t.window = qwnd;
}

void
MetaRoceQueuePair::PlaneStateChanged(uint32_t plane, bool usable)
{
    NS_LOG_INFO("NIC " << m_nic->GetNicId() << " QP " << m_qpn << ": plane " << plane
                       << (usable ? " back in use" : " avoided"));
    if (m_traces)
    {
        m_traces->planeState(plane, usable);
    }
}

void
MetaRoceQueuePair::PathChanged(uint32_t path, uint32_t plane, PathEvent what)
{
    switch (what)
    {
        case PathEvent::Retired:
            NS_LOG_INFO("NIC " << m_nic->GetNicId() << " QP " << m_qpn << ": path " << path
                               << " (plane " << plane << ") retired");
            break;
        case PathEvent::TimedOut:
            NS_LOG_INFO("NIC " << m_nic->GetNicId() << " QP " << m_qpn << ": path " << path
                               << " (plane " << plane << ") retransmission timeout");
            break;
        case PathEvent::Grown:
            NS_LOG_INFO("NIC " << m_nic->GetNicId() << " QP " << m_qpn << ": path " << path
                               << " (plane " << plane << ") opened: every window at its cap");
            break;
        default:
            NS_LOG_LOGIC("NIC " << m_nic->GetNicId() << " QP " << m_qpn << ": path " << path
                                << " (plane " << plane << ") event " << unsigned(what));
            break;
    }
    if (m_traces)
    {
        m_traces->pathEvent(path, plane, what);
    }
}

uint32_t
MetaRoceQueuePair::GetActivePaths() const
{
    return m_tx != nullptr ? m_tx->paths.GetActivePaths() : 0;
}

uint32_t
MetaRoceQueuePair::GetActivePathsOnPlane(uint32_t plane) const
{
    return m_tx != nullptr ? m_tx->paths.GetActivePathsOnPlane(plane) : 0;
}

double
MetaRoceQueuePair::GetQpWindowBytes() const
{
    double w = 0;
    for (uint32_t i = 0; m_tx != nullptr && i < m_tx->paths.NSlots(); ++i)
    {
        if (m_tx->paths.Head(i).state == PATH_ACTIVE)
        {
            w += m_tx->paths.Cc(i).cwndBytes;
        }
    }
    return w;
}

bool
MetaRoceQueuePair::IsPlaneAvoided(uint32_t plane) const
{
    return m_tx != nullptr && plane < m_tx->paths.NPlanes() &&
           (m_tx->paths.PlaneAt(plane).avoided || !m_tx->paths.PlaneAt(plane).linkUp);
}

MetaRoceQueuePair::PathView
MetaRoceQueuePair::GetPath(uint32_t i) const
{
    const PathHead& p = m_tx->paths.Head(i);
    const CcPath& c = m_tx->paths.Cc(i);
    return {p.plane,     p.entropy,       p.epoch, static_cast<PathState>(p.state),
            c.cwndBytes, c.inflightBytes, c.srttPs};
}

// ---------------------------------------------------------------- sending

void
MetaRoceQueuePair::OnPosted()
{
    EnsureInit();
    if (GetPendingSends() == 1)
    {
        m_tx->ccOps->OnRestart(m_tx->paths.Window()); // the message just posted is all there is
        if (m_traces)
        {
            TraceWindows();
        }
    }
    WakeAll();
}

void
MetaRoceQueuePair::Wake(uint32_t plane)
{
    if (m_nic != nullptr && plane < m_tx->paths.NPlanes() && m_tx->paths.PlaneAt(plane).linkUp)
    {
        m_nic->NotifyReady(this, plane);
    }
}

void
MetaRoceQueuePair::WakeAll()
{
    for (uint32_t p = 0; p < m_tx->paths.NPlanes(); ++p)
    {
        Wake(p);
    }
}

void
MetaRoceQueuePair::PacingWake()
{
    WakeAll();
}

// ---------------------------------------------------------------- timers and health

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
    int64_t next = m_tx->paths.NextDeadline();
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
    bool work = HasData() || !m_sendQueue.Empty();
    bool tailLost = false;
    int64_t next = m_tx->paths.DetectTailLosses(
        now, !HasData(),
        [this, &tailLost](uint64_t msg, uint32_t pkt)
        {
            m_tx->retx.PushBack({msg, pkt});
            tailLost = true;
        },
        [this](uint32_t d, uint32_t lost) { m_tx->ccOps->OnLoss(m_tx->paths.Window(), d, lost); });
    next = std::min(next, m_tx->paths.Housekeeping(now, work));
    if (m_traces)
    {
        TraceWindows(); // timeouts and tail losses cut windows; paths retire or close
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
    if (tailLost)
    {
        WakeAll();
    }
}

void
MetaRoceQueuePair::PathTimedOut(uint32_t dense, bool probing)
{
    ++SendSide().timeouts;
    if (!probing)
    {
        m_tx->ccOps->OnTimeout(m_tx->paths.Window(), dense);
    }
}

void
MetaRoceQueuePair::NotifyPortState(uint32_t port, bool up)
{
    if (m_tx == nullptr || port >= m_tx->paths.NPlanes())
    {
        return;
    }
    m_tx->paths.PortState(port, up, NowPs());
    if (m_traces)
    {
        TraceWindows();
    }
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
        __builtin_prefetch(&m_nic);
        __builtin_prefetch(&m_attrs);
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
            PrefetchSendBook();
        }
        else if (h.path < m_tx->paths.NSlots())
        {
            // The path's head, and the first path state (most connections have one or two).
            __builtin_prefetch(&m_tx->paths.Head(h.path));
            PrefetchRange(m_tx->paths.Bodies().data(), sizeof(SPath));
            __builtin_prefetch(m_tx->paths.Window().paths.data());
        }
        return;
    }
    if (stage == 1)
    {
        __builtin_prefetch(PeekPointer(m_hint));
        PrefetchReceiveBook();
    }
    if (m_rx == nullptr)
    {
        return;
    }
    if (stage == 1)
    {
        __builtin_prefetch(m_rx.get());
    }
    else
    {
        m_rx->paths.Prefetch(h.path, 1); // the slot table and the first paths
    }
}

void
MetaRoceQueuePair::PreparePull(uint32_t port, uint32_t stage) const
{
    if (stage == 0)
    {
        __builtin_prefetch(&m_nic);
        __builtin_prefetch(&m_attrs);
        __builtin_prefetch(&m_tx);
    }
    else if (m_tx != nullptr)
    {
        PrefetchRange(m_tx.get(), sizeof(Sender));
        PrefetchSendBook();
    }
}

void
MetaRoceQueuePair::ReceiveData(uint32_t port, FabricFrame& frame, const RdmaHeaderData& h)
{
    const MetaRoceReceiver::Arrival a = ReceiverState().paths.OnData(
        port, frame.entropy, frame.ecn == ECN_CE, h, m_attrs->ackInterval);
    if (a.ecnMarked)
    {
        ++ReceiveSide().ecnMarkedReceived;
    }
    uint32_t payload = PayloadOf(frame, h);
    if ((h.flags & RdmaHeader::kFlagProbe) == 0)
    {
        Place(h, payload, true);
        m_hint->OnData(this,
                       payload); // after placement: the last packet of the last message ends it
    }
    if (!a.current)
    {
        return; // an older epoch's packet: placed if new, its path state is gone
    }
    if (a.ackNow)
    {
        SendPathAck(h.path);
    }
    else if (!IsPending(m_rx->ackFlush))
    {
        m_rx->ackFlush =
            Simulator::Schedule(m_attrs->ackDelay, &MetaRoceQueuePair::FlushAcks, this);
    }
}

void
MetaRoceQueuePair::FlushAcks()
{
    m_rx->paths.ForEachUnacked([this](uint32_t i) { SendPathAck(i); });
}

void
MetaRoceQueuePair::SendPathAck(uint32_t pathId)
{
    RdmaHeaderData a;
    uint8_t port = 0;
    uint16_t entropy = 0;
    m_rx->paths.MakeAck(pathId, m_remoteQpn, m_hint->HintBps(this), a, port, entropy);
    ++ReceiveSide().acksSent;
    m_nic->SendControl(port, MakeFrame(a, 0, entropy, false));
}

bool
MetaRoceQueuePair::ReleaseState()
{
    // Probes are counted with the sender state, which goes below: remember them.
    m_sentCopies = m_sentCopies || Retransmitted() > 0 ||
                   (m_tx != nullptr && m_tx->paths.Counters().probesSent > 0);
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
    if (!AckFlushPending())
    {
        m_rx.reset();
    }
    return !HasReleasableState() && !AckFlushPending() && m_sendQueue.Empty() &&
           GetPendingReceives() == 0 && !m_sentCopies;
}

bool
MetaRoceQueuePair::SenderIdle() const
{
    bool idle = m_sendQueue.Empty() && m_tx->retx.Empty();
    for (const CcPath& c : m_tx->paths.Window().paths)
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
    for (SPath& p : m_tx->paths.Bodies())
    {
        if (p.recs.Empty())
        {
            p.recs.Release();
        }
    }
}

} // namespace metaroce
} // namespace ns3
