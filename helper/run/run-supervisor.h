/*
 * RunSupervisor: one workload's simulation under a RunWatchdog and the invariant checker.
 */
#ifndef METAROCE_RUN_SUPERVISOR_H
#define METAROCE_RUN_SUPERVISOR_H

#include "helper/mpi/distributed-run.h"
#include "helper/run/progress-reporter.h"
#include "helper/run/run-watchdog.h"
#include "helper/run/scenario-runner.h"
#include "helper/scenario/scenario.h"
#include "model/transport/rdma-nic.h"

#include <functional>
#include <string>
#include <vector>

namespace ns3
{
namespace metaroce
{

/**
 * Runs a workload's simulation under a RunWatchdog: the run ends when the workload stops
 * the simulator, at its time limit, on a stall, at the wall-clock limit or on a broken
 * invariant (an InvariantViolation is thrown). With the invariant checker on, Drain then
 * lets the last acknowledgements arrive (after the workload took its metrics, so they do
 * not change) and checks that every queue pair ends with nothing unacknowledged and that
 * every posted byte was placed once.
 */
class RunSupervisor
{
  public:
    RunSupervisor(const RunSpec& spec, const Fabric& fabric, const std::vector<Ptr<RdmaNic>>* nics,
                  Time start);

    ~RunSupervisor();

    /// Simulates until the end; `done` says whether the workload finished.
    /// hardLimit false: the simulation is not stopped at `limit` (raw traffic stops sending
    /// there, and its frames in flight still arrive).
    RunEnd Run(ProgressReporter& progress, Time limit, const std::function<bool()>& done,
               bool hardLimit = true);

    /// On several processes: runs between time windows, on every process alike (the
    /// workload's exchange of what one process's events mean for another's state).
    void SetBetweenWindows(std::function<void(DistributedRun&)> f) { m_between = std::move(f); }

    /// After the workload took its metrics: records how the run ended (metric "ended_by")
    /// and, if it did not complete, `left` (what work is left) with the reason on
    /// rec.unfinished; then drains (see the class comment).
    void Finish(RunRecord& rec, const std::string& left);

  private:
    /// Run over several processes: in windows, deciding together between them.
    RunEnd RunWindows(DistributedRun& d, ProgressReporter& progress, Time limit,
                      const std::function<bool()>& done);
    void Drain();
    void DrainWindows(DistributedRun& d, Time completed, Time until, Time step, bool lasting);

    static RunWatchdog::Config Config(const RunSpec& spec, const std::vector<Ptr<RdmaNic>>* nics,
                                      Time start);

    uint64_t Unacknowledged() const;

    void OnViolation(const std::string& what) { m_dog.Violation(what); }

    void ThrowIfViolated() const;

    void Fail(const std::string& what) const;

    const RunSpec& m_spec;
    const Fabric& m_fabric;
    const std::vector<Ptr<RdmaNic>>* m_nics;
    RunWatchdog m_dog;
    RunEnd m_end{RunEnd::Duration};
    std::string m_diagnosis;
    std::function<void(DistributedRun&)> m_between;
};

} // namespace metaroce
} // namespace ns3

#endif
