// Accelerator hosts: NCCL's host-aware rings and trees, and the bytes each link class carries.
#include "model/collective/collective-plan.h"
#include "model/collective/communicator.h"
#include "model/transport/scale-up.h"
#include "test-util.h"

#include "ns3/string.h"
#include "ns3/uinteger.h"

#include <catch2/catch.hpp>
#include <map>

using namespace ns3;
using namespace ns3::metaroce;
using namespace ns3::metaroce::test;

namespace
{
HostLayout
Hosts(uint32_t hosts, uint32_t perHost)
{
    HostLayout l;
    for (uint32_t r = 0; r < hosts * perHost; ++r)
    {
        l.host.push_back(r / perHost);
        l.local.push_back(r % perHost);
    }
    return l;
}

/// 2 hosts x 8 accelerators on 8 planes: the NICs and the hosts' scale-up domains.
struct TwoHosts
{
    RdmaWorld w{SmallFpf(16, 8, 8)};
    std::vector<Ptr<RdmaNic>> nics;
    ScaleUpFabric su;

    TwoHosts()
    {
        for (uint32_t i = 0; i < 16; ++i)
        {
            nics.push_back(w.rdma->Nic(i));
        }
        su = ScaleUp();
    }

    /// Two hosts of 8 accelerators, each with its scale-up domain.
    static ScaleUpFabric ScaleUp()
    {
        ScaleUpFabric f;
        f.acceleratorsPerHost = 8;
        for (uint32_t h = 0; h < 2; ++h)
        {
            f.hosts.push_back(CreateObject<ScaleUpDomain>());
            f.hosts.back()->SetAccelerators(8);
        }
        return f;
    }
};
} // namespace

TEST_CASE("a channel's ring chains each host's accelerators, rotated by the channel", "[hosts]")
{
    HostLayout l = Hosts(2, 4);
    CHECK(RingOrder(l, 0) == std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7});
    CHECK(RingOrder(l, 1) == std::vector<uint32_t>{1, 2, 3, 0, 5, 6, 7, 4});
    CHECK(RingOrder(l, 5) == RingOrder(l, 1));
    // Over 4 channels every accelerator leaves its host once (the rank before the next
    // host's first), so every NIC carries one channel's network hop.
    std::map<uint32_t, int> exits;
    for (uint32_t ch = 0; ch < 4; ++ch)
    {
        auto o = RingOrder(l, ch);
        for (uint32_t i = 0; i < o.size(); ++i)
        {
            if (l.host[o[i]] != l.host[o[(i + 1) % o.size()]])
            {
                ++exits[o[i]];
            }
        }
    }
    CHECK(exits.size() == 8);
    for (const auto& [r, n] : exits)
    {
        CHECK(n == 1);
    }
    HostLayout flat = Hosts(5, 1);
    CHECK(RingOrder(flat, 3) == std::vector<uint32_t>{0, 1, 2, 3, 4});
}

TEST_CASE("trees span hosts with chains inside, at most 3 children", "[hosts]")
{
    HostLayout l = Hosts(4, 4);
    for (uint32_t t = 0; t < 2; ++t)
    {
        for (uint32_t ch = 0; ch < 4; ++ch)
        {
            TreeShape tree = MakeTree(l, t, ch);
            uint32_t roots = 0;
            uint32_t crossHost = 0;
            for (uint32_t r = 0; r < 16; ++r)
            {
                roots += tree.parent[r] < 0 ? 1 : 0;
                CHECK(tree.kids[r].size() <= 3);
                if (tree.parent[r] >= 0 && l.host[r] != l.host[tree.parent[r]])
                {
                    ++crossHost;
                    CHECK(l.local[r] == ch % 4); // a host joins the tree by its chain's head
                }
            }
            CHECK(roots == 1);
            CHECK(crossHost == 3); // 4 hosts: 3 edges between hosts
        }
    }
    // The mirror: the root host of tree 0 is a leaf host in tree 1.
    TreeShape t0 = MakeTree(l, 0, 0);
    TreeShape t1 = MakeTree(l, 1, 0);
    CHECK(t0.parent[0] < 0);
    CHECK(t1.parent[0] >= 0);
}

