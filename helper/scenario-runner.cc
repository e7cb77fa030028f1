#include "scenario-runner.h"

#include "fabric-helper.h"
#include "model/fabric/raw-traffic.h"

#include "ns3/log.h"
#include "ns3/rng-seed-manager.h"
#include "ns3/simulator.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <sys/resource.h>

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("ScenarioRunner");

uint64_t
PeakRssBytes()
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<uint64_t>(ru.ru_maxrss) * 1024;
}

namespace
{
/// Destinations of the raw pattern: dst[i] for sender i, or -1 if i does not send.
std::vector<int64_t>
RawDestinations(const RawWorkloadSpec& w, uint32_t n, FastRng& rng)
{
    std::vector<int64_t> dst(n, -1);
    if (w.pattern == "pairs")
    {
        for (uint32_t i = 0; i + 1 < n; i += 2)
        {
            dst[i] = i + 1;
        }
    }
    else if (w.pattern == "incast")
    {
        uint32_t added = 0;
        for (uint32_t i = 0; i < n && added < w.senders; ++i)
        {
            if (i != w.incastTarget)
            {
                dst[i] = w.incastTarget;
                ++added;
            }
        }
    }
    else
    {
        // A random derangement (Sattolo's algorithm gives one cycle: nobody sends to itself).
        std::vector<uint32_t> perm(n);
        std::iota(perm.begin(), perm.end(), 0u);
        for (uint32_t i = n - 1; i > 0; --i)
        {
            uint32_t j = static_cast<uint32_t>(rng.Next() % i);
            std::swap(perm[i], perm[j]);
        }
        for (uint32_t i = 0; i < n; ++i)
        {
            dst[i] = perm[i];
        }
    }
    return dst;
}
} // namespace

