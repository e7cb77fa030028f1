// The event schedulers: same order as ns-3's own schedulers, event for event.
#include "helper/fabric-helper.h"
#include "helper/rdma-helper.h"
#include "model/core/bucket-queue.h"
#include "model/core/bucket-scheduler.h"
#include "model/core/fabric-random.h"
#include "model/core/fast-simulator-impl.h"
#include "model/core/quad-heap-scheduler.h"
#include "model/core/reusable-event.h"
#include "test-util.h"

#include "ns3/config.h"
#include "ns3/enum.h"
#include "ns3/global-value.h"
#include "ns3/make-event.h"
#include "ns3/priority-queue-scheduler.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <tuple>

using namespace ns3;
using namespace ns3::metaroce;
using namespace ns3::metaroce::test;

namespace
{
void
Nothing()
{
}
} // namespace

namespace
{
/// Drives a scheduler through random inserts (many timestamp ties, spread over `spread` time
/// steps ahead), removals of arbitrary events and pops, checking every pop against a reference.
void
CheckOrder(Ptr<Scheduler> s, uint64_t spread, double atEarliest = 0)
{
    std::set<std::pair<uint64_t, uint32_t>> ref;
    std::vector<Scheduler::Event> live;
    std::vector<Ptr<EventImpl>> keep; // the events' objects, alive for the whole test
    FastRng rng(7);
    uint32_t uid = 0;
    uint64_t now = 0;
    for (int step = 0; step < 20000; ++step)
    {
        double u = rng.Uniform();
        if (u < 0.55 || ref.empty())
        {
            Scheduler::Event ev;
            keep.push_back(Ptr<EventImpl>(MakeEvent(&Nothing), false));
            ev.impl = PeekPointer(keep.back());
            // Many ties on the timestamp: the uid must break them. Now and then one far ahead.
            ev.key.m_ts =
                now + (rng.Uniform() < 0.02 ? rng.Next() % (spread * 100) : rng.Next() % spread);
            if (!ref.empty() && rng.Uniform() < atEarliest)
            {
                ev.key.m_ts = ref.begin()->first; // into a burst at the earliest pending time
            }
            ev.key.m_uid = uid++;
            ev.key.m_context = 0;
            s->Insert(ev);
            ref.insert({ev.key.m_ts, ev.key.m_uid});
            live.push_back(ev);
        }
        else if (u < 0.6)
        {
            // Remove an arbitrary scheduled event (Simulator::Remove).
            std::size_t i = rng.Next() % live.size();
            if (ref.count({live[i].key.m_ts, live[i].key.m_uid}) != 0)
            {
                s->Remove(live[i]);
                ref.erase({live[i].key.m_ts, live[i].key.m_uid});
            }
        }
        else
        {
            REQUIRE(!s->IsEmpty());
            Scheduler::Event peek = s->PeekNext();
            Scheduler::Event next = s->RemoveNext();
            REQUIRE(peek.key.m_uid == next.key.m_uid);
            REQUIRE(next.key.m_ts == ref.begin()->first);
            REQUIRE(next.key.m_uid == ref.begin()->second);
            ref.erase(ref.begin());
            now = next.key.m_ts;
        }
    }
    while (!ref.empty())
    {
        Scheduler::Event next = s->RemoveNext();
        REQUIRE(next.key.m_uid == ref.begin()->second);
        ref.erase(ref.begin());
    }
    CHECK(s->IsEmpty());
}
} // namespace

TEST_CASE("QuadHeapScheduler pops in (time, uid) order through inserts and removals", "[scheduler]")
{
    CheckOrder(CreateObject<QuadHeapScheduler>(), 50);
    CheckOrder(CreateObject<QuadHeapScheduler>(), 100000);
}

TEST_CASE("BucketScheduler keeps the order through bursts of simultaneous inserts", "[scheduler]")
{
    // Half the inserts join the events of the earliest pending time (scheduled while they
    // wait: they run after them), with removals among them, in narrow and wide buckets.
    for (uint32_t shift : {0u, 4u, 10u})
    {
        for (uint64_t spread : {uint64_t(3), uint64_t(50), uint64_t(5000)})
        {
            INFO("WidthShift " << shift << ", spread " << spread);
            ObjectFactory f("ns3::metaroce::BucketScheduler");
            f.Set("WidthShift", UintegerValue(shift));
            f.Set("Buckets", UintegerValue(64));
            CheckOrder(f.Create<Scheduler>(), spread, 0.5);
        }
    }
}

