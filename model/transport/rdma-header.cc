#include "rdma-header.h"

namespace ns3
{
namespace metaroce
{

NS_OBJECT_ENSURE_REGISTERED(RdmaHeader);

TypeId
RdmaHeader::GetTypeId()
{
    static TypeId tid = TypeId("ns3::metaroce::RdmaHeader")
                            .SetParent<Header>()
                            .SetGroupName("MetaRoce")
                            .AddConstructor<RdmaHeader>();
    return tid;
}

TypeId
RdmaHeader::GetInstanceTypeId() const
{
    return GetTypeId();
}

uint32_t
RdmaHeader::SizeOf(RdmaOpcode op)
{
    switch (op)
    {
        case RdmaOpcode::Data:
            return 12 + 16 + 4;
        case RdmaOpcode::PathData:
            return 12 + 16 + 16 + 4;
        case RdmaOpcode::Ack:
        case RdmaOpcode::Nak:
            return 12 + 4 + 4;
        case RdmaOpcode::PathAck:
            return 12 + 4 + 52 + 4;
        case RdmaOpcode::Cnp:
            return 12 + 16 + 4;
    }
    return 0;
}

void
RdmaHeader::Serialize(Buffer::Iterator i) const
{
    // BTH: opcode, flags, P_Key (our stream id), reserved + dest QP, PSN
    i.WriteU8(static_cast<uint8_t>(opcode));
    i.WriteU8(flags);
    i.WriteHtonU16(stream);
    i.WriteHtonU32(destQpn & 0xffffff);
    i.WriteHtonU32(psn);
    switch (opcode)
    {
        case RdmaOpcode::Data:
        case RdmaOpcode::PathData:
            i.WriteHtonU64(offset);
            i.WriteHtonU32(msgId);
            i.WriteHtonU32(msgBytes);
            if (opcode == RdmaOpcode::PathData)
            {
                i.WriteHtonU16(path);
                i.WriteU8(epoch);
                i.WriteU8(0);
                i.WriteHtonU32(ackBase);
                i.WriteHtonU64(static_cast<uint64_t>(timestampPs));
            }
            break;
        case RdmaOpcode::Ack:
        case RdmaOpcode::Nak:
            i.WriteHtonU32(msgId); // AETH: syndrome + MSN
            break;
        case RdmaOpcode::PathAck:
            i.WriteHtonU32(msgId);
            i.WriteHtonU16(path);
            i.WriteU8(epoch);
            i.WriteU8(0);
            for (uint64_t w : sack)
            {
                i.WriteHtonU64(w);
            }
            i.WriteHtonU64(static_cast<uint64_t>(timestampPs));
            i.WriteHtonU32(rateHintMbps);
            i.WriteHtonU32(0);
            break;
        case RdmaOpcode::Cnp:
            i.WriteHtonU64(0);
            i.WriteHtonU64(0);
            break;
    }
    i.WriteHtonU32(0); // ICRC (not computed)
}

uint32_t
RdmaHeader::Deserialize(Buffer::Iterator i)
{
    opcode = static_cast<RdmaOpcode>(i.ReadU8());
    flags = i.ReadU8();
    stream = i.ReadNtohU16();
    destQpn = i.ReadNtohU32() & 0xffffff;
    psn = i.ReadNtohU32();
    switch (opcode)
    {
        case RdmaOpcode::Data:
        case RdmaOpcode::PathData:
            offset = i.ReadNtohU64();
            msgId = i.ReadNtohU32();
            msgBytes = i.ReadNtohU32();
            if (opcode == RdmaOpcode::PathData)
            {
                path = i.ReadNtohU16();
                epoch = i.ReadU8();
                i.ReadU8();
                ackBase = i.ReadNtohU32();
                timestampPs = static_cast<int64_t>(i.ReadNtohU64());
            }
            break;
        case RdmaOpcode::Ack:
        case RdmaOpcode::Nak:
            msgId = i.ReadNtohU32();
            break;
        case RdmaOpcode::PathAck:
            msgId = i.ReadNtohU32();
            path = i.ReadNtohU16();
            epoch = i.ReadU8();
            i.ReadU8();
            for (uint64_t& w : sack)
            {
                w = i.ReadNtohU64();
            }
            timestampPs = static_cast<int64_t>(i.ReadNtohU64());
            rateHintMbps = i.ReadNtohU32();
            i.ReadNtohU32();
            break;
        case RdmaOpcode::Cnp:
            i.ReadNtohU64();
            i.ReadNtohU64();
            break;
    }
    i.ReadNtohU32();
    return SizeOf(opcode);
}

void
RdmaHeader::Print(std::ostream& os) const
{
    os << "op=0x" << std::hex << unsigned(static_cast<uint8_t>(opcode)) << std::dec
       << " qpn=" << destQpn << " psn=" << psn << " msg=" << msgId << " off=" << offset
       << " path=" << path;
}

} // namespace metaroce
} // namespace ns3
