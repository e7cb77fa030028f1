#include "rdma-nic.h"

#include "ns3/abort.h"
#include "ns3/log.h"
#include "ns3/nstime.h"
#include "ns3/object-map.h"
#include "ns3/trace-source-accessor.h"

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("RdmaNic");
NS_OBJECT_ENSURE_REGISTERED(RdmaNic);

namespace
{
/// The NIC's attached queue pairs as an ObjectMap keyed by QPN, for Config paths such as
/// /NodeList/3/$ns3::metaroce::RdmaNic/QueuePairList/1/QpWindow. QPNs of closed QPs are
/// skipped (a Config path must not meet a null object).
class QueuePairListAccessor : public ObjectPtrContainerAccessor
{
  private:
    bool DoGetN(const ObjectBase* object, std::size_t* n) const override
    {
        const RdmaNic* nic = dynamic_cast<const RdmaNic*>(object);
        if (nic == nullptr)
        {
            return false;
        }
        // ObjectPtrContainerAccessor::Get asks for the count, then for each element in
        // turn: the attached QPNs are listed here once.
        m_qpns.clear();
        for (uint32_t qpn = 1; qpn <= nic->GetNQueuePairs(); ++qpn)
        {
            if (nic->GetQueuePair(qpn))
            {
                m_qpns.push_back(qpn);
            }
        }
        *n = m_qpns.size();
        return true;
    }

    Ptr<Object> DoGet(const ObjectBase* object, std::size_t i, std::size_t* index) const override
    {
        const RdmaNic* nic = dynamic_cast<const RdmaNic*>(object);
        *index = m_qpns[i];
        return nic->GetQueuePair(m_qpns[i]);
    }

    mutable std::vector<uint32_t> m_qpns;
};
} // namespace