RunRecord
RunScenario(const RunSpec& spec, ProgressReporter& progress)
{
    auto wall0 = std::chrono::steady_clock::now();
    // The scenario's seed selects ns-3's run number: independent streams per seed.
    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(spec.seed);
    UsePicosecondTime();

    auto fabric = FabricHelper().Build(spec.topology);
    int64_t stream = 1;
    stream += fabric->AssignStreams(stream);
    double buildS = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();

    for (const auto& f : spec.faults)
    {
        if (f.kind == "loss")
        {
            fabric->SetLossRate(f.rate, f.allPlanes ? -1 : static_cast<int32_t>(f.plane));
        }
        else if (f.kind == "plane_down")
        {
            fabric->SchedulePlaneState(f.plane, MicroSeconds(1) * f.atUs, false);
            if (f.untilUs >= 0)
            {
                fabric->SchedulePlaneState(f.plane, MicroSeconds(1) * f.untilUs, true);
            }
        }
        else
        {
            Ptr<FabricChannel> link = fabric->HostPort(f.nic, f.plane)->GetFabricChannel();
            fabric->ScheduleLinkState(link, MicroSeconds(1) * f.atUs, false);
            if (f.untilUs >= 0)
            {
                fabric->ScheduleLinkState(link, MicroSeconds(1) * f.untilUs, true);
            }
        }
    }

    // Raw workload.
    const RawWorkloadSpec& w = spec.raw;
    const uint32_t n = fabric->NumNics();
    std::vector<Ptr<RawTrafficEndpoint>> eps(n);
    for (uint32_t i = 0; i < n; ++i)
    {
        eps[i] = CreateObject<RawTrafficEndpoint>();
        eps[i]->Install(fabric->Host(i), i);
    }
    FastRng rng(static_cast<uint64_t>(stream++));
    std::vector<int64_t> dst = RawDestinations(w, n, rng);
    const Time stop = MicroSeconds(1) * spec.durationUs;
    const uint32_t wireBytes =
        FabricFrame::Make(Create<Packet>(w.payloadBytes + 16), 0, 0, 0, 0, 0).wireBytes;
    const int64_t portGapPs = static_cast<int64_t>(wireBytes * 8e3 / w.rateGbps);
    uint64_t flows = 0;
    for (uint32_t i = 0; i < n; ++i)
    {
        if (dst[i] < 0)
        {
            continue;
        }
        for (uint32_t p : w.planes)
        {
            for (uint32_t e = 0; e < w.entropiesPerFlow; ++e)
            {
                RawTrafficEndpoint::FlowSpec fs;
                fs.dst = static_cast<uint32_t>(dst[i]);
                fs.port = p;
                fs.entropy = static_cast<uint16_t>(rng.Next());
                fs.payloadBytes = w.payloadBytes;
                fs.rate = DataRate(static_cast<uint64_t>(w.rateGbps * 1e9 / w.entropiesPerFlow));
                // Sub-flow e starts e port-packet-times late: together they are smooth.
                fs.start = PicoSeconds(portGapPs * e);
                fs.stop = stop;
                eps[i]->AddFlow(fs);
                ++flows;
            }
        }
    }

    progress.Start(spec.scenario + "/" + spec.variant, stop);
    auto run0 = std::chrono::steady_clock::now();
    uint64_t ev0 = Simulator::GetEventCount();
    Simulator::Run();
    progress.Finish();
    double runS = std::chrono::duration<double>(std::chrono::steady_clock::now() - run0).count();
    uint64_t events = Simulator::GetEventCount() - ev0;

    uint64_t sent = 0;
    uint64_t received = 0;
    uint64_t payload = 0;
    uint64_t outOfOrder = 0;
    int64_t latSum = 0;
    int64_t latMax = 0;
    for (const auto& ep : eps)
    {
        sent += ep->GetSentPackets();
        const auto& s = ep->GetSinkStats();
        received += s.packets;
        payload += s.payloadBytes;
        outOfOrder += s.outOfOrder;
        latSum += s.latencySumPs;
        latMax = std::max(latMax, s.latencyMaxPs);
    }
    auto t = fabric->CollectTotals();
    uint64_t maxBuffer = 0;
    for (const auto& sw : fabric->Switches())
    {
        maxBuffer = std::max(maxBuffer, sw->GetCounters().maxBufferUsed);
    }
    // Goodput: payload of frames sent during the run (and delivered), over the run's length.
    const double perUs = 8.0 / (spec.durationUs * 1e3);
    RunRecord rec;
    rec.scenario = spec.scenario;
    rec.variant = spec.variant;
    rec.parameters = spec.resolved;
    rec.metrics = {
        {"offered_goodput_gbps", static_cast<double>(sent) * w.payloadBytes * perUs},
        {"delivered_goodput_gbps", payload * perUs},
        {"delivery_ratio", sent ? static_cast<double>(received) / sent : 0.0},
        {"mean_latency_us", received ? latSum / 1e6 / received : 0.0},
        {"max_latency_us", latMax / 1e6},
        {"max_switch_buffer_bytes", maxBuffer},
        {"duration_us", spec.durationUs},
    };
    rec.counters = {
        {"flows", flows},
        {"packets_sent", sent},
        {"packets_delivered", received},
        {"out_of_order", outOfOrder},
        {"drops_buffer", t.switchDropsBuffer},
        {"drops_no_route", t.switchDropsNoRoute},
        {"drops_link_down", t.portDropsLinkDown},
        {"drops_corrupt", t.portDropsCorrupt},
        {"lost_in_flight", t.lostInFlight},
        {"ecn_marks", t.ecnMarks},
        {"pfc_pauses", t.pauses},
        {"switch_forwards", t.forwarded},
    };
    rec.cost = {
        {"build_wall_s", buildS},
        {"run_wall_s", runS},
        {"events", events},
        {"events_per_wall_s", runS > 0 ? events / runS : 0.0},
        {"peak_rss_bytes", PeakRssBytes()},
        {"switches", fabric->Switches().size()},
        {"links", fabric->Links().size()},
    };
    eps.clear();
    fabric.reset();
    Simulator::Destroy();
    return rec;
}

} // namespace metaroce
} // namespace ns3