namespace
{
/// An event ordered by (time, tie) with ties in no particular order, as TieOrder node's.
struct TieKey
{
    uint64_t m_ts;
    uint64_t m_tie;
    uint32_t m_uid;
};

struct TieEvent
{
    EventImpl* impl;
    TieKey key;
};

struct ByTie
{
    static constexpr bool kNewestLast = false;

    static bool Before(const TieEvent& a, const TieEvent& b)
    {
        return a.key.m_ts < b.key.m_ts || (a.key.m_ts == b.key.m_ts && a.key.m_tie < b.key.m_tie);
    }

    static bool SecondBefore(const TieEvent& a, const TieEvent& b)
    {
        return a.key.m_tie < b.key.m_tie;
    }

    static void Copy(TieEvent& dst, const TieEvent& src) { dst = src; }
};
} // namespace

TEST_CASE("BucketQueue in an order of ties keeps it through bursts of thousands at one time",
          "[scheduler]")
{
    // Bursts at the earliest pending time, each insert with a random tie (a node's): beyond
    // a few dozen they wait beside the sorted bucket, and must still come out in order, with
    // removals among them.
    for (uint32_t shift : {0u, 10u})
    {
        INFO("shift " << shift);
        BucketQueue<TieEvent, ByTie> q;
        q.Configure(shift, 64, 16384);
        Ptr<EventImpl> impl(MakeEvent(&Nothing), false); // read (prefetched), never run
        std::set<std::tuple<uint64_t, uint64_t, uint32_t>> ref;
        std::vector<TieEvent> live;
        FastRng rng(11);
        uint32_t uid = 0;
        uint64_t now = 0;
        for (int step = 0; step < 60000; ++step)
        {
            double u = rng.Uniform();
            if (u < 0.6 || ref.empty())
            {
                TieEvent ev{PeekPointer(impl), TieKey{now + rng.Next() % 3, rng.Next(), uid++}};
                if (!ref.empty() && rng.Uniform() < 0.7)
                {
                    ev.key.m_ts = std::get<0>(*ref.begin());
                }
                q.Insert(ev);
                ref.insert({ev.key.m_ts, ev.key.m_tie, ev.key.m_uid});
                live.push_back(ev);
            }
            else if (u < 0.63)
            {
                const TieEvent& e = live[rng.Next() % live.size()];
                if (ref.erase({e.key.m_ts, e.key.m_tie, e.key.m_uid}) != 0)
                {
                    REQUIRE(q.Remove(e.key.m_ts, e.key.m_uid));
                }
            }
            else
            {
                const uint32_t peek = q.PeekNext().key.m_uid;
                TieEvent next = q.RemoveNext();
                REQUIRE(next.key.m_uid == peek);
                REQUIRE(next.key.m_uid == std::get<2>(*ref.begin()));
                ref.erase(ref.begin());
                now = next.key.m_ts;
            }
            REQUIRE(q.Size() == ref.size());
        }
        while (!ref.empty())
        {
            REQUIRE(q.RemoveNext().key.m_uid == std::get<2>(*ref.begin()));
            ref.erase(ref.begin());
        }
        CHECK(q.IsEmpty());
    }
}

TEST_CASE("BucketScheduler pops in (time, uid) order through inserts and removals", "[scheduler]")
{
    // Narrow buckets and a short ring put events in many buckets, across the ring's wrap and
    // into the far heap; wide ones put many in one bucket.
    for (uint32_t shift : {0u, 4u, 10u, 12u, 13u}) // up to 12 a big bucket is counting-sorted
    {
        for (uint64_t spread : {uint64_t(50), uint64_t(5000), uint64_t(1) << 20})
        {
            INFO("WidthShift " << shift << ", spread " << spread);
            ObjectFactory f("ns3::metaroce::BucketScheduler");
            f.Set("WidthShift", UintegerValue(shift));
            f.Set("Buckets", UintegerValue(64));
            CheckOrder(f.Create<Scheduler>(), spread);
        }
    }
    CheckOrder(CreateObject<BucketScheduler>(), 5000); // defaults
    // A ring size that is not a power of two is rounded up (it was an abort).
    ObjectFactory f("ns3::metaroce::BucketScheduler");
    f.Set("Buckets", UintegerValue(96));
    Ptr<BucketScheduler> odd = f.Create<BucketScheduler>();
    UintegerValue buckets;
    odd->GetAttribute("Buckets", buckets);
    CHECK(buckets.Get() == 128);
    CheckOrder(odd, 5000);
}

