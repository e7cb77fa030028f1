/*
 * A frame as the fabric carries it: the ns-3 Packet (transport headers and payload) with a
 * parsed copy of the Ethernet/IPv4/UDP fields a switch reads kept beside it, so no hop has
 * to remove and re-add a header to read the destination or flip the ECN bits.
 * FabricHeader serializes the same fields for anything that needs real bytes (pcap, MPI).
 */
#ifndef METAROCE_FABRIC_FRAME_H
#define METAROCE_FABRIC_FRAME_H

#include "ring.h"

#include "ns3/packet.h"
#include "ns3/ptr.h"

#include <cstdint>
#include <utility>

namespace ns3
{
namespace metaroce
{

/// Bytes on the wire around the IP packet that are not in the Packet: Ethernet header (14),
/// IPv4 (20) and UDP (8) as modelled by FabricHeader, plus FCS (4), preamble+SFD (8) and
/// the inter-frame gap (12). ICRC belongs to the transport header.
constexpr uint32_t kL2L3HeaderBytes = 14 + 20 + 8;
constexpr uint32_t kFrameTrailerBytes = 4;
constexpr uint32_t kPreambleIfgBytes = 8 + 12;
constexpr uint32_t kWireOverheadBytes = kL2L3HeaderBytes + kFrameTrailerBytes + kPreambleIfgBytes;
/// Ethernet's minimum frame (headers + payload + FCS) is 64 B.
constexpr uint32_t kMinFrameBytes = 64;

/// ECN codepoints of the IP header.
enum EcnCodepoint : uint8_t
{
    ECN_NOT_ECT = 0,
    ECN_ECT1 = 1,
    ECN_ECT0 = 2,
    ECN_CE = 3
};

/**
 * Owns one reference to a Packet. Unlike ns-3's Ptr (which has no move constructor in 3.37),
 * moving it does not touch the Packet's reference count: a frame moves through several
 * queues per hop, and each count update would fetch the Packet's cold cache line although
 * no switch reads the Packet itself.
 */
class PacketRef
{
  public:
    PacketRef() = default;

    PacketRef(Ptr<Packet> p)
        : m_p(GetPointer(p))
    {
    }

    PacketRef(const PacketRef& o)
        : m_p(o.m_p)
    {
        if (m_p != nullptr)
        {
            m_p->Ref();
        }
    }

    PacketRef(PacketRef&& o) noexcept
        : m_p(o.m_p)
    {
        o.m_p = nullptr;
    }

    PacketRef& operator=(PacketRef o) noexcept
    {
        std::swap(m_p, o.m_p);
        return *this;
    }

    ~PacketRef()
    {
        if (m_p != nullptr)
        {
            m_p->Unref();
        }
    }

    Packet* operator->() const { return m_p; }

    explicit operator bool() const { return m_p != nullptr; }

    /// A counted pointer for APIs and trace sources that take one.
    operator Ptr<Packet>() const { return Ptr<Packet>(m_p); }

    Ptr<Packet> Get() const { return Ptr<Packet>(m_p); }

  private:
    Packet* m_p{nullptr};
};

/// One frame in flight or queued. Kept small: it is moved through every queue and link.
struct FabricFrame
{
    PacketRef packet;         //!< transport headers and payload
    int64_t readyPs{0};       //!< on a link: arrival time; in a switch: earliest departure (ps)
    uint32_t src{0};          //!< source NIC id (IPv4 source address)
    uint32_t dst{0};          //!< destination NIC id (IPv4 destination address)
    uint32_t wireBytes{0};    //!< bytes this frame occupies on the wire, overhead included
    uint16_t entropy{0};      //!< UDP source port: what ECMP hashes besides the addresses
    uint16_t ingress{0xffff}; //!< ingress port index inside a switch (PFC accounting)
    uint8_t ecn{ECN_NOT_ECT}; //!< IP ECN field
    uint8_t tc{0};            //!< traffic class (from DSCP), 0..7: selects queue and PFC priority

    /// Builds a frame around a packet and computes its wire size.
    static FabricFrame Make(Ptr<Packet> p, uint32_t src, uint32_t dst, uint16_t entropy, uint8_t tc,
                            uint8_t ecn)
    {
        FabricFrame f;
        f.packet = std::move(p);
        f.src = src;
        f.dst = dst;
        f.entropy = entropy;
        f.tc = tc;
        f.ecn = ecn;
        uint32_t frame = f.packet->GetSize() + kL2L3HeaderBytes + kFrameTrailerBytes;
        f.wireBytes = (frame < kMinFrameBytes ? kMinFrameBytes : frame) + kPreambleIfgBytes;
        return f;
    }
};

/// The FIFO of frames of a port or a link direction.
using FrameRing = Ring<FabricFrame>;

} // namespace metaroce
} // namespace ns3

#endif
