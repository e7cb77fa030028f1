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
                          MakeUintegerChecker<uint16_t>(64, 9000))
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

const QueuePair&
QueuePairFactory::Prototype() const
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
    return *m_proto;
}

bool
QueuePairFactory::MakesPinned() const
{
    return Prototype().IsPinned();
}

Ptr<QueuePair>
QueuePairFactory::Create() const
{
    return Prototype().Clone();
}

QueuePair::~QueuePair() = default;

QueuePair::Counters
QueuePair::GetCounters() const
{
    Counters c;
    if (m_sendBook)
    {
        const SendBook& s = *m_sendBook;
        c.messagesPosted = s.messagesPosted;
        c.bytesPosted = s.bytesPosted;
        c.messagesSent = s.messagesSent;
        c.dataPacketsSent = s.dataPacketsSent;
        c.retransmittedPackets = s.retransmittedPackets;
        c.spuriousRetransmissions = s.spuriousRetransmissions;
        c.timeouts = s.timeouts;
    }
    if (m_recvBook)
    {
        const RecvBook& r = *m_recvBook;
        c.messagesReceived = r.messagesReceived;
        c.bytesDelivered = r.bytesDelivered;
        c.duplicatePackets = r.duplicatePackets;
        c.outOfOrderDropped = r.outOfOrderDropped;
        c.acksSent = r.acksSent;
        c.naksSent = r.naksSent;
        c.cnpsSent = r.cnpsSent;
        c.ecnMarkedReceived = r.ecnMarkedReceived;
    }
    return c;
}

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
    if (m_recvBook)
    {
        m_recvBook->messages.clear(); // the counters stay readable
    }
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
    SendBook& book = SendSide();
    SendMessage m;
    m.bytes = bytes;
    m.stream = stream;
    m.seq = book.nextSeqToPost[stream]++;
    m.postedPs = NowPs();
    m.packets = PacketsOf(bytes);
    m.onSent = std::move(onSent);
    m_sendQueue.PushBack(std::move(m));
    ++book.messagesPosted;
    book.bytesPosted += bytes;
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
    RecvBook& book = ReceiveSide();
    uint32_t& next = book.nextSeqToComplete[h.stream];
    if (h.msgId < next)
    {
        ++book.duplicatePackets; // the whole message already completed
        return false;
    }
    auto key = std::make_pair(h.stream, h.msgId);
    auto it = book.messages.find(key);
    if (it == book.messages.end())
    {
        RecvMessage rm;
        rm.bytes = h.msgBytes;
        rm.postedPs = NowPs();
        if (trackPlacement)
        {
            rm.placed.resize(PacketsOf(h.msgBytes));
        }
        it = book.messages.emplace(key, std::move(rm)).first;
    }
    RecvMessage& rm = it->second;
    if (rm.complete)
    {
        ++book.duplicatePackets;
        return false;
    }
    if (trackPlacement)
    {
        std::size_t idx = h.offset / m_mtu;
        if (idx >= rm.placed.size() || rm.placed.test(idx))
        {
            ++book.duplicatePackets;
            return false;
        }
        rm.placed.set(idx);
    }
    rm.received += payload;
    book.bytesDelivered += payload;
    m_nic->NotePlaced(payload);
    bool whole = trackPlacement ? rm.placed.all() : h.offset + payload >= rm.bytes;
    if (whole)
    {
        rm.complete = true;
        rm.placed.clear();
        rm.placed.shrink_to_fit();
        ReleaseReceives(book, h.stream);
    }
    return true;
}

void
QueuePair::ReleaseReceives(RecvBook& book, uint16_t stream)
{
    uint32_t& next = book.nextSeqToComplete[stream];
    for (;;)
    {
        auto it = book.messages.find(std::make_pair(stream, next));
        if (it == book.messages.end() || !it->second.complete)
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
        book.messages.erase(it);
        ++next;
        ++book.messagesReceived;
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
        if (!front.reported)
        {
            Report(front);
        }
    }
}

void
QueuePair::MarkSentNow(uint64_t index)
{
    SendMessage& m = m_sendQueue.At(static_cast<uint32_t>(index - m_sendQueueBase));
    m.done = true;
    m.reported = true;
    // Out of the queue before its completion runs, which may post (and move the queue).
    SendMessage done;
    done.bytes = m.bytes;
    done.postedPs = m.postedPs;
    done.seq = m.seq;
    done.stream = m.stream;
    done.onSent = std::move(m.onSent);
    MarkSent(m);
    Report(done);
}

void
QueuePair::Report(SendMessage& m)
{
    ++m_sendBook->messagesSent;
    if (m_traces)
    {
        m_traces->sendComplete(m.stream, m.seq, m.bytes, Simulator::Now());
    }
    if (m.onSent)
    {
        RdmaCompletion c;
        c.stream = m.stream;
        c.seq = m.seq;
        c.bytes = m.bytes;
        c.postedPs = m.postedPs;
        c.completedPs = NowPs();
        m.onSent(c);
    }
}

} // namespace metaroce
} // namespace ns3
