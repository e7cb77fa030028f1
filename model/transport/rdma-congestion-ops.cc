#include "rdma-congestion-ops.h"

namespace ns3
{
namespace metaroce
{

NS_OBJECT_ENSURE_REGISTERED(RdmaCongestionOps);
NS_OBJECT_ENSURE_REGISTERED(RdmaNoCongestionControl);

TypeId
RdmaCongestionOps::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::RdmaCongestionOps").SetParent<Object>().SetGroupName("MetaRoce");
    return tid;
}

TypeId
RdmaNoCongestionControl::GetTypeId()
{
    static TypeId tid = TypeId("ns3::metaroce::RdmaNoCongestionControl")
                            .SetParent<RdmaCongestionOps>()
                            .SetGroupName("MetaRoce")
                            .AddConstructor<RdmaNoCongestionControl>();
    return tid;
}

Ptr<RdmaCongestionOps>
RdmaNoCongestionControl::Fork() const
{
    // It holds no state: one instance serves every QP (disposing it twice is harmless).
    return Ptr<RdmaCongestionOps>(const_cast<RdmaNoCongestionControl*>(this));
}

} // namespace metaroce
} // namespace ns3
