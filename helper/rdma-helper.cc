#include "helper/rdma-helper.h"

#include "model/rocev2/rocev2-queue-pair.h"

#include "ns3/uinteger.h"

#include <cmath>

namespace ns3
{
namespace metaroce
{

RdmaHelper::RdmaHelper(Fabric& fabric, int64_t stream)
    : m_fabric(fabric)
    , m_rng(static_cast<uint64_t>(stream))
{
    m_qpFactory.SetTypeId(RoceV2QueuePair::GetTypeId());
}

RdmaHelper::~RdmaHelper()
{
    for (auto& nic : m_nics)
    {
        nic->Close(); // not Dispose: that would dispose the host it is aggregated to
    }
}

void
RdmaHelper::InstallNics()
{
    m_nics.clear();
    m_nextPlane.assign(m_fabric.NumNics(), 0);
    for (uint32_t i = 0; i < m_fabric.NumNics(); ++i)
    {
        auto nic = CreateObject<RdmaNic>();
        const TopologySpec& t = m_fabric.Spec();
        if (t.nicTxLatencyNs)
        {
            nic->SetAttribute("TxLatency",
                              TimeValue(PicoSeconds(std::llround(*t.nicTxLatencyNs * 1e3))));
        }
        if (t.nicRxLatencyNs)
        {
            nic->SetAttribute("RxLatency",
                              TimeValue(PicoSeconds(std::llround(*t.nicRxLatencyNs * 1e3))));
        }
        nic->Install(m_fabric.Host(i), i);
        m_nics.push_back(nic);
    }
}

void
RdmaHelper::SetQueuePairType(const std::string& typeName)
{
    m_qpFactory.SetTypeId(typeName);
}

std::pair<Ptr<QueuePair>, Ptr<QueuePair>>
RdmaHelper::Connect(uint32_t a, uint32_t b, int32_t plane)
{
    uint32_t planes = m_fabric.NumPlanes();
    uint32_t p = plane >= 0 ? static_cast<uint32_t>(plane) : m_nextPlane[a]++ % planes;
    // A pinned QP (RoCEv2) takes its one path's entropy from here; drawn for both ends on
    // every process alike, whether or not the end is this process's.
    const bool pinned = m_qpFactory.MakesPinned();
    Ptr<QueuePair> qa = !m_isLocal || m_isLocal(a) ? m_qpFactory.Create() : nullptr;
    Ptr<QueuePair> qb = !m_isLocal || m_isLocal(b) ? m_qpFactory.Create() : nullptr;
    for (auto& qp : {qa, qb})
    {
        // RoCE NICs derive the UDP source port from the QP: any value in the dynamic range.
        const uint64_t entropy = pinned ? 49152 + m_rng.Next() % 16384 : 0;
        if (!qp)
        {
            continue; // another process's end
        }
        qp->PinToPort(p);
        qp->SetEntropy(static_cast<uint16_t>(entropy));
    }
    uint32_t qpnA = qa ? m_nics[a]->AddQueuePair(qa) : m_nics[a]->ReserveQpn();
    uint32_t qpnB = qb ? m_nics[b]->AddQueuePair(qb) : m_nics[b]->ReserveQpn();
    if (qa)
    {
        qa->Connect(b, qpnB);
    }
    if (qb)
    {
        qb->Connect(a, qpnA);
    }
    return {qa, qb};
}

} // namespace metaroce
} // namespace ns3