TEST_CASE("a ring over 2 hosts x 8 accelerators puts NCCL's bytes on each link class",
          "[hosts][collective]")
{
    // Each protocol's lines on the wire: LL 16 B per 8 B of data, LL128 128 B per 120 B.
    for (NcclProto proto : {NcclProto::Simple, NcclProto::LL128, NcclProto::LL})
    {
        SimGuard guard;
        TwoHosts t;
        std::vector<Ptr<RdmaNic>>& nics = t.nics;
        ScaleUpFabric& su = t.su;
        QueuePairFactory f;
        f.SetTypeId("ns3::metaroce::MetaRoceQueuePair");
        CollectiveConfig cfg;
        cfg.scaleUp = &su;
        cfg.maxChannels = 8;
        cfg.protocol = proto;
        std::vector<uint32_t> ranks(16);
        std::iota(ranks.begin(), ranks.end(), 0u);
        Communicator comm(ranks, &nics, f, cfg);
        const uint64_t S = 1 << 20; // 8 channels x 16 chunks of 8 KiB
        bool done = false;
        CollectiveResult res;
        comm.Start(CollectiveOp::AllReduce, CollectiveAlgorithm::Ring, S,
                   [&](const CollectiveResult& r)
                   {
                       res = r;
                       done = true;
                       Simulator::Stop();
                   });
        Simulator::Run();
        INFO(ToString(proto));
        REQUIRE(done);
        REQUIRE(res.channels == 8);
        REQUIRE(res.protocol == proto);
        // NCCL's ring all-reduce: per channel, every rank sends 2(k - 1) chunks of S / (C k)
        // to its next; of the k = 16 hops of a channel's ring 14 stay in a host and 2 cross.
        const uint64_t chunk = S / 8 / 16;
        const uint64_t lines = proto == NcclProto::LL      ? (chunk + 7) / 8 * 16
                               : proto == NcclProto::LL128 ? (chunk + 119) / 120 * 128
                                                           : chunk;
        const uint64_t perHop = 2 * 15 * lines;
        std::map<uint32_t, uint64_t> net;
        std::map<uint32_t, uint64_t> up;
        comm.ForEachQp(
            [&](const Ptr<QueuePair>& q)
            {
                uint32_t nic = q->GetNic()->GetNicId();
                (DynamicCast<ScaleUpQueuePair>(q) ? up : net)[nic] += q->GetCounters().bytesPosted;
            });
        uint64_t netTotal = 0;
        uint64_t upTotal = 0;
        for (uint32_t a = 0; a < 16; ++a)
        {
            // Each accelerator leaves its host in one channel of eight and stays in the others.
            CHECK(net[a] == perHop);
            CHECK(up[a] == 7 * perHop);
            CHECK(su.hosts[a / 8]->GetTxBytes(a % 8) == 7 * perHop);
            netTotal += net[a];
            upTotal += up[a];
        }
        CHECK(netTotal == 8 * 2 * perHop);
        CHECK(upTotal == 8 * 14 * perHop);
        // The data the ranks moved is the protocol's business only on the wire.
        CHECK(res.wireBytesPerRank == 2 * 15 * chunk * 8);
    }
}

