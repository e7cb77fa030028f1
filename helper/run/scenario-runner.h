/*
 * Runs one resolved scenario variant: builds the fabric, installs the workload, schedules
 * the faults, runs, and returns a record of metrics (units in names) and counters.
 */
#ifndef METAROCE_SCENARIO_RUNNER_H
#define METAROCE_SCENARIO_RUNNER_H

#include "helper/run/progress-reporter.h"
#include "helper/scenario/scenario.h"

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

namespace ns3
{
namespace metaroce
{

struct RunRecord
{
    std::string scenario;
    std::string variant;
    nlohmann::json parameters; //!< the resolved scenario of this run
    nlohmann::json metrics;    //!< deterministic results
    nlohmann::json counters;   //!< deterministic counts
    nlohmann::json cost;       //!< wall time, events, memory: vary between runs and machines
    nlohmann::json timeseries; //!< optional: [{time_us, goodput_gbps, ...}]
    nlohmann::json flows;      //!< optional: [{src, dst, bytes, fct_us}]
    nlohmann::json paths;      //!< optional: the first QP's paths over time (MetaRoCE)
    nlohmann::json timeline;   //!< optional: a replayed trace's per-rank intervals
    /// What the run left undone ("" if nothing): one line for the warning on stderr.
    std::string unfinished;
    bool expectUnfinished{false}; //!< the scenario declares that unfinished work is expected
};

/// An invariant of the model was broken (a bug, not bad input): the message names the QP or
/// switch, the rule and the simulated time.
class InvariantViolation : public std::runtime_error
{
  public:
    using std::runtime_error::runtime_error;
};

/// Runs one variant; a collective sweep gives one record per message size.
std::vector<RunRecord> RunScenario(const RunSpec& spec, ProgressReporter& progress);

/// The metric and counter names a record of this workload kind ("raw", "streams",
/// "collective", "job") can carry: the columns outputs.table may name. Some appear only with
/// one transport, a victim, faults or a time series; a table prints "-" where one is absent.
const std::vector<std::string>& ResultColumns(const std::string& workloadKind);

/// For a collective workload: what each size would run (algorithm, NCCL protocol, channels,
/// NCCL's estimate), as the run would choose it, without building anything (--dry-run);
/// null for other workloads.
nlohmann::json CollectiveChoices(const RunSpec& spec);

/// Peak resident set of this process so far, in bytes.
uint64_t PeakRssBytes();

} // namespace metaroce
} // namespace ns3

#endif
