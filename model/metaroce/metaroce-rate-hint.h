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
    static TypeId GetTypeId();
    MetaRoceRateHint();
    ~MetaRoceRateHint() override;

    /// The tracker of `nic`, created and aggregated on first use.
    static Ptr<MetaRoceRateHint> Of(RdmaNic* nic);

    /// A data packet arrived for the receiving QP `qp`.
    void OnData(const QueuePair* qp);
    /// The fair share of one active sender, in bit/s.
    double HintBps() const;
    uint32_t ActiveSenders() const { return static_cast<uint32_t>(m_active.size()); }

  protected:
    void DoDispose() override;

  private:
    void Sweep();

    RdmaNic* m_nic{nullptr};
    Time m_window;
    double m_utilization{1.0};
    // Dense by QPN (a NIC numbers its QPs from 1): one store per data packet, no hashing.
    std::vector<int64_t> m_lastPs;  //!< [qpn]: last data packet, or -1 if inactive
    std::vector<uint32_t> m_active; //!< QPNs of the active receiving QPs (open or since closed)
    EventId m_sweep;
};

} // namespace metaroce
} // namespace ns3

#endif
