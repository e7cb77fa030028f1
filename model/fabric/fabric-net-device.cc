#include "fabric-net-device.h"

#include "fabric-channel.h"
#include "fabric-header.h"
#include "model/core/fast-simulator-impl.h"

#include "ns3/abort.h"
#include "ns3/boolean.h"
#include "ns3/data-rate.h"
#include "ns3/double.h"
#include "ns3/log.h"
#include "ns3/mac48-address.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("FabricNetDevice");
NS_OBJECT_ENSURE_REGISTERED(FabricNetDevice);

TypeId
FabricNetDevice::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::FabricNetDevice")
            .SetParent<NetDevice>()
            .SetGroupName("MetaRoce")
            .AddConstructor<FabricNetDevice>()
            .AddAttribute(
                "DataRate", "Line rate of the port.", DataRateValue(DataRate("100Gb/s")),
                MakeDataRateAccessor(&FabricNetDevice::SetDataRate, &FabricNetDevice::GetDataRate),
                MakeDataRateChecker())
            .AddAttribute(
                "LossRate",
                "Probability that a frame arriving at this port is lost (random loss "
                "on the link into it), 0..1.",
                DoubleValue(0.0),
                MakeDoubleAccessor(&FabricNetDevice::SetLossRate, &FabricNetDevice::GetLossRate),
                MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("ControlTrafficClass",
                          "Frames of this traffic class or higher use the strict-priority "
                          "control queue and are never paused (ACK, NAK, CNP). Assumption: 6, "
                          "as in common RoCE deployments that put CNPs on TC6.",
                          UintegerValue(6), MakeUintegerAccessor(&FabricNetDevice::m_controlTc),
                          MakeUintegerChecker<uint8_t>(1, 7))
            .AddAttribute("Mtu", "IP MTU in bytes (informational; frames are built by the NICs).",
                          UintegerValue(9000), MakeUintegerAccessor(&FabricNetDevice::m_mtu),
                          MakeUintegerChecker<uint16_t>(64))
            .AddTraceSource("Drop", "A frame was dropped by the port (reason: FabricDropReason).",
                            MakeTraceSourceAccessor(&FabricNetDevice::m_dropTrace),
                            "ns3::metaroce::FabricNetDevice::DropTracedCallback")
            .AddTraceSource(
                "PhyTxBegin", "A frame started transmission (the transport's bytes).",
                MakeLazyTraceSourceAccessor<FabricNetDevice>(&FabricPortTraces::txBegin),
                "ns3::Packet::TracedCallback")
            .AddTraceSource(
                "Sniffer",
                "A frame started transmission, as on the wire: Ethernet, IPv4, UDP (4791) and "
                "the RoCEv2 headers and payload (no FCS), for pcap.",
                MakeLazyTraceSourceAccessor<FabricNetDevice>(&FabricPortTraces::sniffer),
                "ns3::Packet::TracedCallback")
            .AddTraceSource(
                "QueueBytes",
                "Bytes waiting in the port's queues (data and control), after each change.",
                MakeLazyTraceSourceAccessor<FabricNetDevice>(&FabricPortTraces::queueBytes),
                "ns3::TracedValueCallback::Uint64");
    return tid;
}

FabricNetDevice::FabricNetDevice()
{
    SetDataRate(DataRate("100Gb/s"));
}

FabricNetDevice::~FabricNetDevice() = default;

FabricPortTraces&
FabricNetDevice::GetTraceBlock()
{
    if (!m_traces)
    {
        m_traces.reset(new FabricPortTraces);
        m_traces->queueBytes = m_queueBytes[0] + m_queueBytes[1];
    }
    return *m_traces;
}

void
FabricNetDevice::TraceTransmit(const FabricFrame& f)
{
    TraceFrame(m_traces->txBegin, f);
    if (!m_traces->sniffer.IsEmpty())
    {
        Ptr<Packet> p = f.AsPacket()->Copy();
        p->AddHeader(FabricHeader::FromFrame(f));
        m_traces->sniffer(p);
    }
}

