// MetaRoCE's additive increase shared across a connection's paths: a connection of 40 paths
// takes no more than its fair share from a 1-path connection at one bottleneck.
#include "helper/rdma-helper.h"
#include "test-util.h"

#include "ns3/boolean.h"
#include "ns3/config.h"
#include "ns3/double.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"

#include <catch2/catch.hpp>

using namespace ns3;
using namespace ns3::metaroce;
using namespace ns3::metaroce::test;

namespace
{
/// The share of a 40-path connection beside a 1-path one into the same receiver (one leaf:
/// the receiver's link is the bottleneck), from 10 to 30 ms.
double
MultipathShare(const std::string& coupling, const std::string& ecn, double bdpFraction = 0.2)
{
    SimGuard guard;
    // The receiver's hints would split its link equally whatever the windows do: off, so the
    // windows alone decide.
    Config::SetDefault("ns3::metaroce::MetaRoceAimd::UseRateHints", BooleanValue(false));
    Config::SetDefault("ns3::metaroce::MetaRoceAimd::IncreaseCoupling", StringValue(coupling));
    Config::SetDefault("ns3::metaroce::MetaRoceAimd::EcnResponse", StringValue(ecn));
    Config::SetDefault("ns3::metaroce::MetaRoceAimd::IncreaseBdpFraction",
                       DoubleValue(bdpFraction));
    // 10 us links: a bandwidth-delay product of ~125 packets, so the fair share (~62) is
    // above the 40 packets that 40 paths of at least one packet each keep in flight.
    auto topo = SmallFpf(8, 1, 8);
    topo["nic_link_delay_ns"] = 10000;
    RdmaWorld w(topo, "ns3::metaroce::MetaRoceQueuePair");
    std::vector<Ptr<QueuePair>> rx;
    for (uint32_t paths : {40u, 1u})
    {
        auto& f = w.rdma->QpFactory();
        f.Set("MinPaths", UintegerValue(paths));
        f.Set("MaxPaths", UintegerValue(paths));
        f.Set("GrowPaths", BooleanValue(false));
        auto [a, b] = w.rdma->Connect(paths == 40 ? 1 : 2, 0);
        a->PostSend(1u << 30);
        rx.push_back(b);
    }
    uint64_t from[2]{};
    Simulator::Schedule(MilliSeconds(10),
                        [&]
                        {
                            from[0] = rx[0]->GetCounters().bytesDelivered;
                            from[1] = rx[1]->GetCounters().bytesDelivered;
                        });
    Simulator::Stop(MilliSeconds(30));
    Simulator::Run();
    double multi = static_cast<double>(rx[0]->GetCounters().bytesDelivered - from[0]);
    double single = static_cast<double>(rx[1]->GetCounters().bytesDelivered - from[1]);
    return multi / (multi + single);
}
} // namespace

TEST_CASE("MetaRoCE AIMD: 40 paths take no more than a fair share from 1 path at one "
          "bottleneck",
          "[metaroce][cc]")
{
    double coupled = MultipathShare("connection", "mark");
    INFO("40-path share, increase per connection, decrease per mark: " << coupled);
    CHECK(coupled <= 0.5 * 1.1);
    CHECK(coupled >= 0.5 * 0.9);
    // Each path growing on its own and cut at most once per path RTT, or the latter with the
    // connection's increase a fixed packet count: the connection of 40 paths crowds the
    // other out. (A rate-scaled increase outweighs the per-RTT cut's dependence on the
    // number of paths: see the INFO.)
    double perPath = MultipathShare("path", "rtt");
    double perRtt = MultipathShare("connection", "rtt", 0.0);
    INFO("per RTT decrease, rate-scaled increase: " << MultipathShare("connection", "rtt"));
    INFO("per path increase and per RTT decrease: " << perPath << "; per RTT decrease: " << perRtt);
    CHECK(perPath > 0.6);
    CHECK(perRtt > 0.6);
}