namespace
{
/// Runs sixteen 1 MiB MetaRoCE transfers on the 64-NIC fabric at 1% loss and returns every
/// observable that depends on event order: completion times, counters, the switch statistics.
std::vector<uint64_t>
RunWith(const char* scheduler, const char* qpType = "ns3::metaroce::MetaRoceQueuePair",
        const char* simulator = "ns3::DefaultSimulatorImpl")
{
    SimGuard guard;
    GlobalValue::Bind("SchedulerType", StringValue(scheduler));
    GlobalValue::Bind("SimulatorImplementationType", StringValue(simulator));
    RdmaWorld w("topologies/fpf-8plane-64.json", qpType);
    w.fabric->SetLossRate(0.01); // retransmissions and timers make the order matter more
    std::vector<Ptr<QueuePair>> qps;
    for (uint32_t i = 0; i < 16; ++i)
    {
        auto [a, b] = w.rdma->Connect(i, (5 * i + 3) % 64);
        a->PostSend(1 << 20);
        qps.push_back(a);
        qps.push_back(b);
    }
    Simulator::Run();
    std::vector<uint64_t> out;
    out.push_back(static_cast<uint64_t>(Simulator::Now().GetPicoSeconds()));
    out.push_back(Simulator::GetEventCount());
    for (const auto& q : qps)
    {
        const auto& c = q->GetCounters();
        out.insert(out.end(), {c.bytesDelivered, c.dataPacketsSent, c.retransmittedPackets,
                               c.duplicatePackets, c.timeouts});
    }
    GlobalValue::Bind("SchedulerType", StringValue("ns3::MapScheduler"));
    GlobalValue::Bind("SimulatorImplementationType", StringValue("ns3::DefaultSimulatorImpl"));
    return out;
}
} // namespace

TEST_CASE("A run under either scheduler is identical to one under ns-3's", "[scheduler]")
{
    auto a = RunWith("ns3::PriorityQueueScheduler");
    auto b = RunWith("ns3::metaroce::QuadHeapScheduler");
    auto c = RunWith("ns3::metaroce::BucketScheduler");
    REQUIRE(a.size() == b.size());
    CHECK(a == c);
    INFO("end " << a[0] << " ps, first QP sent " << a[3] << ", retransmitted " << a[4]);
    CHECK(a == b);
    CHECK(a[0] > 0);
    CHECK(a[4] > 0); // losses were repaired: timers and retransmissions took part
}

TEST_CASE("A run under FastSimulatorImpl is identical to one under ns-3's, event count included",
          "[scheduler]")
{
    for (const char* qp : {"ns3::metaroce::MetaRoceQueuePair", "ns3::metaroce::RoceV2QueuePair"})
    {
        INFO(qp);
        for (const char* sched : {"ns3::MapScheduler", "ns3::metaroce::BucketScheduler"})
        {
            INFO(sched);
            auto ref = RunWith(sched, qp, "ns3::DefaultSimulatorImpl");
            auto fast = RunWith(sched, qp, "ns3::metaroce::FastSimulatorImpl");
            CHECK(ref == fast);
            CHECK(ref[1] > 1000); // events ran
            CHECK(ref[4] > 0);    // and retransmissions
        }
    }
}

