// Topology files and builders: sizes, wiring consistent with routing, validation errors.
#include "helper/fabric-helper.h"
#include "helper/scenario/json-reader.h"
#include "test-util.h"

#include <catch2/catch.hpp>

using namespace ns3;
using namespace ns3::metaroce;
using namespace ns3::metaroce::test;

namespace
{
std::string
Topo(const std::string& name)
{
    return "topologies/" + name + ".json";
}

/// Follows ECMP from src's port on `plane` to wherever the fabric delivers; returns the host
/// node id reached (or -1) and the number of switches crossed.
std::pair<int64_t, uint32_t>
Walk(const Fabric& f, uint32_t src, uint32_t dst, uint32_t plane, uint16_t entropy)
{
    FabricNetDevice* at = PeekPointer(f.HostPort(src, plane))->GetPeer();
    uint32_t hops = 0;
    while (at != nullptr && hops < 16)
    {
        auto sw = DynamicCast<FabricSwitch>(at->GetNode());
        if (!sw)
        {
            return {static_cast<int64_t>(at->GetNode()->GetId()), hops};
        }
        ++hops;
        int32_t e = sw->SelectEgress(src, dst, entropy);
        if (e < 0)
        {
            return {-1, hops};
        }
        at = sw->GetPort(static_cast<uint32_t>(e))->GetPeer();
    }
    return {-1, hops};
}

void
CheckAllPairsReach(const Fabric& f, uint32_t maxHops)
{
    uint32_t n = f.NumNics();
    for (uint32_t s = 0; s < n; ++s)
    {
        for (uint32_t d = 0; d < n; ++d)
        {
            if (s == d)
            {
                continue;
            }
            for (uint32_t p = 0; p < f.NumPlanes(); ++p)
            {
                for (uint16_t e : {uint16_t(1), uint16_t(999), uint16_t(65000)})
                {
                    auto [reached, hops] = Walk(f, s, d, p, e);
                    REQUIRE(reached == d);
                    REQUIRE(hops <= maxHops);
                }
            }
        }
    }
}
} // namespace

TEST_CASE("topology files build the expected fabrics", "[topology]")
{
    struct Expect
    {
        const char* file;
        uint32_t nics, planes, tiers, switches;
        uint64_t links, ports;
    };

    // ports = NIC ports + switch ports (wired or not)
    std::vector<Expect> cases = {
        {"fpf-8x100g-lab", 2, 8, 2, 8 * 3, 8 * 4, 16 + 8 * (2 * 2 + 2)},
        {"fpf-8plane-64", 64, 8, 2, 8 * 16, 8 * 128, 512 + 8 * (8 * 16 + 8 * 8)},
        {"fpf-8plane-1k", 1024, 8, 2, 8 * 260, 8 * 2048, 8192 + 8 * (4 * 512 + 256 * 4)},
        {"clos-64x400g", 64, 1, 2, 16, 128, 64 + 8 * 16 + 8 * 8},
        {"scale-across-2site-150km", 32, 8, 2, 8 * 20, 8 * 80, 256 + 8 * 2 * (2 * 16 + 8 * 4)},
    };
    for (const auto& c : cases)
    {
        SimGuard guard;
        INFO(c.file);
        auto f = FabricHelper().Build(Topo(c.file));
        CHECK(f->NumNics() == c.nics);
        CHECK(f->NumPlanes() == c.planes);
        CHECK(f->Geometry().tiers == c.tiers);
        CHECK(f->Switches().size() == c.switches);
        CHECK(f->Links().size() == c.links);
        CHECK(f->NumPorts() == c.ports);
    }
}

TEST_CASE("the 8k and 100k files describe 2-tier planes of 512-port switches", "[topology]")
{
    // Checked on the spec (building 100k NICs belongs in scripts/bench, not in a unit test).
    auto t8 = LoadTopologyFile(Topo("fpf-8plane-8k"));
    CHECK(t8.geometry.tiers == 2);
    CHECK(t8.geometry.L == 32);
    CHECK(t8.geometry.S == 256);
    auto t = LoadTopologyFile(Topo("fpf-8plane-100k"));
    CHECK(t.geometry.tiers == 2);
    CHECK(t.geometry.d == 256);
    CHECK(t.geometry.L == 391);
    CHECK(t.geometry.S == 256);
    CHECK(t.geometry.PortsInTier(1) == 391);
}

TEST_CASE("every NIC reaches every other on every plane (2 tiers)", "[topology][routing]")
{
    SimGuard guard;
    auto f = FabricHelper().Build(Topo("fpf-8plane-64"));
    CheckAllPairsReach(*f, 3);
}

