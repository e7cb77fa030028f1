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

#include <memory>

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
    void PinToPort(uint32_t port) override;
    PullResult PullFrame(uint32_t port, FabricFrame& out) override;
    void Receive(uint32_t port, FabricFrame& frame, const RdmaHeaderData& h) override;
    void PrepareReceive(const RdmaFields& h, uint32_t stage) const override;
    void PreparePull(uint32_t port, uint32_t stage) const override;
    /// A RoCEv2 QP keeps no state apart from itself: once everything it sent is
    /// acknowledged, it stops its idle timers, frees its sender state (DCQCN's included) and
    /// its empty send queue, and may close. A QP that retransmitted, or whose DCQCN is still
    /// recovering its rate, keeps them and stays open.
    bool ReleaseState() override;
    bool HasReleasableState() const override { return true; }

    uint32_t GetPort() const { return m_port; }
    uint16_t GetEntropy() const { return m_entropy; }
    void SetEntropy(uint16_t entropy) override { m_entropy = entropy; }
    /// DCQCN's current rate; 0 while the QP holds no sender state (never sent, or released).
    double GetRateBps() const { return m_tx ? m_tx->cc.rateBps : 0; }
    Ptr<RdmaCongestionOps> GetCongestionControl() const { return m_tx ? m_tx->ccOps : nullptr; }
    uint32_t GetSndUna() const { return m_tx ? m_tx->sndUna : m_psnEnd; }
    uint32_t GetSndNxt() const { return m_tx ? m_tx->sndNxt : m_psnEnd; }
    /// Whether the QP holds sender state (it posted, or a control frame reached its sender).
    bool HasSenderState() const { return m_tx != nullptr; }

  protected:
    void DoDispose() override;
    void OnPosted() override;
    void InitTraces(QueuePairTraces& t) override;

  private:
    /// What only a sending QP needs. The receiving end of a connection (half of a
    /// collective's QPs) never makes it, and ReleaseState frees it: the PSNs go on from
    /// m_psnEnd, so a later post starts a fresh sender where the old one stopped.
    struct Sender
    {
        CcState cc;
        Ptr<RdmaCongestionOps> ccOps;
        uint32_t sndNxt{0};
        uint32_t sndUna{0};
        uint32_t highestSent{0}; //!< one past the highest PSN ever sent
        uint64_t txMsg{0};       //!< absolute index of the message holding sndNxt
        int64_t nextSendPs{0};   //!< pacing
        int64_t lastProgressPs{0};
        EventId wakeEvent;
        EventId rtoEvent;
    };

    /// Owns the sender state; copying (a prototype's Clone) yields none.
    struct SenderPtr : std::unique_ptr<Sender>
    {
        SenderPtr() = default;
        SenderPtr(const SenderPtr&)
            : std::unique_ptr<Sender>()
        {
        }
    };

    /// The sender state, made on first use.
    Sender& Tx();
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

    // attributes (packed: one QP per channel and peer, hundreds per NIC)
    Time m_nakInterval;
    Time m_rto;
    Time m_cnpInterval;
    uint32_t m_windowPackets{0};
    uint32_t m_psnEnd{0}; //!< one past the last PSN assigned to a posted message
    uint16_t m_entropy{0};
    uint16_t m_ackInterval{1};
    TypeId m_ccType;
    uint8_t m_port{0};
    // receiver
    uint16_t m_unacked{0};
    uint32_t m_epsn{0};
    uint32_t m_lastNakPsn{0xffffffff};
    int64_t m_lastNakPs{0};
    int64_t m_lastCnpPs{-1};
    SenderPtr m_tx; //!< null until the first send, and again after ReleaseState
};

} // namespace metaroce
} // namespace ns3

#endif