void
FabricNetDevice::DoDispose()
{
    CancelTx();
    m_queue[0].Clear();
    m_queue[1].Clear();
    m_traces.reset();
    m_channel = nullptr;
    m_channelRaw = nullptr;
    m_node = nullptr;
    m_receiver = nullptr;
    NetDevice::DoDispose();
}

void
FabricNetDevice::SetDataRate(DataRate rate)
{
    NS_ABORT_MSG_IF(rate.GetBitRate() == 0, "FabricNetDevice: DataRate must be positive");
    m_rate = rate;
    // Exact picoseconds per byte for the usual rates (100G: 80), else 0: divide per frame.
    uint64_t bps = rate.GetBitRate();
    uint64_t ps = 8000000000000ULL % bps == 0 ? 8000000000000ULL / bps : 0;
    m_psPerByte = ps <= UINT32_MAX ? static_cast<uint32_t>(ps) : 0;
}

int64_t
FabricNetDevice::TxTimePs(uint32_t wireBytes) const
{
    // bytes * 8 bits * 1e12 ps/s / (bit/s); exact for the usual rates (100G: 80 ps per byte).
    if (m_psPerByte != 0)
    {
        return static_cast<int64_t>(uint64_t(wireBytes) * m_psPerByte);
    }
    unsigned __int128 num = static_cast<unsigned __int128>(wireBytes) * 8000000000000ULL;
    return static_cast<int64_t>(num / m_rate.GetBitRate());
}

void
FabricNetDevice::SetLossRate(double p)
{
    m_lossRate = p;
    m_lossy = p > 0;
}

int64_t
FabricNetDevice::AssignStreams(int64_t stream)
{
    m_rng.Seed(static_cast<uint64_t>(stream));
    return 1;
}

void
FabricNetDevice::Attach(Ptr<FabricChannel> channel)
{
    m_channel = channel;
    m_channelRaw = PeekPointer(channel);
    m_txDir = static_cast<uint8_t>(channel->DirectionFrom(this));
}

void
FabricNetDevice::SetReceiver(FabricFrameReceiver* r)
{
    m_receiver = r;
    m_notifyIdle = r != nullptr && r->WantsPortIdle();
    if (m_channelRaw != nullptr)
    {
        m_channelRaw->RefreshReceivers();
    }
}

void
FabricNetDevice::PrepareEvent(uint32_t, uint32_t stage) const
{
    // The hints fetched lines 0-2 and the link's line: fetch the owner's lines that
    // NotifyDequeue reads (a switch's buffer accounting) and the link slot the next frame
    // goes to.
    if (stage == 0 && m_receiver != nullptr)
    {
        __builtin_prefetch(m_receiver);
        __builtin_prefetch(reinterpret_cast<const char*>(m_receiver) + 64);
    }
    if (stage == 1 && m_channelRaw != nullptr)
    {
        m_channelRaw->PrepareTransmit(m_txDir);
    }
    // A NIC's port that will fall idle: its arbiter pulls the next frame from a QP.
    if (stage >= 1 && m_notifyIdle && m_queue[0].Empty() && m_queue[1].Empty())
    {
        m_receiver->PrepareIdle(m_ifIndex, stage - 1);
    }
}

void
FabricNetDevice::PrepareEnqueue(const FabricFrame& f) const
{
    // Nothing queued or pending: the frame most likely goes straight to the link; else to
    // its queue.
    if (m_queue[0].Empty() && m_queue[1].Empty() && !m_eventPending)
    {
        if (m_channelRaw != nullptr)
        {
            m_channelRaw->PrepareTransmit(m_txDir);
        }
        return;
    }
    FabricChannel::PrefetchSlot(m_queue[QueueOf(f.tc)].NextSlot());
}

