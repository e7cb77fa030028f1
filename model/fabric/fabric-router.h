/*
 * Routing for generated fabrics: a shared object that maps (switch position, destination NIC)
 * to a range of equal-cost egress ports by arithmetic. One instance serves every switch of a
 * fabric, so routing costs O(1) memory per switch.
 */
#ifndef METAROCE_FABRIC_ROUTER_H
#define METAROCE_FABRIC_ROUTER_H

#include "clos-geometry.h"

#include "ns3/object.h"

namespace ns3
{
namespace metaroce
{

class FabricRouter : public Object
{
  public:
    static TypeId GetTypeId();
    /// Equal-cost egress ports towards dst from the switch at `at`; count 0: no route.
    virtual PortRange Route(const SwitchCoord& at, uint32_t dst) const = 0;
};

/// Up/down routing in the multiplane Clos described by a ClosGeometry.
class ClosRouter : public FabricRouter
{
  public:
    static TypeId GetTypeId();
    ClosRouter() = default;
    explicit ClosRouter(const ClosGeometry& g)
        : m_geometry(g)
    {
    }
    PortRange Route(const SwitchCoord& at, uint32_t dst) const override;
    const ClosGeometry& GetGeometry() const { return m_geometry; }

  private:
    ClosGeometry m_geometry;
};

} // namespace metaroce
} // namespace ns3

#endif
