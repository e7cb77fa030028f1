#include "metaroce-rate-hint.h"

#include "model/core/fast-simulator-impl.h"
#include "model/transport/queue-pair.h"
#include "model/transport/rdma-nic.h"

#include "ns3/double.h"
#include "ns3/enum.h"
#include "ns3/simulator.h"

#include <algorithm>

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
                          "A QP with a message partly received stops counting once its sender "
                          "has been silent this long (until its next packet). Assumption: "
                          "20 us, about two scale-out RTTs.",
                          TimeValue(MicroSeconds(20)),
                          MakeTimeAccessor(&MetaRoceRateHint::m_window),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("Utilization",
                          "Fraction of the inbound capacity handed out in hints. Assumption: "
                          "1 (ECN drains any queue built before the first hints arrive).",
                          DoubleValue(1.0), MakeDoubleAccessor(&MetaRoceRateHint::m_utilization),
                          MakeDoubleChecker<double>(0.01, 1.0))
            .AddAttribute("BufferWeighting",
                          "How posted receive buffers weigh an active QP's share: posted "
                          "(weight = posted, unconsumed buffers, at least 1) or off (equal "
                          "shares). Assumption: posted (the talk names the signal, not its "
                          "use).",
                          EnumValue(WEIGHT_POSTED),
                          MakeEnumAccessor(&MetaRoceRateHint::m_weighting),
                          MakeEnumChecker(WEIGHT_POSTED, "posted", WEIGHT_OFF, "off"));
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

uint32_t
MetaRoceRateHint::WeightOf(const QueuePair* qp) const
{
    return m_weighting == WEIGHT_POSTED ? std::max<uint32_t>(1, qp->GetPostedReceives()) : 1;
}

void
MetaRoceRateHint::OnData(const QueuePair* qp)
{
    uint32_t qpn = qp->GetQpn();
    if (qpn >= m_q.size())
    {
        m_q.resize(qpn + 1);
    }
    Entry& e = m_q[qpn];
    if (qp->GetPendingReceives() == 0)
    {
        // Everything it sent so far is complete: no share until its next message.
        if (e.weight != 0)
        {
            Remove(qpn);
        }
        return;
    }
    uint32_t w = WeightOf(qp);
    if (e.weight == 0)
    {
        e.slot = static_cast<uint32_t>(m_active.size());
        m_active.push_back(qpn);
    }
    m_totalWeight += static_cast<double>(w) - e.weight;
    e.weight = w;
    e.lastPs = NowPs();
    if (!IsPending(m_sweep))
    {
        m_sweep = Simulator::Schedule(m_window, &MetaRoceRateHint::Sweep, this);
    }
}

void
MetaRoceRateHint::Remove(uint32_t qpn)
{
    Entry& e = m_q[qpn];
    m_totalWeight -= e.weight;
    uint32_t last = m_active.back();
    m_active[e.slot] = last;
    m_q[last].slot = e.slot;
    m_active.pop_back();
    e.weight = 0;
    if (m_active.empty())
    {
        m_totalWeight = 0; // no drift from the sums
    }
}

void
MetaRoceRateHint::Sweep()
{
    int64_t cutoff = NowPs() - m_window.GetPicoSeconds();
    for (std::size_t i = 0; i < m_active.size();)
    {
        uint32_t qpn = m_active[i];
        // A connection closed meanwhile (its last collective is done) receives nothing.
        Ptr<QueuePair> qp = m_nic->GetQueuePair(qpn);
        if (m_q[qpn].lastPs < cutoff || !qp || qp->GetPendingReceives() == 0)
        {
            Remove(qpn); // moves the last entry into slot i
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
MetaRoceRateHint::HintBps(const QueuePair* qp) const
{
    uint32_t qpn = qp->GetQpn();
    uint32_t w = qpn < m_q.size() ? m_q[qpn].weight : 0;
    double total = m_totalWeight;
    if (w == 0)
    {
        w = WeightOf(qp);
        total += w;
    }
    return m_nic->GetUpCapacityBps() * m_utilization * w / std::max<double>(total, w);
}

double
MetaRoceRateHint::HintBps() const
{
    return m_nic->GetUpCapacityBps() * m_utilization / std::max(1.0, m_totalWeight);
}

} // namespace metaroce
} // namespace ns3
