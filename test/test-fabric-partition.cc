// Distributed runs without MPI: the partition of a fabric over processes, and a link's remote
// hand-over (the part of a crossing link each process keeps).
#include "helper/mpi/fabric-partition.h"
#include "helper/scenario/json-reader.h"
#include "test-util.h"

#include "ns3/uinteger.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>

using namespace ns3;
using namespace ns3::metaroce;
using namespace ns3::metaroce::test;

namespace
{
/// The hosts attached to each switch that has any (its leaves).
std::map<uint32_t, std::set<uint32_t>>
LeafHosts(const Fabric& f)
{
    std::map<uint32_t, std::set<uint32_t>> out;
    for (uint32_t k = 0; k < f.Switches().size(); ++k)
    {
        const auto& sw = f.Switches()[k];
        for (uint32_t i = 0; i < sw->GetNPorts(); ++i)
        {
            FabricNetDevice* port = sw->GetPort(i);
            uint32_t peer = port->GetFabricChannel()->GetPeer(port)->GetNode()->GetId();
            if (peer < f.NumNics())
            {
                out[k].insert(peer);
            }
        }
    }
    return out;
}
} // namespace

TEST_CASE("a partition keeps hosts with their leaves and spreads the spines", "[mpi][partition]")
{
    SimGuard guard;
    auto f = FabricHelper().Build(std::string("topologies/fpf-8plane-64.json"));
    const auto leaves = LeafHosts(*f);
    REQUIRE(leaves.size() == 64); // 8 leaves of 8 NICs on each of 8 planes
    for (uint32_t ranks : {1u, 2u, 3u, 4u})
    {
        CAPTURE(ranks);
        FabricPartition p = PartitionFabric(*f, ranks);
        std::vector<uint32_t> hosts(ranks, 0);
        std::vector<uint32_t> upper(ranks, 0);
        for (uint32_t h = 0; h < 64; ++h)
        {
            REQUIRE(p.hostRank[h] < ranks);
            ++hosts[p.hostRank[h]];
        }
        for (uint32_t k = 0; k < f->Switches().size(); ++k)
        {
            auto it = leaves.find(k);
            if (it == leaves.end())
            {
                ++upper[p.switchRank[k]];
                continue;
            }
            for (uint32_t h : it->second)
            {
                CHECK(p.hostRank[h] == p.switchRank[k]); // a leaf's hosts are its rank's
            }
        }
        for (uint32_t r = 0; r < ranks; ++r)
        {
            // Groups of 8 NICs (one leaf per plane): as even as groups allow.
            CHECK(hosts[r] >= 64 / ranks - 8);
            CHECK(hosts[r] <= 64 / ranks + 8);
            CHECK(upper[r] >= 64 / ranks); // 64 spines in all
            CHECK(upper[r] <= 64 / ranks + 1);
        }
        if (ranks == 1)
        {
            CHECK(p.crossingLinks == 0);
        }
        else
        {
            // Only leaf-spine links cross, so the lookahead is the fabric link's 500 ns.
            CHECK(p.crossingLinks > 0);
            CHECK(p.minCrossingDelayPs == 500000);
        }
    }
    FabricPartition two = PartitionFabric(*f, 2);
    CHECK(two.hostRank[0] == 0);
    CHECK(two.hostRank[63] == 1);
    ApplyPartition(*f, two);
    CHECK(f->Host(63)->GetSystemId() == 1);
    for (uint32_t k = 0; k < f->Switches().size(); ++k)
    {
        CHECK(f->Switches()[k]->GetSystemId() == two.switchRank[k]);
    }
}

TEST_CASE("a given partition that splits a leaf or names a missing rank is refused",
          "[mpi][partition]")
{
    SimGuard guard;
    auto f = FabricHelper().Build(std::string("topologies/fpf-8plane-64.json"));
    std::vector<uint32_t> ranks(64, 0);
    CHECK_NOTHROW(PartitionFabric(*f, 1, ranks));
    ranks[1] = 1; // NIC 1 shares its leaves with NIC 0
    CHECK_THROWS_AS(PartitionFabric(*f, 2, ranks), InputError);
    CHECK_THROWS_WITH(PartitionFabric(*f, 2, ranks),
                      Catch::Contains("share a leaf but not a rank"));
    ranks.assign(64, 0);
    ranks[5] = 2;
    CHECK_THROWS_WITH(PartitionFabric(*f, 2, ranks), Catch::Contains("NIC 5: rank 2"));
    CHECK_THROWS_AS(PartitionFabric(*f, 2, std::vector<uint32_t>(3, 0)), InputError);
    CHECK_THROWS_AS(PartitionFabric(*f, 0), InputError);
}

