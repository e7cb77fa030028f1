// Collective, job and trace workloads: NCCL collectives through Communicator.
#include "helper/mpi/distributed-run.h"
#include "helper/run/run-context.h"
#include "helper/run/run-supervisor.h"
#include "helper/trace/trace-replay.h"

#include "ns3/simulator.h"

#include <algorithm>
#include <climits>
#include <numeric>
#include <sstream>
#include <vector>

namespace ns3
{
namespace metaroce
{

/// A collective over a list of sizes, each repeated `iterations` times, back to back.
std::vector<RunRecord>
RunCollective(const RunSpec& spec, Fabric& fabric, int64_t& stream, ProgressReporter& progress)
{
    const CollectiveWorkloadSpec& w = spec.collective;
    TransportSetup setup(spec.transport, fabric, stream);
    const QueuePairFactory& qpf = setup.rdma.QpFactory();
    // Ranks live on accelerators, each served by its NIC.
    const std::vector<Ptr<RdmaNic>> nics = AcceleratorNics(spec.topology, setup.nics);
    const uint32_t accelerators = static_cast<uint32_t>(nics.size());
    // Placement of ranks on accelerators.
    uint32_t n = w.ranks == 0 ? accelerators : w.ranks;
    std::vector<uint32_t> ranks =
        PlaceRanks(w.placement, w.stride, w.nics, n, accelerators, stream);
    auto scaleUp = BuildScaleUp(spec.topology);
    CollectiveConfig cfg = CollectiveConfigOf(spec);
    cfg.scaleUp = scaleUp.get();
    // On several processes (one size, one iteration: RunWorld refuses more) each process
    // runs its ranks' part; the parts are combined below.
    DistributedRun* several = SeveralProcesses();
    cfg.isLocal = LocalAccelerators(fabric, spec.topology, nics);
    Communicator comm(ranks, &nics, qpf, cfg);
    int64_t startPs = 0;

    struct SizeResult
    {
        std::vector<CollectiveResult> iters;
    };

    std::vector<SizeResult> results(w.sizes.size());
    std::size_t sizeIdx = 0;
    uint32_t iter = 0;
    std::function<void()> next;
    const uint32_t perSize = w.warmupIterations + w.iterations;
    std::function<void(const CollectiveResult&)> onDone = [&](const CollectiveResult& r)
    {
        if (iter >= w.warmupIterations)
        {
            results[sizeIdx].iters.push_back(r); // timed
        }
        if (++iter == perSize)
        {
            iter = 0;
            ++sizeIdx;
        }
        if (sizeIdx < w.sizes.size())
        {
            next();
        }
        else if (several == nullptr)
        {
            Simulator::Stop();
        }
    };
    next = [&]()
    {
        startPs = Simulator::Now().GetPicoSeconds();
        bool last = sizeIdx + 1 == w.sizes.size() && iter + 1 == perSize;
        comm.Start(CollectiveOpOf(w.op), CollectiveAlgorithmOf(w.algorithm), w.sizes[sizeIdx],
                   onDone, last);
    };
    Simulator::ScheduleNow(next);
    Time limit = MicroSeconds(1) * spec.durationUs;
    RunSupervisor supervisor(spec, fabric, &setup.nics, Time(0));
    supervisor.SetBetweenWindows([&comm](DistributedRun& d) { ExchangeRetired(d, {&comm}); });
    supervisor.Run(progress, limit,
                   [&]() { return sizeIdx == w.sizes.size() || comm.LocalRanks() == 0; });

    QueuePair::Counters sum = comm.SendCounters();
    uint64_t qps = comm.QueuePairs();
    if (several != nullptr)
    {
        // The collective ended when every process's ranks did: its end is the latest
        // rank's, its fastest rank the earliest; counters are sums over the processes.
        const bool mine = sizeIdx == w.sizes.size() || comm.LocalRanks() == 0;
        const bool has = !results[0].iters.empty();
        const CollectiveResult local = has ? results[0].iters[0] : CollectiveResult{};
        std::vector<uint64_t> sums{mine ? 1u : 0u, qps, sum.retransmittedPackets, sum.timeouts,
                                   sum.dataPacketsSent};
        std::vector<int64_t> maxima{has ? local.endPs : INT64_MIN,
                                    static_cast<int64_t>(local.wireBytesPerRank),
                                    static_cast<int64_t>(local.messages)};
        std::vector<int64_t> minima{has ? local.fastestRankPs : INT64_MAX};
        several->Sum(sums);
        several->Max(maxima);
        several->Min(minima);
        qps = sums[1];
        sum.retransmittedPackets = sums[2];
        sum.timeouts = sums[3];
        sum.dataPacketsSent = sums[4];
        results[0].iters.clear();
        sizeIdx = 0;
        if (sums[0] == several->Ranks())
        {
            const CollectiveChoice c =
                comm.Choose(CollectiveOpOf(w.op), CollectiveAlgorithmOf(w.algorithm), w.sizes[0]);
            CollectiveResult r;
            r.op = CollectiveOpOf(w.op);
            r.algorithm = c.algorithm;
            r.protocol = c.protocol;
            r.ncclModelUs = c.modelUs;
            r.bytes = w.sizes[0];
            r.ranks = n;
            r.channels = c.channels;
            r.startPs = startPs;
            r.endPs = maxima[0];
            r.fastestRankPs = minima[0];
            r.messages = static_cast<uint64_t>(maxima[2]);
            r.wireBytesPerRank = static_cast<uint64_t>(maxima[1]);
            results[0].iters.push_back(r);
            sizeIdx = 1;
        }
    }
    std::vector<RunRecord> out;
    for (std::size_t i = 0; i < w.sizes.size(); ++i)
    {
        RunRecord rec;
        rec.scenario = spec.scenario;
        rec.variant = spec.variant;
        rec.parameters = spec.resolved;
        const auto& it = results[i].iters;
        rec.metrics["size_bytes"] = w.sizes[i];
        rec.metrics["count"] = w.sizes[i] / 4; // nccl-tests' float elements
        rec.metrics["op"] = w.op;
        // nccl-tests' columns: float elements, sum where the op reduces, no root, and no data
        // to check (the simulator moves no values): #wrong is N/A, as with nccl-tests -c 0.
        rec.metrics["type"] = "float";
        rec.metrics["redop"] = w.op == "allreduce" || w.op == "reducescatter" ? "sum" : "none";
        rec.metrics["root"] = -1;
        rec.metrics["wrong"] = "N/A";
        rec.metrics["ranks"] = n;
        rec.metrics["warmup_iterations"] = w.warmupIterations;
        rec.metrics["iterations"] = w.iterations;
        if (it.size() < w.iterations)
        {
            // The duration limit ended the sweep before this size finished.
            rec.metrics["completed"] = false;
            out.push_back(rec);
            continue;
        }
        double t = 0;
        double spread = 0;
        for (const auto& r : it)
        {
            t += (r.endPs - r.startPs) / 1e6;
            spread += (r.endPs - r.fastestRankPs) / 1e6;
        }
        t /= it.size();
        spread /= it.size();
        double algbw = t > 0 ? w.sizes[i] / (t * 1e-6) / 1e9 : 0.0;
        rec.metrics["completed"] = true;
        rec.metrics["algorithm"] = ToString(it[0].algorithm);
        // What NCCL would run it with, and NCCL's own estimate (the wire carries Simple).
        rec.metrics["protocol"] = ToString(it[0].protocol);
        if (it[0].ncclModelUs >= 0)
        {
            rec.metrics["nccl_model_us"] = it[0].ncclModelUs;
        }
        rec.metrics["channels"] = it[0].channels;
        rec.metrics["time_us"] = t;
        rec.metrics["algbw_gbytes_per_s"] = algbw;
        rec.metrics["busbw_gbytes_per_s"] = algbw * BusBwFactor(CollectiveOpOf(w.op), n);
        rec.metrics["rank_spread_us"] = spread;
        rec.metrics["wire_bytes_per_rank"] = it[0].wireBytesPerRank;
        rec.counters["messages"] = it[0].messages;
        out.push_back(rec);
    }
    if (!out.empty())
    {
        out[0].counters["qps"] = qps;
        out[0].counters["retransmitted_packets"] = sum.retransmittedPackets;
        out[0].counters["timeouts"] = sum.timeouts;
        out[0].counters["data_packets_sent"] = sum.dataPacketsSent;
        std::ostringstream left;
        left << w.sizes.size() - std::min(sizeIdx, w.sizes.size()) << " of " << w.sizes.size()
             << " sizes unfinished (from " << (sizeIdx < w.sizes.size() ? w.sizes[sizeIdx] : 0)
             << " bytes on)";
        supervisor.Finish(out[0], left.str());
        for (auto& r : out)
        {
            r.metrics["ended_by"] = out[0].metrics["ended_by"];
        }
    }
    return out;
}

/// A job: phases of collectives on groups of ranks, concurrent or in sequence, repeated.
std::vector<RunRecord>
RunJob(const RunSpec& spec, Fabric& fabric, int64_t& stream, ProgressReporter& progress)
{
    const JobWorkloadSpec& job = spec.job;
    TransportSetup setup(spec.transport, fabric, stream);
    const QueuePairFactory& qpf = setup.rdma.QpFactory();
    const std::vector<Ptr<RdmaNic>> nics = AcceleratorNics(spec.topology, setup.nics);
    const uint32_t n = job.ranks == 0 ? static_cast<uint32_t>(nics.size()) : job.ranks;

    struct PhaseRun
    {
        std::vector<std::unique_ptr<Communicator>> comms;
        std::vector<double> timeUs;    //!< per iteration: stage start to the last group's end
        std::vector<double> fastestUs; //!< per iteration: to the first group's end
        int64_t firstEndPs{-1};
        int64_t lastEndPs{-1};
        std::vector<int64_t> groupEndPs; //!< per group: when its ranks here finished (-1: none)
        std::string algorithm;
    };

    auto scaleUp = BuildScaleUp(spec.topology);
    CollectiveConfig jobCfg;
    jobCfg.scaleUp = scaleUp.get();
    jobCfg.endpoint = BuildEndpoint(spec.topology);
    // On several processes (one stage, once: RunWorld refuses more) each process runs its
    // ranks' part of every group; the parts are combined below.
    DistributedRun* several = SeveralProcesses();
    jobCfg.isLocal = LocalAccelerators(fabric, spec.topology, nics);
    bool localDone = false;
    std::vector<PhaseRun> phases(job.phases.size());
    for (std::size_t p = 0; p < job.phases.size(); ++p)
    {
        const JobPhaseSpec& ph = job.phases[p];
        uint32_t groups = n / ph.groupSize;
        for (uint32_t g = 0; g < groups; ++g)
        {
            std::vector<uint32_t> ranks(ph.groupSize);
            for (uint32_t i = 0; i < ph.groupSize; ++i)
            {
                ranks[i] = ph.layout == "contiguous" ? g * ph.groupSize + i : g + i * groups;
            }
            phases[p].comms.push_back(std::make_unique<Communicator>(ranks, &nics, qpf, jobCfg));
        }
    }
    // Stages: a phase marked with_previous joins the stage before it.
    std::vector<std::vector<std::size_t>> stages;
    for (std::size_t p = 0; p < job.phases.size(); ++p)
    {
        if (!job.phases[p].withPrevious || stages.empty())
        {
            stages.emplace_back();
        }
        stages.back().push_back(p);
    }
    uint32_t iteration = 0;
    std::size_t stage = 0;
    uint64_t outstanding = 0;
    int64_t stageStartPs = 0;
    int64_t iterStartPs = 0;
    std::vector<double> iterUs;
    std::function<void()> startStage;
    startStage = [&]()
    {
        stageStartPs = Simulator::Now().GetPicoSeconds();
        if (stage == 0)
        {
            iterStartPs = stageStartPs;
        }
        for (std::size_t p : stages[stage])
        {
            const JobPhaseSpec& ph = job.phases[p];
            PhaseRun& pr = phases[p];
            pr.firstEndPs = pr.lastEndPs = -1;
            pr.groupEndPs.assign(pr.comms.size(), -1);
            for (std::size_t g = 0; g < pr.comms.size(); ++g)
            {
                auto& comm = pr.comms[g];
                if (several != nullptr)
                {
                    pr.algorithm =
                        ToString(comm->Choose(CollectiveOpOf(ph.op),
                                              CollectiveAlgorithmOf(ph.algorithm), ph.bytes)
                                     .algorithm);
                }
                if (comm->LocalRanks() == 0)
                {
                    // all of its ranks are another process's: its end is reported there
                    comm->Start(CollectiveOpOf(ph.op), CollectiveAlgorithmOf(ph.algorithm),
                                ph.bytes, nullptr, iteration + 1 == job.iterations);
                    continue;
                }
                ++outstanding;
                comm->Start(
                    CollectiveOpOf(ph.op), CollectiveAlgorithmOf(ph.algorithm), ph.bytes,
                    [&, p, g](const CollectiveResult& r)
                    {
                        PhaseRun& q = phases[p];
                        q.groupEndPs[g] = r.endPs;
                        q.algorithm = ToString(r.algorithm);
                        q.firstEndPs = q.firstEndPs < 0 ? r.endPs : std::min(q.firstEndPs, r.endPs);
                        q.lastEndPs = std::max(q.lastEndPs, r.endPs);
                        if (--outstanding > 0)
                        {
                            return;
                        }
                        if (several != nullptr)
                        {
                            localDone = true; // the stage's end is decided after the run
                            return;
                        }
                        for (std::size_t x : stages[stage])
                        {
                            phases[x].timeUs.push_back((phases[x].lastEndPs - stageStartPs) / 1e6);
                            phases[x].fastestUs.push_back((phases[x].firstEndPs - stageStartPs) /
                                                          1e6);
                        }
                        if (++stage == stages.size())
                        {
                            stage = 0;
                            iterUs.push_back((Simulator::Now().GetPicoSeconds() - iterStartPs) /
                                             1e6);
                            if (++iteration == job.iterations)
                            {
                                Simulator::Stop();
                                return;
                            }
                        }
                        Simulator::ScheduleNow(startStage);
                    },
                    iteration + 1 == job.iterations);
            }
        }
        localDone = localDone || (several != nullptr && outstanding == 0);
    };
    Simulator::ScheduleNow(startStage);
    Time limit = MicroSeconds(1) * spec.durationUs;
    RunSupervisor supervisor(spec, fabric, &setup.nics, Time(0));
    std::vector<Communicator*> all;
    for (auto& pr : phases)
    {
        for (auto& c : pr.comms)
        {
            all.push_back(c.get());
        }
    }
    supervisor.SetBetweenWindows([&all](DistributedRun& d) { ExchangeRetired(d, all); });
    supervisor.Run(progress, limit,
                   [&]() { return several != nullptr ? localDone : iteration == job.iterations; });

    std::vector<uint64_t> posted(job.phases.size());
    for (std::size_t p = 0; p < job.phases.size(); ++p)
    {
        for (const auto& comm : phases[p].comms)
        {
            posted[p] += comm->SendCounters().bytesPosted;
        }
    }
    if (several != nullptr)
    {
        // A group split over processes ends with its latest part (each process reports when
        // its own ranks of the group are done): a phase ends with its latest group, its
        // fastest group is the earliest group end, and the stage with the latest phase.
        const std::size_t np = job.phases.size();
        std::vector<uint64_t> sums{localDone ? 1u : 0u};
        sums.insert(sums.end(), posted.begin(), posted.end());
        std::vector<int64_t> ends;
        for (std::size_t p = 0; p < np; ++p)
        {
            phases[p].groupEndPs.resize(phases[p].comms.size(), -1);
            ends.insert(ends.end(), phases[p].groupEndPs.begin(), phases[p].groupEndPs.end());
        }
        several->Sum(sums);
        several->Max(ends);
        std::vector<int64_t> last(np, INT64_MIN);
        std::vector<int64_t> first(np, INT64_MAX);
        std::size_t at = 0;
        for (std::size_t p = 0; p < np; ++p)
        {
            for (std::size_t g = 0; g < phases[p].comms.size(); ++g, ++at)
            {
                if (ends[at] >= 0)
                {
                    last[p] = std::max(last[p], ends[at]);
                    first[p] = std::min(first[p], ends[at]);
                }
            }
        }
        std::copy(sums.begin() + 1, sums.end(), posted.begin());
        if (sums[0] == several->Ranks())
        {
            int64_t endPs = stageStartPs;
            for (std::size_t p = 0; p < np; ++p)
            {
                phases[p].timeUs.push_back((last[p] - stageStartPs) / 1e6);
                phases[p].fastestUs.push_back((first[p] - stageStartPs) / 1e6);
                endPs = std::max(endPs, last[p]);
            }
            iterUs.push_back((endPs - iterStartPs) / 1e6);
            iteration = job.iterations;
        }
    }

    auto mean = [](const std::vector<double>& v)
    { return v.empty() ? -1.0 : std::accumulate(v.begin(), v.end(), 0.0) / v.size(); };
    std::vector<RunRecord> out;
    for (std::size_t p = 0; p < job.phases.size(); ++p)
    {
        const JobPhaseSpec& ph = job.phases[p];
        RunRecord rec;
        rec.scenario = spec.scenario;
        rec.variant = spec.variant;
        rec.parameters = spec.resolved;
        double t = mean(phases[p].timeUs);
        rec.metrics["phase"] = ph.name;
        rec.metrics["op"] = ph.op;
        rec.metrics["bytes"] = ph.bytes;
        rec.metrics["group_size"] = ph.groupSize;
        rec.metrics["groups"] = static_cast<uint32_t>(phases[p].comms.size());
        rec.metrics["algorithm"] = phases[p].algorithm;
        rec.metrics["iterations_completed"] = static_cast<uint32_t>(phases[p].timeUs.size());
        rec.metrics["time_us"] = t;
        rec.metrics["fastest_group_us"] = mean(phases[p].fastestUs);
        double algbw = t > 0 ? ph.bytes / (t * 1e-6) / 1e9 : 0.0;
        rec.metrics["busbw_gbytes_per_s"] =
            algbw * BusBwFactor(CollectiveOpOf(ph.op), ph.groupSize);
        rec.metrics["iteration_us"] = mean(iterUs);
        rec.metrics["payload_bytes_posted"] = posted[p]; // all groups, all iterations
        rec.metrics["iterations"] = job.iterations;
        out.push_back(rec);
    }
    if (!out.empty())
    {
        std::ostringstream left;
        left << job.iterations - iteration << " of " << job.iterations << " iterations unfinished";
        supervisor.Finish(out[0], left.str());
        for (auto& r : out)
        {
            r.metrics["ended_by"] = out[0].metrics["ended_by"];
        }
    }
    return out;
}

/// A recorded job replayed (trace-replay.h) on the run's transport.
std::vector<RunRecord>
RunTrace(const RunSpec& spec, Fabric& fabric, int64_t& stream, ProgressReporter& progress)
{
    TransportSetup setup(spec.transport, fabric, stream);
    const std::vector<Ptr<RdmaNic>> nics = AcceleratorNics(spec.topology, setup.nics);
    auto scaleUp = BuildScaleUp(spec.topology);
    CollectiveConfig cfg;
    cfg.scaleUp = scaleUp.get();
    cfg.endpoint = BuildEndpoint(spec.topology);
    TraceReplay replay(*spec.trace.job,
                       TracePlacement(spec.trace, static_cast<uint32_t>(nics.size()), stream),
                       &nics, setup.rdma.QpFactory(), cfg, spec.topology.acceleratorsPerHost);
    // Compute gaps place no payload: the stall interval counts from the longest one's end.
    RunSpec watched = spec;
    int64_t longestGapPs = 0;
    for (const auto& r : spec.trace.job->ranks)
    {
        for (const auto& op : r.ops)
        {
            longestGapPs = std::max(longestGapPs, op.gapPs);
        }
    }
    if (watched.stallUs > 0)
    {
        watched.stallUs += longestGapPs / 1e6;
    }
    Simulator::ScheduleNow(&TraceReplay::Start, &replay);
    RunSupervisor supervisor(watched, fabric, &setup.nics, Time(0));
    supervisor.Run(progress, MicroSeconds(1) * spec.durationUs, [&]() { return replay.Done(); });
    std::vector<RunRecord> out = replay.Records(spec);
    supervisor.Finish(out[0], replay.Unfinished());
    for (auto& r : out)
    {
        r.metrics["ended_by"] = out[0].metrics["ended_by"];
    }
    return out;
}

} // namespace metaroce
} // namespace ns3