TEST_CASE("every NIC reaches every other in 3 tiers, partial pods included", "[topology][routing]")
{
    SimGuard guard;
    // radix 8: 4 NICs per leaf, 32 leaves cannot hang off 8-port spines -> 3 tiers;
    // 124 NICs leave the last leaf and the last pod partly filled.
    auto j = SmallFpf(124, 2, 8);
    auto f = FabricHelper().Build(ParseTopology(j, "topology"));
    REQUIRE(f->Geometry().tiers == 3);
    CHECK(f->Geometry().P == 8);
    CHECK(f->Switches().size() == 2 * (31 + 32 + 16));
    CheckAllPairsReach(*f, 5);
}

TEST_CASE("every NIC reaches every other across sites", "[topology][routing]")
{
    SimGuard guard;
    auto f = FabricHelper().Build(Topo("scale-across-2site-150km"));
    CheckAllPairsReach(*f, 4);
    // The long-haul links carry 0.75 ms of delay each way.
    const auto& links = f->Links();
    int64_t maxDelay = 0;
    for (const auto& l : links)
    {
        maxDelay = std::max(maxDelay, l->GetDelayPs());
    }
    CHECK(maxDelay == 750000000);
}

TEST_CASE("a plane can be taken down and brought back", "[topology][fault]")
{
    SimGuard guard;
    auto f = FabricHelper().Build(Topo("fpf-8x100g-lab"));
    f->SetPlaneUp(3, false);
    for (uint32_t p = 0; p < 8; ++p)
    {
        CHECK(f->HostPort(0, p)->IsLinkUp() == (p != 3));
    }
    auto [b, e] = f->PlaneLinkRange(3);
    CHECK(e - b == 4);
    f->SetPlaneUp(3, true);
    CHECK(f->HostPort(0, 3)->IsLinkUp());
}

TEST_CASE("bad topologies are rejected with the key named", "[topology][input]")
{
    auto base = SmallFpf(64, 8, 16);
    struct Bad
    {
        std::function<void(nlohmann::json&)> mutate;
        std::string key;
    };

    std::vector<Bad> bads = {
        {[](auto& j) { j["planes"] = 0; }, "topology.planes: must be a whole number in 1..16"},
        {[](auto& j) { j["planes"] = 17; }, "topology.planes"},
        {[](auto& j) { j.erase("nics"); }, "topology.nics: missing"},
        {[](auto& j) { j["nics"] = "many"; }, "topology.nics: must be a whole number"},
        {[](auto& j) { j["kind"] = "torus"; }, "topology.kind: must be one of fpf, clos"},
        {[](auto& j) { j["plane"] = 8; }, "topology.plane: unknown key"},
        {[](auto& j) { j["nic_port_gbps"] = -100; }, "topology.nic_port_gbps"},
        {[](auto& j) { j["nics_per_leaf"] = 12; }, "topology.nics_per_leaf: a leaf needs"},
        {[](auto& j) { j["spines"] = 3; }, "topology.spines: must divide leaf_uplinks"},
        {[](auto& j) { j["tiers"] = 2, j["nics"] = 4096; }, "topology.tiers: a 2-tier plane"},
        {[](auto& j) { j["nics"] = 1000000; }, "topology.nics: 1000000 NICs need"},
        {[](auto& j) { j["kind"] = "clos"; }, "topology.planes: a \"clos\" fabric has one plane"},
        {[](auto& j) { j["sites"] = 2; }, "topology.scale_across: missing"},
        {[](auto& j) { j["sites"] = 3; }, "topology.nics: must be a multiple of sites"},
        {[](auto& j) {
             j["switch"] = {{"ecn_pmax", 2}};
         },
         "topology.switch.ecn_pmax"},
        {[](auto& j) {
             j["switch"] = {{"ecn_kmin_bytes", 9}, {"ecn_kmax_bytes", 1}};
         },
         "topology.switch.ecn_kmin_bytes: must not exceed"},
        {[](auto& j) {
             j["switch"] = {{"buffr", 1}};
         },
         "topology.switch.buffr: unknown key"},
        {[](auto& j) {
             j["scale_across"] = {{"distance_km", 1}};
         },
         "topology.scale_across: needs sites > 1"},
    };
    for (const auto& b : bads)
    {
        auto j = base;
        b.mutate(j);
        INFO(j.dump());
        try
        {
            ParseTopology(j, "topology");
            FAIL("accepted: " << j.dump());
        }
        catch (const InputError& e)
        {
            CHECK_THAT(e.what(), Catch::Matchers::StartsWith(b.key));
        }
    }
}

TEST_CASE("a missing or malformed topology file is an input error", "[topology][input]")
{
    CHECK_THROWS_AS(LoadTopologyFile("topologies/no-such-file.json"), InputError);
    CHECK_THROWS_WITH(LoadTopologyFile("test/data/not-json.json"),
                      Catch::Matchers::Contains("not valid JSON"));
}