namespace
{
/// Stands for the other process: keeps what the links hand over (the process's sink while
/// it exists).
class Outbox : public FabricRemoteSink
{
  public:
    struct Sent
    {
        uint32_t dir;
        FabricFrame frame;
        uint8_t downs;
    };

    Outbox() { FabricChannel::SetRemoteSink(this); }

    ~Outbox() override { FabricChannel::SetRemoteSink(nullptr); }

    void SendRemote(FabricChannel*, uint32_t dir, FabricFrame&& f, uint8_t downs) override
    {
        sent.push_back({dir, std::move(f), downs});
    }

    void SendPause(FabricChannel*, uint32_t, int64_t, uint8_t, bool) override { ++pauses; }

    uint32_t pauses{0};

    std::vector<Sent> sent;
};
} // namespace

TEST_CASE("a remote link direction hands frames over due at their arrival; late ones are lost",
          "[mpi][link]")
{
    SimGuard guard;
    Ptr<Node> na = CreateObject<Node>();
    Ptr<Node> nb = CreateObject<Node>();
    auto a = CreateObject<FabricNetDevice>();
    auto b = CreateObject<FabricNetDevice>();
    na->AddDevice(a);
    nb->AddDevice(b);
    a->SetDataRate(DataRate("100Gb/s"));
    b->SetDataRate(DataRate("100Gb/s"));
    auto ch = CreateObject<FabricChannel>();
    ch->SetDelay(NanoSeconds(500));
    ch->Connect(a, b);
    FrameLog log;
    b->SetReceiver(&log);
    Outbox out;
    ch->SetRemote(0, true);
    CHECK(ch->IsRemote(0));
    CHECK_FALSE(ch->IsRemote(1));

    a->Enqueue(FabricFrame::Make(Create<Packet>(4096 + 16), 0, 1, 7, 3, ECN_ECT0));
    Simulator::Run();
    // Nothing arrived here: the frame went to the other process, due when it would arrive.
    CHECK(log.entries.empty());
    REQUIRE(out.sent.size() == 1);
    CHECK(out.sent[0].dir == 0);
    CHECK(out.sent[0].downs == 0);
    CHECK(out.sent[0].frame.readyPs == 334240 + 500000);
    CHECK(out.sent[0].frame.entropy == 7);

    // The receiving process's copy of the link delivers it at that time...
    auto deliver = [&](int64_t at, uint8_t downs)
    {
        Simulator::Schedule(PicoSeconds(at) - Simulator::Now(),
                            [&, downs]()
                            {
                                FabricFrame f = out.sent[0].frame;
                                ch->ReceiveRemote(0, std::move(f), downs);
                            });
        Simulator::Run();
    };
    deliver(834240, 0);
    REQUIRE(log.entries.size() == 1);
    CHECK(log.entries[0].atPs == 834240);
    CHECK(log.entries[0].frame.entropy == 7);
    // ...but not one sent before the link went down, even if it is up again by then, as a
    // frame in flight on a local link would be lost.
    const int64_t t0 = Simulator::Now().GetPicoSeconds();
    const uint8_t before = ch->GetDowns();
    Simulator::Schedule(NanoSeconds(100), &FabricChannel::SetUp, ch, false);
    Simulator::Schedule(NanoSeconds(200), &FabricChannel::SetUp, ch, true);
    deliver(t0 + 834240, before);
    CHECK(ch->GetDowns() == before + 1);
    CHECK(log.entries.size() == 1);
    CHECK(ch->GetLostInFlight() == 1);
    // A frame sent after the link came back arrives.
    deliver(Simulator::Now().GetPicoSeconds() + 834240, ch->GetDowns());
    CHECK(log.entries.size() == 2);
    // Back to local: frames travel the link again.
    ch->SetRemote(0, false);
    a->Enqueue(FabricFrame::Make(Create<Packet>(100), 0, 1, 8, 3, ECN_ECT0));
    Simulator::Run();
    CHECK(log.entries.size() == 3);
    CHECK(out.sent.size() == 1);
}