TEST_CASE("a collective inside one host takes the same time under every network transport",
          "[hosts][collective]")
{
    // No byte of it touches a NIC: the scale-up domain alone decides, so MetaRoCE and RoCEv2
    // (with several QPs per connection too) must agree to the picosecond. A connection over
    // the domain is one QP per channel whatever the transport (NCCL's P2P transport).
    struct Case
    {
        const char* qp;
        uint32_t qpsPerConnection;
    };
    for (CollectiveAlgorithm algo :
         {CollectiveAlgorithm::Ring, CollectiveAlgorithm::Tree, CollectiveAlgorithm::Direct})
    {
        std::vector<int64_t> ends;
        std::vector<uint64_t> qps;
        for (Case c :
             {Case{"ns3::metaroce::MetaRoceQueuePair", 1},
              Case{"ns3::metaroce::RoceV2QueuePair", 1}, Case{"ns3::metaroce::RoceV2QueuePair", 4}})
        {
            SimGuard guard;
            TwoHosts t;
            QueuePairFactory f;
            f.SetTypeId(c.qp);
            CollectiveConfig cfg;
            cfg.scaleUp = &t.su;
            cfg.maxChannels = 8;
            cfg.qpsPerConnection = c.qpsPerConnection;
            cfg.protocol = NcclProto::Simple;
            std::vector<uint32_t> ranks(8); // host 0's accelerators
            std::iota(ranks.begin(), ranks.end(), 0u);
            Communicator comm(ranks, &t.nics, f, cfg);
            CollectiveResult res;
            bool done = false;
            comm.Start(algo == CollectiveAlgorithm::Direct ? CollectiveOp::AllToAll
                                                           : CollectiveOp::AllReduce,
                       algo, 8 << 20,
                       [&](const CollectiveResult& r)
                       {
                           res = r;
                           done = true;
                           Simulator::Stop();
                       });
            Simulator::Run();
            INFO(c.qp << " x" << c.qpsPerConnection << " " << ToString(algo));
            REQUIRE(done);
            uint64_t n = 0;
            comm.ForEachQp(
                [&](const Ptr<QueuePair>& q)
                {
                    CHECK(DynamicCast<ScaleUpQueuePair>(q) != nullptr);
                    ++n;
                });
            ends.push_back(res.endPs - res.startPs);
            qps.push_back(n);
        }
        INFO(ToString(algo) << " " << ends[0] << " " << ends[1] << " " << ends[2]);
        CHECK(ends[0] == ends[1]);
        CHECK(ends[0] == ends[2]);
        CHECK(qps[0] == qps[1]);
        CHECK(qps[0] == qps[2]);
        // one QP per connection: a ring's to the next rank, all-to-all's to every peer
        if (algo != CollectiveAlgorithm::Tree)
        {
            CHECK(qps[0] == (algo == CollectiveAlgorithm::Direct ? 8u * 7 : 8u));
        }
    }
}

TEST_CASE("scale-up: a transfer takes serialization plus latency, and senders share an ingress",
          "[hosts][scaleup]")
{
    SimGuard guard;
    RdmaWorld w(SmallFpf(4, 1, 4));
    Ptr<ScaleUpDomain> d = CreateObject<ScaleUpDomain>();
    d->SetAttribute("DataRate", DataRateValue(DataRate("800Gbps"))); // 100 bytes per ns
    d->SetAttribute("Latency", TimeValue(NanoSeconds(500)));
    d->SetAttribute("ChunkBytes", UintegerValue(65536));
    d->SetAccelerators(4);
    auto connect = [&](uint32_t a, uint32_t b)
    {
        auto [qa, qb] = d->Connect(a, b);
        w.rdma->Nic(a)->AddQueuePair(qa);
        w.rdma->Nic(b)->AddQueuePair(qb);
        qa->Connect(b, qb->GetQpn());
        qb->Connect(a, qa->GetQpn());
        return std::make_pair(qa, qb);
    };
    const uint64_t S = 1 << 20; // 16 chunks: 10,485.76 ns at 100 bytes per ns
    std::vector<int64_t> recv;
    std::vector<int64_t> sent;
    auto [a0, b0] = connect(0, 3);
    b0->SetReceiveHandler([&](const RdmaCompletion& c) { recv.push_back(c.completedPs); });
    a0->PostSend(S, 0, [&](const RdmaCompletion& c) { sent.push_back(c.completedPs); });
    Simulator::Run();
    REQUIRE(recv.size() == 1);
    CHECK(recv[0] == 10485760 + 500000); // serialization + latency, in ps
    CHECK(sent.size() == 1);
    CHECK(d->GetTxBytes(0) == S);
    CHECK(d->GetRxBytes(3) == S);

    // Two senders into accelerator 3 at once: its ingress takes one chunk at a time.
    auto [a1, b1] = connect(1, 3);
    auto [a2, b2] = connect(2, 3);
    std::vector<int64_t> done;
    int64_t t0 = Simulator::Now().GetPicoSeconds();
    for (auto qb : {b1, b2})
    {
        qb->SetReceiveHandler([&](const RdmaCompletion& c) { done.push_back(c.completedPs); });
    }
    a1->PostSend(S, 0, nullptr);
    a2->PostSend(S, 0, nullptr);
    Simulator::Run();
    REQUIRE(done.size() == 2);
    int64_t last = std::max(done[0], done[1]) - t0;
    CHECK(last == 2 * 10485760 + 500000); // 2 S through one ingress, then the latency
    // The posted bytes were placed once each (the NICs' counters feed the stall watchdog).
    CHECK(w.rdma->Nic(3)->GetPlacedBytes() == 3 * S);

    // A QP's streams are channels of their own: a small message on stream 1 posted after a
    // large one on stream 0 takes every other chunk of the egress, and completes (at both
    // ends) long before it, not behind it.
    std::vector<std::pair<uint16_t, int64_t>> order;
    std::vector<std::pair<uint16_t, int64_t>> recvd;
    b0->SetReceiveHandler([&](const RdmaCompletion& c)
                          { recvd.emplace_back(c.stream, c.completedPs); });
    t0 = Simulator::Now().GetPicoSeconds();
    auto note = [&](const RdmaCompletion& c) { order.emplace_back(c.stream, c.completedPs); };
    a0->PostSend(4 * S, 0, note);
    a0->PostSend(2 * 65536, 1, note);
    Simulator::Run();
    REQUIRE(order.size() == 2);
    REQUIRE(recvd.size() == 2);
    CHECK(order[0].first == 1);
    CHECK(recvd[0].first == 1);
    // stream 0's first chunk left at once and it went back in line ahead of stream 1: the
    // egress sends 0, 0, 1, 0, 1, so stream 1 is in after 5 chunk times and the latency
    CHECK(recvd[0].second - t0 == 5 * 655360 + 500000);
    CHECK(recvd[1].second - t0 == 4 * 10485760 + 2 * 655360 + 500000);
    CHECK(order[0].second < order[1].second);
}

