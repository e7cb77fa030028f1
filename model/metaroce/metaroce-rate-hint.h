/*
 * RCN, the receiver's rate hints: a NIC-wide tracker of the MetaRoCE QPs actively receiving
 * at this NIC. Every ACK carries its sender's share of the NIC's inbound capacity: the
 * capacity of its live ports x Utilization, split among the active receiving QPs in
 * proportion to their weights. Aggregated to the RdmaNic (one per NIC, created by the first
 * MetaRoCE QP that needs it).
 *
 * The talk names two signals, the QPs actively receiving and the receive buffers posted.
 *  - Active: a QP counts while a message of it is partly received, and stops counting the
 *    moment its last message completes (finished work holds no share of the next), or when
 *    its sender has been silent for ActiveWindow (a stalled sender's share goes to the others).
 *    Only a QP that is receiving holds a share, so the shares of the senders that are sending
 *    always add up to the whole capacity.
 *  - Posted buffers: how they weigh a QP's share is not stated (an assumption, the attribute
 *    BufferWeighting): "posted", a QP's weight is its posted, unconsumed receive buffers (at
 *    least 1); "off", every active QP weighs the same.
 *  - A share a sender cannot use (it is held back elsewhere: its own NIC, its own inputs) goes
 *    to the others (Redistribute "measured", an assumption): every ActiveWindow the tracker
 *    measures what each active QP delivered; one that used less than LimitedBelow of its share
 *    keeps LimitedHeadroom x its rate reserved (its own hint stays its plain share, so it can
 *    speed up), and the rest of the capacity is split among the others by weight, as a
 *    max-min fair allocation. "off": plain shares only.
 */
#ifndef METAROCE_METAROCE_RATE_HINT_H
#define METAROCE_METAROCE_RATE_HINT_H

#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/object.h"

#include <vector>

namespace ns3
{
namespace metaroce
{

class RdmaNic;
class QueuePair;

class MetaRoceRateHint : public Object
{
  public:
    enum Weighting
    {
        WEIGHT_OFF,   //!< equal shares
        WEIGHT_POSTED //!< shares in proportion to posted receive buffers
    };

    enum Redistribution
    {
        REDISTRIBUTE_OFF,     //!< plain shares
        REDISTRIBUTE_MEASURED //!< shares a sender does not use go to the others
    };

    static TypeId GetTypeId();
    MetaRoceRateHint();
    ~MetaRoceRateHint() override;

    /// The tracker of `nic`, created and aggregated on first use.
    static Ptr<MetaRoceRateHint> Of(RdmaNic* nic);

    /// A data packet of the receiving QP `qp` was placed (call after placement: a packet that
    /// completes the QP's last message ends its share).
    void OnData(const QueuePair* qp, uint32_t payloadBytes);
    /// The share of `qp`, in bit/s (as if it were active, if it is not).
    double HintBps(const QueuePair* qp) const;
    /// The share of an active QP of weight 1, in bit/s.
    double HintBps() const;
    uint32_t ActiveSenders() const { return static_cast<uint32_t>(m_active.size()); }
    /// Sum of the active QPs' weights.
    double TotalWeight() const { return m_totalWeight; }

  protected:
    void DoDispose() override;

  private:
    struct Entry
    {
        int64_t lastPs{-1}; //!< last data packet
        uint32_t weight{0}; //!< 0: not active
        uint32_t qpn{0};
        uint64_t bytes{0};     //!< payload since the last measurement
        uint32_t age{0};       //!< measurements since it became active
        double reservedBps{0}; //!< > 0: limited elsewhere, this much kept for it
    };

    uint32_t WeightOf(const QueuePair* qp) const;
    void Remove(uint32_t qpn);
    void Sweep();
    /// Measures the active QPs' rates and finds those limited elsewhere (water-filling).
    void Allocate();
    /// The hint of a QP of weight w (entry e, null if none) when the weights add up to total.
    double ShareOf(const Entry* e, uint32_t w, double total) const;
    /// The capacity the hints split: live ports x Utilization.
    double Capacity() const;

    RdmaNic* m_nic{nullptr};
    Time m_window;
    double m_utilization{1.0};
    Weighting m_weighting{WEIGHT_POSTED};
    Redistribution m_redistribute{REDISTRIBUTE_MEASURED};
    double m_limitedBelow{0.8};
    double m_headroom{1.25};
    double m_reservedBps{0};   //!< sum over limited QPs
    double m_limitedWeight{0}; //!< their weights
    int64_t m_lastSweepPs{-1};
    /// The active entry of `qpn`, or null.
    Entry* Find(uint32_t qpn)
    {
        return qpn < m_slot.size() && m_slot[qpn] != 0 ? &m_active[m_slot[qpn] - 1] : nullptr;
    }

    const Entry* Find(uint32_t qpn) const { return const_cast<MetaRoceRateHint*>(this)->Find(qpn); }

    // An inactive QP's entry holds nothing, so only the active ones are kept (a NIC may have
    // a thousand QPs, few of them receiving at once), found by a slot dense by QPN (a NIC
    // numbers its QPs from 1): one load per data packet, no hashing, 4 bytes a QP.
    std::vector<Entry> m_active;  //!< the active receiving QPs
    std::vector<uint32_t> m_slot; //!< [QPN]: 1 + index in m_active; 0: not active
    double m_totalWeight{0};
    EventId m_sweep;
};

} // namespace metaroce
} // namespace ns3

#endif
