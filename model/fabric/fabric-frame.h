/*
 * A frame as the fabric carries it: the transport's bytes, with a parsed copy of the
 * Ethernet/IPv4/UDP fields a switch reads kept beside them, so no hop has to remove and re-add
 * a header to read the destination or flip the ECN bits. FabricHeader serializes the same
 * fields for anything that needs real bytes (pcap, MPI).
 *
 * The transport's bytes are either an ns-3 Packet (raw traffic, NetDevice::Send, tests) or a
 * FrameHeader: the transport header as a struct that is never serialized, plus a payload
 * size. The RDMA transports use the latter: a Packet costs a Packet object, a byte buffer and
 * metadata per frame, and parsing the header back at the receiving NIC touched cold cache
 * lines on every packet. Trace sinks still get a Packet (built when a sink is connected).
 */
#ifndef METAROCE_FABRIC_FRAME_H
#define METAROCE_FABRIC_FRAME_H

#include "model/core/ring.h"

#include "ns3/packet.h"
#include "ns3/ptr.h"
#include "ns3/simple-ref-count.h"

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

/// Bytes a frame whose IP packet is `ipPayload` bytes after the IP and UDP headers takes on
/// the wire: headers, FCS, padding to the minimum frame, preamble and inter-frame gap.
constexpr uint32_t
FrameWireBytes(uint32_t ipPayload)
{
    uint32_t frame = ipPayload + kL2L3HeaderBytes + kFrameTrailerBytes;
    return (frame < kMinFrameBytes ? kMinFrameBytes : frame) + kPreambleIfgBytes;
}

/// ECN codepoints of the IP header.
enum EcnCodepoint : uint8_t
{
    ECN_NOT_ECT = 0,
    ECN_ECT1 = 1,
    ECN_ECT0 = 2,
    ECN_CE = 3
};

/**
 * Owns one reference to a Packet or a FrameHeader. Unlike ns-3's Ptr (which has no move
 * constructor in 3.37), moving it does not touch the reference count: a frame moves through
 * several queues per hop, and each count update would fetch the object's cold cache line
 * although no switch reads the object itself.
 */
template <typename T> class IntrusiveRef
{
  public:
    IntrusiveRef() = default;

    IntrusiveRef(Ptr<T> p)
        : m_p(GetPointer(p)) // counts a reference
    {
    }

    IntrusiveRef(const IntrusiveRef& o)
        : m_p(o.m_p)
    {
        if (m_p != nullptr)
        {
            m_p->Ref();
        }
    }

    IntrusiveRef(IntrusiveRef&& o) noexcept
        : m_p(o.m_p)
    {
        o.m_p = nullptr;
    }

    IntrusiveRef& operator=(IntrusiveRef o) noexcept
    {
        std::swap(m_p, o.m_p);
        return *this;
    }

    ~IntrusiveRef()
    {
        if (m_p != nullptr)
        {
            m_p->Unref();
        }
    }

    T* operator->() const { return m_p; }

    T& operator*() const { return *m_p; }

    explicit operator bool() const { return m_p != nullptr; }

    /// A counted pointer for APIs and trace sources that take one.
    operator Ptr<T>() const { return Ptr<T>(m_p); }

    Ptr<T> Get() const { return Ptr<T>(m_p); }

  private:
    T* m_p{nullptr};
};

using PacketRef = IntrusiveRef<Packet>;

/// A transport header travelling as a struct (see the top of this file); transports
/// subclass it.
class FrameHeader : public SimpleRefCount<FrameHeader>
{
  public:
    virtual ~FrameHeader() = default;
    /// The header and payload as a Packet, for trace sinks and anything that wants bytes.
    virtual Ptr<Packet> ToPacket() const = 0;

    uint32_t ipPayloadBytes{0}; //!< transport header + payload (the Packet's size)
};

/// One frame in flight or queued. Kept small: it is moved through every queue and link.
struct FabricFrame
{
    PacketRef packet;                 //!< transport headers and payload, or...
    IntrusiveRef<FrameHeader> header; //!< ...the transport header as a struct
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
        uint32_t bytes = p->GetSize();
        f.packet = PacketRef(std::move(p));
        f.Address(src, dst, entropy, tc, ecn, bytes);
        return f;
    }

    /// Builds a frame around a transport header (which the frame then owns).
    static FabricFrame Make(FrameHeader* h, uint32_t src, uint32_t dst, uint16_t entropy,
                            uint8_t tc, uint8_t ecn)
    {
        FabricFrame f;
        f.header = IntrusiveRef<FrameHeader>(Ptr<FrameHeader>(h, false));
        f.Address(src, dst, entropy, tc, ecn, h->ipPayloadBytes);
        return f;
    }

    /// Transport header + payload bytes (the IP payload).
    uint32_t IpPayloadBytes() const
    {
        return header ? header->ipPayloadBytes : packet ? packet->GetSize() : 0;
    }

    /// The transport's bytes as a Packet (built for a header frame: for trace sinks).
    Ptr<Packet> AsPacket() const { return header ? header->ToPacket() : packet.Get(); }

  private:
    void Address(uint32_t s, uint32_t d, uint16_t e, uint8_t t, uint8_t n, uint32_t ipPayload)
    {
        src = s;
        dst = d;
        entropy = e;
        tc = t;
        ecn = n;
        wireBytes = FrameWireBytes(ipPayload);
    }
};

/// Fires a trace source that takes the frame's bytes (and `args`), only if a sink is
/// connected: a header frame's Packet is built for it.
template <typename Trace, typename... Args>
void
TraceFrame(const Trace& trace, const FabricFrame& f, Args... args)
{
    if (!trace.IsEmpty())
    {
        trace(f.AsPacket(), args...);
    }
}

/// The FIFO of frames of a port or a link direction.
using FrameRing = Ring<FabricFrame>;

} // namespace metaroce
} // namespace ns3

#endif