namespace
{
/// Drives a simulator implementation through every call of its interface the module and
/// ns-3's helpers make, and logs what is observable: who ran, when, in which context, and
/// what IsExpired, GetDelayLeft and Now said.
std::vector<std::string>
Script(const char* simulator, bool nodeOrder = false)
{
    SimGuard guard;
    GlobalValue::Bind("SimulatorImplementationType", StringValue(simulator));
    Config::SetDefault(
        "ns3::metaroce::FastSimulatorImpl::TieOrder",
        EnumValue(static_cast<int>(nodeOrder ? FastSimulatorImpl::TieOrder::Node
                                             : FastSimulatorImpl::TieOrder::Scheduled)));
    UsePicosecondTime();
    std::vector<std::string> log;
    auto note = [&log](const std::string& what)
    {
        log.push_back(what + "@" + std::to_string(Simulator::Now().GetPicoSeconds()) + "/" +
                      std::to_string(Simulator::GetContext()));
    };
    EventId cancelled = Simulator::Schedule(PicoSeconds(50), [&] { note("never-cancelled"); });
    EventId removed = Simulator::Schedule(PicoSeconds(60), [&] { note("never-removed"); });
    EventId later;
    for (int i = 0; i < 5; ++i)
    {
        // ties at 100 ps: scheduling order decides
        Simulator::Schedule(PicoSeconds(100), [&, i] { note("tie" + std::to_string(i)); });
        Simulator::ScheduleWithContext(7 + i, PicoSeconds(100 - 10 * i),
                                       [&, i]
                                       {
                                           note("ctx" + std::to_string(i));
                                           Simulator::ScheduleNow(
                                               [&, i] { note("now" + std::to_string(i)); });
                                       });
    }
    later = Simulator::Schedule(PicoSeconds(500), [&] { note("later"); });
    Simulator::Schedule(
        PicoSeconds(20),
        [&]
        {
            note("first");
            Simulator::Cancel(cancelled);
            Simulator::Remove(removed);
            note(std::string("expired:") + (Simulator::IsExpired(cancelled) ? "1" : "0") +
                 (Simulator::IsExpired(removed) ? "1" : "0") + (later.IsExpired() ? "1" : "0"));
            note("left:" + std::to_string(Simulator::GetDelayLeft(later).GetPicoSeconds()));
            // The module's shortcut for IsRunning (ns-3's own call under DefaultSimulatorImpl)
            note(std::string("pending:") + (IsPending(cancelled) ? "1" : "0") +
                 (IsPending(removed) ? "1" : "0") + (IsPending(later) ? "1" : "0") +
                 (IsPending(EventId()) ? "1" : "0"));
        });
    EventId skipped = Simulator::ScheduleDestroy([&] { note("never-destroy"); });
    Simulator::ScheduleDestroy([&] { note("destroy"); });
    Simulator::Cancel(skipped);
    Simulator::Stop(PicoSeconds(200));
    Simulator::Run();
    note("stopped:" + std::to_string(Simulator::IsFinished()));
    Simulator::Run(); // resumes with what is left
    note("events:" + std::to_string(Simulator::GetEventCount()) +
         " finished:" + std::to_string(Simulator::IsFinished()));
    Simulator::Destroy();
    Config::SetDefault("ns3::metaroce::FastSimulatorImpl::TieOrder",
                       EnumValue(static_cast<int>(FastSimulatorImpl::TieOrder::Scheduled)));
    return log;
}
} // namespace

TEST_CASE("FastSimulatorImpl in TieOrder node: the same calls, ties by who scheduled them",
          "[scheduler]")
{
    auto ref = Script("ns3::DefaultSimulatorImpl");
    auto node = Script("ns3::metaroce::FastSimulatorImpl", true);
    INFO("ns-3: " << ::Catch::Detail::stringify(ref));
    INFO("node: " << ::Catch::Detail::stringify(node));
    // Cancel, Remove, IsExpired, GetDelayLeft, Stop, Destroy and the event count say the same;
    // only the order of events at one instant differs.
    CHECK(ref != node);
    auto sorted = [](std::vector<std::string> v)
    {
        std::sort(v.begin(), v.end());
        return v;
    };
    CHECK(sorted(ref) == sorted(node));
    // At 100 ps: the program's events (no context) in the order it scheduled them, but what
    // node 7's event scheduled for now runs next, before the program's later ones (ns-3:
    // after every event scheduled before it).
    auto at = [](const std::vector<std::string>& v, const std::string& what)
    { return std::find(v.begin(), v.end(), what) - v.begin(); };
    CHECK(at(node, "now0@100/7") == at(node, "ctx0@100/7") + 1);
    CHECK(at(node, "tie1@100/4294967295") == at(node, "now0@100/7") + 1);
    CHECK(at(ref, "now0@100/7") > at(ref, "tie4@100/4294967295"));
}