FabricNetDevice::Counters
FabricNetDevice::GetCounters() const
{
    Counters c;
    c.txPackets = m_txPackets;
    c.txBytes = m_txBytes;
    c.rxPackets = m_rxPackets;
    c.rxBytes = m_rxBytes;
    c.dropLinkDown = m_dropLinkDown;
    c.dropLinkDownRx = m_dropLinkDownRx;
    c.dropCorrupt = m_dropCorrupt;
    c.maxQueueBytes = m_maxQueueBytes;
    c.pausedPs = m_pausedPs;
    c.pauses = m_pauses;
    return c;
}

FabricNetDevice*
FabricNetDevice::GetPeer() const
{
    return m_channel ? m_channel->GetPeer(this) : nullptr;
}

bool
FabricNetDevice::Enqueue(FabricFrame&& frame)
{
    if (!m_linkUp)
    {
        Drop(frame, FabricDropReason::LinkDown);
        return false;
    }
    uint32_t q = QueueOf(frame.tc);
    m_queueBytes[q] += frame.wireBytes;
    uint64_t total = m_queueBytes[0] + m_queueBytes[1];
    if (total > m_maxQueueBytes)
    {
        m_maxQueueBytes = total;
    }
    if (m_eventPending)
    {
        m_queue[q].PushBack(std::move(frame)); // the pending event will send it
        TraceQueue();
        return true;
    }
    int64_t now = NowPs();
    if (m_queue[0].Empty() && m_queue[1].Empty() && now >= m_busyUntilPs && frame.readyPs <= now &&
        (q == 0 || !IsPaused(frame.tc)))
    {
        // Idle port (the common case): the frame goes straight to the wire, without a trip
        // through the queue's storage. Same order of calls as the queued path.
        m_queueBytes[q] -= frame.wireBytes;
        StartTransmission(std::move(frame), now);
        return true;
    }
    m_queue[q].PushBack(std::move(frame));
    TraceQueue();
    Kick(now);
    return true;
}

void
FabricNetDevice::Kick(int64_t now)
{
    if (now >= m_busyUntilPs)
    {
        TryTransmit(now);
        return;
    }
    // The frame on the wire was started with nothing behind it, so no event marks its end.
    ScheduleTx(m_busyUntilPs - now);
}

void
FabricNetDevice::ScheduleTx(int64_t delayPs)
{
    if (!m_txEvent)
    {
        m_txEvent = Create<TxEvent>(this, 0);
    }
    m_eventPending = true;
    // Lines 0 and 1 (with the hot line's neighbour), the transmitter's line, and the frame
    // that goes next (data: the control queue is usually empty).
    m_txEvent->SetHints(&m_receiver, &m_busyUntilPs,
                        m_queue[1].Empty() ? nullptr : &m_queue[1].Front(), TxHotLine());
    TxEvent::ScheduleIn(m_txEvent, delayPs);
}

void
FabricNetDevice::CancelTx()
{
    if (m_eventPending && m_txEvent)
    {
        m_txEvent->CancelFiring();
        m_txEvent = nullptr;
    }
    m_eventPending = false;
}

bool
FabricNetDevice::IsBusy() const
{
    // A pending end-of-transmission event at this very instant still counts as busy, as
    // the transmitter is not free until it has run.
    return m_eventPending || NowPs() < m_busyUntilPs;
}

void
FabricNetDevice::SetRxLatency(int64_t ps)
{
    m_rxLatencyPs = ps;
    if (m_channel)
    {
        m_channel->RefreshDelays();
    }
}

void
FabricNetDevice::SetTxLatency(int64_t ps)
{
    m_txLatencyPs = ps;
    if (m_channel)
    {
        m_channel->RefreshDelays();
    }
}

