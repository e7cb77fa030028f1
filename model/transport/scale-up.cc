#include "scale-up.h"

#include "model/core/fast-simulator-impl.h"
#include "rdma-nic.h"

#include "ns3/abort.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("ScaleUp");
NS_OBJECT_ENSURE_REGISTERED(ScaleUpDomain);
NS_OBJECT_ENSURE_REGISTERED(ScaleUpQueuePair);

TypeId
ScaleUpDomain::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::ScaleUpDomain")
            .SetParent<Object>()
            .SetGroupName("MetaRoce")
            .AddConstructor<ScaleUpDomain>()
            .AddAttribute("DataRate",
                          "Each accelerator's scale-up bandwidth per direction. Default: NVIDIA "
                          "H100 SXM, fourth-generation NVLink, 900 GB/s bidirectional per GPU "
                          "(NVIDIA's datasheet), i.e. 450 GB/s = 3,600 Gb/s each way.",
                          DataRateValue(DataRate("3600Gbps")),
                          MakeDataRateAccessor(&ScaleUpDomain::m_rate), MakeDataRateChecker())
            .AddAttribute("Latency",
                          "One-way latency of a chunk through the scale-up switch, after its "
                          "serialization. Assumption: vendors state only 'sub-microsecond' for "
                          "NVLink through NVSwitch; 700 ns.",
                          TimeValue(NanoSeconds(700)), MakeTimeAccessor(&ScaleUpDomain::m_latency),
                          MakeTimeChecker())
            .AddAttribute("ChunkBytes",
                          "Granularity at which messages share an accelerator's egress and "
                          "ingress. Assumption: 512 KiB, NCCL's Simple step: a receiving kernel "
                          "sees a step only once all of it has landed, so finer chunks change "
                          "only how concurrent transfers interleave on an egress, at two events "
                          "per chunk (64 KiB gave the same 64-GPU ring and all-to-all times and "
                          "trees within 0.3% but for DCQCN, which moves by up to 13% with any "
                          "change of timing).",
                          UintegerValue(524288), MakeUintegerAccessor(&ScaleUpDomain::m_chunkBytes),
                          MakeUintegerChecker<uint32_t>(256));
    return tid;
}

ScaleUpDomain::ScaleUpDomain() = default;
ScaleUpDomain::~ScaleUpDomain() = default;

void
ScaleUpDomain::DoDispose()
{
    for (Port& p : m_ports)
    {
        // Pending firings must not reach a disposed domain.
        if (p.busy && p.done)
        {
            p.done->CancelFiring();
        }
        if (p.arriving.Size() > 0 && p.deliver)
        {
            p.deliver->CancelFiring();
        }
    }
    m_ports.clear();
    Object::DoDispose();
}

void
ScaleUpDomain::SetAccelerators(uint32_t n)
{
    m_ports.clear();
    m_ports.resize(n);
    for (uint32_t i = 0; i < n; ++i)
    {
        m_ports[i].done = Create<DoneEvent>(this, i);
        m_ports[i].deliver = Create<DeliverEvent>(this, i);
    }
}

std::pair<Ptr<ScaleUpQueuePair>, Ptr<ScaleUpQueuePair>>
ScaleUpDomain::Connect(uint32_t a, uint32_t b)
{
    NS_ABORT_MSG_IF(a == b || a >= m_ports.size() || b >= m_ports.size(),
                    "ScaleUpDomain::Connect: accelerators " << a << " and " << b);
    Ptr<ScaleUpQueuePair> qa = CreateObject<ScaleUpQueuePair>();
    Ptr<ScaleUpQueuePair> qb = CreateObject<ScaleUpQueuePair>();
    qa->m_domain = qb->m_domain = this;
    qa->m_peer = PeekPointer(qb);
    qb->m_peer = PeekPointer(qa);
    qa->m_local = qb->m_peerLocal = a;
    qb->m_local = qa->m_peerLocal = b;
    return {qa, qb};
}

int64_t
ScaleUpDomain::TxPs(uint32_t bytes) const
{
    // A chunk of no payload still writes a flag: one 64-byte line.
    return static_cast<int64_t>(std::max<uint32_t>(bytes, 64) * 8e12 / m_rate.GetBitRate());
}

void
ScaleUpDomain::NotifyReady(uint32_t acc, ScaleUpQueuePair* qp, uint16_t stream)
{
    ScaleUpQueuePair::Cursor& c = qp->m_streams[stream];
    if (c.ready)
    {
        return;
    }
    c.ready = true;
    m_ports[acc].ready.PushBack(Ready{qp, stream});
    Transmit(acc);
}

