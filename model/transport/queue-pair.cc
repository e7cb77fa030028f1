#include "queue-pair.h"

#include "model/core/fast-simulator-impl.h"
#include "rdma-nic.h"

#include "ns3/abort.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/type-id.h"
#include "ns3/uinteger.h"

#include <sstream>

namespace ns3
{
namespace metaroce
{

namespace
{
/// The per-stream counter of `stream`, grown on first use.
uint32_t&
StreamSlot(std::vector<uint32_t>& v, uint16_t stream)
{
    if (stream >= v.size())
    {
        v.resize(stream + 1u, 0);
    }
    return v[stream];
}
} // namespace

NS_LOG_COMPONENT_DEFINE("QueuePair");
NS_OBJECT_ENSURE_REGISTERED(QueuePair);

TypeId
QueuePair::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::QueuePair")
            .SetParent<Object>()
            .SetGroupName("MetaRoce")
            .AddAttribute("Mtu", "Payload bytes per packet (the RDMA path MTU).",
                          UintegerValue(4096), MakeUintegerAccessor(&QueuePair::m_mtu),
                          MakeUintegerChecker<uint32_t>(64, 9000))
            .AddAttribute("DataTrafficClass",
                          "Traffic class of data packets (the PFC-protected class when PFC is "
                          "on). Assumption: 3, the usual RoCE priority.",
                          UintegerValue(3), MakeUintegerAccessor(&QueuePair::m_dataTc),
                          MakeUintegerChecker<uint8_t>(0, 5))
            .AddAttribute("ControlTrafficClass",
                          "Traffic class of ACKs, NAKs and CNPs (strict priority in the "
                          "fabric). Assumption: 6.",
                          UintegerValue(6), MakeUintegerAccessor(&QueuePair::m_controlTc),
                          MakeUintegerChecker<uint8_t>(6, 7))
            .AddTraceSource("Retransmit", "A data packet was retransmitted (PSN, path).",
                            MakeLazyTraceSourceAccessor<QueuePair>(&QueuePairTraces::retransmit),
                            "ns3::metaroce::QueuePair::RetransmitTracedCallback")
            .AddTraceSource(
                "ReceiveComplete",
                "A message completed at the receiver (stream, seq, bytes, time).",
                MakeLazyTraceSourceAccessor<QueuePair>(&QueuePairTraces::receiveComplete),
                "ns3::metaroce::QueuePair::CompleteTracedCallback")
            .AddTraceSource(
                "SendComplete",
                "A message completed at the sender: every byte acknowledged (stream, seq, "
                "bytes, time).",
                MakeLazyTraceSourceAccessor<QueuePair>(&QueuePairTraces::sendComplete),
                "ns3::metaroce::QueuePair::CompleteTracedCallback");
    return tid;
}

namespace
{
Ptr<RdmaCongestionOps>
CreateCongestionOps(TypeId type)
{
    ObjectFactory f;
    f.SetTypeId(type);
    return f.Create<RdmaCongestionOps>();
}
} // namespace

QueuePair::QueuePair() = default;

Ptr<RdmaCongestionOps>
QueuePair::NewCongestionOps(TypeId type) const
{
    bool shared = m_ccProto && m_ccProto->GetInstanceTypeId() == type;
    return (shared ? m_ccProto : CreateCongestionOps(type))->Fork();
}

void
QueuePairFactory::SetTypeId(TypeId tid)
{
    m_factory.SetTypeId(tid);
    m_proto = nullptr;
}

void
QueuePairFactory::SetTypeId(const std::string& name)
{
    m_factory.SetTypeId(name);
    m_proto = nullptr;
}

void
QueuePairFactory::Set(const std::string& name, const AttributeValue& value)
{
    m_factory.Set(name, value);
    m_proto = nullptr;
}

Ptr<QueuePair>
QueuePairFactory::Create() const
{
    if (!m_proto)
    {
        m_proto = m_factory.Create<QueuePair>();
        TypeIdValue cc;
        if (m_proto->GetAttributeFailSafe("CongestionControl", cc))
        {
            m_proto->SetCongestionPrototype(CreateCongestionOps(cc.Get()));
        }
    }
    return m_proto->Clone();
}

QueuePair::~QueuePair() = default;

QueuePairTraces&
QueuePair::GetTraceBlock()
{
    if (!m_traces)
    {
        m_traces.reset(new QueuePairTraces);
        InitTraces(*m_traces);
    }
    return *m_traces;
}

void
QueuePair::DoDispose()
{
    m_nic = nullptr;
    m_sendQueue.Clear();
    m_recv.clear();
    m_onReceive = nullptr;
    m_traces.reset();
    Object::DoDispose();
}

void
QueuePair::Attach(RdmaNic* nic, uint32_t qpn)
{
    m_nic = nic;
    m_qpn = qpn;
}

void
QueuePair::Connect(uint32_t remoteNic, uint32_t remoteQpn)
{
    m_remoteNic = remoteNic;
    m_remoteQpn = remoteQpn;
}

uint32_t
QueuePair::PostSend(uint64_t bytes, uint16_t stream, CompletionHandler onSent)
{
    NS_ABORT_MSG_IF(m_nic == nullptr, "QueuePair::PostSend before the QP was added to a NIC");
    NS_ABORT_MSG_IF(bytes > 0xffffffffULL, "QueuePair::PostSend: a message is at most 4 GiB - 1");
    SendMessage m;
    m.bytes = bytes;
    m.stream = stream;
    m.seq = StreamSlot(m_nextSeqToPost, stream)++;
    m.postedPs = NowPs();
    m.packets = PacketsOf(bytes);
    m.onSent = std::move(onSent);
    m_sendQueue.PushBack(std::move(m));
    ++m_counters.messagesPosted;
    m_counters.bytesPosted += bytes;
    m_nic->NotePosted(bytes);
    OnPosted();
    return m_sendQueue.Back().seq;
}

FabricFrame
QueuePair::MakeFrame(const RdmaHeaderData& h, uint32_t payload, uint16_t entropy, bool data)
{
    return FabricFrame::Make(RdmaFrameHeader::Make(h, payload), m_nic->GetNicId(), m_remoteNic,
                             entropy, data ? m_dataTc : m_controlTc, data ? ECN_ECT0 : ECN_NOT_ECT);
}

bool
QueuePair::Place(const RdmaHeaderData& h, uint32_t payload, bool trackPlacement)
{
    uint32_t& next = StreamSlot(m_nextSeqToComplete, h.stream);
    if (h.msgId < next)
    {
        ++m_counters.duplicatePackets; // the whole message already completed
        return false;
    }
    auto key = std::make_pair(h.stream, h.msgId);
    auto it = m_recv.find(key);
    if (it == m_recv.end())
    {
        RecvMessage rm;
        rm.bytes = h.msgBytes;
        rm.postedPs = NowPs();
        if (trackPlacement)
        {
            rm.placed.resize(PacketsOf(h.msgBytes));
        }
        it = m_recv.emplace(key, std::move(rm)).first;
    }
    RecvMessage& rm = it->second;
    if (rm.complete)
    {
        ++m_counters.duplicatePackets;
        return false;
    }
    if (trackPlacement)
    {
        std::size_t idx = h.offset / m_mtu;
        if (idx >= rm.placed.size() || rm.placed.test(idx))
        {
            ++m_counters.duplicatePackets;
            return false;
        }
        rm.placed.set(idx);
    }
    rm.received += payload;
    m_counters.bytesDelivered += payload;
    m_nic->NotePlaced(payload);
    bool whole = trackPlacement ? rm.placed.all() : h.offset + payload >= rm.bytes;
    if (whole)
    {
        rm.complete = true;
        rm.placed.clear();
        rm.placed.shrink_to_fit();
        ReleaseReceives(h.stream);
    }
    return true;
}

void
QueuePair::ReleaseReceives(uint16_t stream)
{
    uint32_t& next = StreamSlot(m_nextSeqToComplete, stream);
    for (;;)
    {
        auto it = m_recv.find(std::make_pair(stream, next));
        if (it == m_recv.end() || !it->second.complete)
        {
            return;
        }
        if (it->second.received != it->second.bytes)
        {
            // Exactly once: a complete message holds each of its bytes once.
            std::ostringstream os;
            os << "NIC " << m_nic->GetNicId() << " QP " << m_qpn << " (from NIC " << m_remoteNic
               << "): message " << next << " of stream " << stream << " completed with "
               << it->second.received << " of its " << it->second.bytes
               << " bytes placed (rule: every posted byte delivered exactly once)";
            m_nic->ReportViolation(os.str());
        }
        RdmaCompletion c;
        c.stream = stream;
        c.seq = next;
        c.bytes = it->second.bytes;
        c.postedPs = it->second.postedPs;
        c.completedPs = NowPs();
        m_recv.erase(it);
        ++next;
        ++m_counters.messagesReceived;
        if (m_postedReceives > 0)
        {
            --m_postedReceives;
        }
        if (m_traces)
        {
            m_traces->receiveComplete(stream, c.seq, c.bytes, Simulator::Now());
        }
        if (m_onReceive)
        {
            m_onReceive(c);
        }
    }
}

void
QueuePair::MarkSent(SendMessage& m)
{
    m.done = true;
    while (!m_sendQueue.Empty() && m_sendQueue.Front().done)
    {
        SendMessage front = std::move(m_sendQueue.Front());
        m_sendQueue.PopFront();
        ++m_sendQueueBase;
        ++m_counters.messagesSent;
        if (m_traces)
        {
            m_traces->sendComplete(front.stream, front.seq, front.bytes, Simulator::Now());
        }
        if (front.onSent)
        {
            RdmaCompletion c;
            c.stream = front.stream;
            c.seq = front.seq;
            c.bytes = front.bytes;
            c.postedPs = front.postedPs;
            c.completedPs = NowPs();
            front.onSent(c);
        }
    }
}

} // namespace metaroce
} // namespace ns3
