// Links and ports: serialization and propagation time, FIFO order, byte accounting, loss.
#include "model/fabric/fabric-header.h"
#include "model/fabric/raw-traffic.h"
#include "test-util.h"

#include <catch2/catch.hpp>
#include <cmath>

using namespace ns3;
using namespace ns3::metaroce;
using namespace ns3::metaroce::test;

namespace
{
struct Wire
{
    Ptr<Node> na = CreateObject<Node>();
    Ptr<Node> nb = CreateObject<Node>();
    Ptr<FabricNetDevice> a = CreateObject<FabricNetDevice>();
    Ptr<FabricNetDevice> b = CreateObject<FabricNetDevice>();
    Ptr<FabricChannel> ch = CreateObject<FabricChannel>();
    FrameLog log;

    Wire(const std::string& rate, Time delay)
    {
        na->AddDevice(a);
        nb->AddDevice(b);
        a->SetDataRate(DataRate(rate));
        b->SetDataRate(DataRate(rate));
        ch->SetDelay(delay);
        ch->Connect(a, b);
        b->SetReceiver(&log);
    }
};

FabricFrame
Frame(uint32_t packetBytes, uint32_t tag = 0)
{
    return FabricFrame::Make(Create<Packet>(packetBytes), 0, 1, static_cast<uint16_t>(tag), 3,
                             ECN_ECT0);
}
} // namespace

TEST_CASE("wire size counts Ethernet, IPv4, UDP, FCS, preamble and IFG", "[fabric][link]")
{
    // A 4096 B payload behind a BTH (12) and ICRC (4): frame 4158 B, 4178 B on the wire.
    CHECK(Frame(4096 + 16).wireBytes == 4178);
    // The smallest RoCEv2 ACK (BTH 12 + AETH 4 + ICRC 4): 66 B frame, 86 B on the wire.
    CHECK(Frame(20).wireBytes == 86);
    // Below Ethernet's 64 B minimum the frame is padded.
    CHECK(Frame(0).wireBytes == 84);
}

TEST_CASE("FabricHeader serializes to 42 bytes and back", "[fabric][header]")
{
    FabricFrame f = FabricFrame::Make(Create<Packet>(100), 70000, 99999, 51234, 5, ECN_CE);
    FabricHeader h = FabricHeader::FromFrame(f);
    Ptr<Packet> p = Create<Packet>(100);
    p->AddHeader(h);
    CHECK(p->GetSize() == 142);
    FabricHeader back;
    p->RemoveHeader(back);
    FabricFrame g;
    back.ToFrame(g);
    CHECK(g.src == 70000);
    CHECK(g.dst == 99999);
    CHECK(g.entropy == 51234);
    CHECK(g.tc == 5);
    CHECK(g.ecn == ECN_CE);
    CHECK(back.ipPayloadBytes == 100);
}

TEST_CASE("one frame arrives after serialization plus propagation", "[fabric][link]")
{
    SimGuard guard;
    Wire w("100Gb/s", MicroSeconds(1));
    w.a->Enqueue(Frame(4096 + 16));
    Simulator::Run();
    REQUIRE(w.log.entries.size() == 1);
    // 4178 B x 80 ps/B = 334,240 ps on the wire, then 1 us of fibre.
    CHECK(w.log.entries[0].atPs == 334240 + 1000000);
    CHECK(w.a->TxTimePs(4178) == 334240);
    Wire w8("800Gb/s", NanoSeconds(0));
    CHECK(w8.a->TxTimePs(4178) == 41780);
}

