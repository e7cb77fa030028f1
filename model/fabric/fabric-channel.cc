#include "fabric-channel.h"

#include "fabric-net-device.h"
#include "model/core/fast-simulator-impl.h"

#include "ns3/log.h"
#include "ns3/simulator.h"

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("FabricChannel");
NS_OBJECT_ENSURE_REGISTERED(FabricChannel);

TypeId
FabricChannel::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::FabricChannel")
            .SetParent<Channel>()
            .SetGroupName("MetaRoce")
            .AddConstructor<FabricChannel>()
            .AddAttribute("Delay", "One-way propagation delay of the link.",
                          TimeValue(NanoSeconds(0)),
                          MakeTimeAccessor(&FabricChannel::SetDelay, &FabricChannel::GetDelay),
                          MakeTimeChecker(Time(0)));
    return tid;
}

FabricChannel::FabricChannel() = default;

FabricChannel::~FabricChannel() = default;

void
FabricChannel::DoDispose()
{
    for (uint32_t d = 0; d < 2; ++d)
    {
        Direction& x = m_dir[d];
        x.inFlight.Clear();
        if (x.arrival)
        {
            x.arrival->CancelFiring();
            x.arrival = nullptr;
        }
        x.to = nullptr;
        m_dev[d] = nullptr;
        x.remote = false;
    }
    Channel::DoDispose();
}

void
FabricChannel::Connect(Ptr<FabricNetDevice> a, Ptr<FabricNetDevice> b)
{
    m_dev[0] = a;
    m_dev[1] = b;
    for (uint32_t d = 0; d < 2; ++d)
    {
        m_dir[d].to = PeekPointer(m_dev[1 - d]);
        // Arrival events run in the receiving node's context (logging, distributed runs).
        m_dir[d].toNode = m_dir[d].to->GetNode() ? m_dir[d].to->GetNode()->GetId() : 0;
    }
    a->Attach(this);
    b->Attach(this);
    RefreshDelays();
    RefreshReceivers();
}

void
FabricChannel::RefreshDelays()
{
    for (uint32_t d = 0; d < 2; ++d)
    {
        // The sender's transmit pipeline and the receiver's lookup both delay the handover.
        m_dir[d].handoverPs = m_delayPs + (m_dev[d] ? m_dev[d]->GetTxLatencyPs() : 0) +
                              (m_dir[d].to ? m_dir[d].to->GetRxLatencyPs() : 0);
    }
}

void
FabricChannel::RefreshReceivers()
{
    for (Direction& x : m_dir)
    {
        x.toReceiver = x.to ? x.to->GetReceiver() : nullptr;
    }
}

void
FabricChannel::PrepareEvent(uint32_t d, uint32_t stage) const
{
    // The hints fetched this line, the first frame and the receiver's hot lines.
    const Direction& x = m_dir[d];
    if (!x.inFlight.Empty() && x.toReceiver != nullptr)
    {
        x.toReceiver->PrepareFrame(x.inFlight.Front(), stage);
    }
}

FabricNetDevice*
FabricChannel::GetPeer(const FabricNetDevice* dev) const
{
    return m_dir[DirectionFrom(dev)].to;
}

void
FabricChannel::Transmit(uint32_t d, FabricFrame&& frame, int64_t txPs, int64_t nowPs)
{
    NS_ASSERT(nowPs == NowPs());
    Direction& x = m_dir[d];
    if (x.divert)
    {
        if (!x.up)
        {
            ++m_lostInFlight;
            return;
        }
        frame.readyPs = nowPs + txPs + x.handoverPs;
        s_remoteSink->SendRemote(this, d, std::move(frame), x.downs);
        return;
    }
    frame.readyPs = nowPs + txPs + x.handoverPs;
    bool wasEmpty = x.inFlight.Empty();
    int64_t arrive = frame.readyPs;
    x.inFlight.PushBack(std::move(frame));
    if (wasEmpty)
    {
        ScheduleDeliver(d, arrive - nowPs, true);
    }
}

