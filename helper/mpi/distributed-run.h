/*
 * The runner's view of a distributed run (one simulation over several MPI processes): a
 * program that runs on MPI (metaroce-sim-mpi, helper/mpi-fabric.h) installs one; without it
 * the runner is the one-process runner it always was. MPI-free, so that the library and the
 * default build need no MPI.
 */
#ifndef METAROCE_DISTRIBUTED_RUN_H
#define METAROCE_DISTRIBUTED_RUN_H

#include "ns3/node.h"
#include "ns3/nstime.h"
#include "ns3/ptr.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace ns3
{
namespace metaroce
{

class Fabric;

class DistributedRun
{
  public:
    virtual ~DistributedRun() = default;
    virtual uint32_t Rank() const = 0;
    virtual uint32_t Ranks() const = 0;
    /// Splits a freshly built fabric over the processes (node ranks, links between them).
    virtual void Distribute(Fabric& fabric) = 0;
    /// Element-wise sums and maxima over the processes, in place; every process calls them
    /// in the same order with its own part.
    virtual void Sum(std::vector<uint64_t>& v) = 0;
    virtual void Max(std::vector<int64_t>& v) = 0;
    virtual void Min(std::vector<int64_t>& v) = 0;
    /// Every process's `mine`, concatenated in rank order (on every process): per-rank
    /// records joined after a run.
    virtual std::vector<int64_t> Gather(const std::vector<int64_t>& mine) = 0;
    /// Per-process costs of the world just run, for the results' `cost` (rank 0's record):
    /// given this process's events and peak RSS, every process's, with the frames that
    /// crossed and the synchronization rounds.
    virtual nlohmann::json RankCosts(uint64_t events, uint64_t peakRssBytes) = 0;
    /// How long after a workload's own end (raw traffic: when it stops sending) the run is
    /// stopped, for engines that end only at a stop time (ns-3's null-message engine); zero:
    /// the run ends when no event is left anywhere, as on one process.
    virtual Time StopAfter() const = 0;
    /// Whether the workloads run as parts (each process its own NICs' transport, results
    /// combined, decided between time windows): with more than one process, and on one
    /// when asked to (a test that this path alone changes nothing).
    virtual bool RunsInParts() const { return Ranks() > 1; }
};

/// The installed distributed run, or null (one process).
DistributedRun* CurrentDistributedRun();
void SetDistributedRun(DistributedRun* run);

/// The installed distributed run if the workloads run as parts (RunsInParts), else null.
inline DistributedRun*
SeveralProcesses()
{
    DistributedRun* d = CurrentDistributedRun();
    return d != nullptr && d->RunsInParts() ? d : nullptr;
}

/// Whether this process simulates `node`: always in a one-process run.
inline bool
IsLocal(const Ptr<Node>& node)
{
    DistributedRun* d = CurrentDistributedRun();
    return d == nullptr || node->GetSystemId() == d->Rank();
}

} // namespace metaroce
} // namespace ns3

#endif