TEST_CASE("the NICs' transmit and receive processing add exactly their latency to a message",
          "[endpoint]")
{
    // One 1 KiB message across the lab fabric, one way, under both transports.
    for (const char* qp : {"ns3::metaroce::MetaRoceQueuePair", "ns3::metaroce::RoceV2QueuePair"})
    {
        std::vector<int64_t> at;
        for (int64_t ns : {0, 500, 1200})
        {
            SimGuard guard;
            auto topo = SmallFpf(2, 1, 4);
            topo["nic_tx_latency_ns"] = ns;
            topo["nic_rx_latency_ns"] = ns / 2;
            RdmaWorld w(topo, qp);
            auto [a, b] = w.rdma->Connect(0, 1);
            int64_t done = -1;
            b->SetReceiveHandler([&](const RdmaCompletion& c) { done = c.completedPs; });
            a->PostSend(1024, 0, nullptr);
            Simulator::Stop(MicroSeconds(100));
            Simulator::Run();
            REQUIRE(done > 0);
            at.push_back(done);
        }
        INFO(qp);
        // Sender's transmit plus receiver's receive processing, nothing else.
        CHECK(at[1] - at[0] == 750000);
        CHECK(at[2] - at[0] == 1800000);
    }
}

TEST_CASE("with hosts, RoCEv2's pinned QPs of one NIC spread over all its planes",
          "[hosts][collective]")
{
    // 2 hosts x 8 accelerators, 8 planes: an all-to-all (8 channels) and a 64-channel ring
    // must each send on every plane of every NIC, as NCCL puts channels on distinct ports.
    for (CollectiveAlgorithm algo : {CollectiveAlgorithm::Direct, CollectiveAlgorithm::Ring})
    {
        SimGuard guard;
        TwoHosts t;
        std::vector<Ptr<RdmaNic>>& nics = t.nics;
        ScaleUpFabric& su = t.su;
        QueuePairFactory f;
        f.SetTypeId("ns3::metaroce::RoceV2QueuePair");
        f.Set("CongestionControl", StringValue("ns3::metaroce::RdmaNoCongestionControl"));
        CollectiveConfig cfg;
        cfg.scaleUp = &su;
        cfg.maxChannels = algo == CollectiveAlgorithm::Ring ? 64 : 8;
        std::vector<uint32_t> ranks(16);
        std::iota(ranks.begin(), ranks.end(), 0u);
        Communicator comm(ranks, &nics, f, cfg);
        bool done = false;
        comm.Start(algo == CollectiveAlgorithm::Ring ? CollectiveOp::AllReduce
                                                     : CollectiveOp::AllToAll,
                   algo, 16 << 20,
                   [&](const CollectiveResult&)
                   {
                       done = true;
                       Simulator::Stop();
                   });
        Simulator::Run();
        REQUIRE(done);
        for (uint32_t n = 0; n < 16; ++n)
        {
            for (uint32_t p = 0; p < 8; ++p)
            {
                INFO("NIC " << n << " plane " << p << " " << ToString(algo));
                CHECK(nics[n]->GetPort(p)->GetCounters().txBytes > 100000);
            }
        }
    }
}

