/*
 * Raw fabric traffic for tests and the fabric-only demo: constant-rate flows of fixed-size
 * packets from one host port on one entropy, and a sink that checks order and measures
 * latency. No transport: what is lost stays lost.
 */
#ifndef METAROCE_RAW_TRAFFIC_H
#define METAROCE_RAW_TRAFFIC_H

#include "fabric-net-device.h"

#include "ns3/data-rate.h"
#include "ns3/header.h"
#include "ns3/node.h"
#include "ns3/nstime.h"

#include <unordered_map>
#include <vector>

namespace ns3
{
namespace metaroce
{

/// 16 bytes, the size of a BTH plus ICRC, so raw frames have RoCEv2's wire size.
class RawHeader : public Header
{
  public:
    static TypeId GetTypeId();
    TypeId GetInstanceTypeId() const override;
    uint32_t GetSerializedSize() const override { return 16; }
    void Serialize(Buffer::Iterator start) const override;
    uint32_t Deserialize(Buffer::Iterator start) override;
    void Print(std::ostream& os) const override;

    uint32_t flow{0};
    uint32_t seq{0};
    int64_t sentPs{0};
};

/// A host's raw traffic generator and sink; install one per host node.
class RawTrafficEndpoint : public Object, public FabricFrameReceiver
{
  public:
    static TypeId GetTypeId();
    RawTrafficEndpoint() = default;

    /// Takes over every FabricNetDevice of the host; nicId is this host's fabric address.
    void Install(Ptr<Node> host, uint32_t nicId);

    struct FlowSpec
    {
        uint32_t dst{0};
        uint32_t port{0}; //!< host port (= plane) to send on
        uint16_t entropy{0};
        uint32_t payloadBytes{4096};
        DataRate rate{"100Gb/s"};
        Time start{0};
        Time stop{0}; //!< exclusive; packets start before it
        uint8_t tc{3};
        bool ecnCapable{true};
    };

    /// Adds a flow; returns its global flow id (unique per endpoint: nicId << 12 | index).
    uint32_t AddFlow(const FlowSpec& spec);

    struct SinkStats
    {
        uint64_t packets{0};
        uint64_t payloadBytes{0};
        uint64_t outOfOrder{0}; //!< a packet with a lower seq than one already seen (per flow)
        uint64_t ecnMarked{0};
        int64_t latencySumPs{0};
        int64_t latencyMaxPs{0};
        int64_t firstPs{-1};
        int64_t lastPs{0};
    };

    const SinkStats& GetSinkStats() const { return m_sink; }
    /// Packets received per flow id.
    const std::unordered_map<uint32_t, uint64_t>& GetReceivedPerFlow() const { return m_perFlow; }
    uint64_t GetSentPackets() const { return m_sent; }

    void ReceiveFrame(FabricNetDevice* port, FabricFrame&& frame) override;

  protected:
    void DoDispose() override;

  private:
    struct Flow
    {
        FlowSpec spec;
        uint32_t id{0};
        uint32_t seq{0};
        int64_t gapPs{0};
    };

    void SendNext(uint32_t i);

    Ptr<Node> m_host;
    std::vector<FabricNetDevice*> m_ports;
    std::vector<Flow> m_flows;
    uint32_t m_nic{0};
    uint64_t m_sent{0};
    SinkStats m_sink;
    std::unordered_map<uint32_t, uint32_t> m_nextSeq; //!< per flow: highest seq seen + 1
    std::unordered_map<uint32_t, uint64_t> m_perFlow;
};

} // namespace metaroce
} // namespace ns3

#endif