TypeId
RdmaNic::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::RdmaNic")
            .SetParent<Object>()
            .SetGroupName("MetaRoce")
            .AddConstructor<RdmaNic>()
            .AddAttribute("TxLatency",
                          "Transmit processing of every frame, from the doorbell or the "
                          "QP's turn to the first bit on the wire (WQE and payload fetch "
                          "over PCIe, header build), pipelined: it adds latency, not "
                          "occupancy. Assumption: 500 ns, half of the ~1 us one-way "
                          "latency of a small RDMA write between two back-to-back "
                          "400G-class NICs, as NIC vendors' perftest figures put it.",
                          TimeValue(NanoSeconds(500)), MakeTimeAccessor(&RdmaNic::m_txLatency),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("RxLatency",
                          "Receive processing of every frame, from its last bit to its "
                          "payload placed in memory (PCIe write) and the QP updated, "
                          "pipelined. Assumption: 500 ns, the other half (see TxLatency).",
                          TimeValue(NanoSeconds(500)), MakeTimeAccessor(&RdmaNic::m_rxLatency),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("QueuePairList", "The NIC's open queue pairs, by QPN (for Config paths).",
                          ObjectMapValue(),
                          Ptr<const AttributeAccessor>(new QueuePairListAccessor, false),
                          MakeObjectMapChecker<QueuePair>())
            .AddTraceSource("InvariantViolation",
                            "A queue pair of this NIC broke a delivery invariant "
                            "(the text names the QP, the rule and the values).",
                            MakeTraceSourceAccessor(&RdmaNic::m_violationTrace),
                            "ns3::metaroce::RdmaNic::ViolationTracedCallback");
    return tid;
}

RdmaNic::RdmaNic()
    : m_qps(1)
    , m_readyMask(1, 0)
{
}

RdmaNic::~RdmaNic() = default;

void
RdmaNic::DoDispose()
{
    Close();
    Object::DoDispose();
}

void
RdmaNic::Close()
{
    for (auto& qp : m_qps)
    {
        if (qp)
        {
            qp->Dispose();
        }
    }
    m_qps.clear();
    m_ports.clear();
    m_host = nullptr;
}

void
RdmaNic::Install(Ptr<Node> host, uint32_t nicId)
{
    m_host = host;
    m_nicId = nicId;
    // As ns-3's protocols are: /NodeList/N/$ns3::metaroce::RdmaNic reaches the NIC (and its
    // QueuePairList the QPs) in Config paths, and host->GetObject<RdmaNic>() finds it.
    if (!host->GetObject<RdmaNic>())
    {
        host->AggregateObject(this);
    }
    else
    {
        // ns-3 aggregates one object per type: a second NIC on a host (a later helper on
        // the same fabric) works, but Config paths and GetObject find the first.
        NS_LOG_WARN("host " << host->GetId() << " has an RdmaNic already; the new one is "
                            << "not aggregated to it");
    }
    NS_ABORT_MSG_IF(host->GetNDevices() > 32, "RdmaNic: at most 32 ports");
    for (uint32_t i = 0; i < host->GetNDevices(); ++i)
    {
        auto dev = DynamicCast<FabricNetDevice>(host->GetDevice(i));
        NS_ABORT_MSG_IF(!dev, "RdmaNic: host device " << i << " is not a fabric port");
        dev->SetReceiver(this);
        dev->SetTxLatency(m_txLatency.GetPicoSeconds());
        dev->SetRxLatency(m_rxLatency.GetPicoSeconds());
        Port p;
        p.dev = PeekPointer(dev);
        m_ports.push_back(std::move(p));
    }
}

uint32_t
RdmaNic::AddQueuePair(Ptr<QueuePair> qp)
{
    uint32_t qpn = ReserveQpn();
    AttachQueuePair(qpn, qp);
    return qpn;
}

uint32_t
RdmaNic::ReserveQpn()
{
    uint32_t qpn = static_cast<uint32_t>(m_qps.size());
    NS_ABORT_MSG_IF(qpn > 0xffffff, "RdmaNic: out of QPNs");
    m_qps.emplace_back();
    m_readyMask.push_back(0);
    return qpn;
}

void
RdmaNic::AttachQueuePair(uint32_t qpn, Ptr<QueuePair> qp)
{
    NS_ABORT_MSG_IF(qpn == 0 || qpn >= m_qps.size() || m_qps[qpn], "RdmaNic: QPN not free");
    m_qps[qpn] = qp;
    qp->Attach(this, qpn);
}

void
RdmaNic::DetachQueuePair(uint32_t qpn)
{
    NS_ABORT_MSG_IF(qpn == 0 || qpn >= m_qps.size(), "RdmaNic: no such QPN");
    if (m_readyMask[qpn] != 0)
    {
        // Out of the round robins it waits in (they hold plain pointers).
        for (uint32_t port = 0; port < m_ports.size(); ++port)
        {
            Ring<QueuePair*>& ready = m_ports[port].ready;
            for (uint32_t n = ready.Size(); n > 0; --n)
            {
                QueuePair* q = ready.PopFront();
                if (q->GetQpn() != qpn)
                {
                    ready.PushBack(std::move(q));
                }
            }
        }
        m_readyMask[qpn] = 0;
    }
    m_qps[qpn] = nullptr;
}

Ptr<QueuePair>
RdmaNic::GetQueuePair(uint32_t qpn) const
{
    return qpn < m_qps.size() ? m_qps[qpn] : nullptr;
}

void
RdmaNic::NotifyReady(QueuePair* qp, uint32_t port)
{
    uint32_t bit = 1u << port;
    uint32_t& mask = m_readyMask[qp->GetQpn()];
    if ((mask & bit) == 0)
    {
        mask |= bit;
        m_ports[port].ready.PushBack(std::move(qp));
    }
    FabricNetDevice* dev = m_ports[port].dev;
    if (!m_ports[port].pulling && !dev->IsBusy() && dev->GetQueuePackets() == 0)
    {
        Arbitrate(port);
    }
}

void
RdmaNic::Arbitrate(uint32_t port)
{
    Port& p = m_ports[port];
    if (!p.dev->IsLinkUp())
    {
        return; // a dead port takes nothing; its QPs wait (or move, if they can)
    }
    uint32_t bit = 1u << port;
    while (!p.ready.Empty())
    {
        QueuePair* qp = p.ready.PopFront();
        m_readyMask[qp->GetQpn()] &= ~bit;
        FabricFrame f;
        p.pulling = true;
        PullResult r = qp->PullFrame(port, f);
        p.pulling = false;
        if (r == PullResult::Nothing)
        {
            continue;
        }
        if (r == PullResult::More)
        {
            m_readyMask[qp->GetQpn()] |= bit;
            QueuePair* again = qp;
            p.ready.PushBack(std::move(again));
        }
        p.dev->Enqueue(std::move(f));
        return;
    }
}

void
RdmaNic::SendControl(uint32_t port, FabricFrame&& f)
{
    m_ports[port].dev->Enqueue(std::move(f));
}

void
RdmaNic::ReceiveFrame(FabricNetDevice* port, FabricFrame&& frame)
{
    if (frame.header)
    {
        // Only the RDMA transports build header frames on this fabric.
        RdmaHeaderData h;
        static_cast<const RdmaFrameHeader&>(*frame.header).Get(h);
        Deliver(port, frame, h);
        return;
    }
    RdmaHeader parsed; // a frame built from bytes (tests, NetDevice::Send)
    frame.packet->RemoveHeader(parsed);
    Deliver(port, frame, parsed);
}

void
RdmaNic::PrepareFrame(const FabricFrame& f, uint32_t stage) const
{
    // Along the chain Deliver follows: header, QP table entry, QP, then the QP's own state.
    if (!f.header)
    {
        return;
    }
    const auto* fh = static_cast<const RdmaFrameHeader*>(&*f.header);
    if (stage == 0)
    {
        __builtin_prefetch(fh);
        return;
    }
    uint32_t qpn = fh->f.destQpn;
    if (qpn == 0 || qpn >= m_qps.size())
    {
        return;
    }
    if (stage == 1)
    {
        __builtin_prefetch(&m_qps[qpn]);
        if (fh->f.opcode == RdmaOpcode::PathAck)
        {
            __builtin_prefetch(reinterpret_cast<const char*>(fh) + 64); // the SACK bitmap
        }
        return;
    }
    const QueuePair* qp = PeekPointer(m_qps[qpn]);
    if (qp == nullptr)
    {
        return;
    }
    if (stage == 2)
    {
        __builtin_prefetch(qp);
        return;
    }
    qp->PrepareReceive(fh->f, stage - 3);
}

void
RdmaNic::PrepareIdle(uint32_t port, uint32_t stage) const
{
    // Along the chain Arbitrate follows: the port's entry, its round robin's head, the QP,
    // then the QP's own state.
    if (port >= m_ports.size())
    {
        return;
    }
    const Port& p = m_ports[port];
    if (stage == 0)
    {
        __builtin_prefetch(&p);
        return;
    }
    if (p.ready.Empty())
    {
        return;
    }
    if (stage == 1)
    {
        __builtin_prefetch(&p.ready.Front());
        return;
    }
    const QueuePair* qp = p.ready.Front();
    if (stage == 2)
    {
        __builtin_prefetch(qp);
        return;
    }
    qp->PreparePull(port, stage - 3);
}

void
RdmaNic::Deliver(FabricNetDevice* port, FabricFrame& frame, const RdmaHeaderData& h)
{
    if (h.destQpn == 0 || h.destQpn >= m_qps.size() || !m_qps[h.destQpn])
    {
        ++m_unknownQp;
        return;
    }
    m_qps[h.destQpn]->Receive(port->GetIfIndex(), frame, h);
}

void
RdmaNic::NotifyPortIdle(FabricNetDevice* port)
{
    Arbitrate(port->GetIfIndex());
}

double
RdmaNic::GetUpCapacityBps() const
{
    if (m_upCapacityBps < 0)
    {
        m_upCapacityBps = 0;
        for (const Port& p : m_ports)
        {
            if (p.dev->IsLinkUp())
            {
                m_upCapacityBps += static_cast<double>(p.dev->GetDataRate().GetBitRate());
            }
        }
    }
    return m_upCapacityBps;
}

void
RdmaNic::NotifyLinkChange(FabricNetDevice* port, bool up)
{
    m_upCapacityBps = -1;
    uint32_t i = port->GetIfIndex();
    for (std::size_t q = 1; q < m_qps.size(); ++q)
    {
        if (m_qps[q])
        {
            m_qps[q]->NotifyPortState(i, up);
        }
    }
    if (up)
    {
        Arbitrate(i);
    }
}

} // namespace metaroce
} // namespace ns3
