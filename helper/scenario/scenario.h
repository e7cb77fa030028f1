/*
 * A scenario file: a topology, a workload, faults, a seed and variants to compare, each
 * variant a set of overrides on the same file. Everything is validated before anything
 * runs; errors name the key path and are InputErrors (exit status 2).
 */
#ifndef METAROCE_SCENARIO_H
#define METAROCE_SCENARIO_H

#include "helper/topology-spec.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ns3
{
namespace metaroce
{

/// Who talks to whom: a traffic pattern over the fabric's NICs.
struct PatternSpec
{
    std::string pattern; //!< "permutation", "pairs", "incast", "explicit", "random-peers",
                         //!< "all-to-all"
    uint32_t incastTarget{0};
    uint32_t senders{0};                              //!< incast: how many NICs send
    uint32_t peersPerNic{1};                          //!< random-peers: distinct peers each
    std::vector<std::pair<uint32_t, uint32_t>> flows; //!< explicit (src, dst)
};

/// Raw fabric traffic (no transport): constant-rate flows of fixed-size frames.
struct RawWorkloadSpec
{
    PatternSpec who;
    std::vector<uint32_t> planes; //!< planes to send on (default: all)
    uint32_t entropiesPerFlow{1};
    uint32_t payloadBytes{4096};
    double rateGbps{0}; //!< per NIC port, wire rate; 0: the port's line rate
};

/// RDMA message streams between NICs over a transport.
struct StreamsWorkloadSpec
{
    PatternSpec who;
    uint32_t qpsPerFlow{1};
    uint64_t messageBytes{1 << 20};
    uint64_t messagesPerQp{1};
    uint32_t outstandingPerQp{1}; //!< messages posted ahead (a send queue's depth)
    uint32_t streamsPerQp{1};
    bool bidirectional{false};
    double startUs{0};
    // An optional victim: one message from victimSrc to victimDst that shares the fabric with
    // the pattern's traffic; its completion time is reported on its own.
    bool victim{false};
    uint32_t victimSrc{0};
    uint32_t victimDst{0};
    uint64_t victimBytes{0};
};

/// A collective swept over message sizes (nccl-tests style).
struct CollectiveWorkloadSpec
{
    std::string op;        //!< allreduce, reducescatter, allgather, alltoall
    std::string algorithm; //!< auto, ring, tree, direct
    std::vector<uint64_t> sizes;
    uint32_t ranks{0};     //!< 0: every NIC
    std::string placement; //!< contiguous, strided, random
    uint32_t stride{1};
    std::vector<uint32_t> nics;   //!< explicit placement: rank i runs on NIC nics[i]
    uint32_t ranksPerHost{1};     //!< how NCCL would see the ranks (algorithm choice)
    uint32_t warmupIterations{0}; //!< run before the timed ones, as nccl-tests' -w
    uint32_t iterations{1};       //!< timed, averaged (nccl-tests' -n)
    uint32_t channels{0};         //!< 0: NCCL's rule
    uint32_t qpsPerConnection{1};
    double reducePsPerByte{0};
    std::string protocol{"auto"}; //!< NCCL_PROTO: auto, LL, LL128, Simple
    bool pxn{false};              //!< all-to-all: NCCL's PXN over the scale-up domain
};

/// One collective of a job, run on every group of a partition of the ranks.
struct JobPhaseSpec
{
    std::string name;
    std::string op;
    std::string algorithm{"auto"};
    uint64_t bytes{0};
    uint32_t groupSize{0};
    std::string layout{"contiguous"}; //!< contiguous or strided groups
    bool withPrevious{false};         //!< starts together with the phase before it
};

/// A training-step-like job: phases (concurrent or in sequence), repeated for iterations.
struct JobWorkloadSpec
{
    std::string name;
    uint32_t iterations{1};
    uint32_t ranks{0}; //!< 0: every NIC
    std::vector<JobPhaseSpec> phases;
};

struct TraceJob;

/// A recorded job replayed (trace-import.h, trace-replay.h).
struct TraceWorkloadSpec
{
    std::vector<std::string> files; //!< one trace, one per rank, or an NCCL log
    std::string format{"auto"};     //!< pytorch-profiler, nccl-log, auto (by content)
    uint32_t scaleTo{0};            //!< 0: the trace's world
    double gapUs{0};                //!< NCCL logs: compute before each collective
    std::string placement{"contiguous"};
    uint32_t stride{1};
    std::vector<uint32_t> nics;          //!< explicit placement
    std::shared_ptr<const TraceJob> job; //!< imported, completed and scaled when loaded
};

/// The transport of a run: a QP TypeId, its congestion control and attribute overrides.
struct TransportSpec
{
    std::string kind; //!< "metaroce" or "rocev2"
    std::string qpType;
    std::string ccType;
    std::vector<std::pair<std::string, std::string>> qpAttributes;
    std::vector<std::pair<std::string, std::string>> ccAttributes;
    /// MetaRoCE only: the receiver's rate-hint tracker (one per NIC).
    std::vector<std::pair<std::string, std::string>> hintAttributes;
};

struct FaultSpec
{
    std::string kind;         //!< "plane_down", "link_down", "loss"
    std::string scope{"all"}; //!< plane_down: "all" links, or "fabric" (NIC links stay up)
    uint32_t plane{0};
    uint32_t nic{0};
    double atUs{0};
    double untilUs{-1}; //!< < 0: stays down
    double rate{0};
    bool allPlanes{true};
    std::string links{"all"}; //!< loss: "all" links, a NIC's own, "fabric" (switch to switch
                              //!< in a site) or "long" (between sites)
};

/// One fully resolved run of a scenario.
struct RunSpec
{
    std::string scenario;
    std::string variant;
    uint64_t seed{1};
    double durationUs{0}; //!< raw: how long traffic flows; streams: the simulated-time limit
    TopologySpec topology;
    std::string workloadKind; //!< "raw", "streams", "collective", "job" or "trace"
    RawWorkloadSpec raw;
    StreamsWorkloadSpec streams;
    CollectiveWorkloadSpec collective;
    JobWorkloadSpec job;
    TraceWorkloadSpec trace;
    TransportSpec transport;
    double timeseriesBinUs{0}; //!< > 0: record delivered throughput per bin
    double steadyFromUs{-1};   //!< >= 0: mean throughput of the bins from here to the end
    bool flowsOutput{false};   //!< write per-flow completion times
    std::vector<FaultSpec> faults;
    std::vector<std::string> table; //!< columns of the printed table
    /// No payload placed anywhere for this long while work is outstanding ends the run as
    /// stalled (0: never); faults restart the interval.
    double stallUs{10000};
    bool expectUnfinished{false}; //!< unfinished work is expected (exit 0, not 3)
    bool checkInvariants{true};   //!< the invariant checker (see RunWatchdog)
    double maxWallS{0};           //!< wall-clock limit of the run (0: none; command line)
    /// Ports whose links are written to pcap files, as (NIC, plane), and the files' prefix
    /// (command line; see Fabric::EnablePcap).
    struct PcapFile
    {
        uint32_t nic{0};
        uint32_t plane{0};
        std::string path; //!< where the runner writes it (the output set's temporary)
    };

    std::vector<PcapFile> pcapFiles;
    nlohmann::json resolved; //!< the scenario JSON of this variant, topology inlined
};

struct Scenario
{
    std::string name;
    std::string description;
    std::vector<RunSpec> runs; //!< one per variant, in file order
};

/// Applies "a.b.c=value" (value parsed as JSON, else taken as a string) to j.
void ApplySet(nlohmann::json& j, const std::string& assignment, const std::string& origin);

/// Loads, overrides (--set), inlines the topology and job files and validates the variants:
/// all of them, or only those named in `variants` (an unknown name is an error). Every
/// error, whatever raised it, is an InputError naming the file.
Scenario LoadScenario(const std::string& file, const std::vector<std::string>& sets,
                      const std::vector<std::string>& variants = {});

/// LoadScenario on a scenario's text; `file` names it in errors and locates the files it
/// refers to. Errors are InputErrors but for faults of the loader itself (what fuzzing
/// looks for).
Scenario LoadScenarioText(const std::string& text, const std::string& file,
                          const std::vector<std::string>& sets,
                          const std::vector<std::string>& variants);

} // namespace metaroce
} // namespace ns3

#endif
