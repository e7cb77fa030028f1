#include "rdma-header.h"

#include "ns3/assert.h"

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
RdmaHeaderData::SizeOf(RdmaOpcode op)
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

namespace
{
// Big-endian field writers/readers over a local array: the header crosses the Buffer in one
// Write/Read call instead of one library call per field (it is (de)serialized per packet).
struct Out
{
    uint8_t* p;

    void U8(uint8_t v) { *p++ = v; }

    void U16(uint16_t v)
    {
        U8(static_cast<uint8_t>(v >> 8));
        U8(static_cast<uint8_t>(v));
    }

    void U32(uint32_t v)
    {
        U16(static_cast<uint16_t>(v >> 16));
        U16(static_cast<uint16_t>(v));
    }

    void U64(uint64_t v)
    {
        U32(static_cast<uint32_t>(v >> 32));
        U32(static_cast<uint32_t>(v));
    }
};

struct In
{
    const uint8_t* p;

    uint8_t U8() { return *p++; }

    uint16_t U16()
    {
        uint16_t hi = U8();
        return static_cast<uint16_t>((hi << 8) | U8());
    }

    uint32_t U32()
    {
        uint32_t hi = U16();
        return (hi << 16) | U16();
    }

    uint64_t U64()
    {
        uint64_t hi = U32();
        return (hi << 32) | U32();
    }
};

constexpr uint32_t kMaxHeaderBytes = 72;
} // namespace

void
RdmaHeader::Serialize(Buffer::Iterator i) const
{
    uint8_t bytes[kMaxHeaderBytes];
    Out o{bytes};
    // BTH: opcode, flags, P_Key (our stream id), reserved + dest QP, PSN
    o.U8(static_cast<uint8_t>(opcode));
    o.U8(flags);
    o.U16(stream);
    o.U32(destQpn & 0xffffff);
    o.U32(psn);
    switch (opcode)
    {
        case RdmaOpcode::Data:
        case RdmaOpcode::PathData:
            o.U64(offset);
            o.U32(msgId);
            o.U32(msgBytes);
            if (opcode == RdmaOpcode::PathData)
            {
                o.U16(path);
                o.U8(epoch);
                o.U8(0);
                o.U32(ackBase);
                o.U64(static_cast<uint64_t>(timestampPs));
            }
            break;
        case RdmaOpcode::Ack:
        case RdmaOpcode::Nak:
            o.U32(msgId); // AETH: syndrome + MSN
            break;
        case RdmaOpcode::PathAck:
            o.U32(msgId);
            o.U16(path);
            o.U8(epoch);
            o.U8(0);
            for (uint64_t w : sack)
            {
                o.U64(w);
            }
            o.U64(static_cast<uint64_t>(timestampPs));
            o.U32(rateHintMbps);
            o.U32(0);
            break;
        case RdmaOpcode::Cnp:
            o.U64(0);
            o.U64(0);
            break;
    }
    o.U32(0); // ICRC (not computed)
    NS_ASSERT(static_cast<uint32_t>(o.p - bytes) == SizeOf(opcode));
    i.Write(bytes, static_cast<uint32_t>(o.p - bytes));
}

uint32_t
RdmaHeader::Deserialize(Buffer::Iterator i)
{
    uint8_t bytes[kMaxHeaderBytes];
    if (i.GetRemainingSize() == 0)
    {
        return 0;
    }
    bytes[0] = i.ReadU8();
    opcode = static_cast<RdmaOpcode>(bytes[0]);
    uint32_t size = SizeOf(opcode);
    if (size == 0 || size - 1 > i.GetRemainingSize())
    {
        return 0; // not an opcode of this transport, or a truncated header
    }
    i.Read(bytes + 1, size - 1);
    In r{bytes + 1};
    flags = r.U8();
    stream = r.U16();
    destQpn = r.U32() & 0xffffff;
    psn = r.U32();
    switch (opcode)
    {
        case RdmaOpcode::Data:
        case RdmaOpcode::PathData:
            offset = r.U64();
            msgId = r.U32();
            msgBytes = r.U32();
            if (opcode == RdmaOpcode::PathData)
            {
                path = r.U16();
                epoch = r.U8();
                r.U8();
                ackBase = r.U32();
                timestampPs = static_cast<int64_t>(r.U64());
            }
            break;
        case RdmaOpcode::Ack:
        case RdmaOpcode::Nak:
            msgId = r.U32();
            break;
        case RdmaOpcode::PathAck:
            msgId = r.U32();
            path = r.U16();
            epoch = r.U8();
            r.U8();
            for (uint64_t& w : sack)
            {
                w = r.U64();
            }
            timestampPs = static_cast<int64_t>(r.U64());
            rateHintMbps = r.U32();
            break;
        case RdmaOpcode::Cnp:
            break;
    }
    return size;
}

void
RdmaHeader::Print(std::ostream& os) const
{
    os << "op=0x" << std::hex << unsigned(static_cast<uint8_t>(opcode)) << std::dec
       << " qpn=" << destQpn << " psn=" << psn << " msg=" << msgId << " off=" << offset
       << " path=" << path;
}

Ptr<Packet>
RdmaFrameHeader::ToPacket() const
{
    Ptr<Packet> p = Create<Packet>(PayloadBytes());
    RdmaHeader h;
    Get(h);
    p->AddHeader(h);
    return p;
}

} // namespace metaroce
} // namespace ns3
