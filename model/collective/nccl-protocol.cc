#include "nccl-protocol.h"

#include "ns3/log.h"

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("NcclProtocol");
NS_OBJECT_ENSURE_REGISTERED(NcclEndpoint);

std::optional<NcclProto>
NcclProtoOf(const std::string& name)
{
    for (NcclProto p : {NcclProto::LL, NcclProto::LL128, NcclProto::Simple})
    {
        if (ToString(p) == name)
        {
            return p;
        }
    }
    return std::nullopt;
}

uint64_t
ProtocolWireBytes(NcclProto p, uint64_t bytes)
{
    switch (p)
    {
        case NcclProto::LL:
            return (bytes + 7) / 8 * 16;
        case NcclProto::LL128:
            return (bytes + 119) / 120 * 128;
        case NcclProto::Simple:
            break;
    }
    return bytes;
}

uint64_t
ProtocolStepDataBytes(NcclProto p)
{
    switch (p)
    {
        case NcclProto::LL:
            return 8 * 512 * 16 / 2;
        case NcclProto::LL128:
            return uint64_t{120} * 640 * 8 / 128 * 120;
        case NcclProto::Simple:
            break;
    }
    return 0;
}

TypeId
NcclEndpoint::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::NcclEndpoint")
            .SetParent<Object>()
            .SetGroupName("MetaRoce")
            .AddConstructor<NcclEndpoint>()
            .AddAttribute("KernelStep",
                          "Per step a rank sends: the collective kernel's flag write and memory "
                          "fence. Assumption: 300 ns.",
                          TimeValue(NanoSeconds(300)),
                          MakeTimeAccessor(&NcclEndpoint::m_kernelStep), MakeTimeChecker())
            .AddAttribute("Proxy",
                          "Per network step sent: until NCCL's proxy thread sees it (polling "
                          "host memory the GPU wrote across PCIe). Assumption: 500 ns.",
                          TimeValue(NanoSeconds(500)), MakeTimeAccessor(&NcclEndpoint::m_proxy),
                          MakeTimeChecker())
            .AddAttribute("Doorbell",
                          "Per network step sent: the verbs post (MMIO doorbell, the NIC's WQE "
                          "fetch and first payload read across PCIe). Assumption: 1 us, about "
                          "three PCIe traversals.",
                          TimeValue(NanoSeconds(1000)), MakeTimeAccessor(&NcclEndpoint::m_doorbell),
                          MakeTimeChecker())
            .AddAttribute("Completion",
                          "Per network step received with Simple: the NIC's completion entry "
                          "and the proxy's poll of it. Assumption: 500 ns.",
                          TimeValue(NanoSeconds(500)),
                          MakeTimeAccessor(&NcclEndpoint::m_completion), MakeTimeChecker())
            .AddAttribute("Flush",
                          "Per network step received with Simple: the GPUDirect flush (a PCIe "
                          "read) that orders the data before the kernel is told. Assumption: "
                          "1 us.",
                          TimeValue(NanoSeconds(1000)), MakeTimeAccessor(&NcclEndpoint::m_flush),
                          MakeTimeChecker());
    return tid;
}

NcclEndpoint::NcclEndpoint() = default;
NcclEndpoint::~NcclEndpoint() = default;

EndpointLatency
NcclEndpoint::Get() const
{
    return {m_kernelStep.GetPicoSeconds(), m_proxy.GetPicoSeconds(), m_doorbell.GetPicoSeconds(),
            m_completion.GetPicoSeconds(), m_flush.GetPicoSeconds()};
}

EndpointLatency
NcclEndpoint::Defaults()
{
    return CreateObject<NcclEndpoint>()->Get();
}

} // namespace metaroce
} // namespace ns3