TEST_CASE("all-to-all with PXN: every network byte travels between NICs of one rail",
          "[hosts][pxn]")
{
    const uint64_t S = 16 * 16 * 4096;                   // 16 KiB to every peer
    std::map<bool, std::pair<uint64_t, uint64_t>> bytes; // pxn -> (network, scale-up)
    for (bool pxn : {false, true})
    {
        SimGuard guard;
        TwoHosts t;
        QueuePairFactory f;
        f.SetTypeId("ns3::metaroce::MetaRoceQueuePair");
        CollectiveConfig cfg;
        cfg.scaleUp = &t.su;
        cfg.pxn = pxn;
        std::vector<uint32_t> ranks(16);
        std::iota(ranks.begin(), ranks.end(), 0u);
        Communicator comm(ranks, &t.nics, f, cfg);
        bool done = false;
        comm.Start(CollectiveOp::AllToAll, CollectiveAlgorithm::Direct, S,
                   [&](const CollectiveResult&)
                   {
                       done = true;
                       Simulator::Stop();
                   });
        Simulator::Run();
        INFO("pxn " << pxn);
        REQUIRE(done);
        uint64_t crossRail = 0;
        comm.ForEachQp(
            [&](const Ptr<QueuePair>& q)
            {
                uint64_t b = q->GetCounters().bytesPosted;
                if (DynamicCast<ScaleUpQueuePair>(q))
                {
                    bytes[pxn].second += b;
                    return;
                }
                bytes[pxn].first += b;
                uint32_t a = q->GetNic()->GetNicId();
                crossRail += a % 8 != q->GetRemoteNic() % 8 ? b : 0;
            });
        // Without PXN 7 of a rank's 8 peers on the other host sit on other rails.
        CHECK(crossRail == (pxn ? 0 : 16 * 7 * S / 16));
    }
    // The same bytes cross the network; PXN adds the hop to the rail's accelerator.
    CHECK(bytes[true].first == bytes[false].first);
    CHECK(bytes[true].second == bytes[false].second + 16 * 7 * S / 16);
}

TEST_CASE("NICs shared by two accelerators each: a ring over 2 hosts x 8 puts both accelerators' "
          "network bytes on their NIC",
          "[hosts][collective][shared-nic]")
{
    SimGuard guard;
    RdmaWorld w{SmallFpf(8, 8, 8)}; // 8 NICs: 4 per host
    std::vector<Ptr<RdmaNic>> nics; // by accelerator: accelerator a uses NIC a / 2
    for (uint32_t a = 0; a < 16; ++a)
    {
        nics.push_back(w.rdma->Nic(a / 2));
    }
    ScaleUpFabric su = TwoHosts::ScaleUp();
    QueuePairFactory f;
    f.SetTypeId("ns3::metaroce::MetaRoceQueuePair");
    CollectiveConfig cfg;
    cfg.scaleUp = &su;
    cfg.maxChannels = 8;
    cfg.protocol = NcclProto::Simple;
    std::vector<uint32_t> ranks(16);
    std::iota(ranks.begin(), ranks.end(), 0u);
    Communicator comm(ranks, &nics, f, cfg);
    const uint64_t S = 1 << 20;
    bool done = false;
    CollectiveResult res;
    comm.Start(CollectiveOp::AllReduce, CollectiveAlgorithm::Ring, S,
               [&](const CollectiveResult& r)
               {
                   res = r;
                   done = true;
                   Simulator::Stop();
               });
    Simulator::Run();
    REQUIRE(done);
    REQUIRE(res.channels == 8);
    // As with a NIC each: every accelerator leaves its host in one channel of eight; here two
    // accelerators leave through each NIC, and every QP connects the NICs that serve its ends.
    const uint64_t perHop = 2 * 15 * (S / 8 / 16);
    std::map<uint32_t, uint64_t> net;
    comm.ForEachQp(
        [&](const Ptr<QueuePair>& q)
        {
            if (!DynamicCast<ScaleUpQueuePair>(q))
            {
                net[q->GetNic()->GetNicId()] += q->GetCounters().bytesPosted;
                CHECK(q->GetRemoteNic() / 4 != q->GetNic()->GetNicId() / 4); // other host
            }
        });
    REQUIRE(net.size() == 8);
    for (const auto& [nic, bytes] : net)
    {
        CHECK(bytes == 2 * perHop);
    }
}
