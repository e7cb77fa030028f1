/*
 * What a NIC's MetaRoCE connections know of the fabric's round-trip time together: the lowest
 * RTT any of them measured. A connection that has no RTT sample of its own yet (its first
 * packets were all lost) times out from this instead of InitialRto, which must cover a
 * connection across sites.
 * Assumption (no spec is public): a NIC shares this across its QPs.
 */
#ifndef METAROCE_METAROCE_NIC_RTT_H
#define METAROCE_METAROCE_NIC_RTT_H

#include "ns3/object.h"

#include <cstdint>

namespace ns3
{
namespace metaroce
{

class RdmaNic;

class MetaRoceNicRtt : public Object
{
  public:
    static TypeId GetTypeId();
    /// The record of `nic`, created and aggregated on first use.
    static Ptr<MetaRoceNicRtt> Of(RdmaNic* nic);

    /// The lowest RTT measured by a QP of the NIC (0: none yet).
    int64_t minRttPs{0};
};

} // namespace metaroce
} // namespace ns3

#endif
