// The invariant checker's fabric rules: each one passes on a consistent switch and names the
// switch and the rule when broken.
#include "helper/run/run-watchdog.h"
#include "test-util.h"

#include "ns3/uinteger.h"

#include <catch2/catch.hpp>

using namespace ns3;
using namespace ns3::metaroce;
using namespace ns3::metaroce::test;

namespace
{
FabricFrame
Data(uint32_t dst)
{
    return FabricFrame::Make(Create<Packet>(1000), 2, dst, 0, 3, ECN_ECT0);
}
} // namespace

TEST_CASE("switch conservation: frames in = out + dropped + queued", "[invariants]")
{
    SimGuard guard;
    auto f = TinyFabric({{"alpha", 1024}});
    Ptr<FabricSwitch> leaf = f->Switch(0, 0, 0, 0);
    leaf->SetAttribute("BufferBytes", UintegerValue(20 * Data(0).wireBytes));
    leaf->GetPort(0)->SetPaused(3, true); // frames for NIC 0 stay queued
    for (uint32_t i = 0; i < 30; ++i)
    {
        leaf->GetPort(2)->Receive(Data(0)); // queued (or dropped once the buffer is full)
        leaf->GetPort(2)->Receive(Data(1)); // forwarded to NIC 1
    }
    Simulator::Run();
    REQUIRE(leaf->GetCounters().dropBuffer > 0);
    REQUIRE(leaf->GetPort(0)->GetQueuePackets() > 0);
    CHECK(RunWatchdog::CheckSwitches(*f).empty());

    // A frame that appears in an egress queue without having entered the switch.
    leaf->GetPort(0)->Enqueue(Data(0));
    std::string v = RunWatchdog::CheckSwitches(*f);
    CHECK(v.find("switch (site 0, plane 0, tier 0, index 0)") != std::string::npos);
    CHECK(v.find("in = out + dropped + queued") != std::string::npos);
    CHECK(v.find("60 frames in") != std::string::npos);
}

TEST_CASE("a lossless class that drops breaks the checker's rule", "[invariants]")
{
    SimGuard guard;
    auto f = TinyFabric({{"pfc", true}});
    Ptr<FabricSwitch> leaf = f->Switch(0, 0, 0, 0);
    leaf->SetAttribute("BufferBytes", UintegerValue(10 * Data(0).wireBytes));
    leaf->GetPort(0)->SetPaused(3, true);
    for (uint32_t i = 0; i < 5; ++i)
    {
        leaf->GetPort(2)->Receive(Data(0));
    }
    CHECK(RunWatchdog::CheckSwitches(*f).empty()); // PFC holds them: nothing dropped
    for (uint32_t i = 0; i < 10; ++i)
    {
        leaf->GetPort(2)->Receive(Data(0)); // past the whole buffer: headroom exhausted
    }
    REQUIRE(leaf->GetCounters().dropLossless == 5);
    std::string v = RunWatchdog::CheckSwitches(*f);
    CHECK(v.find("lossless") != std::string::npos);
    CHECK(v.find("dropped 5 frames") != std::string::npos);
}
