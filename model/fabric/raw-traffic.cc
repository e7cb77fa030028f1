#include "raw-traffic.h"

#include "model/core/fast-simulator-impl.h"

#include "ns3/abort.h"
#include "ns3/log.h"
#include "ns3/simulator.h"

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("RawTraffic");
NS_OBJECT_ENSURE_REGISTERED(RawHeader);
NS_OBJECT_ENSURE_REGISTERED(RawTrafficEndpoint);

TypeId
RawHeader::GetTypeId()
{
    static TypeId tid = TypeId("ns3::metaroce::RawHeader")
                            .SetParent<Header>()
                            .SetGroupName("MetaRoce")
                            .AddConstructor<RawHeader>();
    return tid;
}

TypeId
RawHeader::GetInstanceTypeId() const
{
    return GetTypeId();
}

void
RawHeader::Serialize(Buffer::Iterator i) const
{
    i.WriteHtonU32(flow);
    i.WriteHtonU32(seq);
    i.WriteHtonU64(static_cast<uint64_t>(sentPs));
}

uint32_t
RawHeader::Deserialize(Buffer::Iterator i)
{
    if (i.GetRemainingSize() < 16)
    {
        return 0; // truncated
    }
    flow = i.ReadNtohU32();
    seq = i.ReadNtohU32();
    sentPs = static_cast<int64_t>(i.ReadNtohU64());
    return 16;
}

void
RawHeader::Print(std::ostream& os) const
{
    os << "flow=" << flow << " seq=" << seq << " sent_ps=" << sentPs;
}

TypeId
RawTrafficEndpoint::GetTypeId()
{
    static TypeId tid = TypeId("ns3::metaroce::RawTrafficEndpoint")
                            .SetParent<Object>()
                            .SetGroupName("MetaRoce")
                            .AddConstructor<RawTrafficEndpoint>();
    return tid;
}

void
RawTrafficEndpoint::DoDispose()
{
    m_host = nullptr;
    m_ports.clear();
    Object::DoDispose();
}

void
RawTrafficEndpoint::Install(Ptr<Node> host, uint32_t nicId)
{
    m_host = host;
    m_nic = nicId;
    for (uint32_t i = 0; i < host->GetNDevices(); ++i)
    {
        auto dev = DynamicCast<FabricNetDevice>(host->GetDevice(i));
        NS_ABORT_MSG_IF(!dev, "RawTrafficEndpoint: host device " << i << " is not a fabric port");
        dev->SetReceiver(this);
        m_ports.push_back(PeekPointer(dev));
    }
}

uint32_t
RawTrafficEndpoint::AddFlow(const FlowSpec& spec)
{
    NS_ABORT_MSG_IF(spec.port >= m_ports.size(),
                    "RawTrafficEndpoint: port " << spec.port << " does not exist");
    NS_ABORT_MSG_IF(spec.rate.GetBitRate() == 0, "RawTrafficEndpoint: rate must be positive");
    Flow f;
    f.spec = spec;
    f.id = (m_nic << 12) | static_cast<uint32_t>(m_flows.size());
    // Inter-packet gap so that the wire rate (overheads included) equals spec.rate.
    uint32_t wire =
        FabricFrame::Make(Create<Packet>(spec.payloadBytes + 16), 0, 0, 0, 0, 0).wireBytes;
    f.gapPs = static_cast<int64_t>(static_cast<unsigned __int128>(wire) * 8000000000000ULL /
                                   spec.rate.GetBitRate());
    m_flows.push_back(f);
    uint32_t idx = static_cast<uint32_t>(m_flows.size() - 1);
    Simulator::ScheduleWithContext(m_host->GetId(), spec.start, &RawTrafficEndpoint::SendNext, this,
                                   idx);
    return f.id;
}

void
RawTrafficEndpoint::SendNext(uint32_t i)
{
    Flow& f = m_flows[i];
    int64_t now = NowPs();
    if (now >= f.spec.stop.GetPicoSeconds())
    {
        return;
    }
    RawHeader h;
    h.flow = f.id;
    h.seq = f.seq++;
    h.sentPs = now;
    Ptr<Packet> p = Create<Packet>(f.spec.payloadBytes);
    p->AddHeader(h);
    ++m_sent;
    m_ports[f.spec.port]->Enqueue(FabricFrame::Make(p, m_nic, f.spec.dst, f.spec.entropy, f.spec.tc,
                                                    f.spec.ecnCapable ? ECN_ECT0 : ECN_NOT_ECT));
    Simulator::Schedule(PicoSeconds(f.gapPs), &RawTrafficEndpoint::SendNext, this, i);
}

void
RawTrafficEndpoint::ReceiveFrame(FabricNetDevice* port, FabricFrame&& frame)
{
    RawHeader h;
    frame.packet->PeekHeader(h);
    int64_t now = NowPs();
    ++m_sink.packets;
    m_sink.payloadBytes += frame.packet->GetSize() - h.GetSerializedSize();
    if (frame.ecn == ECN_CE)
    {
        ++m_sink.ecnMarked;
    }
    int64_t lat = now - h.sentPs;
    m_sink.latencySumPs += lat;
    m_sink.latencyMaxPs = std::max(m_sink.latencyMaxPs, lat);
    if (m_sink.firstPs < 0)
    {
        m_sink.firstPs = now;
    }
    m_sink.lastPs = now;
    uint32_t& next = m_nextSeq[h.flow];
    if (h.seq < next)
    {
        ++m_sink.outOfOrder;
    }
    else
    {
        next = h.seq + 1;
    }
    ++m_perFlow[h.flow];
}

} // namespace metaroce
} // namespace ns3
