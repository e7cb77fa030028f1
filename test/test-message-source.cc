// RdmaMessageSource: the Application a streams workload posts its messages with.
#include "helper/fabric-helper.h"
#include "helper/rdma-helper.h"
#include "model/workload/rdma-message-source.h"
#include "test-util.h"

#include "ns3/uinteger.h"

#include <catch2/catch.hpp>
#include <vector>

using namespace ns3;
using namespace ns3::metaroce;
using namespace ns3::metaroce::test;

TEST_CASE("RdmaMessageSource: posts its quota from its start time, a few outstanding, on "
          "its streams in turn",
          "[workload]")
{
    SimGuard guard;
    RdmaWorld w("topologies/fpf-8x100g-lab.json", "ns3::metaroce::MetaRoceQueuePair");
    auto [tx, rx] = w.rdma->Connect(0, 1);
    Ptr<RdmaMessageSource> app = CreateObject<RdmaMessageSource>();
    app->SetAttribute("MessageBytes", UintegerValue(64 << 10));
    app->SetAttribute("MaxMessages", UintegerValue(10));
    app->SetAttribute("Outstanding", UintegerValue(3));
    app->SetAttribute("Streams", UintegerValue(2));
    app->SetQueuePair(tx);
    app->SetStartTime(MicroSeconds(5));
    w.fabric->Host(0)->AddApplication(app);

    std::vector<int64_t> postedPs;
    std::vector<uint16_t> streams;
    app->TraceConnectWithoutContext(
        "Post", MakeCallback(+[](std::vector<int64_t>* at, std::vector<uint16_t>* st, uint16_t s,
                                 uint32_t, uint64_t)
                             {
                                 at->push_back(Simulator::Now().GetPicoSeconds());
                                 st->push_back(s);
                             })
                    .Bind(&postedPs, &streams));
    std::vector<int64_t> fctPs;
    rx->SetReceiveHandler(
        [&](const RdmaCompletion& c)
        {
            int64_t at = app->TakePostedPs(c.stream, c.seq);
            REQUIRE(at >= 0);
            fctPs.push_back(c.completedPs - at);
            CHECK(app->TakePostedPs(c.stream, c.seq) == -1); // taken once
        });
    Simulator::Run();

    REQUIRE(postedPs.size() == 10);
    CHECK(app->GetPosted() == 10);
    // The first three at the start time, the rest one per message sent.
    for (int i = 0; i < 3; ++i)
    {
        CHECK(postedPs[i] == MicroSeconds(5).GetPicoSeconds());
    }
    CHECK(postedPs[3] > postedPs[2]);
    for (std::size_t i = 0; i < streams.size(); ++i)
    {
        CHECK(streams[i] == i % 2);
    }
    CHECK(fctPs.size() == 10);
    CHECK(rx->GetCounters().bytesDelivered == 10u * (64 << 10));
}
