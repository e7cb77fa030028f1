#include "rdma-message-source.h"

#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("RdmaMessageSource");
NS_OBJECT_ENSURE_REGISTERED(RdmaMessageSource);

TypeId
RdmaMessageSource::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::RdmaMessageSource")
            .SetParent<Application>()
            .SetGroupName("MetaRoce")
            .AddConstructor<RdmaMessageSource>()
            .AddAttribute("MessageBytes", "Bytes of each message.", UintegerValue(1 << 20),
                          MakeUintegerAccessor(&RdmaMessageSource::m_messageBytes),
                          MakeUintegerChecker<uint64_t>(1))
            .AddAttribute("MaxMessages", "Messages to post in all (0: no limit).", UintegerValue(1),
                          MakeUintegerAccessor(&RdmaMessageSource::m_maxMessages),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("Outstanding",
                          "Messages kept posted and not yet sent: a new one is posted when one "
                          "is sent.",
                          UintegerValue(1), MakeUintegerAccessor(&RdmaMessageSource::m_outstanding),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("Streams", "Ordered streams of the QP the messages take in turn.",
                          UintegerValue(1), MakeUintegerAccessor(&RdmaMessageSource::m_streams),
                          MakeUintegerChecker<uint32_t>(1, 65535))
            .AddTraceSource("Post", "A message was posted: stream, sequence number, bytes.",
                            MakeTraceSourceAccessor(&RdmaMessageSource::m_postTrace),
                            "ns3::metaroce::RdmaMessageSource::PostTracedCallback");
    return tid;
}

RdmaMessageSource::RdmaMessageSource() = default;
RdmaMessageSource::~RdmaMessageSource() = default;

void
RdmaMessageSource::SetQueuePair(Ptr<QueuePair> qp)
{
    m_qp = qp;
}

int64_t
RdmaMessageSource::TakePostedPs(uint16_t stream, uint32_t seq)
{
    auto it = m_postedAt.find({stream, seq});
    if (it == m_postedAt.end())
    {
        return -1;
    }
    int64_t at = it->second;
    m_postedAt.erase(it);
    return at;
}

void
RdmaMessageSource::DoDispose()
{
    m_qp = nullptr;
    Application::DoDispose();
}

void
RdmaMessageSource::StartApplication()
{
    NS_ABORT_MSG_IF(!m_qp, "RdmaMessageSource started without a queue pair");
    m_running = true;
    for (uint32_t k = 0; k < m_outstanding; ++k)
    {
        PostOne();
    }
}

void
RdmaMessageSource::StopApplication()
{
    m_running = false; // posted messages still go; no new ones
}

void
RdmaMessageSource::PostOne()
{
    if (!m_running || (m_maxMessages != 0 && m_posted >= m_maxMessages))
    {
        return;
    }
    uint16_t stream = static_cast<uint16_t>(m_posted % m_streams);
    ++m_posted;
    uint32_t seq =
        m_qp->PostSend(m_messageBytes, stream, [this](const RdmaCompletion&) { PostOne(); });
    m_postedAt[{stream, seq}] = Simulator::Now().GetPicoSeconds();
    m_postTrace(stream, seq, m_messageBytes);
}

} // namespace metaroce
} // namespace ns3
