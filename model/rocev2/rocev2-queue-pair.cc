#include "rocev2-queue-pair.h"

#include "dcqcn.h"
#include "model/core/fast-simulator-impl.h"
#include "model/transport/rdma-nic.h"

#include "ns3/log.h"
#include "ns3/object-factory.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("RoceV2QueuePair");
NS_OBJECT_ENSURE_REGISTERED(RoceV2QueuePair);

TypeId
RoceV2QueuePair::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::RoceV2QueuePair")
            .SetParent<QueuePair>()
            .SetGroupName("MetaRoce")
            .AddConstructor<RoceV2QueuePair>()
            .AddAttribute("Port", "NIC port (= plane) the QP is pinned to.", UintegerValue(0),
                          MakeUintegerAccessor(&RoceV2QueuePair::m_port),
                          MakeUintegerChecker<uint8_t>(0, 31))
            .AddAttribute("Entropy", "UDP source port: the one ECMP path of this QP.",
                          UintegerValue(49152), MakeUintegerAccessor(&RoceV2QueuePair::m_entropy),
                          MakeUintegerChecker<uint16_t>())
            .AddAttribute("AckInterval",
                          "Data packets per ACK (ACK coalescing); the last packet of a message "
                          "is always acknowledged. Assumption: 1, as the reference simulators.",
                          UintegerValue(1), MakeUintegerAccessor(&RoceV2QueuePair::m_ackInterval),
                          MakeUintegerChecker<uint16_t>(1, 1024))
            .AddAttribute("NakInterval",
                          "Minimum time between two NAKs for the same expected PSN. Default "
                          "4 us (ConWeave's setting; HPCC uses 500 us).",
                          TimeValue(MicroSeconds(4)),
                          MakeTimeAccessor(&RoceV2QueuePair::m_nakInterval),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("Rto",
                          "Retransmission timeout: with data outstanding and no progress for "
                          "this long, go back to the oldest unacknowledged PSN. Default 4 ms "
                          "(ConWeave's non-IRN QP timeout).",
                          TimeValue(MilliSeconds(4)), MakeTimeAccessor(&RoceV2QueuePair::m_rto),
                          MakeTimeChecker(MicroSeconds(1)))
            .AddAttribute("CnpInterval",
                          "Notification point: minimum time between CNPs to this QP's sender. "
                          "Default 4 us (ConnectX min_time_between_cnps before tuning).",
                          TimeValue(MicroSeconds(4)),
                          MakeTimeAccessor(&RoceV2QueuePair::m_cnpInterval),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("WindowPackets",
                          "Cap on unacknowledged packets; 0: none (ConnectX RC has no sender "
                          "window, only the rate limiter).",
                          UintegerValue(0), MakeUintegerAccessor(&RoceV2QueuePair::m_windowPackets),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("CongestionControl",
                          "Rate controller (an RdmaCongestionOps TypeId): ns3::metaroce::Dcqcn or "
                          "ns3::metaroce::RdmaNoCongestionControl.",
                          TypeIdValue(Dcqcn::GetTypeId()),
                          MakeTypeIdAccessor(&RoceV2QueuePair::m_ccType), MakeTypeIdChecker())
            .AddTraceSource("Rate",
                            "The QP's sending rate in bit/s: DCQCN's current rate (RC), the "
                            "line rate without congestion control.",
                            MakeLazyTraceSourceAccessor<QueuePair>(&QueuePairTraces::rate),
                            "ns3::TracedValueCallback::Double");
    return tid;
}

RoceV2QueuePair::RoceV2QueuePair()
    : m_nakInterval(MicroSeconds(4))
    , m_rto(MilliSeconds(4))
    , m_cnpInterval(MicroSeconds(4))
{
}

RoceV2QueuePair::~RoceV2QueuePair() = default;

Ptr<QueuePair>
RoceV2QueuePair::Clone() const
{
    NS_ASSERT_MSG(GetNic() == nullptr, "only a QP never attached is a prototype");
    // A never-attached QP holds only its configuration: a member-wise copy is a fresh QP.
    return CopyObject<RoceV2QueuePair>(this);
}

void
RoceV2QueuePair::PinToPort(uint32_t port)
{
    NS_ABORT_MSG_IF(port > 31, "RoceV2QueuePair: port " << port << " is not a NIC port (0-31)");
    m_port = static_cast<uint8_t>(port);
}

void
RoceV2QueuePair::DoDispose()
{
    if (m_tx)
    {
        m_tx->wakeEvent.Cancel();
        m_tx->rtoEvent.Cancel();
        m_tx->ccOps->Dispose();
        m_tx.reset();
    }
    QueuePair::DoDispose();
}

void
RoceV2QueuePair::InitTraces(QueuePairTraces& t)
{
    t.rate = GetRateBps();
}

RoceV2QueuePair::Sender&
RoceV2QueuePair::Tx()
{
    if (m_tx)
    {
        return *m_tx;
    }
    m_tx.reset(new Sender);
    Sender& tx = *m_tx;
    // Everything before m_psnEnd was acknowledged (a released sender), or nothing was sent.
    tx.sndNxt = tx.sndUna = tx.highestSent = m_psnEnd;
    tx.txMsg = m_sendQueueBase;
    double line = static_cast<double>(m_nic->GetPort(m_port)->GetDataRate().GetBitRate());
    tx.cc.lineRateBps = line;
    tx.cc.rateBps = line;
    if (m_traces)
    {
        m_traces->rate = line; // a sink connected before the QP started
    }
    tx.cc.mtu = m_mtu;
    tx.cc.paths.resize(1);
    tx.cc.onRateChange = [this]()
    {
        // A new rate re-times the next packet from the last one sent.
        if (m_traces)
        {
            m_traces->rate = m_tx->cc.rateBps;
        }
        Wake();
    };
    tx.ccOps = NewCongestionOps(m_ccType);
    tx.ccOps->Init(tx.cc);
    return tx;
}

void
RoceV2QueuePair::OnPosted()
{
    Tx();
    SendMessage& m = m_sendQueue.Back();
    m.firstPsn = m_psnEnd;
    m_psnEnd += m.packets;
    Wake();
}

void
RoceV2QueuePair::Wake()
{
    if (m_tx && m_tx->sndNxt < m_psnEnd && m_nic != nullptr)
    {
        m_nic->NotifyReady(this, m_port);
    }
}

void
RoceV2QueuePair::ScheduleWake(int64_t now)
{
    if (!IsPending(m_tx->wakeEvent))
    {
        m_tx->wakeEvent =
            Simulator::Schedule(PicoSeconds(m_tx->nextSendPs - now), &RoceV2QueuePair::Wake, this);
    }
}

uint64_t
RoceV2QueuePair::MessageOf(uint32_t psn)
{
    // Messages hold consecutive PSN ranges in posting order: binary search the live ones.
    std::size_t lo = 0;
    std::size_t hi = m_sendQueue.Size();
    while (hi - lo > 1)
    {
        std::size_t mid = (lo + hi) / 2;
        if (m_sendQueue.At(mid).firstPsn <= psn)
        {
            lo = mid;
        }
        else
        {
            hi = mid;
        }
    }
    return m_sendQueueBase + lo;
}

PullResult
RoceV2QueuePair::PullFrame(uint32_t port, FabricFrame& out)
{
    if (!m_tx || m_tx->sndNxt >= m_psnEnd)
    {
        return PullResult::Nothing;
    }
    Sender& tx = *m_tx;
    if (m_windowPackets != 0 && tx.sndNxt - tx.sndUna >= m_windowPackets)
    {
        return PullResult::Nothing; // an ACK will wake us
    }
    int64_t now = NowPs();
    if (now < tx.nextSendPs)
    {
        ScheduleWake(now);
        return PullResult::Nothing;
    }
    while (tx.txMsg - m_sendQueueBase < m_sendQueue.Size() &&
           Msg(tx.txMsg).firstPsn + Msg(tx.txMsg).packets <= tx.sndNxt)
    {
        ++tx.txMsg;
    }
    const SendMessage& m = Msg(tx.txMsg);
    uint32_t idx = tx.sndNxt - m.firstPsn;
    uint64_t offset = static_cast<uint64_t>(idx) * m_mtu;
    uint32_t payload = static_cast<uint32_t>(std::min<uint64_t>(m_mtu, m.bytes - offset));
    RdmaHeaderData h;
    h.opcode = RdmaOpcode::Data;
    h.destQpn = m_remoteQpn;
    h.psn = tx.sndNxt;
    h.stream = m.stream;
    h.msgId = m.seq;
    h.offset = offset;
    h.msgBytes = static_cast<uint32_t>(m.bytes);
    out = MakeFrame(h, payload, m_entropy, true);
    if (tx.sndNxt < tx.highestSent)
    {
        ++SendSide().retransmittedPackets;
        if (m_traces)
        {
            m_traces->retransmit(tx.sndNxt, 0);
        }
    }
    ++SendSide().dataPacketsSent;
    ++tx.sndNxt;
    tx.highestSent = std::max(tx.highestSent, tx.sndNxt);
    // Pacing: the next packet may start one wire-time at the current rate after this one.
    if (tx.cc.rateBps < tx.cc.lineRateBps)
    {
        tx.nextSendPs = now + static_cast<int64_t>(out.wireBytes * 8e12 / tx.cc.rateBps);
    }
    else
    {
        tx.nextSendPs = now;
    }
    if (!IsPending(tx.rtoEvent))
    {
        tx.lastProgressPs = now;
        ArmRto();
    }
    bool more = tx.sndNxt < m_psnEnd &&
                (m_windowPackets == 0 || tx.sndNxt - tx.sndUna < m_windowPackets) &&
                tx.nextSendPs <= now;
    if (!more && tx.sndNxt < m_psnEnd && tx.nextSendPs > now)
    {
        ScheduleWake(now);
    }
    return more ? PullResult::More : PullResult::Sent;
}

void
RoceV2QueuePair::ArmRto()
{
    Sender& tx = *m_tx;
    tx.rtoEvent =
        Simulator::Schedule(PicoSeconds(tx.lastProgressPs + m_rto.GetPicoSeconds() - NowPs()),
                            &RoceV2QueuePair::RtoCheck, this);
}

void
RoceV2QueuePair::RtoCheck()
{
    Sender& tx = *m_tx;
    if (tx.sndUna >= tx.highestSent)
    {
        return; // nothing outstanding: the timer stops
    }
    int64_t now = NowPs();
    if (now - tx.lastProgressPs < m_rto.GetPicoSeconds())
    {
        ArmRto(); // progress since the timer was set: check again later
        return;
    }
    ++SendSide().timeouts;
    NS_LOG_INFO("NIC " << m_nic->GetNicId() << " QP " << m_qpn << ": retransmission timeout, "
                       << tx.highestSent - tx.sndUna << " packets outstanding");
    tx.ccOps->OnTimeout(tx.cc, 0);
    tx.lastProgressPs = now;
    GoBack(tx.sndUna);
    ArmRto();
}

void
RoceV2QueuePair::GoBack(uint32_t psn)
{
    Sender& tx = *m_tx;
    NS_LOG_INFO("NIC " << m_nic->GetNicId() << " QP " << m_qpn << ": go-back-N from PSN "
                       << tx.sndNxt << " to " << psn);
    tx.sndNxt = psn;
    tx.txMsg = MessageOf(psn);
    Wake();
}

void
RoceV2QueuePair::OnAckPsn(uint32_t psn)
{
    Sender& tx = Tx();
    if (psn <= tx.sndUna)
    {
        return;
    }
    uint64_t acked = 0;
    tx.sndUna = psn;
    tx.lastProgressPs = NowPs();
    // Complete the messages whose every PSN is now acknowledged.
    while (!m_sendQueue.Empty())
    {
        SendMessage& m = m_sendQueue.Front();
        if (m.done || m.firstPsn + m.packets > tx.sndUna)
        {
            break;
        }
        acked += m.bytes;
        uint64_t front = m_sendQueueBase;
        MarkSent(m);
        if (tx.txMsg < m_sendQueueBase)
        {
            tx.txMsg = m_sendQueueBase;
        }
        if (m_sendQueueBase == front)
        {
            break;
        }
    }
    if (tx.sndNxt < tx.sndUna)
    {
        GoBack(tx.sndUna);
    }
    tx.ccOps->OnAck(tx.cc, 0, acked, -1, false);
    if (m_windowPackets != 0)
    {
        Wake();
    }
}

void
RoceV2QueuePair::SendAck(RdmaOpcode op, uint32_t port)
{
    RdmaHeaderData a;
    a.opcode = op;
    a.destQpn = m_remoteQpn;
    a.psn = m_epsn;
    m_nic->SendControl(port, MakeFrame(a, 0, m_entropy, false));
    if (op == RdmaOpcode::Nak)
    {
        ++ReceiveSide().naksSent;
    }
    else
    {
        ++ReceiveSide().acksSent;
    }
}

void
RoceV2QueuePair::PrepareReceive(const RdmaFields& h, uint32_t stage) const
{
    // The lines of this object Receive reads (the first is in cache), then the sender's.
    if (stage == 0)
    {
        __builtin_prefetch(&m_nic);
        __builtin_prefetch(&m_tx);
        __builtin_prefetch(&m_epsn);
        if (h.opcode == RdmaOpcode::Data)
        {
            PrefetchPlacement();
        }
    }
    else if (stage == 1 && h.opcode == RdmaOpcode::Data)
    {
        PrefetchReceiveBook();
    }
    else if (stage == 1 && m_tx)
    {
        PrefetchRange(m_tx.get(), sizeof(Sender));
        PrefetchSendBook();
    }
}

bool
RoceV2QueuePair::ReleaseState()
{
    // A QP that went back may still have copies in flight: its peer would acknowledge them
    // again, and those ACKs share the fabric, so it stays open.
    if (!m_sendQueue.Empty() || GetSndUna() != m_psnEnd || GetPendingReceives() != 0 ||
        Retransmitted() > 0 || (m_tx && m_tx->ccOps->HasPendingEvents()))
    {
        return false;
    }
    // Everything sent is acknowledged: the RTO check would find nothing outstanding and the
    // pacing wake nothing to send, so neither timer can change anything.
    if (m_tx)
    {
        m_tx->rtoEvent.Cancel();
        m_tx->wakeEvent.Cancel();
        m_tx->ccOps->Dispose();
        m_tx.reset();
    }
    m_sendQueue.Release();
    return true;
}

void
RoceV2QueuePair::PreparePull(uint32_t, uint32_t stage) const
{
    if (stage == 0)
    {
        __builtin_prefetch(&m_nic);
        __builtin_prefetch(&m_tx);
    }
    else if (stage == 1 && m_tx)
    {
        PrefetchRange(m_tx.get(), sizeof(Sender));
        PrefetchSendBook();
    }
}

void
RoceV2QueuePair::Receive(uint32_t port, FabricFrame& frame, const RdmaHeaderData& h)
{
    int64_t now = NowPs();
    switch (h.opcode)
    {
        case RdmaOpcode::Data:
        {
            if (frame.ecn == ECN_CE)
            {
                ++ReceiveSide().ecnMarkedReceived;
                if (m_lastCnpPs < 0 || now - m_lastCnpPs >= m_cnpInterval.GetPicoSeconds())
                {
                    m_lastCnpPs = now;
                    RdmaHeaderData c;
                    c.opcode = RdmaOpcode::Cnp;
                    c.destQpn = m_remoteQpn;
                    m_nic->SendControl(port, MakeFrame(c, 0, m_entropy, false));
                    ++ReceiveSide().cnpsSent;
                }
            }
            uint32_t payload = PayloadOf(frame, h);
            if (h.psn == m_epsn)
            {
                Place(h, payload, false);
                ++m_epsn;
                ++m_unacked;
                bool lastOfMessage = h.offset + payload >= h.msgBytes;
                if (m_unacked >= m_ackInterval || lastOfMessage)
                {
                    m_unacked = 0;
                    SendAck(RdmaOpcode::Ack, port);
                }
            }
            else if (h.psn > m_epsn)
            {
                ++ReceiveSide().outOfOrderDropped;
                if (m_lastNakPsn != m_epsn || now - m_lastNakPs >= m_nakInterval.GetPicoSeconds())
                {
                    m_lastNakPsn = m_epsn;
                    m_lastNakPs = now;
                    SendAck(RdmaOpcode::Nak, port);
                }
            }
            else
            {
                ++ReceiveSide().duplicatePackets;
                SendAck(RdmaOpcode::Ack, port); // the sender may have missed our ACK
            }
            break;
        }
        case RdmaOpcode::Ack:
            OnAckPsn(h.psn);
            break;
        case RdmaOpcode::Nak:
            OnAckPsn(h.psn);
            if (h.psn < m_tx->sndNxt)
            {
                GoBack(h.psn);
            }
            m_tx->ccOps->OnLoss(m_tx->cc, 0, 1);
            break;
        case RdmaOpcode::Cnp:
            Tx().ccOps->OnCnp(m_tx->cc);
            break;
        default:
            break;
    }
}

} // namespace metaroce
} // namespace ns3
