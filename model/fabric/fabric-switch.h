/*
 * A commodity Ethernet switch as MetaRoCE assumes it: ECMP and ECN, nothing else.
 * - Shared buffer with a per-egress dynamic threshold (Choudhury-Hahne): a frame is admitted
 *   to an egress queue only while that queue holds less than Alpha x (free buffer).
 * - Drop-tail when the buffer or the threshold is exceeded.
 * - RED-style ECN marking of ECN-capable frames on enqueue: probability 0 below Kmin, rising
 *   linearly to Pmax at Kmax, 1 above.
 * - ECMP: hash of (source, destination, entropy, salt) over the live equal-cost next hops
 *   that the shared FabricRouter returns; a failed port leaves the ECMP group only after
 *   ConvergenceDelay (until then frames hashed onto it are lost).
 * - Forwarding latency: a frame may leave no earlier than Latency after it arrived.
 * PFC (lossless classes) hooks in at ReceiveFrame/NotifyDequeue through the ingress port
 * carried in every frame.
 * What forwarding reads sits in two cache lines right after ns-3's Node fields (see
 * FabricNetDevice for why).
 */
#ifndef METAROCE_FABRIC_SWITCH_H
#define METAROCE_FABRIC_SWITCH_H

#include "fabric-net-device.h"
#include "fabric-router.h"
#include "model/core/fabric-random.h"

#include "ns3/node.h"
#include "ns3/nstime.h"
#include "ns3/traced-callback.h"

#include <vector>

namespace ns3
{
namespace metaroce
{

class alignas(64) FabricSwitch final : public Node, public FabricFrameReceiver
{
  public:
    static TypeId GetTypeId();
    FabricSwitch();
    ~FabricSwitch() override;

    /// Adds a port; returns its index (ports are numbered in the order they are added).
    uint32_t AddPort(Ptr<FabricNetDevice> dev);
    FabricNetDevice* GetPort(uint32_t i) const { return m_portsData[i]; }
    uint32_t GetNPorts() const { return static_cast<uint32_t>(m_ports.size()); }

    void SetRouter(Ptr<FabricRouter> router, const SwitchCoord& coord);
    /// Forwarding latency; the ports' links deliver frames this much later (see
    /// FabricNetDevice::SetRxLatency), so the switch needs no event of its own for it.
    void SetLatency(Time latency);
    Time GetLatency() const;
    const SwitchCoord& GetCoord() const { return m_coord; }
    /// Seeds the ECN-marking random stream; returns the number of streams used.
    int64_t AssignStreams(int64_t stream);

    /// The egress port ECMP picks for a frame, or -1 when no live next hop exists.
    int32_t SelectEgress(uint32_t src, uint32_t dst, uint16_t entropy) const;
    /// Whether ECMP still hashes onto port i (false once a failure has converged).
    bool IsRoutable(uint32_t i) const { return !m_anyUnroutable || !m_unroutable[i]; }
    /// Probability that a frame finding `queuedBytes` in its egress queue is marked.
    double MarkProbability(uint64_t queuedBytes) const;

    uint64_t GetBufferBytes() const;
    uint64_t GetBufferUsed() const { return m_bufferUsed; }

    /// PFC: bytes of the lossless class that entered through port i and are still buffered.
    uint64_t GetIngressBytes(uint32_t i) const
    {
        return m_ingressBytes.empty() ? 0 : m_ingressBytes[i];
    }
    /// PFC: the pause threshold now (bytes per ingress port).
    double GetPfcXoff() const;
    /// PFC headroom reserved for port i: 2 x (bytes in flight over its link) + 2 MTU +
    /// rate x response time.
    uint64_t GetPfcHeadroom(uint32_t i) const;
    bool IsUpstreamPaused(uint32_t i) const
    {
        return !m_upstreamPaused.empty() && m_upstreamPaused[i];
    }

    struct Counters
    {
        uint64_t forwarded{0};
        uint64_t dropBuffer{0};
        uint64_t dropNoRoute{0};
        uint64_t dropLossless{0}; //!< of dropBuffer: frames of the PFC class (headroom exhausted)
        uint64_t ecnMarked{0};
        uint64_t maxBufferUsed{0};
        uint64_t pausesSent{0};
        uint64_t resumesSent{0};
    };

    Counters GetCounters() const;

    // FabricFrameReceiver
    void ReceiveFrame(FabricNetDevice* port, FabricFrame&& frame) override;
    void PrepareFrame(const FabricFrame& frame, uint32_t stage) const override;
    void NotifyDequeue(FabricNetDevice* port, const FabricFrame& frame) override;
    void NotifyLinkChange(FabricNetDevice* port, bool up) override;

    typedef void (*DropTracedCallback)(Ptr<const Packet> packet, uint8_t reason);

  protected:
    void DoDispose() override;

  private:
    void Converge(uint32_t port);
    void FillEgress();
    void PfcInit();
    void SendPause(uint32_t port, bool pause);

    void SetEcmpSalt(uint32_t salt);
    uint32_t GetEcmpSalt() const { return m_salt; }

    // Line 2 (after Node's fields and FabricFrameReceiver's vtable pointer): routing.
    FabricRouter* m_routerRaw{nullptr}; //!< m_router without the reference count
    SwitchCoord m_coord;
    uint32_t m_hashSalt{0}; //!< the salt ECMP uses: EcmpSalt, or one derived from the node id
    bool m_ecnEnabled{true};
    bool m_pfc{false};
    bool m_anyUnroutable{false}; //!< m_unroutable is allocated (a port has failed)
    uint8_t m_pfcClass{3};
    uint32_t m_nPorts{0};
    FabricNetDevice* const* m_portsData{nullptr}; //!< m_ports.data()
    /// A port and the cache line a frame it sends touches on its link (null: no link).
    struct Egress
    {
        FabricNetDevice* port;
        const void* link;
    };

    //! [port], for PrepareFrame; filled at the first frame, when the fabric is wired
    const Egress* m_egress{nullptr};
    // Line 3: admission.
    uint64_t m_bufferUsed{0};
    uint64_t m_bufferBytes{0}; //!< explicit total; 0: BufferPerPort x ports
    uint64_t m_bufferPerPort{0};
    double m_alpha{1.0};
    uint64_t m_kmin{0};
    uint64_t m_forwarded{0};
    uint64_t m_maxBufferUsed{0};
    uint64_t m_kmax{0};
    // Marking, then the rest.
    double m_pmax{1.0};
    mutable FastRng m_rng;
    uint64_t m_ecnMarked{0};
    uint64_t m_dropBuffer{0};
    uint64_t m_dropNoRoute{0};
    uint64_t m_dropLossless{0};
    uint64_t m_pausesSent{0};
    uint64_t m_resumesSent{0};
    std::vector<FabricNetDevice*> m_ports; //!< owned through Node's device list
    std::vector<Egress> m_egressStore;
    std::vector<bool> m_unroutable; //!< allocated on the first failure only
    Ptr<FabricRouter> m_router;
    Time m_latency;
    Time m_convergence;
    uint32_t m_salt{0};
    // PFC
    double m_pfcAlpha{0.125};
    Time m_pfcResponse;
    uint64_t m_pfcXonOffset{0};
    uint64_t m_pfcHeadroomTotal{0};
    std::vector<uint64_t> m_ingressBytes; //!< allocated when PFC is on
    std::vector<bool> m_upstreamPaused;
    TracedCallback<Ptr<const Packet>, uint8_t> m_dropTrace;
    TracedCallback<Ptr<const Packet>> m_markTrace;
};

} // namespace metaroce
} // namespace ns3

#endif
