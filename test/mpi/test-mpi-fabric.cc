// What crosses processes in a distributed run: a frame serialized by MpiFabric and rebuilt on
// the other side, field for field (no MPI needed: the bytes are what MpiInterface carries).
#define CATCH_CONFIG_MAIN
#include "helper/mpi/mpi-fabric.h"
#include "model/fabric/fabric-header.h"
#include "model/transport/rdma-header.h"

#include "ns3/simulator.h"

#include <catch2/catch.hpp>

using namespace ns3;
using namespace ns3::metaroce;

namespace
{
void
CheckSame(const FabricFrame& a, const FabricFrame& b)
{
    CHECK(a.readyPs == b.readyPs);
    CHECK(a.src == b.src);
    CHECK(a.dst == b.dst);
    CHECK(a.wireBytes == b.wireBytes);
    CHECK(a.entropy == b.entropy);
    CHECK(a.ingress == b.ingress);
    CHECK(a.ecn == b.ecn);
    CHECK(a.tc == b.tc);
    CHECK(a.IpPayloadBytes() == b.IpPayloadBytes());
}
} // namespace

TEST_CASE("an RDMA frame crosses processes with every header field", "[mpi]")
{
    for (RdmaOpcode op : {RdmaOpcode::PathData, RdmaOpcode::PathAck, RdmaOpcode::Nak})
    {
        RdmaHeaderData h;
        h.opcode = op;
        h.offset = 0x123456789abcULL;
        h.timestampPs = 987654321012LL;
        h.destQpn = 77;
        h.psn = 1u << 30;
        h.msgId = 4242;
        h.msgBytes = 1u << 27;
        h.rateHintMbps = 390000;
        h.ackBase = 31;
        h.stream = 3;
        h.path = 511;
        h.epoch = 9;
        h.flags = RdmaHeaderData::kFlagEcnEcho | RdmaHeaderData::kFlagRetransmit;
        h.sack = {1, 0x8000000000000000ULL, 0xdeadbeefULL, 5};
        FabricFrame f =
            FabricFrame::Make(RdmaFrameHeader::Make(h, op == RdmaOpcode::PathData ? 4096 : 0), 12,
                              99999, 51234, 5, ECN_CE);
        f.readyPs = 1234567;
        f.ingress = 17;
        Ptr<Packet> p = MpiFabric::Serialize(4321, 1, 250, f);
        uint32_t link = 0;
        uint32_t dir = 0;
        uint8_t downs = 0;
        FabricFrame g = MpiFabric::Deserialize(p, link, dir, downs);
        CHECK(link == 4321);
        CHECK(dir == 1);
        CHECK(downs == 250);
        CheckSame(f, g);
        REQUIRE(g.header);
        RdmaHeaderData back;
        static_cast<const RdmaFrameHeader&>(*g.header).Get(back);
        CHECK(back.opcode == op);
        CHECK(back.offset == h.offset);
        CHECK(back.timestampPs == h.timestampPs);
        CHECK(back.destQpn == h.destQpn);
        CHECK(back.psn == h.psn);
        CHECK(back.msgId == h.msgId);
        CHECK(back.msgBytes == h.msgBytes);
        CHECK(back.rateHintMbps == h.rateHintMbps);
        CHECK(back.ackBase == h.ackBase);
        CHECK(back.stream == h.stream);
        CHECK(back.path == h.path);
        CHECK(back.epoch == h.epoch);
        CHECK(back.flags == h.flags);
        // Only MetaRoCE's ACK carries the SACK bitmap.
        if (op == RdmaOpcode::PathAck)
        {
            CHECK(back.sack == h.sack);
        }
    }
}

TEST_CASE("a packet frame crosses processes with its headers and size", "[mpi]")
{
    // As raw traffic builds them: a header before a zero-filled payload.
    Ptr<Packet> payload = Create<Packet>(4000);
    FabricHeader inner = FabricHeader::FromFrame(
        FabricFrame::Make(Create<Packet>(10), 70000, 99999, 51234, 5, ECN_CE));
    payload->AddHeader(inner);
    FabricFrame f = FabricFrame::Make(payload, 1, 2, 3, 4, ECN_ECT1);
    f.readyPs = 55;
    uint32_t link = 0;
    uint32_t dir = 0;
    uint8_t downs = 0;
    Ptr<Packet> wire = MpiFabric::Serialize(7, 0, 44, f);
    CHECK(wire->GetSize() < 1000); // ns-3's MPI messages hold at most 2000 bytes
    FabricFrame g = MpiFabric::Deserialize(wire, link, dir, downs);
    CHECK(link == 7);
    CHECK(dir == 0);
    CHECK(downs == 44);
    CheckSame(f, g);
    REQUIRE(g.packet);
    CHECK(g.packet->GetSize() == payload->GetSize());
    Ptr<Packet> q = g.packet->Copy();
    FabricHeader back;
    q->RemoveHeader(back);
    CHECK(back.src == 70000);
    CHECK(back.dst == 99999);
    CHECK(back.ipPayloadBytes == 10);
    CHECK(q->GetSize() == 4000);
    Simulator::Destroy();
}
