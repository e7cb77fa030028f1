#include "fabric-header.h"

namespace ns3
{
namespace metaroce
{

NS_OBJECT_ENSURE_REGISTERED(FabricHeader);

TypeId
FabricHeader::GetTypeId()
{
    static TypeId tid = TypeId("ns3::metaroce::FabricHeader")
                            .SetParent<Header>()
                            .SetGroupName("MetaRoce")
                            .AddConstructor<FabricHeader>();
    return tid;
}

TypeId
FabricHeader::GetInstanceTypeId() const
{
    return GetTypeId();
}

uint32_t
FabricHeader::GetSerializedSize() const
{
    return kL2L3HeaderBytes;
}

namespace
{
// NIC id n gets the locally administered MAC 02:00:nn:nn:nn:nn and the IPv4 address 10.0.0.0+n
// (ids up to 2^24 fit in 10/8, enough for the 100k-accelerator fabrics).
void
WriteMac(Buffer::Iterator& i, uint32_t id)
{
    i.WriteU8(0x02);
    i.WriteU8(0x00);
    i.WriteHtonU32(id);
}
} // namespace

void
FabricHeader::Serialize(Buffer::Iterator i) const
{
    WriteMac(i, dst);
    WriteMac(i, src);
    i.WriteHtonU16(0x0800);
    // IPv4
    i.WriteU8(0x45);
    i.WriteU8(static_cast<uint8_t>((tc & 0x7) << 5 | (ecn & 0x3)));
    i.WriteHtonU16(static_cast<uint16_t>(20 + 8 + ipPayloadBytes));
    i.WriteHtonU16(0);      // identification
    i.WriteHtonU16(0x4000); // don't fragment
    i.WriteU8(64);          // TTL
    i.WriteU8(17);          // UDP
    i.WriteHtonU16(0);      // checksum not modelled
    i.WriteHtonU32(0x0a000000u + src);
    i.WriteHtonU32(0x0a000000u + dst);
    // UDP
    i.WriteHtonU16(entropy);
    i.WriteHtonU16(kRoceUdpPort);
    i.WriteHtonU16(static_cast<uint16_t>(8 + ipPayloadBytes));
    i.WriteHtonU16(0);
}

uint32_t
FabricHeader::Deserialize(Buffer::Iterator i)
{
    if (i.GetRemainingSize() < kL2L3HeaderBytes)
    {
        return 0; // truncated
    }
    i.Next(14);
    i.ReadU8();
    uint8_t tos = i.ReadU8();
    tc = static_cast<uint8_t>(tos >> 5);
    ecn = static_cast<uint8_t>(tos & 0x3);
    ipPayloadBytes = static_cast<uint16_t>(i.ReadNtohU16() - 28);
    i.Next(8);
    src = i.ReadNtohU32() - 0x0a000000u;
    dst = i.ReadNtohU32() - 0x0a000000u;
    entropy = i.ReadNtohU16();
    i.Next(6);
    return kL2L3HeaderBytes;
}

void
FabricHeader::Print(std::ostream& os) const
{
    os << "src=" << src << " dst=" << dst << " entropy=" << entropy << " tc=" << unsigned(tc)
       << " ecn=" << unsigned(ecn) << " len=" << ipPayloadBytes;
}

FabricHeader
FabricHeader::FromFrame(const FabricFrame& f)
{
    FabricHeader h;
    h.src = f.src;
    h.dst = f.dst;
    h.entropy = f.entropy;
    h.ecn = f.ecn;
    h.tc = f.tc;
    h.ipPayloadBytes = static_cast<uint16_t>(f.IpPayloadBytes());
    return h;
}

void
FabricHeader::ToFrame(FabricFrame& f) const
{
    f.src = src;
    f.dst = dst;
    f.entropy = entropy;
    f.ecn = ecn;
    f.tc = tc;
}

} // namespace metaroce
} // namespace ns3