void
FabricChannel::ScheduleDeliver(uint32_t d, int64_t delayPs, bool withContext)
{
    Direction& x = m_dir[d];
    if (!x.arrival)
    {
        x.arrival = Create<ArrivalEvent>(this, d);
    }
    // The first frame (a 48-byte slot may straddle two lines: the hot address gets both),
    // the receiver's hot line, then what Deliver reads; PrepareEvent goes further.
    x.arrival->SetHints(&x.inFlight.Front(), x.toReceiver, &x, x.to->RxHotLine());
    FastSimulatorImpl* s = FastSimulatorImpl::Running();
    if (s != nullptr && s->NodeOrder())
    {
        // Ordered by link and direction, not by who scheduled it: the same whether the frame
        // was sent here or received from another process (see FastSimulatorImpl).
        x.arrival->Ref();
        s->InsertWithTie(PeekPointer(x.arrival), s->CurrentTs() + static_cast<uint64_t>(delayPs),
                         x.toNode, FastSimulatorImpl::FrameTie(GetId(), d));
        return;
    }
    if (withContext)
    {
        ArrivalEvent::ScheduleInWithContext(x.arrival, x.toNode, delayPs);
    }
    else
    {
        ArrivalEvent::ScheduleIn(x.arrival, delayPs);
    }
}

void
FabricChannel::Deliver(uint32_t d)
{
    int64_t now = NowPs();
    FrameRing& q = m_dir[d].inFlight;
    FabricNetDevice* dst = m_dir[d].to;
    // Arrival times are non-decreasing (FIFO, constant delay): deliver all that are due.
    while (!q.Empty() && q.Front().readyPs <= now)
    {
        FabricFrame f = q.PopFront();
        dst->Receive(std::move(f));
    }
    if (!q.Empty())
    {
        ScheduleDeliver(d, q.Front().readyPs - now, false);
    }
}

void
FabricChannel::SetRemote(uint32_t d, bool remote)
{
    m_dir[d].remote = remote;
    m_dir[d].divert = !m_dir[d].up || remote;
}

void
FabricChannel::ReceiveRemote(uint32_t d, FabricFrame&& frame, uint8_t downs)
{
    if (!m_dir[d].up || m_dir[d].downs != downs)
    {
        ++m_lostInFlight;
        return;
    }
    m_dir[d].to->Receive(std::move(frame));
}

void
FabricChannel::EnqueueRemote(uint32_t d, FabricFrame&& frame, uint8_t downs)
{
    Direction& x = m_dir[d];
    if (!x.up || x.downs != downs)
    {
        ++m_lostInFlight;
        return;
    }
    const bool wasEmpty = x.inFlight.Empty();
    const int64_t arrive = frame.readyPs;
    x.inFlight.PushBack(std::move(frame));
    if (wasEmpty)
    {
        ScheduleDeliver(d, arrive - NowPs(), true);
    }
}

void
FabricChannel::SetUp(bool up)
{
    if (up == m_dir[0].up)
    {
        return;
    }
    m_dir[0].up = m_dir[1].up = up;
    for (Direction& x : m_dir)
    {
        x.divert = !up || x.remote;
        if (!up)
        {
            ++x.downs;
        }
    }
    if (!up)
    {
        for (Direction& x : m_dir)
        {
            if (x.arrival && !x.inFlight.Empty())
            {
                x.arrival->CancelFiring(); // its frames are lost; a fresh event serves what follows
                x.arrival = nullptr;
            }
            m_lostInFlight += x.inFlight.Size();
            x.inFlight.Clear();
        }
    }
    for (uint32_t d = 0; d < 2; ++d)
    {
        if (m_dev[d])
        {
            m_dev[d]->SetLinkUp(up);
        }
    }
}

std::size_t
FabricChannel::GetNDevices() const
{
    return 2;
}

Ptr<NetDevice>
FabricChannel::GetDevice(std::size_t i) const
{
    return m_dev[i];
}

} // namespace metaroce
} // namespace ns3
