#include "metaroce-rate-hint.h"

#include "model/core/fast-simulator-impl.h"
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
    uint32_t qpn = qp->GetQpn();
    if (qpn >= m_lastPs.size())
    {
        m_lastPs.resize(qpn + 1, -1);
    }
    if (m_lastPs[qpn] < 0)
    {
        m_active.push_back(qpn);
    }
    m_lastPs[qpn] = NowPs();
    if (!IsPending(m_sweep))
    {
        m_sweep = Simulator::Schedule(m_window, &MetaRoceRateHint::Sweep, this);
    }
}

void
MetaRoceRateHint::Sweep()
{
    int64_t cutoff = NowPs() - m_window.GetPicoSeconds();
    for (std::size_t i = 0; i < m_active.size();)
    {
        // A connection closed meanwhile (its last collective is done) receives nothing.
        Ptr<QueuePair> qp = m_nic->GetQueuePair(m_active[i]);
        int64_t& last = m_lastPs[m_active[i]];
        if (last < cutoff && (!qp || qp->GetPendingReceives() == 0))
        {
            last = -1;
            m_active[i] = m_active.back();
            m_active.pop_back();
        }
        else
        {
            ++i;
        }
    }
    if (!m_active.empty())
    {
        m_sweep = Simulator::Schedule(m_window, &MetaRoceRateHint::Sweep, this);
    }
}

double
MetaRoceRateHint::HintBps() const
{
    std::size_t n = std::max<std::size_t>(1, m_active.size());
    return m_nic->GetUpCapacityBps() * m_utilization / static_cast<double>(n);
}

} // namespace metaroce
} // namespace ns3