void
FabricNetDevice::TryTransmit(int64_t now)
{
    // Control frames first, then data unless its class is paused (one data FIFO: a paused
    // head blocks the frames behind it, as in a single-queue port). A frame still inside the
    // switch pipeline (readyPs in the future) blocks nothing: the other queue may go.
    bool dataOk = !m_queue[1].Empty() && !IsPaused(m_queue[1].Front().tc);
    FrameRing* q = nullptr;
    int64_t wait = INT64_MAX;
    if (!m_queue[0].Empty())
    {
        if (m_queue[0].Front().readyPs <= now)
        {
            q = &m_queue[0];
        }
        else
        {
            wait = m_queue[0].Front().readyPs;
        }
    }
    if (q == nullptr && dataOk)
    {
        if (m_queue[1].Front().readyPs <= now)
        {
            q = &m_queue[1];
        }
        else
        {
            wait = std::min(wait, m_queue[1].Front().readyPs);
        }
    }
    if (q == nullptr)
    {
        if (wait != INT64_MAX)
        {
            // Forwarding latency not yet elapsed: start later, still one event.
            ScheduleTx(wait - now);
        }
        else if (m_queue[1].Empty() && m_notifyIdle)
        {
            m_receiver->NotifyPortIdle(this);
        }
        return;
    }
    uint32_t qi = static_cast<uint32_t>(q - m_queue);
    FabricFrame f = q->PopFront();
    m_queueBytes[qi] -= f.wireBytes;
    TraceQueue();
    StartTransmission(std::move(f), now);
}

void
FabricNetDevice::StartTransmission(FabricFrame&& f, int64_t now)
{
    if (m_receiver != nullptr)
    {
        m_receiver->NotifyDequeue(this, f);
    }
    int64_t tx = TxTimePs(f.wireBytes);
    m_busyUntilPs = now + tx;
    ++m_txPackets;
    m_txBytes += f.wireBytes;
    if (m_traces)
    {
        TraceTransmit(f); // only when traced: the bytes are cold (or built) here
    }
    m_channelRaw->Transmit(m_txDir, std::move(f), tx, now);
    // The end of this frame matters only if a frame waits behind it or the owner feeds the
    // port one frame at a time; otherwise the next Enqueue finds m_busyUntilPs.
    if (m_notifyIdle || !m_queue[0].Empty() || !m_queue[1].Empty())
    {
        ScheduleTx(tx);
    }
}

void
FabricNetDevice::TransmitComplete(uint32_t)
{
    m_eventPending = false;
    TryTransmit(NowPs());
}

void
FabricNetDevice::Receive(FabricFrame&& frame)
{
    if (!m_linkUp)
    {
        ++m_dropLinkDownRx;
        Drop(frame, FabricDropReason::LinkDown);
        return;
    }
    if (m_lossy && m_rng.Uniform() < m_lossRate)
    {
        Drop(frame, FabricDropReason::Corrupt);
        return;
    }
    ++m_rxPackets;
    m_rxBytes += frame.wireBytes;
    if (m_receiver != nullptr)
    {
        m_receiver->ReceiveFrame(this, std::move(frame));
    }
}

void
FabricNetDevice::Drop(const FabricFrame& f, FabricDropReason reason)
{
    if (reason == FabricDropReason::LinkDown)
    {
        ++m_dropLinkDown;
    }
    else if (reason == FabricDropReason::Corrupt)
    {
        ++m_dropCorrupt;
    }
    NS_LOG_LOGIC("port " << m_ifIndex << " drops frame " << f.src << "->" << f.dst << " reason "
                         << unsigned(reason));
    TraceFrame(m_dropTrace, f, static_cast<uint8_t>(reason));
}

void
FabricNetDevice::SetLinkUp(bool up)
{
    if (up == m_linkUp)
    {
        return;
    }
    m_linkUp = up;
    if (!up)
    {
        // A failed link loses what was queued for it; the owner releases its buffer.
        CancelTx();
        m_busyUntilPs = NowPs(); // the frame on the wire is lost
        for (auto& q : m_queue)
        {
            while (!q.Empty())
            {
                FabricFrame f = q.PopFront();
                if (m_receiver != nullptr)
                {
                    m_receiver->NotifyDequeue(this, f);
                }
                Drop(f, FabricDropReason::LinkDown);
            }
        }
        m_queueBytes[0] = m_queueBytes[1] = 0;
        TraceQueue();
    }
    m_linkChangeCallbacks();
    if (m_receiver != nullptr)
    {
        m_receiver->NotifyLinkChange(this, up);
    }
    if (up && !m_eventPending)
    {
        Kick(NowPs());
    }
}

