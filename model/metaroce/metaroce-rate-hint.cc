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
                          MakeEnumChecker(WEIGHT_POSTED, "posted", WEIGHT_OFF, "off"))
            .AddAttribute(
                "Redistribute",
                "What becomes of a share its sender cannot use: measured (every "
                "ActiveWindow the tracker measures each active QP's delivered rate; "
                "one below LimitedBelow of its share keeps LimitedHeadroom x its rate "
                "and the others split the rest by weight) or off (plain shares: a "
                "sender held back elsewhere leaves its share idle). Assumption: "
                "measured (the talk says the receiver 'knows best how much traffic "
                "is coming').",
                EnumValue(REDISTRIBUTE_MEASURED),
                MakeEnumAccessor(&MetaRoceRateHint::m_redistribute),
                MakeEnumChecker(REDISTRIBUTE_MEASURED, "measured", REDISTRIBUTE_OFF, "off"))
            .AddAttribute("LimitedBelow",
                          "A QP that delivered less than this fraction of its share over a "
                          "measurement is limited elsewhere. Assumption: 0.8.",
                          DoubleValue(0.8), MakeDoubleAccessor(&MetaRoceRateHint::m_limitedBelow),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("LimitedHeadroom",
                          "What a limited QP keeps reserved, as a multiple of its measured rate "
                          "(room to speed up before the next measurement). Assumption: 1.25.",
                          DoubleValue(1.25), MakeDoubleAccessor(&MetaRoceRateHint::m_headroom),
                          MakeDoubleChecker<double>(1.0, 100.0));
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
MetaRoceRateHint::OnData(const QueuePair* qp, uint32_t payloadBytes)
{
    uint32_t qpn = qp->GetQpn();
    if (qpn >= m_slot.size())
    {
        m_slot.resize(qpn + 1, 0);
    }
    if (qp->GetPendingReceives() == 0)
    {
        // Everything it sent so far is complete: no share until its next message.
        if (m_slot[qpn] != 0)
        {
            Remove(qpn);
        }
        return;
    }
    uint32_t w = WeightOf(qp);
    if (m_slot[qpn] == 0)
    {
        m_active.emplace_back();
        m_active.back().qpn = qpn;
        m_slot[qpn] = static_cast<uint32_t>(m_active.size());
    }
    Entry& e = m_active[m_slot[qpn] - 1];
    m_totalWeight += static_cast<double>(w) - e.weight;
    if (e.reservedBps > 0)
    {
        m_limitedWeight += static_cast<double>(w) - e.weight;
    }
    e.weight = w;
    e.bytes += payloadBytes;
    e.lastPs = NowPs();
    if (!IsPending(m_sweep))
    {
        m_sweep = Simulator::Schedule(m_window, &MetaRoceRateHint::Sweep, this);
    }
}

void
MetaRoceRateHint::Remove(uint32_t qpn)
{
    const uint32_t slot = m_slot[qpn] - 1;
    const Entry& e = m_active[slot];
    m_totalWeight -= e.weight;
    if (e.reservedBps > 0)
    {
        m_reservedBps -= e.reservedBps;
        m_limitedWeight -= e.weight;
    }
    if (slot + 1 != m_active.size())
    {
        m_active[slot] = m_active.back(); // the last one takes its place
        m_slot[m_active[slot].qpn] = slot + 1;
    }
    m_active.pop_back();
    m_slot[qpn] = 0;
    if (m_active.empty())
    {
        m_totalWeight = 0; // no drift from the sums
        m_reservedBps = 0;
        m_limitedWeight = 0;
    }
}

void
MetaRoceRateHint::Sweep()
{
    int64_t cutoff = NowPs() - m_window.GetPicoSeconds();
    for (std::size_t i = 0; i < m_active.size();)
    {
        uint32_t qpn = m_active[i].qpn;
        // A connection closed meanwhile (its last collective is done) receives nothing.
        Ptr<QueuePair> qp = m_nic->GetQueuePair(qpn);
        if (m_active[i].lastPs < cutoff || !qp || qp->GetPendingReceives() == 0)
        {
            Remove(qpn); // moves the last entry into slot i
        }
        else
        {
            ++i;
        }
    }
    Allocate();
    if (!m_active.empty())
    {
        m_sweep = Simulator::Schedule(m_window, &MetaRoceRateHint::Sweep, this);
    }
}

double
MetaRoceRateHint::Capacity() const
{
    return m_nic->GetUpCapacityBps() * m_utilization;
}

void
MetaRoceRateHint::Allocate()
{
    const int64_t now = NowPs();
    const double intervalPs = m_lastSweepPs < 0 ? 0 : static_cast<double>(now - m_lastSweepPs);
    m_lastSweepPs = now;
    // The QPs measured over the whole interval that delivered less than LimitedBelow of their
    // plain share (held back elsewhere, not by a hint), by rate per unit of weight.
    const double perWeightShare = m_totalWeight > 0 ? Capacity() / m_totalWeight : 0;
    std::vector<std::pair<double, uint32_t>> measured;
    for (Entry& e : m_active)
    {
        double rate = intervalPs > 0 ? e.bytes * 8e12 / intervalPs : 0;
        if (m_redistribute == REDISTRIBUTE_MEASURED && e.age > 0 && intervalPs > 0 &&
            rate < m_limitedBelow * perWeightShare * e.weight)
        {
            measured.emplace_back(rate / e.weight, e.qpn);
        }
        e.bytes = 0;
        e.reservedBps = 0;
        ++e.age;
    }
    m_reservedBps = 0;
    m_limitedWeight = 0;
    if (measured.empty())
    {
        return;
    }
    std::sort(measured.begin(), measured.end());
    // Water-filling: the slowest first; one that used less than LimitedBelow of its share of
    // what is left keeps LimitedHeadroom x its rate, the rest share the remainder.
    double left = Capacity();
    double wleft = m_totalWeight;
    for (const auto& [perWeight, qpn] : measured)
    {
        Entry& e = *Find(qpn);
        double fair = left * e.weight / wleft;
        double keep = perWeight * e.weight * m_headroom;
        if (keep >= fair)
        {
            break; // this one and every faster one take a share of what is left
        }
        e.reservedBps = keep;
        if (e.reservedBps <= 0)
        {
            e.reservedBps = 1; // a QP that delivered nothing reserves (almost) nothing
        }
        left -= e.reservedBps;
        wleft -= e.weight;
        m_reservedBps += e.reservedBps;
        m_limitedWeight += e.weight;
    }
}

double
MetaRoceRateHint::HintBps(const QueuePair* qp) const
{
    uint32_t qpn = qp->GetQpn();
    const Entry* e = Find(qpn);
    uint32_t w = e != nullptr ? e->weight : 0;
    double total = m_totalWeight;
    if (w == 0)
    {
        w = WeightOf(qp);
        total += w;
    }
    return ShareOf(e, w, total);
}

double
MetaRoceRateHint::ShareOf(const Entry* e, uint32_t w, double total) const
{
    const double capacity = Capacity();
    if (m_reservedBps > 0 && e != nullptr && e->weight != 0 && e->reservedBps == 0 &&
        total > m_limitedWeight)
    {
        // Not limited: a share of what the limited QPs leave.
        double rest = std::max(0.0, capacity - m_reservedBps);
        return std::max(capacity * w / total, rest * w / (total - m_limitedWeight));
    }
    return capacity * w / std::max<double>(total, w);
}

double
MetaRoceRateHint::HintBps() const
{
    return m_nic->GetUpCapacityBps() * m_utilization / std::max(1.0, m_totalWeight);
}

} // namespace metaroce
} // namespace ns3
