// FabricHelper's attribute setters, and a topology file's switch settings going through them.
#include "helper/fabric-helper.h"
#include "helper/scenario/json-reader.h"
#include "test-util.h"

#include "ns3/boolean.h"
#include "ns3/nstime.h"
#include "ns3/uinteger.h"

#include <catch2/catch.hpp>

using namespace ns3;
using namespace ns3::metaroce;
using namespace ns3::metaroce::test;

namespace
{
uint64_t
UIntOf(Ptr<Object> o, const std::string& name)
{
    UintegerValue v;
    o->GetAttribute(name, v);
    return v.Get();
}
} // namespace

TEST_CASE("FabricHelper: switch and device attributes reach every switch and port", "[topology]")
{
    SimGuard guard;
    FabricHelper fh;
    fh.SetSwitchAttribute("PfcXonOffset", UintegerValue(12345));
    fh.SetSwitchAttribute("PfcEnabled", BooleanValue(true));
    fh.SetDeviceAttribute("ControlTrafficClass", UintegerValue(7));
    auto f = fh.Build(ParseTopology(SmallFpf(8, 2, 4), "topology"));
    REQUIRE(!f->Switches().empty());
    for (const auto& sw : f->Switches())
    {
        CHECK(UIntOf(sw, "PfcXonOffset") == 12345);
        BooleanValue pfc;
        sw->GetAttribute("PfcEnabled", pfc);
        CHECK(pfc.Get());
        for (uint32_t i = 0; i < sw->GetNDevices(); ++i)
        {
            CHECK(UIntOf(sw->GetDevice(i), "ControlTrafficClass") == 7);
        }
    }
    for (uint32_t n = 0; n < f->NumNics(); ++n)
    {
        CHECK(UIntOf(f->HostPort(n, 1), "ControlTrafficClass") == 7);
    }
}

TEST_CASE("FabricHelper: every switch attribute is reachable from a topology file, and the "
          "helper's own settings override the file's",
          "[topology]")
{
    SimGuard guard;
    auto j = SmallFpf(4, 1, 4);
    j["switch"] = {{"buffer_per_port_bytes", 100000},
                   {"buffer_bytes", 2000000},
                   {"ecmp_salt", 77},
                   {"pfc_class", 2},
                   {"pfc_response_us", 2.5},
                   {"pfc_xon_offset_bytes", 5000},
                   {"latency_ns", 450}};
    FabricHelper fh;
    fh.SetSwitchAttribute("PfcXonOffset", UintegerValue(6000));
    auto f = fh.Build(ParseTopology(j, "topology"));
    for (const auto& sw : f->Switches())
    {
        CHECK(UIntOf(sw, "BufferPerPort") == 100000);
        CHECK(UIntOf(sw, "BufferBytes") == 2000000);
        CHECK(UIntOf(sw, "EcmpSalt") == 77);
        CHECK(UIntOf(sw, "PfcClass") == 2);
        CHECK(UIntOf(sw, "PfcXonOffset") == 6000); // the helper's, not the file's 5000
        TimeValue t;
        sw->GetAttribute("PfcResponseTime", t);
        CHECK(t.Get() == NanoSeconds(2500));
        sw->GetAttribute("Latency", t);
        CHECK(t.Get() == NanoSeconds(450));
    }
    j["switch"] = {{"pfc_class", 8}};
    CHECK_THROWS_WITH(ParseTopology(j, "topology"),
                      Catch::Matchers::Contains("topology.switch.pfc_class"));
    j["switch"] = {{"pfc_response_us", -1}};
    CHECK_THROWS_WITH(ParseTopology(j, "topology"),
                      Catch::Matchers::Contains("topology.switch.pfc_response_us"));
}