TEST_CASE("TieOrder node orders an instant's events by scheduling node and its count, whatever "
          "the order they were scheduled in",
          "[scheduler]")
{
    for (bool swap : {false, true})
    {
        SimGuard guard;
        GlobalValue::Bind("SimulatorImplementationType",
                          StringValue("ns3::metaroce::FastSimulatorImpl"));
        Config::SetDefault("ns3::metaroce::FastSimulatorImpl::TieOrder",
                           EnumValue(static_cast<int>(FastSimulatorImpl::TieOrder::Node)));
        UsePicosecondTime();
        std::vector<std::string> log;
        // Nodes 3 and 5 each schedule two events for 1000 ps into node 9; which node's event
        // runs first here depends on which ran first at 10 ps (swap), as it would depend on the
        // process in a distributed run. Under TieOrder node it does not.
        auto fire = [&log](uint32_t node)
        {
            for (int k = 0; k < 2; ++k)
            {
                Simulator::ScheduleWithContext(
                    9, PicoSeconds(990),
                    [&log, node, k]
                    { log.push_back(std::to_string(node) + "." + std::to_string(k)); });
            }
        };
        Simulator::ScheduleWithContext(swap ? 5 : 3, PicoSeconds(10), [&] { fire(swap ? 5 : 3); });
        Simulator::ScheduleWithContext(swap ? 3 : 5, PicoSeconds(10), [&] { fire(swap ? 3 : 5); });
        // A frame's arrival (tie by link) comes before both.
        Ptr<EventImpl> frame(MakeEvent([&log] { log.push_back("frame"); }), false);
        auto* sim = static_cast<FastSimulatorImpl*>(PeekPointer(Simulator::GetImplementation()));
        REQUIRE(sim->NodeOrder());
        frame->Ref();
        sim->InsertWithTie(PeekPointer(frame), 1000, 9, FastSimulatorImpl::FrameTie(42, 1));
        Simulator::Run();
        CHECK(log == std::vector<std::string>{"frame", "3.0", "3.1", "5.0", "5.1"});
        Simulator::Destroy();
        Config::SetDefault("ns3::metaroce::FastSimulatorImpl::TieOrder",
                           EnumValue(static_cast<int>(FastSimulatorImpl::TieOrder::Scheduled)));
    }
}

TEST_CASE("FastSimulatorImpl keeps ns-3's semantics: order, contexts, cancel, remove, stop, "
          "destroy",
          "[scheduler]")
{
    auto ref = Script("ns3::DefaultSimulatorImpl");
    auto fast = Script("ns3::metaroce::FastSimulatorImpl");
    GlobalValue::Bind("SimulatorImplementationType", StringValue("ns3::DefaultSimulatorImpl"));
    INFO("ns-3: " << ::Catch::Detail::stringify(ref));
    INFO("fast: " << ::Catch::Detail::stringify(fast));
    CHECK(ref == fast);
    REQUIRE(ref.size() == 23);
    CHECK(std::find(ref.begin(), ref.end(), "pending:0010@20/4294967295") != ref.end());
    CHECK(ref.back().rfind("destroy", 0) == 0);
}

namespace
{
/// Counts the calls of PrepareEvent (stage by stage) and of the event itself.
struct PrepareProbe
{
    void Fire(uint32_t) { ++fired; }

    void PrepareEvent(uint32_t, uint32_t stage) const { ++prepared[stage]; }

    uint64_t fired{0};
    mutable uint64_t prepared[PreparedEvent::kStages]{};
};
} // namespace

