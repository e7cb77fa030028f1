#include "fabric-switch.h"

#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("FabricSwitch");
NS_OBJECT_ENSURE_REGISTERED(FabricSwitch);

TypeId
FabricSwitch::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::FabricSwitch")
            .SetParent<Node>()
            .SetGroupName("MetaRoce")
            .AddConstructor<FabricSwitch>()
            .AddAttribute("BufferPerPort",
                          "Shared packet buffer contributed by each port, in bytes (the switch's "
                          "buffer is this times its port count unless BufferBytes is set). "
                          "Assumption: 323,555 B, a Tomahawk-5-class 165.66 MB pool over 512 "
                          "ports.",
                          UintegerValue(323555),
                          MakeUintegerAccessor(&FabricSwitch::m_bufferPerPort),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("BufferBytes",
                          "Total shared buffer in bytes; 0 derives it from BufferPerPort.",
                          UintegerValue(0), MakeUintegerAccessor(&FabricSwitch::m_bufferBytes),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("Alpha",
                          "Dynamic-threshold factor: an egress queue may hold at most Alpha x "
                          "the free shared buffer. Assumption: 1.",
                          DoubleValue(1.0), MakeDoubleAccessor(&FabricSwitch::m_alpha),
                          MakeDoubleChecker<double>(1.0 / 1024, 1024))
            .AddAttribute("EcnEnabled", "Mark ECN-capable frames (else ECN bits pass unchanged).",
                          BooleanValue(true), MakeBooleanAccessor(&FabricSwitch::m_ecnEnabled),
                          MakeBooleanChecker())
            .AddAttribute("EcnKmin",
                          "Egress queue depth (bytes) above which marking starts. Assumption: "
                          "20,000 B = 0.2 x the bandwidth-delay product of a 100G port at 8 us "
                          "(the UET reference model's rule; a low threshold suits a lossy "
                          "fabric).",
                          UintegerValue(20000), MakeUintegerAccessor(&FabricSwitch::m_kmin),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("EcnKmax",
                          "Egress queue depth (bytes) at which the marking probability reaches "
                          "Pmax; above it every ECN-capable frame is marked. Assumption: "
                          "80,000 B = 0.8 x BDP, as for EcnKmin.",
                          UintegerValue(80000), MakeUintegerAccessor(&FabricSwitch::m_kmax),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("EcnPmax",
                          "Marking probability at Kmax. Assumption: 1 (a linear ramp from "
                          "Kmin to Kmax).",
                          DoubleValue(1.0), MakeDoubleAccessor(&FabricSwitch::m_pmax),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("Latency",
                          "Port-to-port forwarding latency added to every frame: the lookup "
                          "and admission pipeline, which a frame passes before the buffer "
                          "admits (and ECN marks) it. Assumption: 600 ns, the low end of "
                          "quoted Tomahawk-5 figures.",
                          TimeValue(NanoSeconds(600)),
                          MakeTimeAccessor(&FabricSwitch::SetLatency, &FabricSwitch::GetLatency),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("ConvergenceDelay",
                          "Time from a port's link failure (or recovery) until ECMP stops (or "
                          "resumes) hashing onto it. Assumption: 1 ms, a local hardware ECMP "
                          "group update.",
                          TimeValue(MilliSeconds(1)),
                          MakeTimeAccessor(&FabricSwitch::m_convergence), MakeTimeChecker(Time(0)))
            .AddAttribute(
                "EcmpSalt", "Per-switch ECMP hash seed; 0 derives one from the node id.",
                UintegerValue(0),
                MakeUintegerAccessor(&FabricSwitch::SetEcmpSalt, &FabricSwitch::GetEcmpSalt),
                MakeUintegerChecker<uint32_t>())
            .AddAttribute("PfcEnabled",
                          "Priority flow control for the lossless traffic class: pause the "
                          "upstream port when its ingress bytes pass the dynamic threshold, so "
                          "that congestion never drops a frame of that class.",
                          BooleanValue(false), MakeBooleanAccessor(&FabricSwitch::m_pfc),
                          MakeBooleanChecker())
            .AddAttribute("PfcClass", "The lossless traffic class. Assumption: 3.",
                          UintegerValue(3), MakeUintegerAccessor(&FabricSwitch::m_pfcClass),
                          MakeUintegerChecker<uint8_t>(0, 7))
            .AddAttribute("PfcAlpha",
                          "Dynamic PFC threshold: pause an ingress port whose buffered bytes "
                          "exceed PfcAlpha x (buffer - all headroom - used). Default 1/8 (the "
                          "HPCC simulator's setting for ports at NIC rate).",
                          DoubleValue(0.125), MakeDoubleAccessor(&FabricSwitch::m_pfcAlpha),
                          MakeDoubleChecker<double>(1.0 / 1024, 64))
            .AddAttribute("PfcResponseTime",
                          "Time the upstream port takes to act on a PAUSE (sized into the "
                          "headroom). Assumption: 1 us, the top of the usual range.",
                          TimeValue(MicroSeconds(1)),
                          MakeTimeAccessor(&FabricSwitch::m_pfcResponse), MakeTimeChecker(Time(0)))
            .AddAttribute("PfcXonOffset",
                          "Resume when the ingress bytes fall this far below the threshold. "
                          "Assumption: 8,356 B (two 4 KiB frames on the wire).",
                          UintegerValue(8356), MakeUintegerAccessor(&FabricSwitch::m_pfcXonOffset),
                          MakeUintegerChecker<uint64_t>())
            .AddTraceSource("Drop", "A frame was dropped by the switch (reason: FabricDropReason).",
                            MakeTraceSourceAccessor(&FabricSwitch::m_dropTrace),
                            "ns3::metaroce::FabricSwitch::DropTracedCallback")
            .AddTraceSource("EcnMark", "A frame was ECN-marked (CE).",
                            MakeTraceSourceAccessor(&FabricSwitch::m_markTrace),
                            "ns3::Packet::TracedCallback");
    return tid;
}

FabricSwitch::FabricSwitch()
{
    SetEcmpSalt(0); // the node id is known: Node's constructor registered it
}

void
FabricSwitch::SetEcmpSalt(uint32_t salt)
{
    m_salt = salt;
    m_hashSalt = salt != 0 ? salt : static_cast<uint32_t>(Mix64(GetId()));
}

FabricSwitch::Counters
FabricSwitch::GetCounters() const
{
    Counters c;
    c.forwarded = m_forwarded;
    c.dropBuffer = m_dropBuffer;
    c.dropNoRoute = m_dropNoRoute;
    c.dropLossless = m_dropLossless;
    c.ecnMarked = m_ecnMarked;
    c.maxBufferUsed = m_maxBufferUsed;
    c.pausesSent = m_pausesSent;
    c.resumesSent = m_resumesSent;
    return c;
}

FabricSwitch::~FabricSwitch() = default;

void
FabricSwitch::DoDispose()
{
    m_ports.clear();
    m_portsData = nullptr;
    m_nPorts = 0;
    m_egress = nullptr;
    m_router = nullptr;
    m_routerRaw = nullptr;
    Node::DoDispose();
}

uint32_t
FabricSwitch::AddPort(Ptr<FabricNetDevice> dev)
{
    AddDevice(dev);
    dev->SetReceiver(this);
    dev->SetRxLatency(m_latency.GetPicoSeconds());
    m_ports.push_back(PeekPointer(dev));
    m_portsData = m_ports.data();
    m_nPorts = static_cast<uint32_t>(m_ports.size());
    m_egress = nullptr; // refilled at the next frame
    return m_nPorts - 1;
}

void
FabricSwitch::SetLatency(Time latency)
{
    m_latency = latency;
    for (FabricNetDevice* p : m_ports)
    {
        p->SetRxLatency(latency.GetPicoSeconds());
    }
}

Time
FabricSwitch::GetLatency() const
{
    return m_latency;
}

void
FabricSwitch::SetRouter(Ptr<FabricRouter> router, const SwitchCoord& coord)
{
    m_router = router;
    m_routerRaw = PeekPointer(router);
    m_coord = coord;
}

int64_t
FabricSwitch::AssignStreams(int64_t stream)
{
    m_rng.Seed(static_cast<uint64_t>(stream));
    return 1;
}

uint64_t
FabricSwitch::GetBufferBytes() const
{
    return m_bufferBytes != 0 ? m_bufferBytes : m_bufferPerPort * m_nPorts;
}

double
FabricSwitch::MarkProbability(uint64_t q) const
{
    if (q <= m_kmin)
    {
        return 0.0;
    }
    if (q >= m_kmax)
    {
        return q == m_kmax ? m_pmax : 1.0;
    }
    return m_pmax * static_cast<double>(q - m_kmin) / static_cast<double>(m_kmax - m_kmin);
}

int32_t
FabricSwitch::SelectEgress(uint32_t src, uint32_t dst, uint16_t entropy) const
{
    PortRange r = m_routerRaw->Route(m_coord, dst);
    if (r.count == 0)
    {
        return -1;
    }
    if (r.count == 1)
    {
        return IsRoutable(r.first) ? static_cast<int32_t>(r.first) : -1;
    }
    uint32_t h = EcmpHash(src, dst, entropy, m_hashSalt);
    if (!m_anyUnroutable)
    {
        return static_cast<int32_t>(r.first + h % r.count);
    }
    // Some port has failed: hash over the live members only (rare path).
    uint32_t live = 0;
    for (uint32_t i = 0; i < r.count; ++i)
    {
        live += IsRoutable(r.first + i) ? 1 : 0;
    }
    if (live == 0)
    {
        return -1;
    }
    uint32_t k = h % live;
    for (uint32_t i = 0; i < r.count; ++i)
    {
        if (IsRoutable(r.first + i) && k-- == 0)
        {
            return static_cast<int32_t>(r.first + i);
        }
    }
    return -1;
}

void
FabricSwitch::FillEgress()
{
    m_egressStore.resize(m_nPorts);
    for (uint32_t i = 0; i < m_nPorts; ++i)
    {
        m_egressStore[i] = {m_portsData[i], m_portsData[i]->TxHotLine()};
    }
    m_egress = m_egressStore.data();
}

void
FabricSwitch::PrepareFrame(const FabricFrame& f, uint32_t stage) const
{
    // Where the frame will go (the same pure function ReceiveFrame runs): fetch the egress
    // entry, then the port's three hot lines and its link's, which ReceiveFrame would
    // otherwise wait for one after the other; three stages, the later ones have nothing left.
    if (m_egress == nullptr || stage > 2)
    {
        return;
    }
    int32_t e = SelectEgress(f.src, f.dst, f.entropy);
    if (e < 0)
    {
        return;
    }
    if (stage == 0)
    {
        __builtin_prefetch(&m_egress[e]);
        __builtin_prefetch(&m_bufferUsed); // line 3: admission
        return;
    }
    const FabricNetDevice* out = m_egress[e].port;
    if (stage == 1)
    {
        const char* p = reinterpret_cast<const char*>(out);
        __builtin_prefetch(p);
        __builtin_prefetch(p + 64);
        __builtin_prefetch(p + 128);
        __builtin_prefetch(m_egress[e].link);
        return;
    }
    out->PrepareEnqueue(f);
}

void
FabricSwitch::ReceiveFrame(FabricNetDevice* port, FabricFrame&& f)
{
    if (m_egress == nullptr)
    {
        FillEgress();
    }
    int32_t e = SelectEgress(f.src, f.dst, f.entropy);
    if (e < 0)
    {
        ++m_dropNoRoute;
        TraceFrame(m_dropTrace, f, static_cast<uint8_t>(FabricDropReason::NoRoute));
        return;
    }
    FabricNetDevice* out = m_egress[e].port; // the entry PrepareFrame fetched
    if (!out->IsLinkUp())
    {
        out->Enqueue(std::move(f)); // counted as a link-down drop by the port (black hole)
        return;
    }
    // Shared buffer, dynamic threshold per egress queue. A lossless frame is held back by
    // PFC instead, so only a full buffer (headroom exhausted) can drop it.
    uint64_t total = GetBufferBytes();
    uint64_t queued = out->GetQueueBytes();
    bool lossless = m_pfc && f.tc == m_pfcClass;
    double threshold = m_alpha * static_cast<double>(total - m_bufferUsed);
    if (m_bufferUsed + f.wireBytes > total ||
        (!lossless && static_cast<double>(queued + f.wireBytes) > threshold))
    {
        ++m_dropBuffer;
        m_dropLossless += lossless ? 1 : 0;
        TraceFrame(m_dropTrace, f, static_cast<uint8_t>(FabricDropReason::BufferFull));
        return;
    }
    if (m_ecnEnabled && f.ecn != ECN_NOT_ECT && f.ecn != ECN_CE && queued > m_kmin)
    {
        double p = MarkProbability(queued);
        if (p >= 1.0 || m_rng.Uniform() < p)
        {
            f.ecn = ECN_CE;
            ++m_ecnMarked;
            TraceFrame(m_markTrace, f);
        }
    }
    f.ingress = static_cast<uint16_t>(port->GetIfIndex());
    if (lossless)
    {
        if (m_ingressBytes.empty())
        {
            PfcInit();
        }
        uint64_t& in = m_ingressBytes[f.ingress];
        in += f.wireBytes;
        if (!m_upstreamPaused[f.ingress] && static_cast<double>(in) > GetPfcXoff())
        {
            SendPause(f.ingress, true);
        }
    }
    m_bufferUsed += f.wireBytes;
    if (m_bufferUsed > m_maxBufferUsed)
    {
        m_maxBufferUsed = m_bufferUsed;
    }
    ++m_forwarded;
    out->Enqueue(std::move(f));
}

void
FabricSwitch::NotifyDequeue(FabricNetDevice* port, const FabricFrame& f)
{
    m_bufferUsed -= f.wireBytes;
    if (m_pfc && f.tc == m_pfcClass && f.ingress != 0xffff && !m_ingressBytes.empty())
    {
        uint64_t& in = m_ingressBytes[f.ingress];
        in -= f.wireBytes;
        if (m_upstreamPaused[f.ingress] &&
            (in == 0 || static_cast<double>(in + m_pfcXonOffset) <= GetPfcXoff()))
        {
            SendPause(f.ingress, false);
        }
    }
}

void
FabricSwitch::PfcInit()
{
    m_ingressBytes.assign(m_ports.size(), 0);
    m_upstreamPaused.assign(m_ports.size(), false);
    m_pfcHeadroomTotal = 0;
    for (uint32_t i = 0; i < m_ports.size(); ++i)
    {
        m_pfcHeadroomTotal += GetPfcHeadroom(i);
    }
}

uint64_t
FabricSwitch::GetPfcHeadroom(uint32_t i) const
{
    const FabricNetDevice* d = m_ports[i];
    if (!d->GetFabricChannel())
    {
        return 0;
    }
    double bytesPerPs = static_cast<double>(d->GetDataRate().GetBitRate()) / 8e12;
    // In flight: on the wire plus inside this switch's lookup pipeline, not yet admitted.
    double flight = bytesPerPs * static_cast<double>(d->GetFabricChannel()->GetDelayPs() +
                                                     m_latency.GetPicoSeconds());
    double response = bytesPerPs * static_cast<double>(m_pfcResponse.GetPicoSeconds());
    return static_cast<uint64_t>(2 * flight + 2 * 4178 + response);
}

double
FabricSwitch::GetPfcXoff() const
{
    double free = static_cast<double>(GetBufferBytes()) - static_cast<double>(m_pfcHeadroomTotal) -
                  static_cast<double>(m_bufferUsed);
    return m_pfcAlpha * std::max(free, 0.0);
}

void
FabricSwitch::SendPause(uint32_t i, bool pause)
{
    m_upstreamPaused[i] = pause;
    NS_LOG_INFO("switch " << GetId() << " port " << i << ": PFC " << (pause ? "PAUSE" : "RESUME")
                          << " of class " << unsigned(m_pfcClass) << " sent upstream");
    if (pause)
    {
        ++m_pausesSent;
    }
    else
    {
        ++m_resumesSent;
    }
    FabricNetDevice* up = m_ports[i]->GetPeer();
    if (up == nullptr)
    {
        return;
    }
    // The PAUSE frame (64 B + preamble and gap) crosses the link ahead of any data.
    FabricChannel* link = PeekPointer(m_ports[i]->GetFabricChannel());
    int64_t delay = m_ports[i]->TxTimePs(84) + link->GetDelayPs();
    const uint32_t dir = link->DirectionFrom(m_ports[i]);
    if (link->IsRemote(dir))
    {
        // The upstream device is another process's (a distributed run).
        FabricChannel::GetRemoteSink()->SendPause(link, dir, NowPs() + delay, m_pfcClass, pause);
        return;
    }
    Simulator::ScheduleWithContext(up->GetNode()->GetId(), PicoSeconds(delay),
                                   &FabricNetDevice::SetPaused, up, m_pfcClass, pause);
}

void
FabricSwitch::NotifyLinkChange(FabricNetDevice* port, bool up)
{
    Simulator::Schedule(m_convergence, &FabricSwitch::Converge, this, port->GetIfIndex());
}

void
FabricSwitch::Converge(uint32_t i)
{
    bool up = m_ports[i]->IsLinkUp();
    if (!m_anyUnroutable)
    {
        if (up)
        {
            return;
        }
        m_unroutable.assign(m_ports.size(), false);
        m_anyUnroutable = true;
    }
    m_unroutable[i] = !up;
    NS_LOG_INFO("switch " << GetId() << " port " << i << (up ? " rejoins" : " leaves")
                          << " its ECMP groups");
}

} // namespace metaroce
} // namespace ns3
