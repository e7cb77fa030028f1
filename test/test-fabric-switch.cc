// Switches: ECN marking, ECMP spreading, shared-buffer drop-tail, failure convergence.
#include "helper/fabric-helper.h"
#include "model/fabric/raw-traffic.h"
#include "test-util.h"

#include "ns3/double.h"
#include "ns3/uinteger.h"

#include <catch2/catch.hpp>
#include <cmath>

using namespace ns3;
using namespace ns3::metaroce;
using namespace ns3::metaroce::test;

namespace
{
FabricFrame
Data(uint32_t payload, uint32_t dst, uint16_t entropy, uint8_t ecn = ECN_ECT0)
{
    return FabricFrame::Make(Create<Packet>(payload), 2, dst, entropy, 3, ecn);
}
} // namespace

TEST_CASE("ECN marking probability follows the RED ramp", "[fabric][ecn]")
{
    SimGuard guard;
    auto f = TinyFabric({{"ecn_kmin_bytes", 20000}, {"ecn_kmax_bytes", 80000}, {"ecn_pmax", 0.5}});
    Ptr<FabricSwitch> leaf = f->Switch(0, 0, 0, 0);
    CHECK(leaf->MarkProbability(0) == 0.0);
    CHECK(leaf->MarkProbability(20000) == 0.0);
    CHECK(leaf->MarkProbability(50000) == Approx(0.25));
    CHECK(leaf->MarkProbability(80000) == Approx(0.5));
    CHECK(leaf->MarkProbability(80001) == 1.0);
}

TEST_CASE("ECN marks on a filling queue match the ramp statistically", "[fabric][ecn]")
{
    double expected = 0;
    double variance = 0;
    uint64_t observed = 0;
    uint64_t notEctMarked = 0;
    for (uint32_t run = 1; run <= 10; ++run)
    {
        SimGuard guard(run);
        auto f = TinyFabric({{"ecn_kmin_bytes", 20000},
                             {"ecn_kmax_bytes", 80000},
                             {"ecn_pmax", 0.5},
                             {"buffer_per_port_bytes", 1 << 24}});
        Ptr<FabricSwitch> leaf = f->Switch(0, 0, 0, 0);
        FabricNetDevice* toNic0 = leaf->GetPort(0);
        toNic0->SetPaused(3, true); // hold the queue so its depth is known for every frame
        FabricNetDevice* in = leaf->GetPort(2);
        for (uint32_t i = 0; i < 600; ++i)
        {
            uint64_t q = toNic0->GetQueueBytes();
            double p = leaf->MarkProbability(q);
            expected += p;
            variance += p * (1 - p);
            leaf->ReceiveFrame(in, Data(100, 0, static_cast<uint16_t>(i)));
            // a non-ECT frame at the same depth is never marked
            uint64_t before = leaf->GetCounters().ecnMarked;
            leaf->ReceiveFrame(in, Data(100, 0, 1, ECN_NOT_ECT));
            notEctMarked += leaf->GetCounters().ecnMarked - before;
        }
        observed += leaf->GetCounters().ecnMarked;
    }
    CHECK(notEctMarked == 0);
    CHECK(std::abs(static_cast<double>(observed) - expected) < 4 * std::sqrt(variance));
    CHECK(expected > 1000); // the test exercised the ramp, not just the ends
}

TEST_CASE("ECMP spreads entropies evenly and sends one entropy one way", "[fabric][ecmp]")
{
    SimGuard guard;
    auto f = TinyFabric({}, 64, 16); // leaves with 8 NICs and 8 uplinks
    Ptr<FabricSwitch> leaf = f->Switch(0, 0, 0, 0);
    std::vector<uint32_t> hits(16, 0);
    const uint32_t n = 8000;
    for (uint32_t e = 0; e < n; ++e)
    {
        int32_t port = leaf->SelectEgress(3, 40, static_cast<uint16_t>(e));
        REQUIRE(port >= 8);
        REQUIRE(port < 16);
        ++hits[port];
        CHECK(leaf->SelectEgress(3, 40, static_cast<uint16_t>(e)) == port);
    }
    double chi2 = 0;
    double mean = n / 8.0;
    for (uint32_t p = 8; p < 16; ++p)
    {
        chi2 += (hits[p] - mean) * (hits[p] - mean) / mean;
    }
    CHECK(chi2 < 24.32); // chi-square, 7 degrees of freedom, p = 0.001
    // Local destinations never go up.
    CHECK(leaf->SelectEgress(3, 5, 1234) == 5);
}

TEST_CASE("frames of one entropy follow one path end to end", "[fabric][ecmp]")
{
    SimGuard guard;
    auto f = TinyFabric({}, 64, 16);
    auto src = CreateObject<RawTrafficEndpoint>();
    auto dst = CreateObject<RawTrafficEndpoint>();
    src->Install(f->Host(3), 3);
    dst->Install(f->Host(40), 40);
    RawTrafficEndpoint::FlowSpec fs;
    fs.dst = 40;
    fs.entropy = 777;
    fs.rate = DataRate("50Gb/s");
    fs.stop = MicroSeconds(20);
    src->AddFlow(fs);
    Simulator::Run();
    Ptr<FabricSwitch> leaf = f->Switch(0, 0, 0, 0);
    uint32_t used = 0;
    for (uint32_t p = 8; p < 16; ++p)
    {
        used += leaf->GetPort(p)->GetCounters().txPackets > 0 ? 1 : 0;
    }
    CHECK(used == 1);
    CHECK(dst->GetSinkStats().packets == src->GetSentPackets());
    CHECK(dst->GetSinkStats().outOfOrder == 0);
}