TEST_CASE("The scheduler prepares reusable events stage by stage, and only them", "[scheduler]")
{
    using Probe = ReusableEvent<PrepareProbe, &PrepareProbe::Fire>;
    PrepareProbe owner;
    Ptr<Probe> ev = Create<Probe>(&owner, 0);
    CHECK(PreparedEvent::Is(PeekPointer(ev)));
    Ptr<EventImpl> foreign(MakeEvent(&Nothing), false); // MakeEvent returns a reference
    CHECK_FALSE(PreparedEvent::Is(PeekPointer(foreign)));

    auto run = [&](uint32_t prepareAbove)
    {
        ObjectFactory f("ns3::metaroce::BucketScheduler");
        f.Set("PrepareAbove", UintegerValue(prepareAbove));
        Ptr<Scheduler> s = f.Create<Scheduler>();
        // 100 firings of the probe among ns-3 events, all in one bucket; one is cancelled.
        std::vector<Ptr<EventImpl>> keep;
        for (uint64_t i = 0; i < 200; ++i)
        {
            Ptr<EventImpl> impl = i % 2 == 0 ? Ptr<EventImpl>(Create<Probe>(&owner, 0))
                                             : Ptr<EventImpl>(MakeEvent(&Nothing), false);
            if (i == 100)
            {
                StaticCast<Probe>(impl)->CancelFiring();
            }
            keep.push_back(impl);
            Scheduler::Event e;
            e.impl = PeekPointer(impl);
            e.key.m_ts = 1000 + i % 7;
            e.key.m_uid = i;
            e.key.m_context = 0;
            s->Insert(e);
        }
        owner = PrepareProbe();
        while (!s->IsEmpty())
        {
            Scheduler::Event e = s->RemoveNext();
            if (!e.impl->IsCancelled())
            {
                e.impl->Invoke();
            }
        }
    };
    run(0); // always prepare
    CHECK(owner.fired == 99);
    for (uint32_t k = 0; k < PreparedEvent::kStages; ++k)
    {
        INFO("stage " << k);
        // Every probe but the cancelled one and those too near the end of the queue.
        CHECK(owner.prepared[k] >= 99 - PreparedEvent::kStages);
        CHECK(owner.prepared[k] <= 99);
    }
    run(1000); // fewer pending than that: no stages
    CHECK(owner.fired == 99);
    CHECK(owner.prepared[0] == 0);
}

TEST_CASE("Prepare stages on every event change no result", "[scheduler]")
{
    // The default threshold keeps the stages off on this small fabric; 0 turns them on.
    for (const char* qp : {"ns3::metaroce::MetaRoceQueuePair", "ns3::metaroce::RoceV2QueuePair"})
    {
        INFO(qp);
        auto off = RunWith("ns3::metaroce::BucketScheduler", qp);
        Config::SetDefault("ns3::metaroce::BucketScheduler::PrepareAbove", UintegerValue(0));
        auto on = RunWith("ns3::metaroce::BucketScheduler", qp);
        Config::SetDefault("ns3::metaroce::BucketScheduler::PrepareAbove", UintegerValue(16384));
        CHECK(off == on);
        CHECK(off[0] > 0);
    }
}

namespace
{
/// Events per packet-hop of one 8 MiB transfer on the 64-NIC fabric: the simulator's own cost
/// budget, counted (not timed), so it is exact and repeatable.
double
EventsPerHop(const char* qpType)
{
    SimGuard guard;
    RdmaWorld w("topologies/fpf-8plane-64.json", qpType);
    auto [a, b] = w.rdma->Connect(3, 40);
    a->PostSend(8 << 20);
    uint64_t ev0 = Simulator::GetEventCount();
    Simulator::Run();
    REQUIRE(b->GetCounters().bytesDelivered == (8u << 20));
    uint64_t hops = 0;
    for (const auto& l : w.fabric->Links())
    {
        for (std::size_t d = 0; d < 2; ++d)
        {
            hops += StaticCast<FabricNetDevice>(l->GetDevice(d))->GetCounters().txPackets;
        }
    }
    return static_cast<double>(Simulator::GetEventCount() - ev0) / static_cast<double>(hops);
}
} // namespace

TEST_CASE("A packet-hop costs under 1.5 events (no per-frame event at idle switch ports)",
          "[scheduler][cost]")
{
    // An uncongested flow: each hop should be one arrival, plus the NIC's end-of-frame
    // event and the transport's timers. Two events per hop (the old port/link design) fails.
    double meta = EventsPerHop("ns3::metaroce::MetaRoceQueuePair");
    double roce = EventsPerHop("ns3::metaroce::RoceV2QueuePair");
    INFO("MetaRoCE " << meta << ", RoCEv2 " << roce << " events per packet-hop");
    CHECK(meta < 1.5);
    CHECK(roce < 1.5);
}
