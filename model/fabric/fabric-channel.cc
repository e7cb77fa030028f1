#include "fabric-channel.h"

#include "fabric-net-device.h"

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
        m_inFlight[d].Clear();
        if (m_arrival[d])
        {
            m_arrival[d]->Cancel();
            m_arrival[d] = nullptr;
        }
        m_dev[d] = nullptr;
    }
    Channel::DoDispose();
}

void
FabricChannel::Connect(Ptr<FabricNetDevice> a, Ptr<FabricNetDevice> b)
{
    m_dev[0] = a;
    m_dev[1] = b;
    // Arrival events run in the receiving node's context (logging, distributed runs).
    m_dstNode[0] = b->GetNode() ? b->GetNode()->GetId() : 0;
    m_dstNode[1] = a->GetNode() ? a->GetNode()->GetId() : 0;
    a->Attach(this);
    b->Attach(this);
    RefreshDelays();
}

void
FabricChannel::RefreshDelays()
{
    for (uint32_t d = 0; d < 2; ++d)
    {
        m_handoverPs[d] = m_delayPs + (m_dev[1 - d] ? m_dev[1 - d]->GetRxLatencyPs() : 0);
    }
}

FabricNetDevice*
FabricChannel::GetPeer(const FabricNetDevice* dev) const
{
    return dev == PeekPointer(m_dev[0]) ? PeekPointer(m_dev[1]) : PeekPointer(m_dev[0]);
}

void
FabricChannel::Transmit(const FabricNetDevice* from, FabricFrame&& frame, int64_t txPs,
                        int64_t nowPs)
{
    NS_ASSERT(nowPs == Simulator::Now().GetPicoSeconds());
    uint32_t d = from == PeekPointer(m_dev[0]) ? 0 : 1;
    if (!m_up)
    {
        ++m_lostInFlight;
        return;
    }
    frame.readyPs = nowPs + txPs + m_handoverPs[d];
    bool wasEmpty = m_inFlight[d].Empty();
    int64_t arrive = frame.readyPs;
    m_inFlight[d].PushBack(std::move(frame));
    if (wasEmpty)
    {
        ScheduleDeliver(d, arrive - nowPs, true);
    }
}

void
FabricChannel::ScheduleDeliver(uint32_t d, int64_t delayPs, bool withContext)
{
    if (!m_arrival[d])
    {
        m_arrival[d] = Create<ArrivalEvent>(this, d);
    }
    m_arrival[d]->SetHints(&m_inFlight[d].Front(), PeekPointer(m_dev[1 - d]));
    if (withContext)
    {
        ArrivalEvent::ScheduleInWithContext(m_arrival[d], m_dstNode[d], delayPs);
    }
    else
    {
        ArrivalEvent::ScheduleIn(m_arrival[d], delayPs);
    }
}

void
FabricChannel::Deliver(uint32_t d)
{
    int64_t now = Simulator::Now().GetPicoSeconds();
    FrameRing& q = m_inFlight[d];
    FabricNetDevice* dst = PeekPointer(m_dev[1 - d]);
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
FabricChannel::SetUp(bool up)
{
    if (up == m_up)
    {
        return;
    }
    m_up = up;
    if (!up)
    {
        for (uint32_t d = 0; d < 2; ++d)
        {
            if (m_arrival[d] && !m_inFlight[d].Empty())
            {
                m_arrival[d]->Cancel(); // its frames are lost; a fresh event serves what follows
                m_arrival[d] = nullptr;
            }
            m_lostInFlight += m_inFlight[d].Size();
            m_inFlight[d].Clear();
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
