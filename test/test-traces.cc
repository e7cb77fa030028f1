// Trace sources and Config paths as an ns-3 user reaches them: the NIC aggregated to its
// host, its QPs by QPN, TracedValues that report what the objects' getters say, and tracing
// that changes no result.
#include "helper/fabric-helper.h"
#include "helper/rdma-helper.h"
#include "model/metaroce/metaroce-queue-pair.h"
#include "model/rocev2/rocev2-queue-pair.h"
#include "test-util.h"

#include "ns3/boolean.h"
#include "ns3/config.h"
#include "ns3/string.h"

#include <catch2/catch.hpp>
#include <map>
#include <sstream>

using namespace ns3;
using namespace ns3::metaroce;
using namespace ns3::metaroce::test;

namespace
{
const char* kLab = "topologies/fpf-8x100g-lab.json";

std::string
QpPath(Ptr<Node> host, uint32_t qpn, const std::string& source)
{
    std::ostringstream os;
    os << "/NodeList/" << host->GetId() << "/$ns3::metaroce::RdmaNic/QueuePairList/" << qpn << "/"
       << source;
    return os.str();
}

/// What the window sinks of one MetaRoCE QP saw.
struct WindowLog
{
    Ptr<MetaRoceQueuePair> qp;
    std::map<uint32_t, double> paths; //!< path -> window, as PathWindow reported it
    uint32_t qwndCalls{0};
    uint32_t pathCalls{0};
    uint32_t mismatches{0}; //!< QpWindow values that differ from the QP's getter or the paths
    double firstQwnd{-1};
    double lastQwnd{0};

    void Qwnd(std::string context, double oldV, double newV)
    {
        ++qwndCalls;
        firstQwnd = firstQwnd < 0 ? newV : firstQwnd;
        lastQwnd = newV;
        double sum = 0;
        for (const auto& [path, w] : paths)
        {
            sum += w;
        }
        if (newV != qp->GetQpWindowBytes() || newV != sum || oldV == newV)
        {
            ++mismatches;
        }
    }

    void Path(uint32_t path, double oldV, double newV)
    {
        ++pathCalls;
        if (paths[path] != oldV)
        {
            ++mismatches; // the old value is the one reported before
        }
        paths[path] = newV;
        const auto v = qp->GetPath(path);
        if (newV != (v.state == MetaRoceQueuePair::PATH_ACTIVE ? v.cwndBytes : 0))
        {
            ++mismatches;
        }
    }
};
} // namespace

TEST_CASE("Traces: an RdmaNic is aggregated to its host and reachable by Config path", "[traces]")
{
    SimGuard guard;
    RdmaWorld w(kLab, "ns3::metaroce::MetaRoceQueuePair");
    auto [tx, rx] = w.rdma->Connect(0, 1);
    Ptr<Node> host = w.fabric->Host(0);
    CHECK(host->GetObject<RdmaNic>() == w.rdma->Nic(0));
    auto nics = Config::LookupMatches("/NodeList/*/$ns3::metaroce::RdmaNic");
    CHECK(nics.GetN() == 2);
    auto qps = Config::LookupMatches("/NodeList/" + std::to_string(host->GetId()) +
                                     "/$ns3::metaroce::RdmaNic/QueuePairList/*");
    REQUIRE(qps.GetN() == 1);
    CHECK(qps.Get(0) == tx);
}

TEST_CASE("Traces: Config::Connect to a MetaRoCE QP's window reports what the QP reports",
          "[traces]")
{
    SimGuard guard;
    RdmaWorld w(kLab, "ns3::metaroce::MetaRoceQueuePair");
    w.rdma->QpFactory().Set("OpenPathsOnFirstUse", BooleanValue(false)); // all paths at once
    auto [a, b] = w.rdma->Connect(0, 1);
    auto tx = StaticCast<MetaRoceQueuePair>(a);
    WindowLog log;
    log.qp = tx;
    // PathWindow first: each QpWindow call then finds the paths' windows up to date.
    Config::ConnectWithoutContext(QpPath(w.fabric->Host(0), tx->GetQpn(), "PathWindow"),
                                  MakeCallback(&WindowLog::Path, &log));
    Config::Connect(QpPath(w.fabric->Host(0), tx->GetQpn(), "QpWindow"),
                    MakeCallback(&WindowLog::Qwnd, &log));
    std::map<uint32_t, int64_t> srtt;
    uint32_t rttMismatches = 0;
    tx->TraceConnectWithoutContext(
        "PathRtt", Callback<void, uint32_t, Time, Time>(
                       [&](uint32_t path, Time oldV, Time newV)
                       {
                           rttMismatches += srtt[path] != oldV.GetPicoSeconds();
                           rttMismatches += tx->GetPath(path).srttPs != newV.GetPicoSeconds();
                           srtt[path] = newV.GetPicoSeconds();
                       }));
    std::map<PathEvent, uint32_t> events;
    tx->TraceConnectWithoutContext("PathEvent",
                                   Callback<void, uint32_t, uint32_t, PathEvent>(
                                       [&](uint32_t, uint32_t, PathEvent e) { ++events[e]; }));
    uint32_t sent = 0;
    tx->TraceConnectWithoutContext("SendComplete",
                                   Callback<void, uint16_t, uint32_t, uint64_t, Time>(
                                       [&](uint16_t, uint32_t, uint64_t bytes, Time)
                                       { sent += bytes == (8u << 20); }));
    tx->PostSend(8 << 20);
    Simulator::Run();
    const auto cfg = tx->GetPathCounters();
    INFO("QpWindow calls " << log.qwndCalls << ", PathWindow calls " << log.pathCalls);
    CHECK(log.qwndCalls > 10);
    CHECK(log.pathCalls > 10);
    CHECK(log.mismatches == 0);
    // MinPathsPerPlane x planes x InitialPathWindow x MTU
    CHECK(log.firstQwnd == 8 * 12 * 2 * 4096.0);
    CHECK(log.lastQwnd == tx->GetQpWindowBytes());
    CHECK(log.lastQwnd > log.firstQwnd); // the windows grew from their start
    CHECK(srtt.size() == 8 * 12);
    CHECK(rttMismatches == 0);
    CHECK(events[PathEvent::Opened] == cfg.pathsOpened);
    CHECK(sent == 1);
}

