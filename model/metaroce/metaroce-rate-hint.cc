#include "metaroce-rate-hint.h"

#include "model/transport/queue-pair.h"
#include "model/transport/rdma-nic.h"

#include "ns3/double.h"
#include "ns3/simulator.h"

namespace ns3
{
namespace metaroce
{

NS_OBJECT_ENSURE_REGISTERED(MetaRoceRateHint);

TypeId
MetaRoceRateHint::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::MetaRoceRateHint")
            .SetParent<Object>()
            .SetGroupName("MetaRoce")
            .AddConstructor<MetaRoceRateHint>()
            .AddAttribute("ActiveWindow",
                          "A sender stays active this long after its last data packet. "
                          "Assumption: 20 us, about two scale-out RTTs.",
                          TimeValue(MicroSeconds(20)),
                          MakeTimeAccessor(&MetaRoceRateHint::m_window),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("Utilization",
                          "Fraction of the inbound capacity handed out in hints. Assumption: "
                          "1 (ECN drains any queue built before the first hints arrive).",
                          DoubleValue(1.0), MakeDoubleAccessor(&MetaRoceRateHint::m_utilization),
                          MakeDoubleChecker<double>(0.01, 1.0));
    return tid;
}

MetaRoceRateHint::MetaRoceRateHint()
    : m_window(MicroSeconds(20))
{
}

MetaRoceRateHint::~MetaRoceRateHint() = default;

void
MetaRoceRateHint::DoDispose()
{
    m_sweep.Cancel();
    m_nic = nullptr;
    Object::DoDispose();
}

Ptr<MetaRoceRateHint>
MetaRoceRateHint::Of(RdmaNic* nic)
{
    Ptr<MetaRoceRateHint> h = nic->GetObject<MetaRoceRateHint>();
    if (!h)
    {
        h = CreateObject<MetaRoceRateHint>();
        h->m_nic = nic;
        nic->AggregateObject(h);
    }
    return h;
}

void
MetaRoceRateHint::OnData(const QueuePair* qp)
{
    m_lastSeen[qp->GetQpn()] = {Simulator::Now().GetPicoSeconds(), qp};
    if (!m_sweep.IsRunning())
    {
        m_sweep = Simulator::Schedule(m_window, &MetaRoceRateHint::Sweep, this);
    }
}

void
MetaRoceRateHint::Sweep()
{
    int64_t cutoff = Simulator::Now().GetPicoSeconds() - m_window.GetPicoSeconds();
    for (auto it = m_lastSeen.begin(); it != m_lastSeen.end();)
    {
        bool idle = it->second.lastPs < cutoff && it->second.qp->GetPendingReceives() == 0;
        it = idle ? m_lastSeen.erase(it) : std::next(it);
    }
    if (!m_lastSeen.empty())
    {
        m_sweep = Simulator::Schedule(m_window, &MetaRoceRateHint::Sweep, this);
    }
}

double
MetaRoceRateHint::HintBps() const
{
    double capacity = 0;
    for (uint32_t p = 0; p < m_nic->GetNPorts(); ++p)
    {
        const FabricNetDevice* port = m_nic->GetPort(p);
        if (port->IsLinkUp())
        {
            capacity += static_cast<double>(port->GetDataRate().GetBitRate());
        }
    }
    std::size_t n = std::max<std::size_t>(1, m_lastSeen.size());
    return capacity * m_utilization / static_cast<double>(n);
}

} // namespace metaroce
} // namespace ns3
