#include "metaroce-nic-rtt.h"

#include "model/transport/rdma-nic.h"

#include "ns3/log.h"

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("MetaRoceNicRtt");
NS_OBJECT_ENSURE_REGISTERED(MetaRoceNicRtt);

TypeId
MetaRoceNicRtt::GetTypeId()
{
    static TypeId tid = TypeId("ns3::metaroce::MetaRoceNicRtt")
                            .SetParent<Object>()
                            .SetGroupName("MetaRoce")
                            .AddConstructor<MetaRoceNicRtt>();
    return tid;
}

Ptr<MetaRoceNicRtt>
MetaRoceNicRtt::Of(RdmaNic* nic)
{
    Ptr<MetaRoceNicRtt> r = nic->GetObject<MetaRoceNicRtt>();
    if (!r)
    {
        r = CreateObject<MetaRoceNicRtt>();
        nic->AggregateObject(r);
    }
    return r;
}

} // namespace metaroce
} // namespace ns3
