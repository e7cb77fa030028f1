#include "fabric-router.h"

namespace ns3
{
namespace metaroce
{

NS_OBJECT_ENSURE_REGISTERED(FabricRouter);
NS_OBJECT_ENSURE_REGISTERED(ClosRouter);

TypeId
FabricRouter::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::FabricRouter").SetParent<Object>().SetGroupName("MetaRoce");
    return tid;
}

TypeId
ClosRouter::GetTypeId()
{
    static TypeId tid = TypeId("ns3::metaroce::ClosRouter")
                            .SetParent<FabricRouter>()
                            .SetGroupName("MetaRoce")
                            .AddConstructor<ClosRouter>();
    return tid;
}

PortRange
ClosRouter::Route(const SwitchCoord& at, uint32_t dst) const
{
    return m_geometry.Route(at, dst);
}

} // namespace metaroce
} // namespace ns3
