/*
 * What NCCL's protocols put on the wire, and the latency a collective's step meets at its
 * endpoints (the GPU kernel, NCCL's proxy thread, PCIe and the NIC's completion path).
 *
 * Wire format (NCCL's device.h): LL moves 16-byte lines carrying 8 bytes of data and two
 * 4-byte flags (50%); LL128 moves 128-byte lines of which 8 bytes are a flag (120/128);
 * Simple moves the data and signals a step with one separate flag. A step holds what one
 * NCCL_STEPS slot of the protocol's buffer holds: LL 8 lines x 512 threads x 16 B = 64 KiB
 * of lines (32 KiB of data); LL128 120 x 640 threads x 8 B = 614,400 B of lines (576,000 B
 * of data); Simple 512 KiB. LL and LL128 send a step at a time with NCCL_STEPS = 8 steps in
 * flight per connection.
 *
 * Endpoint latency (NcclEndpoint's attributes, all assumptions: no vendor publishes them as
 * such). Every step a rank sends waits KernelStep (the kernel's flag write and fence); one
 * leaving over the network then waits Proxy (NCCL's proxy thread sees the step) and Doorbell
 * (the verbs post: MMIO doorbell, WQE fetch and first payload read across PCIe) before the
 * NIC takes it. A network step of Simple is seen by the receiving kernel only after
 * Completion (CQE written and polled by the proxy) and Flush (the GPUDirect flush read that
 * orders the data before the proxy's tail update); LL and LL128 carry their flags in the
 * data, so the receiving kernel sees them as they land. The NIC's per-packet processing is
 * RdmaNic's TxLatency/RxLatency, and the scale-up domain's its Latency.
 */
#ifndef METAROCE_NCCL_PROTOCOL_H
#define METAROCE_NCCL_PROTOCOL_H

#include "nccl-cost-model.h"

#include "ns3/nstime.h"
#include "ns3/object.h"

#include <cstdint>
#include <optional>
#include <string>

namespace ns3
{
namespace metaroce
{

/// The protocol NCCL_PROTO names ("LL", "LL128", "Simple"); nullopt for anything else ("auto":
/// NCCL's cost model picks).
std::optional<NcclProto> NcclProtoOf(const std::string& name);

/// Bytes a protocol puts on the wire for `bytes` of data (whole lines for LL and LL128).
uint64_t ProtocolWireBytes(NcclProto p, uint64_t bytes);
/// Data bytes one step of the protocol's buffer carries (LL, LL128), 0 for Simple (its
/// slices and chunks are CollectiveConfig's).
uint64_t ProtocolStepDataBytes(NcclProto p);
/// NCCL_STEPS: steps in flight per connection for LL and LL128.
constexpr uint32_t kNcclSteps = 8;

/// The endpoint latencies in picoseconds (see the file comment).
struct EndpointLatency
{
    int64_t kernelStepPs{0};
    int64_t proxyPs{0};
    int64_t doorbellPs{0};
    int64_t completionPs{0};
    int64_t flushPs{0};

    /// From a step's data being ready to its send reaching the NIC.
    int64_t SendPs(bool network) const
    {
        return kernelStepPs + (network ? proxyPs + doorbellPs : 0);
    }

    /// From a network step's last byte landing to the receiving kernel seeing it.
    int64_t ReceivePs(NcclProto p) const
    {
        return p == NcclProto::Simple ? completionPs + flushPs : 0;
    }
};

/// The endpoint latencies as ns-3 attributes (Config::SetDefault or a topology's `endpoint`).
class NcclEndpoint : public Object
{
  public:
    static TypeId GetTypeId();
    NcclEndpoint();
    ~NcclEndpoint() override;

    EndpointLatency Get() const;
    /// Get() of an NcclEndpoint made with the attributes' current defaults.
    static EndpointLatency Defaults();

  private:
    Time m_kernelStep;
    Time m_proxy;
    Time m_doorbell;
    Time m_completion;
    Time m_flush;
};

} // namespace metaroce
} // namespace ns3

#endif