TEST_CASE("Traces: connecting every trace of a run changes none of its results", "[traces]")
{
    auto finish = [](bool traced)
    {
        SimGuard guard;
        RdmaWorld w(kLab, "ns3::metaroce::MetaRoceQueuePair");
        auto [tx, rx] = w.rdma->Connect(0, 1);
        uint64_t calls = 0;
        if (traced)
        {
            auto count = Callback<void, std::string, double, double>(
                [&](std::string, double, double) { ++calls; });
            Config::Connect("/NodeList/*/$ns3::metaroce::RdmaNic/QueuePairList/*/QpWindow", count);
            Config::Connect("/NodeList/*/$ns3::metaroce::RdmaNic/QueuePairList/*/Rate", count);
            Config::Connect("/NodeList/*/DeviceList/*/$ns3::metaroce::FabricNetDevice/QueueBytes",
                            Callback<void, std::string, uint64_t, uint64_t>(
                                [&](std::string, uint64_t, uint64_t) { ++calls; }));
        }
        int64_t done = -1;
        tx->PostSend(16 << 20, 0, [&](const RdmaCompletion& c) { done = c.completedPs; });
        Simulator::Run();
        CHECK((calls > 0) == traced);
        return std::make_pair(done, tx->GetCounters().dataPacketsSent);
    };
    const auto plain = finish(false);
    const auto traced = finish(true);
    CHECK(plain.first > 0);
    CHECK(plain == traced);
}

TEST_CASE("Traces: DCQCN's rate and a port's queue depth as TracedValues", "[traces]")
{
    SimGuard guard;
    auto topo = SmallFpf(4, 1, 4);
    topo["switch"] = {
        {"pfc", true}, {"ecn_kmin_bytes", 20000}, {"ecn_kmax_bytes", 100000}, {"ecn_pmax", 0.2}};
    RdmaWorld w(topo, "ns3::metaroce::RoceV2QueuePair");
    w.rdma->QpFactory().Set("CongestionControl", StringValue("ns3::metaroce::Dcqcn"));
    auto [a, ar] = w.rdma->Connect(0, 2);
    auto [b, br] = w.rdma->Connect(1, 2);
    auto qa = StaticCast<RoceV2QueuePair>(a);
    uint32_t rateCalls = 0;
    uint32_t rateMismatches = 0;
    double lowest = 1e12;
    double firstNew = -1;
    Config::ConnectWithoutContext(QpPath(w.fabric->Host(0), a->GetQpn(), "Rate"),
                                  Callback<void, double, double>(
                                      [&](double, double v)
                                      {
                                          firstNew = firstNew < 0 ? v : firstNew;
                                          ++rateCalls;
                                          rateMismatches += v != qa->GetRateBps();
                                          lowest = std::min(lowest, v);
                                      }));
    // The port into NIC 2: the incast's queue.
    Ptr<FabricNetDevice> into = StaticCast<FabricNetDevice>(w.fabric->Host(2)->GetDevice(0));
    Ptr<FabricNetDevice> port = Ptr<FabricNetDevice>(into->GetPeer());
    uint64_t highest = 0;
    uint32_t queueMismatches = 0;
    port->TraceConnectWithoutContext("QueueBytes", Callback<void, uint64_t, uint64_t>(
                                                       [&](uint64_t, uint64_t v)
                                                       {
                                                           queueMismatches +=
                                                               v != port->GetQueueBytes();
                                                           highest = std::max(highest, v);
                                                       }));
    a->PostSend(4 << 20);
    b->PostSend(4 << 20);
    Simulator::Run();
    CHECK(rateCalls > 0);
    CHECK(rateMismatches == 0);
    CHECK(firstNew == 100e9); // the line rate when the QP starts
    CHECK(lowest < 50e9);     // DCQCN cut the rate below half the 100G line
    CHECK(queueMismatches == 0);
    CHECK(highest > 0);
    CHECK(highest == port->GetCounters().maxQueueBytes);
}
