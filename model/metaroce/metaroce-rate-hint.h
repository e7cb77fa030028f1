/*
 * RCN, the receiver's rate hints: a NIC-wide tracker of the MetaRoCE QPs actively sending to
 * this NIC. Every ACK carries the sender's fair share of the NIC's inbound capacity: the
 * capacity of its live ports x Utilization, divided equally among the active senders.
 * Aggregated to the RdmaNic (one per NIC, created by the first MetaRoCE QP that needs it).
 *
 * Assumptions (no spec is public): a sender counts as active while a message of it is partly
 * received (its buffer is in use) or it sent data within ActiveWindow; shares are equal.
 */
#ifndef METAROCE_METAROCE_RATE_HINT_H
#define METAROCE_METAROCE_RATE_HINT_H

#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/object.h"

#include <unordered_map>

namespace ns3
{
namespace metaroce
{

class RdmaNic;
class QueuePair;

class MetaRoceRateHint : public Object
{
  public:
    static TypeId GetTypeId();
    MetaRoceRateHint();
    ~MetaRoceRateHint() override;

    /// The tracker of `nic`, created and aggregated on first use.
    static Ptr<MetaRoceRateHint> Of(RdmaNic* nic);

    /// A data packet arrived for the receiving QP `qp`.
    void OnData(const QueuePair* qp);
    /// The fair share of one active sender, in bit/s.
    double HintBps() const;
    uint32_t ActiveSenders() const { return static_cast<uint32_t>(m_lastSeen.size()); }

  protected:
    void DoDispose() override;

  private:
    void Sweep();

    RdmaNic* m_nic{nullptr};
    Time m_window;
    double m_utilization{1.0};
    struct Sender
    {
        int64_t lastPs;
        const QueuePair* qp;
    };

    std::unordered_map<uint32_t, Sender> m_lastSeen; //!< by receiving QPN
    EventId m_sweep;
};

} // namespace metaroce
} // namespace ns3

#endif
