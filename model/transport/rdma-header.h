/*
 * The transport header both NICs use, serialized as RoCEv2 lays its headers out so that a
 * frame's size on the wire is right:
 *   data        BTH (12) + RETH (16) [+ path extension (16), MetaRoCE] + ICRC (4)
 *   ACK/NAK     BTH (12) + AETH (4) [+ path ACK extension (52), MetaRoCE] + ICRC (4)
 *   CNP         BTH (12) + 16 reserved + ICRC (4)
 * RETH's virtual address carries the destination offset and its R_Key the message id, in
 * every data packet (RDMA WRITE placement). The path extensions are MetaRoCE's: no layout is
 * public, so their size (16 B on data, 52 B on ACKs: path, epoch, cumulative PSN, a 256-bit
 * SACK bitmap, the echoed timestamp and the rate hint) is an assumption.
 */
#ifndef METAROCE_RDMA_HEADER_H
#define METAROCE_RDMA_HEADER_H

#include "model/fabric/fabric-frame.h"

#include "ns3/header.h"

#include <array>
#include <cstdint>

namespace ns3
{
namespace metaroce
{

enum class RdmaOpcode : uint8_t
{
    Data = 0x0a,     //!< RDMA WRITE (every packet carries RETH)
    Ack = 0x11,      //!< acknowledge
    Nak = 0x12,      //!< PSN sequence error (go-back-N)
    Cnp = 0x81,      //!< congestion notification (DCQCN)
    PathData = 0x40, //!< MetaRoCE data: RETH + path extension
    PathAck = 0x41,  //!< MetaRoCE ACK: per-path cumulative PSN + SACK bitmap
};

/// The header's fields but the SACK bitmap, ordered to pack into 48 bytes: what a frame in
/// flight carries (RdmaFrameHeader), so that a data frame's header fits one cache line.
struct RdmaFields
{
    uint64_t offset{0};     //!< RETH VA: destination offset of this payload
    int64_t timestampPs{0}; //!< data: send time; ACK: echoed send time of the acked packet
    uint32_t destQpn{0};
    uint32_t psn{0};          //!< data: QP PSN (RoCEv2) or path PSN; ACK/NAK: cumulative PSN
    uint32_t msgId{0};        //!< RETH R_Key: the message
    uint32_t msgBytes{0};     //!< RETH DMA length: the whole message
    uint32_t rateHintMbps{0}; //!< ACK: receiver's fair-share hint for this sender (0: none)
    uint32_t ackBase{0};      //!< path data: every path PSN below it is resolved at the sender
    uint16_t stream{0};       //!< ordered stream within the QP
    // MetaRoCE path fields
    uint16_t path{0};
    RdmaOpcode opcode{RdmaOpcode::Data};
    uint8_t epoch{0};
    uint8_t flags{0}; //!< bit 0: ECN echo (ACK); bit 1: retransmission (data)
};

/// Every field of the header, SACK bitmap included, as plain data: what the transports build
/// and read for each packet. RdmaHeader adds ns-3's Header interface (serialization) on top;
/// building that per packet cost out-of-line constructors and destructors (ns3::Header,
/// ObjectBase) for nothing.
struct RdmaHeaderData : RdmaFields
{
    /// Bytes on the wire of a header with this opcode (BTH and what follows it).
    static uint32_t SizeOf(RdmaOpcode op);

    std::array<uint64_t, 4> sack{}; //!< ACK: bit i = path PSN (psn + 1 + i) received

    static constexpr uint8_t kFlagEcnEcho = 1;
    static constexpr uint8_t kFlagRetransmit = 2;
    static constexpr uint8_t kFlagProbe = 4; //!< data: an empty probe; ACK: echoes a probe
};

class RdmaHeader : public Header, public RdmaHeaderData
{
  public:
    static TypeId GetTypeId();
    TypeId GetInstanceTypeId() const override;
    uint32_t GetSerializedSize() const override { return SizeOf(opcode); }
    void Serialize(Buffer::Iterator start) const override;
    uint32_t Deserialize(Buffer::Iterator start) override;
    void Print(std::ostream& os) const override;
};

/// An RDMA frame's header and payload size as they travel (FrameHeader: never serialized).
/// 64 bytes, one cache line; only MetaRoCE's ACKs also carry the SACK bitmap (the larger
/// RdmaAckFrameHeader).
class RdmaFrameHeader : public FrameHeader
{
  public:
    /// A frame header holding `header`, the kind its opcode needs.
    static RdmaFrameHeader* Make(const RdmaHeaderData& header, uint32_t payloadBytes);

    uint32_t PayloadBytes() const { return ipPayloadBytes - RdmaHeader::SizeOf(f.opcode); }

    /// The whole header, SACK bitmap included.
    void Get(RdmaHeaderData& out) const;

    Ptr<Packet> ToPacket() const override;

    RdmaFields f;

  protected:
    RdmaFrameHeader(const RdmaHeaderData& header, uint32_t payloadBytes)
        : f(header)
    {
        ipPayloadBytes = RdmaHeader::SizeOf(header.opcode) + payloadBytes;
    }
};

/// The frame header of an ACK that carries a SACK bitmap.
class RdmaAckFrameHeader final : public RdmaFrameHeader
{
  public:
    RdmaAckFrameHeader(const RdmaHeaderData& header, uint32_t payloadBytes)
        : RdmaFrameHeader(header, payloadBytes)
        , sack(header.sack)
    {
    }

    std::array<uint64_t, 4> sack;
};

static_assert(sizeof(RdmaFields) == 48 && sizeof(RdmaFrameHeader) == 64,
              "a data frame's header is one cache line");

inline RdmaFrameHeader*
RdmaFrameHeader::Make(const RdmaHeaderData& header, uint32_t payloadBytes)
{
    if (header.opcode == RdmaOpcode::PathAck)
    {
        return new RdmaAckFrameHeader(header, payloadBytes);
    }
    return new RdmaFrameHeader(header, payloadBytes);
}

inline void
RdmaFrameHeader::Get(RdmaHeaderData& out) const
{
    static_cast<RdmaFields&>(out) = f;
    if (f.opcode == RdmaOpcode::PathAck)
    {
        out.sack = static_cast<const RdmaAckFrameHeader*>(this)->sack;
    }
}

} // namespace metaroce
} // namespace ns3

#endif
