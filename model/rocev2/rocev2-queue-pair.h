/*
 * A RoCEv2 reliable-connected QP as commodity NICs run it: one UDP source port (one ECMP
 * path) for its lifetime, pinned to one NIC port/plane; one PSN space; an in-order receiver
 * that drops out-of-order packets and answers with a NAK (throttled); go-back-N on NAK and
 * on retransmission timeout; ACK coalescing; a pluggable rate controller (DCQCN by default,
 * or none: Meta's production RoCE ran PFC without DCQCN).
 */
#ifndef METAROCE_ROCEV2_QUEUE_PAIR_H
#define METAROCE_ROCEV2_QUEUE_PAIR_H

#include "model/transport/queue-pair.h"
#include "model/transport/rdma-congestion-ops.h"

#include "ns3/event-id.h"
#include "ns3/type-id.h"

namespace ns3
{
namespace metaroce
{

class RoceV2QueuePair : public QueuePair
{
  public:
    static TypeId GetTypeId();
    RoceV2QueuePair();
    ~RoceV2QueuePair() override;

    Ptr<QueuePair> Clone() const override;
    bool IsPinned() const override { return true; }
    void PinToPort(uint32_t port) override { m_port = port; }
    PullResult PullFrame(uint32_t port, FabricFrame& out) override;
    void Receive(uint32_t port, FabricFrame& frame, const RdmaHeaderData& h) override;
    void PrepareReceive(const RdmaFields& h, uint32_t stage) const override;
    void PreparePull(uint32_t port, uint32_t stage) const override;
    /// A RoCEv2 QP keeps no state apart from itself: once everything it sent is
    /// acknowledged, it stops its idle timers, frees its empty send queue and may close. A
    /// QP that retransmitted, or whose DCQCN is still recovering its rate, stays open.
    bool ReleaseState() override;
    bool HasReleasableState() const override { return true; }

    uint32_t GetPort() const { return m_port; }
    uint16_t GetEntropy() const { return m_entropy; }
    double GetRateBps() const { return m_cc.rateBps; }
    Ptr<RdmaCongestionOps> GetCongestionControl() const { return m_ccOps; }
    uint32_t GetSndUna() const { return m_sndUna; }
    uint32_t GetSndNxt() const { return m_sndNxt; }

  protected:
    void DoDispose() override;
    void DoInitialize() override;
    void OnPosted() override;
    void InitTraces(QueuePairTraces& t) override;

  private:
    void EnsureCc();
    void Wake();
    void ScheduleWake(int64_t nowPs);
    void OnAckPsn(uint32_t psn);
    void GoBack(uint32_t psn);
    void ArmRto();
    void RtoCheck();
    void SendAck(RdmaOpcode op, uint32_t port);
    /// Absolute index (into all messages posted) of the message holding psn.
    uint64_t MessageOf(uint32_t psn);
    SendMessage& Msg(uint64_t abs) { return m_sendQueue.At(abs - m_sendQueueBase); }

    // attributes
    uint32_t m_port{0};
    uint16_t m_entropy{0};
    uint32_t m_ackInterval{1};
    Time m_nakInterval;
    Time m_rto;
    Time m_cnpInterval;
    uint32_t m_windowPackets{0};
    TypeId m_ccType;
    // sender
    CcState m_cc;
    Ptr<RdmaCongestionOps> m_ccOps;
    uint32_t m_psnEnd{0}; //!< one past the last PSN assigned to a posted message
    uint32_t m_sndNxt{0};
    uint32_t m_sndUna{0};
    uint32_t m_highestSent{0}; //!< one past the highest PSN ever sent
    uint64_t m_txMsg{0};       //!< absolute index of the message holding m_sndNxt
    int64_t m_nextSendPs{0};   //!< pacing
    int64_t m_lastProgressPs{0};
    EventId m_wakeEvent;
    EventId m_rtoEvent;
    // receiver
    uint32_t m_epsn{0};
    uint32_t m_unacked{0};
    uint32_t m_lastNakPsn{0xffffffff};
    int64_t m_lastNakPs{0};
    int64_t m_lastCnpPs{-1};
};

} // namespace metaroce
} // namespace ns3

#endif
