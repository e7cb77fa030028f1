/*
 * What the workload runners share: the run's transport on every NIC, traffic patterns,
 * faults, endpoint and scale-up models; and one entry point per workload kind. Internal to
 * the scenario runner (scenario-runner.h is the interface).
 */
#ifndef METAROCE_RUN_CONTEXT_H
#define METAROCE_RUN_CONTEXT_H

#include "helper/fabric-helper.h"
#include "helper/mpi/distributed-run.h"
#include "helper/rdma-helper.h"
#include "helper/run/progress-reporter.h"
#include "helper/run/scenario-runner.h"
#include "helper/scenario/scenario.h"
#include "model/collective/communicator.h"
#include "model/core/fabric-random.h"
#include "model/transport/scale-up.h"

#include "ns3/config.h"
#include "ns3/string.h"

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ns3
{
namespace metaroce
{

/// (src, dst) pairs of a traffic pattern over n NICs.
std::vector<std::pair<uint32_t, uint32_t>> PatternFlows(const PatternSpec& w, uint32_t n,
                                                        FastRng& rng);
/// Percentile of a sorted vector (nearest rank).
double Percentile(const std::vector<double>& sorted, double q);
/// Schedules the run's faults on the fabric.
void ScheduleFaults(Fabric& fabric, const std::vector<FaultSpec>& faults);
/// The endpoint latencies of a topology: NcclEndpoint's defaults and the `endpoint` keys.
EndpointLatency BuildEndpoint(const TopologySpec& t);
/// The scale-up domains of a topology with accelerator hosts (null when every NIC is a host).
std::unique_ptr<ScaleUpFabric> BuildScaleUp(const TopologySpec& t);
/// The NIC of every accelerator (accelerator a uses NIC a / acceleratorsPerNic).
std::vector<Ptr<RdmaNic>> AcceleratorNics(const TopologySpec& t,
                                          const std::vector<Ptr<RdmaNic>>& nics);
/// On several processes: which accelerators this process simulates (for
/// CollectiveConfig::isLocal), after checking that every host's accelerators are on one
/// process (they talk over its scale-up domain; InputError otherwise). Null on one process.
std::function<bool(uint32_t)> LocalAccelerators(const Fabric& fabric, const TopologySpec& t,
                                                const std::vector<Ptr<RdmaNic>>& nics);
/// On several processes: tells each communicator's receiving processes which of its
/// connections' senders finished their last use (Communicator::TakeRetiredSenders), so they
/// release their ends; every process calls it between the same windows.
void ExchangeRetired(DistributedRun& d, const std::vector<Communicator*>& comms);
/// Where n ranks run among `accelerators`: "explicit" (the list), "random" (a shuffle drawn
/// from the run's next random stream), else every stride-th free accelerator ("strided"; 1
/// for "contiguous"). The collective, job and trace workloads place their ranks so.
std::vector<uint32_t> PlaceRanks(const std::string& placement, uint32_t stride,
                                 const std::vector<uint32_t>& explicitList, uint32_t n,
                                 uint32_t accelerators, int64_t& stream);
/// The collective configuration a collective workload runs with (scale-up domains apart).
CollectiveConfig CollectiveConfigOf(const RunSpec& spec);
/// Applies the transport's QP type, congestion control and attribute overrides to a factory;
/// returns the defaults to restore after the run.
std::vector<std::pair<std::string, std::string>> ConfigureTransport(const TransportSpec& t,
                                                                    QueuePairFactory& f);

/// NICs on every host with the run's transport configured; on destruction the NICs are
/// disposed (by the helper) and the congestion-control defaults the run changed restored.
struct TransportSetup
{
    TransportSetup(const TransportSpec& t, Fabric& fabric, int64_t& stream)
        : rdma(fabric, stream++)
        , fabricRef(fabric)
    {
        rdma.InstallNics();
        restore = ConfigureTransport(t, rdma.QpFactory());
        for (uint32_t i = 0; i < rdma.NumNics(); ++i)
        {
            nics.push_back(rdma.Nic(i));
        }
    }

    ~TransportSetup()
    {
        for (auto& nic : nics)
        {
            fabricRef.NoteQueuePairs(nic->GetNQueuePairs());
        }
        for (const auto& [k, v] : restore)
        {
            Config::SetDefault(k, StringValue(v));
        }
    }

    TransportSetup(const TransportSetup&) = delete;
    TransportSetup& operator=(const TransportSetup&) = delete;

    RdmaHelper rdma;
    Fabric& fabricRef;
    std::vector<Ptr<RdmaNic>> nics;
    std::vector<std::pair<std::string, std::string>> restore;
};

/// Raw traffic (workload-raw.cc): the workload's metrics and counters into rec.
void RunRaw(const RunSpec& spec, Fabric& fabric, int64_t& stream, ProgressReporter& progress,
            RunRecord& rec);
/// RDMA streams over a transport (workload-streams.cc).
void RunStreams(const RunSpec& spec, Fabric& fabric, int64_t& stream, ProgressReporter& progress,
                RunRecord& rec);
/// A collective over a list of sizes (workload-collective.cc): a record per size.
std::vector<RunRecord> RunCollective(const RunSpec& spec, Fabric& fabric, int64_t& stream,
                                     ProgressReporter& progress);
/// A job: phases of collectives on groups of ranks (workload-collective.cc).
std::vector<RunRecord> RunJob(const RunSpec& spec, Fabric& fabric, int64_t& stream,
                              ProgressReporter& progress);
/// A recorded job replayed on the run's transport (workload-collective.cc).
std::vector<RunRecord> RunTrace(const RunSpec& spec, Fabric& fabric, int64_t& stream,
                                ProgressReporter& progress);

} // namespace metaroce
} // namespace ns3

#endif
