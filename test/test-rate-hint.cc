// MetaRoCE's receiver rate hints (RCN): the receiver's link stays busy while senders are
// backlogged, and posted receive buffers weigh the shares (or not, with weighting off).
#include "helper/rdma-helper.h"
#include "model/metaroce/metaroce-queue-pair.h"
#include "model/metaroce/metaroce-rate-hint.h"
#include "test-util.h"

#include "ns3/boolean.h"
#include "ns3/config.h"
#include "ns3/string.h"

#include <catch2/catch.hpp>

using namespace ns3;
using namespace ns3::metaroce;
using namespace ns3::metaroce::test;

namespace
{
/// Payload bit/s of a busy 100G link: 4,096 B of payload in a 4,210 B MetaRoCE frame.
constexpr double kPayloadBps = 100e9 * 4096.0 / 4210.0;

uint64_t
Delivered(const std::vector<Ptr<QueuePair>>& rx)
{
    uint64_t b = 0;
    for (const auto& q : rx)
    {
        b += q->GetCounters().bytesDelivered;
    }
    return b;
}
} // namespace

TEST_CASE("MetaRoCE rate hints: a 16-to-1 incast keeps the receiver's link busy to the end",
          "[metaroce][hint]")
{
    SimGuard guard;
    RdmaWorld w(SmallFpf(32, 1, 16), "ns3::metaroce::MetaRoceQueuePair");
    std::vector<Ptr<QueuePair>> rx;
    int64_t lastDonePs = 0;
    uint32_t done = 0;
    for (uint32_t s = 1; s <= 16; ++s)
    {
        auto [a, b] = w.rdma->Connect(s, 0);
        // Unequal sizes: senders finish one by one, and those left must take up the link.
        a->PostSend((1u << 20) + s * (64u << 10));
        b->SetReceiveHandler(
            [&](const RdmaCompletion& c)
            {
                lastDonePs = c.completedPs;
                ++done;
            });
        rx.push_back(b);
    }
    // From 20 us (a few RTTs: the first hints are in) to the last completion.
    const int64_t fromPs = 20'000'000;
    uint64_t atFrom = 0;
    Simulator::Schedule(PicoSeconds(fromPs), [&] { atFrom = Delivered(rx); });
    Simulator::Stop(MilliSeconds(20));
    Simulator::Run();
    REQUIRE(done == 16);
    double busy = (Delivered(rx) - atFrom) * 8e12 / (lastDonePs - fromPs) / kPayloadBps;
    INFO("receiver link busy " << busy);
    CHECK(busy >= 0.95);
}

TEST_CASE("MetaRoCE rate hints: posted receive buffers 1:3 give shares 1:3, equal with "
          "weighting off",
          "[metaroce][hint]")
{
    for (bool weighted : {true, false})
    {
        SimGuard guard;
        if (!weighted)
        {
            Config::SetDefault("ns3::metaroce::MetaRoceRateHint::BufferWeighting",
                               StringValue("off"));
        }
        RdmaWorld w(SmallFpf(8, 1, 8), "ns3::metaroce::MetaRoceQueuePair");
        std::vector<Ptr<QueuePair>> rx;
        for (uint32_t s = 1; s <= 2; ++s)
        {
            auto [a, b] = w.rdma->Connect(s, 0);
            b->PostReceive(s == 1 ? 10 : 30); // buffers for messages to come
            a->PostSend(64u << 20);
            rx.push_back(b);
        }
        // Shares once the hints hold (from 100 us), long before either message completes.
        uint64_t b0[2]{};
        uint64_t b1[2]{};
        Simulator::Schedule(MicroSeconds(100),
                            [&]
                            {
                                b0[0] = rx[0]->GetCounters().bytesDelivered;
                                b0[1] = rx[1]->GetCounters().bytesDelivered;
                            });
        Simulator::Schedule(MicroSeconds(600),
                            [&]
                            {
                                b1[0] = rx[0]->GetCounters().bytesDelivered;
                                b1[1] = rx[1]->GetCounters().bytesDelivered;
                            });
        Simulator::Stop(MicroSeconds(600));
        Simulator::Run();
        double ratio = static_cast<double>(b1[1] - b0[1]) / static_cast<double>(b1[0] - b0[0]);
        double total = (b1[0] - b0[0] + b1[1] - b0[1]) * 8e12 / 500e6 / kPayloadBps;
        INFO("weighted " << weighted << ": share ratio " << ratio << ", link busy " << total);
        CHECK(ratio == Approx(weighted ? 3.0 : 1.0).epsilon(0.10));
        CHECK(total >= 0.95);
    }
}

TEST_CASE("MetaRoCE rate hints: a share its sender cannot use goes to the backlogged sender",
          "[metaroce][hint]")
{
    // Into NIC 0 (one 100G plane): sender 1 is backlogged; sender 2 also sends to three
    // others, so its own NIC gives the flow to 0 about a quarter of 100G. Plain equal shares
    // hold sender 1 at half the link while a quarter of it idles; measured redistribution
    // gives sender 1 what sender 2 leaves, as no hints at all would.
    auto run = [](const std::string& hints)
    {
        SimGuard guard;
        if (hints == "none")
        {
            Config::SetDefault("ns3::metaroce::MetaRoceAimd::UseRateHints", BooleanValue(false));
        }
        else
        {
            Config::SetDefault("ns3::metaroce::MetaRoceRateHint::Redistribute", StringValue(hints));
        }
        RdmaWorld w(SmallFpf(8, 1, 8), "ns3::metaroce::MetaRoceQueuePair");
        auto [a, ra] = w.rdma->Connect(1, 0);
        auto [b, rb] = w.rdma->Connect(2, 0);
        a->PostSend(8u << 20);
        b->PostSend(8u << 20);
        std::vector<Ptr<QueuePair>> keep;
        for (uint32_t d : {3u, 4u, 5u})
        {
            auto [c, rc] = w.rdma->Connect(2, d);
            c->PostSend(32u << 20);
            keep.push_back(c);
            keep.push_back(rc);
        }
        int64_t aDone = 0;
        ra->SetReceiveHandler([&](const RdmaCompletion& c) { aDone = c.completedPs; });
        Simulator::Stop(MilliSeconds(20));
        Simulator::Run();
        REQUIRE(aDone > 0);
        return (8u << 20) * 8e3 / aDone; // Gb/s
    };
    double none = run("none");
    double plain = run("off");
    double measured = run("measured");
    INFO("backlogged sender: " << none << " Gb/s without hints, " << plain << " plain shares, "
                               << measured << " measured");
    CHECK(plain < 0.75 * none);   // the former rule leaves the link a quarter idle
    CHECK(measured > 0.9 * none); // redistribution fills it
}
