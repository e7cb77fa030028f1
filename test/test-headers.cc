// Transport headers serialize fully and round-trip through a Packet, field for field.
#include "model/fabric/fabric-header.h"
#include "model/fabric/raw-traffic.h"
#include "model/transport/rdma-header.h"

#include "ns3/packet.h"

#include <catch2/catch.hpp>
#include <vector>

using namespace ns3;
using namespace ns3::metaroce;

TEST_CASE("RdmaHeader round-trips every opcode through a Packet at its wire size", "[header]")
{
    for (RdmaOpcode op : {RdmaOpcode::Data, RdmaOpcode::PathData, RdmaOpcode::Ack, RdmaOpcode::Nak,
                          RdmaOpcode::PathAck, RdmaOpcode::Cnp})
    {
        RdmaHeader h;
        h.opcode = op;
        h.flags = RdmaHeader::kFlagEcnEcho | RdmaHeader::kFlagProbe;
        h.stream = 0xbeef;
        h.destQpn = 0xabcdef;
        h.psn = 0x89abcdef;
        h.msgId = 0x01234567;
        h.offset = 0x0123456789abcdefULL;
        h.msgBytes = 0xfedcba98;
        h.path = 0x1234;
        h.epoch = 0xa5;
        h.ackBase = 0x76543210;
        h.timestampPs = 0x1122334455667788LL;
        h.rateHintMbps = 400000;
        h.sack = {0x8000000000000001ULL, 2, 0xffffffff00000000ULL, 0x5555555555555555ULL};
        Ptr<Packet> p = Create<Packet>(100);
        p->AddHeader(h);
        CHECK(p->GetSize() == 100 + RdmaHeader::SizeOf(op));
        RdmaHeader g;
        CHECK(p->RemoveHeader(g) == RdmaHeader::SizeOf(op));
        CHECK(p->GetSize() == 100);
        CHECK(g.opcode == op);
        CHECK(g.flags == h.flags);
        CHECK(g.stream == h.stream);
        CHECK(g.destQpn == h.destQpn);
        CHECK(g.psn == h.psn);
        bool data = op == RdmaOpcode::Data || op == RdmaOpcode::PathData;
        if (data)
        {
            CHECK(g.offset == h.offset);
            CHECK(g.msgBytes == h.msgBytes);
        }
        if (op != RdmaOpcode::Cnp)
        {
            CHECK(g.msgId == h.msgId);
        }
        if (op == RdmaOpcode::PathData || op == RdmaOpcode::PathAck)
        {
            CHECK(g.path == h.path);
            CHECK(g.epoch == h.epoch);
            CHECK(g.timestampPs == h.timestampPs);
        }
        if (op == RdmaOpcode::PathData)
        {
            CHECK(g.ackBase == h.ackBase);
        }
        if (op == RdmaOpcode::PathAck)
        {
            CHECK(g.sack == h.sack);
            CHECK(g.rateHintMbps == h.rateHintMbps);
        }
    }
    // Exact sizes (BTH 12 + extension headers + ICRC 4).
    CHECK(RdmaHeader::SizeOf(RdmaOpcode::Data) == 32);
    CHECK(RdmaHeader::SizeOf(RdmaOpcode::PathData) == 48);
    CHECK(RdmaHeader::SizeOf(RdmaOpcode::Ack) == 20);
    CHECK(RdmaHeader::SizeOf(RdmaOpcode::PathAck) == 72);
    CHECK(RdmaHeader::SizeOf(RdmaOpcode::Cnp) == 32);
}

TEST_CASE("A header frame has the wire size, bytes and lifetime of the Packet frame it replaces",
          "[header]")
{
    for (RdmaOpcode op : {RdmaOpcode::PathData, RdmaOpcode::PathAck, RdmaOpcode::Ack})
    {
        RdmaHeader h;
        h.opcode = op;
        h.destQpn = 7;
        h.psn = 12345;
        h.msgId = 3;
        h.path = 5;
        h.sack = {1, 0, 0, 9};
        uint32_t payload = op == RdmaOpcode::PathData ? 4096 : 0;
        Ptr<Packet> p = Create<Packet>(payload);
        p->AddHeader(h);
        FabricFrame bytes = FabricFrame::Make(p, 1, 2, 3, 4, ECN_ECT0);
        auto* rh = RdmaFrameHeader::Make(h, payload);
        FabricFrame frame = FabricFrame::Make(rh, 1, 2, 3, 4, ECN_ECT0);
        CHECK(frame.wireBytes == bytes.wireBytes);
        CHECK(frame.IpPayloadBytes() == p->GetSize());
        CHECK(frame.header->GetReferenceCount() == 1);
        // What the receiving NIC reads back: every field, and the SACK bitmap on a path ACK
        // (a data frame's header leaves it out).
        RdmaHeader back;
        rh->Get(back);
        CHECK(back.opcode == op);
        CHECK(back.destQpn == 7);
        CHECK(back.psn == 12345);
        CHECK(back.msgId == 3);
        CHECK(back.path == 5);
        CHECK(back.sack == (op == RdmaOpcode::PathAck ? h.sack : std::array<uint64_t, 4>{}));
        CHECK(rh->PayloadBytes() == payload);
        // What a trace sink gets: the same bytes as the Packet frame.
        Ptr<Packet> traced = frame.AsPacket();
        CHECK(traced->GetSize() == p->GetSize());
        RdmaHeader g;
        traced->RemoveHeader(g);
        CHECK(g.opcode == op);
        CHECK(g.psn == h.psn);
        CHECK(g.path == (op == RdmaOpcode::Ack ? 0 : h.path)); // RoCEv2 has no path field
        // Copies share the header; the last one frees it (a leak or double free fails under
        // the sanitizer build).
        {
            FabricFrame copy = frame;
            CHECK(frame.header->GetReferenceCount() == 2);
            FabricFrame moved = std::move(copy);
            CHECK(frame.header->GetReferenceCount() == 2);
        }
        CHECK(frame.header->GetReferenceCount() == 1);
    }
}

TEST_CASE("A truncated header deserializes nothing (and reads nothing past the bytes)", "[header]")
{
    // Deserialize on a buffer of n bytes, copied from a serialized header.
    auto from = [](const Header& h, uint32_t n, Header& into)
    {
        Buffer full;
        full.AddAtStart(h.GetSerializedSize());
        h.Serialize(full.Begin());
        std::vector<uint8_t> bytes(h.GetSerializedSize());
        full.CopyData(bytes.data(), bytes.size());
        Buffer b;
        b.AddAtStart(n);
        b.Begin().Write(bytes.data(), n);
        return into.Deserialize(b.Begin());
    };
    for (RdmaOpcode op : {RdmaOpcode::Data, RdmaOpcode::PathData, RdmaOpcode::Ack, RdmaOpcode::Nak,
                          RdmaOpcode::PathAck, RdmaOpcode::Cnp})
    {
        RdmaHeader h;
        h.opcode = op;
        uint32_t size = RdmaHeader::SizeOf(op);
        for (uint32_t n : {0u, 1u, size / 2, size - 1})
        {
            RdmaHeader g;
            CHECK(from(h, n, g) == 0);
        }
        RdmaHeader g;
        CHECK(from(h, size, g) == size);
    }
    FabricHeader f;
    FabricHeader fg;
    CHECK(from(f, f.GetSerializedSize() - 1, fg) == 0);
    CHECK(from(f, f.GetSerializedSize(), fg) == f.GetSerializedSize());
    RawHeader r;
    RawHeader rg;
    CHECK(from(r, 15, rg) == 0);
    CHECK(from(r, 16, rg) == 16);
}