TEST_CASE("a port is a FIFO and accounts bytes exactly", "[fabric][link]")
{
    SimGuard guard;
    Wire w("100Gb/s", NanoSeconds(500));
    std::vector<uint32_t> sizes = {4112, 100, 1500, 20, 4112, 9000, 64, 777};
    uint64_t total = 0;
    for (uint32_t i = 0; i < sizes.size(); ++i)
    {
        w.a->Enqueue(Frame(sizes[i], i));
        total += Frame(sizes[i]).wireBytes;
    }
    // The first frame went straight onto the wire; the rest wait.
    CHECK(w.a->GetQueueBytes() == total - Frame(sizes[0]).wireBytes);
    CHECK(w.a->GetQueuePackets() == sizes.size() - 1);
    Simulator::Run();
    REQUIRE(w.log.entries.size() == sizes.size());
    int64_t t = 0;
    for (uint32_t i = 0; i < sizes.size(); ++i)
    {
        t += w.a->TxTimePs(Frame(sizes[i]).wireBytes);
        CHECK(w.log.entries[i].frame.entropy == i);
        CHECK(w.log.entries[i].atPs == t + 500000);
    }
    CHECK(w.a->GetQueueBytes() == 0);
    CHECK(w.a->GetCounters().txBytes == total);
    CHECK(w.a->GetCounters().txPackets == sizes.size());
    CHECK(w.b->GetCounters().rxBytes == total);
}

TEST_CASE("control frames overtake queued data; paused data waits", "[fabric][link]")
{
    SimGuard guard;
    Wire w("100Gb/s", NanoSeconds(0));
    w.a->Enqueue(Frame(4112, 0)); // on the wire at once
    w.a->Enqueue(Frame(4112, 1));
    FabricFrame ack = FabricFrame::Make(Create<Packet>(20), 0, 1, 2, 6, ECN_NOT_ECT);
    w.a->Enqueue(std::move(ack));
    Simulator::Run();
    REQUIRE(w.log.entries.size() == 3);
    CHECK(w.log.entries[1].frame.entropy == 2); // the ACK went before data frame 1
}

TEST_CASE("a paused traffic class waits for resume and the pause is timed", "[fabric][link]")
{
    SimGuard guard;
    Wire v("100Gb/s", NanoSeconds(0));
    v.a->SetPaused(3, true);
    v.a->Enqueue(Frame(4112, 0));
    Simulator::Schedule(MicroSeconds(10), &FabricNetDevice::SetPaused, v.a, 3, false);
    Simulator::Run();
    REQUIRE(v.log.entries.size() == 1);
    CHECK(v.log.entries[0].atPs == 10000000 + v.a->TxTimePs(4178));
    CHECK(v.a->GetCounters().pauses == 1);
    CHECK(v.a->GetCounters().pausedPs == 10000000);
}

TEST_CASE("random loss on a link is within statistical bounds and reproducible", "[fabric][loss]")
{
    auto run = [](uint32_t rngRun)
    {
        SimGuard guard(rngRun);
        Wire w("100Gb/s", NanoSeconds(100));
        w.b->SetLossRate(0.01);
        w.b->AssignStreams(7);
        const uint32_t n = 100000;
        for (uint32_t i = 0; i < n; ++i)
        {
            w.a->Enqueue(Frame(100));
        }
        Simulator::Run();
        CHECK(w.b->GetCounters().dropCorrupt + w.log.entries.size() == n);
        return w.b->GetCounters().dropCorrupt;
    };
    uint64_t lost = run(1);
    double mean = 1000.0;
    double sigma = std::sqrt(100000 * 0.01 * 0.99);
    CHECK(std::abs(static_cast<double>(lost) - mean) < 4 * sigma);
    CHECK(run(1) == lost); // same seed and run: same losses
    CHECK(run(2) != lost); // another run: another sample
}

TEST_CASE("a failed link drops queued and in-flight frames and recovers", "[fabric][fault]")
{
    SimGuard guard;
    Wire w("100Gb/s", MicroSeconds(1));
    for (int i = 0; i < 5; ++i)
    {
        w.a->Enqueue(Frame(4112));
    }
    // At 0.5 us: one frame is in flight (sent at 334 ns), one on the wire, three queued.
    Simulator::Schedule(NanoSeconds(500), &FabricChannel::SetUp, w.ch, false);
    Simulator::Schedule(MicroSeconds(5), &FabricChannel::SetUp, w.ch, true);
    Simulator::Schedule(MicroSeconds(6), [&w]() { w.a->Enqueue(Frame(4112)); });
    Simulator::Run();
    CHECK(w.ch->GetLostInFlight() == 2);
    CHECK(w.a->GetCounters().dropLinkDown == 3);
    REQUIRE(w.log.entries.size() == 1);
    CHECK(w.log.entries[0].atPs == 6000000 + 334240 + 1000000);
}