TEST_CASE("shared buffer: drop-tail when full, dynamic threshold per queue", "[fabric][buffer]")
{
    const uint32_t w = Data(100, 0, 0).wireBytes;
    SECTION("static limit (large alpha)")
    {
        SimGuard guard;
        auto f = TinyFabric({{"alpha", 1024}});
        Ptr<FabricSwitch> leaf = f->Switch(0, 0, 0, 0);
        leaf->SetAttribute("BufferBytes", UintegerValue(100 * w));
        leaf->GetPort(0)->SetPaused(3, true);
        for (uint32_t i = 0; i < 150; ++i)
        {
            leaf->ReceiveFrame(leaf->GetPort(2), Data(100, 0, 0));
        }
        CHECK(leaf->GetCounters().dropBuffer == 50);
        CHECK(leaf->GetBufferUsed() == 100 * w);
        CHECK(leaf->GetPort(0)->GetQueuePackets() == 100);
    }
    SECTION("alpha = 1: one queue takes at most half the buffer")
    {
        SimGuard guard;
        auto f = TinyFabric({{"alpha", 1.0}});
        Ptr<FabricSwitch> leaf = f->Switch(0, 0, 0, 0);
        leaf->SetAttribute("BufferBytes", UintegerValue(100 * w));
        leaf->GetPort(0)->SetPaused(3, true);
        leaf->GetPort(1)->SetPaused(3, true);
        for (uint32_t i = 0; i < 150; ++i)
        {
            leaf->ReceiveFrame(leaf->GetPort(2), Data(100, 0, 0));
        }
        // admitted while q + w <= alpha (B - q): (2n + 1) w <= 100 w, so n = 0..49.
        CHECK(leaf->GetPort(0)->GetQueuePackets() == 50);
        CHECK(leaf->GetCounters().dropBuffer == 100);
        // A second queue gets a share of what is left: (q2 + w) <= (B - 50w - q2).
        for (uint32_t i = 0; i < 150; ++i)
        {
            leaf->ReceiveFrame(leaf->GetPort(2), Data(100, 1, 0));
        }
        CHECK(leaf->GetPort(1)->GetQueuePackets() == 25);
    }
}

TEST_CASE("a dead uplink leaves ECMP after the convergence delay and rejoins", "[fabric][fault]")
{
    SimGuard guard;
    auto f = TinyFabric({{"convergence_us", 10}});
    Ptr<FabricSwitch> leaf = f->Switch(0, 0, 0, 0);
    auto src = CreateObject<RawTrafficEndpoint>();
    auto dst = CreateObject<RawTrafficEndpoint>();
    src->Install(f->Host(0), 0);
    dst->Install(f->Host(2), 2);
    for (uint16_t e = 0; e < 64; ++e)
    {
        RawTrafficEndpoint::FlowSpec fs;
        fs.dst = 2;
        fs.entropy = e;
        fs.payloadBytes = 1000;
        fs.rate = DataRate("1Gb/s");
        fs.stop = MicroSeconds(200);
        src->AddFlow(fs);
    }
    Ptr<FabricChannel> up0 = leaf->GetPort(2)->GetFabricChannel();
    Simulator::Schedule(MicroSeconds(1), &FabricChannel::SetUp, up0, false);
    Simulator::Stop(MicroSeconds(12));
    Simulator::Run();
    uint64_t dropsBefore = leaf->GetPort(2)->GetCounters().dropLinkDown;
    CHECK(dropsBefore > 0);           // black-holed until convergence
    CHECK_FALSE(leaf->IsRoutable(2)); // converged at 11 us
    Simulator::Schedule(MicroSeconds(88), &FabricChannel::SetUp, up0, true); // at 100 us
    Simulator::Stop(MicroSeconds(88));
    Simulator::Run();
    CHECK(leaf->GetPort(2)->GetCounters().dropLinkDown == dropsBefore); // no loss after
    uint64_t txBefore = leaf->GetPort(2)->GetCounters().txPackets;
    Simulator::Run();
    CHECK(leaf->IsRoutable(2));
    CHECK(leaf->GetPort(2)->GetCounters().txPackets > txBefore); // back in use after recovery
    // Lost: frames hashed onto the dead port before convergence, and those on the wire.
    CHECK(up0->GetLostInFlight() <= 2);
    CHECK(dst->GetSinkStats().packets ==
          src->GetSentPackets() - dropsBefore - up0->GetLostInFlight());
    CHECK(dst->GetReceivedPerFlow().size() == 64);
    for (const auto& [flow, n] : dst->GetReceivedPerFlow())
    {
        CHECK(n >= 20); // 23 sent per flow; at most the first two lost
    }
}
