#include "helper/run/scenario-runner.h"

#include "helper/fabric-helper.h"
#include "helper/mpi/distributed-run.h"
#include "helper/rdma-helper.h"
#include "helper/run/run-context.h"
#include "helper/run/run-supervisor.h"
#include "helper/run/run-watchdog.h"
#include "helper/scenario/json-reader.h"
#include "helper/scenario/memory-estimate.h"
#include "helper/trace/trace-replay.h"
#include "model/collective/communicator.h"
#include "model/core/fast-simulator-impl.h"
#include "model/fabric/raw-traffic.h"
#include "model/metaroce/metaroce-queue-pair.h"
#include "model/transport/scale-up.h"

#include "ns3/config.h"
#include "ns3/log.h"
#include "ns3/object-factory.h"
#include "ns3/rng-seed-manager.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <sys/resource.h>

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("ScenarioRunner");

uint64_t
PeakRssBytes()
{
    // VmHWM, this program's own peak: getrusage's ru_maxrss keeps the peak of the process
    // image before exec, so a run started by a large parent (a Python script that loaded
    // matplotlib: 47 MB) reported that as its own.
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
    {
        if (line.rfind("VmHWM:", 0) == 0)
        {
            return std::stoull(line.substr(6)) * 1024; // "VmHWM:   123456 kB"
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<uint64_t>(ru.ru_maxrss) * 1024;
}

namespace
{
/// What does not run on several processes, and why (InputError naming the key).
void
RefuseOnSeveralProcesses(const RunSpec& spec, const DistributedRun& d)
{
    if (spec.workloadKind != "raw" && d.StopAfter().IsStrictlyPositive())
    {
        // Every workload but raw runs in parts (Stop, Run, decide together, again), and ns-3
        // 3.37's NullMessageSimulatorImpl::Run serves one call: each call runs
        // InitializeNullMessageEvents again (its NS_ASSERT(!g_initialized) is compiled out),
        // which sends every peer a guarantee of the bare link delay, an instant long past
        // (RemoteChannelBundle::SetGuaranteeTime takes it: its NS_ASSERT is compiled out too):
        // a peer's safe time falls back behind its next event, and both processes may wait
        // for a message the other will not send. Seen with this check lifted: a 1 MiB
        // all-reduce on 64 NICs and 2 processes hung in 3 of 5 tries (tree 2 of 4, ring 1 of
        // 1; 0.5 s under the own engine), both processes blocked in
        // NullMessageSimulatorImpl::HandleArrivingMessagesBlocking inside a window's Run.
        throw InputError("SimulatorImplementationType: ns3::NullMessageSimulatorImpl runs raw "
                         "traffic only on several processes (the windowed runs of '" +
                         spec.workloadKind + "' do not end under it)");
    }
    // A step that starts when every rank of a collective has finished (the next iteration,
    // the next stage of a job) is a barrier of zero duration over all ranks: the process
    // that sees the last rank finish cannot tell the others before they have simulated past
    // that instant (frames between processes take the lookahead), so it would need a model
    // with a barrier latency, or a different one (each rank going on by itself).
    const std::string why = ": the next one starts the instant the last rank finishes (a "
                            "zero-time barrier over processes); on several processes run one";
    if (spec.workloadKind == "collective" &&
        spec.collective.warmupIterations + spec.collective.iterations > 1)
    {
        throw InputError(
            "workload.iterations: " + std::to_string(spec.collective.warmupIterations) +
            " warm-up and " + std::to_string(spec.collective.iterations) + " timed iterations" +
            why + " (warmup_iterations 0, iterations 1)");
    }
    if (spec.workloadKind == "job")
    {
        std::size_t stages = 0;
        for (const auto& ph : spec.job.phases)
        {
            stages += ph.withPrevious && stages > 0 ? 0 : 1;
        }
        if (stages * spec.job.iterations > 1)
        {
            throw InputError("workload.job: " + std::to_string(stages) + " stages x " +
                             std::to_string(spec.job.iterations) + " iterations" + why +
                             " stage once (phases with_previous, iterations 1)");
        }
    }
    if (spec.workloadKind == "streams" && spec.timeseriesBinUs > 0)
    {
        // Its samples read every QP at one instant; combining them is not built yet.
        throw InputError("outputs.timeseries_bin_us: time series do not come from several "
                         "processes yet");
    }
    if (spec.workloadKind == "streams" && spec.flowsOutput)
    {
        throw InputError("outputs.flows: per-flow records do not come from several processes "
                         "yet");
    }
    if (spec.workloadKind == "trace")
    {
        // A replayed group's collective starts the instant its last member reaches it.
        throw InputError("workload.kind: 'trace': a group's collective starts the instant its "
                         "last member reaches it (a zero-time barrier over processes); raw, "
                         "streams, collective and job run on several processes");
    }
}

/// One world: builds the fabric, runs the workload, collects the fabric's counters.
std::vector<RunRecord>
RunWorld(const RunSpec& spec, ProgressReporter& progress)
{
    auto wall0 = std::chrono::steady_clock::now();
    uint64_t startRss = PeakRssBytes();
    // The scenario's seed selects ns-3's run number: independent streams per seed.
    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(spec.seed);
    UsePicosecondTime();

    SetRunPhase("building the fabric");
    auto fabric = FabricHelper().Build(spec.topology);
    SetRunPhase("installing the workload");
    int64_t stream = 1;
    stream += fabric->AssignStreams(stream);
    if (DistributedRun* d = CurrentDistributedRun())
    {
        if (d->RunsInParts())
        {
            RefuseOnSeveralProcesses(spec, *d);
        }
        d->Distribute(*fabric);
    }
    double buildS = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    uint64_t buildRss = PeakRssBytes();
    ScheduleFaults(*fabric, spec.faults);
    for (const auto& f : spec.pcapFiles)
    {
        Fabric::EnablePcapFile(f.path, fabric->HostPort(f.nic, f.plane));
    }

    std::vector<RunRecord> recs(1);
    RunRecord& rec = recs[0];
    rec.scenario = spec.scenario;
    rec.variant = spec.variant;
    rec.parameters = spec.resolved;
    auto run0 = std::chrono::steady_clock::now();
    uint64_t ev0 = Simulator::GetEventCount();
    if (spec.workloadKind == "raw")
    {
        RunRaw(spec, *fabric, stream, progress, rec);
    }
    else if (spec.workloadKind == "streams")
    {
        RunStreams(spec, *fabric, stream, progress, rec);
    }
    else if (spec.workloadKind == "collective")
    {
        recs = RunCollective(spec, *fabric, stream, progress);
    }
    else if (spec.workloadKind == "trace")
    {
        recs = RunTrace(spec, *fabric, stream, progress);
    }
    else
    {
        recs = RunJob(spec, *fabric, stream, progress);
    }
    RunRecord& head = recs.front();
    double runS = std::chrono::duration<double>(std::chrono::steady_clock::now() - run0).count();
    uint64_t events = Simulator::GetEventCount() - ev0;

    auto t = fabric->CollectTotals();
    uint64_t maxBuffer = 0;
    uint64_t pausedNow = 0;
    uint64_t hops = 0; // link transmissions of every frame, data and control
    for (const auto& sw : fabric->Switches())
    {
        maxBuffer = std::max(maxBuffer, sw->GetCounters().maxBufferUsed);
    }
    for (const auto& l : fabric->Links())
    {
        for (std::size_t d = 0; d < 2; ++d)
        {
            auto dev = StaticCast<FabricNetDevice>(l->GetDevice(d));
            pausedNow += dev->IsPaused(3) ? 1 : 0;
            hops += dev->GetCounters().txPackets;
        }
    }
    if (DistributedRun* d = CurrentDistributedRun())
    {
        // Each process's part: the copies of the others' nodes saw no traffic.
        std::vector<uint64_t> sums{t.switchDropsBuffer,
                                   t.switchDropsNoRoute,
                                   t.portDropsLinkDown,
                                   t.portDropsCorrupt,
                                   t.lostInFlight,
                                   t.ecnMarks,
                                   t.pauses,
                                   pausedNow,
                                   hops,
                                   t.forwarded};
        std::vector<int64_t> maxima{static_cast<int64_t>(maxBuffer)};
        d->Sum(sums);
        d->Max(maxima);
        t.switchDropsBuffer = sums[0];
        t.switchDropsNoRoute = sums[1];
        t.portDropsLinkDown = sums[2];
        t.portDropsCorrupt = sums[3];
        t.lostInFlight = sums[4];
        t.ecnMarks = sums[5];
        t.pauses = sums[6];
        pausedNow = sums[7];
        hops = sums[8];
        t.forwarded = sums[9];
        maxBuffer = static_cast<uint64_t>(maxima[0]);
    }
    head.metrics["max_switch_buffer_bytes"] = maxBuffer;
    head.counters["drops_buffer"] = t.switchDropsBuffer;
    head.counters["drops_no_route"] = t.switchDropsNoRoute;
    head.counters["drops_link_down"] = t.portDropsLinkDown;
    head.counters["drops_corrupt"] = t.portDropsCorrupt;
    head.counters["lost_in_flight"] = t.lostInFlight;
    head.counters["ecn_marks"] = t.ecnMarks;
    head.counters["pfc_pauses"] = t.pauses;
    // A port still paused when the run ends never got its RESUME: a possible PFC deadlock.
    head.counters["pfc_ports_paused_at_end"] = pausedNow;
    head.counters["switch_forwards"] = t.forwarded;
    head.cost = {
        {"build_wall_s", buildS},
        {"run_wall_s", runS},
        {"events", events},
        {"events_per_wall_s", runS > 0 ? events / runS : 0.0},
        {"packet_hops", hops},
        {"packet_hops_per_wall_s", runS > 0 ? hops / runS : 0.0},
        {"peak_rss_bytes", PeakRssBytes()},
        {"start_rss_bytes", startRss},
        {"build_peak_rss_bytes", buildRss},
        {"switches", fabric->Switches().size()},
        {"links", fabric->Links().size()},
        {"queue_pairs", fabric->GetQueuePairs()},
        {"simulated_us", Simulator::Now().GetMicroSeconds()},
    };
    // Which simulator ran it, and how it ordered events at the same time: results depend on
    // that order as on a seed (TieOrder node: the same on any number of processes).
    {
        Ptr<SimulatorImpl> impl = Simulator::GetImplementation();
        head.cost["simulator"] = impl->GetInstanceTypeId().GetName();
        if (auto fast = DynamicCast<FastSimulatorImpl>(impl))
        {
            head.cost["tie_order"] = fast->NodeOrder() ? "node" : "scheduled";
        }
    }
    if (DistributedRun* d = CurrentDistributedRun())
    {
        head.cost["distributed"] = d->RankCosts(events, PeakRssBytes());
    }
    fabric.reset();
    Simulator::Destroy();
    return recs;
}
} // namespace

std::vector<RunRecord>
RunScenario(const RunSpec& spec, ProgressReporter& progress)
{
    if (spec.workloadKind != "collective")
    {
        return RunWorld(spec, progress);
    }
    // Each size in a world of its own, seeded alike: a size's result cannot depend on the
    // sizes run before it (no congestion-control, rate-hint or queue state carries over).
    // Warm-up iterations within a size play nccl-tests' part.
    std::vector<RunRecord> out;
    for (uint64_t size : spec.collective.sizes)
    {
        RunSpec one = spec;
        one.collective.sizes = {size};
        for (auto& rec : RunWorld(one, progress))
        {
            out.push_back(std::move(rec));
        }
    }
    return out;
}

nlohmann::json
CollectiveChoices(const RunSpec& spec)
{
    if (spec.workloadKind != "collective")
    {
        return nullptr;
    }
    const CollectiveWorkloadSpec& w = spec.collective;
    uint32_t k = w.placement == "explicit"
                     ? static_cast<uint32_t>(w.nics.size())
                     : (w.ranks == 0 ? spec.topology.Accelerators() : w.ranks);
    CollectiveConfig cfg = CollectiveConfigOf(spec);
    if (k % cfg.ranksPerHost != 0)
    {
        cfg.ranksPerHost = 1; // a group spread unevenly over hosts: one rank per node
    }
    nlohmann::json out = nlohmann::json::array();
    for (uint64_t size : w.sizes)
    {
        CollectiveChoice c =
            Communicator::ChooseFor(CollectiveOpOf(w.op), CollectiveAlgorithmOf(w.algorithm), size,
                                    k, spec.topology.AcceleratorBytesPerSecond(), cfg);
        nlohmann::json e = {{"size_bytes", size},
                            {"algorithm", ToString(c.algorithm)},
                            {"protocol", ToString(c.protocol)},
                            {"channels", c.channels}};
        if (c.modelUs >= 0)
        {
            e["nccl_model_us"] = c.modelUs;
        }
        out.push_back(e);
    }
    return out;
}

} // namespace metaroce
} // namespace ns3
