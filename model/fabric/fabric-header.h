/*
 * The Ethernet + IPv4 + UDP header of a RoCEv2-style frame, as a serializable ns3::Header.
 * On the hot path the same fields travel parsed in FabricFrame; this class gives them real
 * bytes (42 B) for whatever must serialize a frame (pcap writers, a future MPI channel).
 */
#ifndef METAROCE_FABRIC_HEADER_H
#define METAROCE_FABRIC_HEADER_H

#include "fabric-frame.h"

#include "ns3/header.h"

namespace ns3
{
namespace metaroce
{

class FabricHeader : public Header
{
  public:
    static TypeId GetTypeId();
    TypeId GetInstanceTypeId() const override;
    uint32_t GetSerializedSize() const override;
    void Serialize(Buffer::Iterator start) const override;
    uint32_t Deserialize(Buffer::Iterator start) override;
    void Print(std::ostream& os) const override;

    /// Copies the addressing fields of a frame; ipPayloadBytes is the packet's size.
    static FabricHeader FromFrame(const FabricFrame& f);
    /// Writes the fields back into a frame (the packet is left as it is).
    void ToFrame(FabricFrame& f) const;

    uint32_t src{0};
    uint32_t dst{0};
    uint16_t entropy{0};
    uint16_t ipPayloadBytes{0};
    uint8_t ecn{0};
    uint8_t tc{0};

    /// UDP destination port of RoCEv2.
    static constexpr uint16_t kRoceUdpPort = 4791;
};

} // namespace metaroce
} // namespace ns3

#endif