void
FabricNetDevice::SetPaused(uint8_t tc, bool paused)
{
    uint8_t before = m_pausedMask;
    if (paused)
    {
        m_pausedMask |= static_cast<uint8_t>(1u << tc);
    }
    else
    {
        m_pausedMask &= static_cast<uint8_t>(~(1u << tc));
    }
    int64_t now = NowPs();
    if (before == 0 && m_pausedMask != 0)
    {
        ++m_pauses;
        m_pauseStartPs = now;
    }
    else if (before != 0 && m_pausedMask == 0)
    {
        m_pausedPs += static_cast<uint64_t>(now - m_pauseStartPs);
    }
    if (!paused && !m_eventPending)
    {
        Kick(now);
    }
}

// ---- NetDevice boilerplate: this device carries FabricFrames, not IP packets ----

void
FabricNetDevice::SetIfIndex(const uint32_t index)
{
    m_ifIndex = index;
}

Ptr<Channel>
FabricNetDevice::GetChannel() const
{
    return m_channel;
}

void
FabricNetDevice::SetAddress(Address address)
{
}

Address
FabricNetDevice::GetAddress() const
{
    return Mac48Address();
}

bool
FabricNetDevice::SetMtu(const uint16_t mtu)
{
    m_mtu = mtu;
    return true;
}

uint16_t
FabricNetDevice::GetMtu() const
{
    return m_mtu;
}

void
FabricNetDevice::AddLinkChangeCallback(Callback<void> callback)
{
    m_linkChangeCallbacks.ConnectWithoutContext(callback);
}

bool
FabricNetDevice::IsBroadcast() const
{
    return false;
}

Address
FabricNetDevice::GetBroadcast() const
{
    return Mac48Address::GetBroadcast();
}

bool
FabricNetDevice::IsMulticast() const
{
    return false;
}

Address
FabricNetDevice::GetMulticast(Ipv4Address multicastGroup) const
{
    return Mac48Address::GetMulticast(multicastGroup);
}

Address
FabricNetDevice::GetMulticast(Ipv6Address addr) const
{
    return Mac48Address::GetMulticast(addr);
}

bool
FabricNetDevice::IsBridge() const
{
    return false;
}

bool
FabricNetDevice::IsPointToPoint() const
{
    return true;
}

bool
FabricNetDevice::Send(Ptr<Packet> packet, const Address& dest, uint16_t protocolNumber)
{
    // Frames enter through Enqueue(), which carries the fabric addressing fields.
    NS_LOG_WARN("FabricNetDevice::Send is not supported; use Enqueue(FabricFrame)");
    return false;
}

bool
FabricNetDevice::SendFrom(Ptr<Packet> packet, const Address& source, const Address& dest,
                          uint16_t protocolNumber)
{
    return Send(packet, dest, protocolNumber);
}

Ptr<Node>
FabricNetDevice::GetNode() const
{
    return m_node;
}

void
FabricNetDevice::SetNode(Ptr<Node> node)
{
    m_node = node;
}

bool
FabricNetDevice::NeedsArp() const
{
    return false;
}

void
FabricNetDevice::SetReceiveCallback(NetDevice::ReceiveCallback cb)
{
    // Frames go to the FabricFrameReceiver; Node's IP-style upcall is not used.
}

void
FabricNetDevice::SetPromiscReceiveCallback(PromiscReceiveCallback cb)
{
}

bool
FabricNetDevice::SupportsSendFrom() const
{
    return false;
}

} // namespace metaroce
} // namespace ns3