void
ScaleUpDomain::Transmit(uint32_t acc)
{
    Port& port = m_ports[acc];
    while (!port.busy && port.ready.Size() > 0)
    {
        const Ready r = port.ready.Front();
        port.ready.PopFront();
        ScaleUpQueuePair* qp = r.qp;
        RdmaHeaderData h;
        uint32_t payload = 0;
        uint64_t index = 0;
        if (!qp->NextChunk(r.stream, m_chunkBytes, h, payload, index))
        {
            continue;
        }
        // Round robin: back of the line while it has more.
        port.ready.PushBack(Ready{r});
        port.busy = true;
        port.txBytes += payload;
        const int64_t now = NowPs();
        const int64_t tx = TxPs(payload);
        // The receiver's ingress takes chunks at DataRate too: several senders share it.
        Port& in = m_ports[qp->m_peerLocal];
        int64_t arrive = now + tx + m_latency.GetPicoSeconds();
        // Later than every chunk the ingress accepted before: its deliveries stay in order.
        int64_t deliver = std::max(arrive, in.ingressFreePs + tx);
        in.ingressFreePs = deliver;
        in.rxBytes += payload;
        in.arriving.PushBack(Delivery{qp, h, payload, index, deliver});
        if (in.arriving.Size() == 1)
        {
            DeliverEvent::ScheduleIn(in.deliver, deliver - now);
        }
        DoneEvent::ScheduleIn(port.done, tx);
    }
}

void
ScaleUpDomain::TransmitDone(uint32_t acc)
{
    m_ports[acc].busy = false;
    Transmit(acc);
}

void
ScaleUpDomain::Deliver(uint32_t acc)
{
    Port& in = m_ports[acc];
    const Delivery d = in.arriving.Front();
    in.arriving.PopFront();
    if (in.arriving.Size() > 0)
    {
        DeliverEvent::ScheduleIn(in.deliver, in.arriving.Front().atPs - NowPs());
    }
    d.from->m_peer->Arrive(d.h, d.payload);
    d.from->Acknowledge(d.index, d.payload);
}

TypeId
ScaleUpQueuePair::GetTypeId()
{
    static TypeId tid = TypeId("ns3::metaroce::ScaleUpQueuePair")
                            .SetParent<QueuePair>()
                            .SetGroupName("MetaRoce")
                            .AddConstructor<ScaleUpQueuePair>();
    return tid;
}

ScaleUpQueuePair::ScaleUpQueuePair() = default;

Ptr<QueuePair>
ScaleUpQueuePair::Clone() const
{
    return CreateObject<ScaleUpQueuePair>(); // a fresh, unbound QP: ScaleUpDomain binds them
}

void
ScaleUpQueuePair::OnPosted()
{
    const uint16_t stream = m_sendQueue.Back().stream;
    if (stream >= m_streams.size())
    {
        m_streams.resize(stream + 1u);
    }
    m_domain->NotifyReady(m_local, this, stream);
}

bool
ScaleUpQueuePair::NextChunk(uint16_t stream, uint32_t chunkBytes, RdmaHeaderData& h,
                            uint32_t& payload, uint64_t& index)
{
    Cursor& c = m_streams[stream];
    // Messages before the queue's base are done, so sent: the stream's next one is at or
    // after it; other streams' messages are stepped over (each once per stream).
    const uint64_t end = m_sendQueueBase + m_sendQueue.Size();
    c.next = std::max<uint64_t>(c.next, m_sendQueueBase);
    while (c.next < end &&
           m_sendQueue.At(static_cast<uint32_t>(c.next - m_sendQueueBase)).stream != stream)
    {
        ++c.next;
    }
    if (c.next >= end)
    {
        c.ready = false;
        return false;
    }
    const SendMessage& m = m_sendQueue.At(static_cast<uint32_t>(c.next - m_sendQueueBase));
    payload = static_cast<uint32_t>(std::min<uint64_t>(chunkBytes, m.bytes - c.offset));
    h.stream = m.stream;
    h.msgId = m.seq;
    h.msgBytes = static_cast<uint32_t>(m.bytes);
    h.offset = c.offset;
    index = c.next;
    c.offset += payload;
    if (c.offset >= m.bytes)
    {
        ++c.next;
        c.offset = 0;
    }
    ++SendSide().dataPacketsSent;
    return true;
}

void
ScaleUpQueuePair::Arrive(const RdmaHeaderData& h, uint32_t payload)
{
    Place(h, payload, false); // chunks of one connection arrive in order
}

void
ScaleUpQueuePair::Acknowledge(uint64_t index, uint32_t payload)
{
    SendMessage& m = m_sendQueue.At(static_cast<uint32_t>(index - m_sendQueueBase));
    m.ackedBytes += payload;
    if (m.ackedBytes == m.bytes && !m.done)
    {
        MarkSentNow(index); // the last chunk: a stream's chunks arrive in order
    }
}

} // namespace metaroce
} // namespace ns3
