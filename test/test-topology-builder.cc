// TopologyBuilder: a topology described in C++ is the one a file with the same keys holds.
#include "helper/fabric-helper.h"
#include "helper/scenario/json-reader.h"
#include "helper/topology-builder.h"
#include "test-util.h"

#include <catch2/catch.hpp>

using namespace ns3;
using namespace ns3::metaroce;
using namespace ns3::metaroce::test;

TEST_CASE("TopologyBuilder: the 64-NIC fabric from C++ equals the one from its file", "[topology]")
{
    SimGuard guard;
    TopologySpec fromFile = LoadTopologyFile("topologies/fpf-8plane-64.json");
    TopologySpec built = TopologyBuilder("fpf")
                             .Name("fpf-8plane-64")
                             .Nics(64)
                             .Planes(8)
                             .SwitchRadix(16)
                             .NicPortGbps(100)
                             .NicLinkDelayNs(25)
                             .FabricLinkDelayNs(500)
                             .Build();
    CHECK(built.ToJson() == fromFile.ToJson()); // the derived geometry included
    auto a = FabricHelper().Build(built);
    auto b = FabricHelper().Build(fromFile);
    CHECK(a->NumPorts() == b->NumPorts());
    CHECK(a->Switches().size() == b->Switches().size());
    CHECK(a->Links().size() == b->Links().size());
}

TEST_CASE("TopologyBuilder: bad values are input errors naming the key", "[topology]")
{
    CHECK_THROWS_WITH(TopologyBuilder("fpf").Nics(64).Planes(0).SwitchRadix(16).Build(),
                      Catch::Matchers::Contains("topology.planes"));
    CHECK_THROWS_WITH(
        TopologyBuilder("fpf").Nics(64).SwitchRadix(16).Switch("pfc_class", 9).Build(),
        Catch::Matchers::Contains("topology.switch.pfc_class"));
    CHECK_THROWS_WITH(TopologyBuilder("clos").Nics(64).Planes(2).SwitchRadix(16).Build(),
                      Catch::Matchers::Contains("topology.planes"));
}
