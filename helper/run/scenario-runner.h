/*
 * Runs one resolved scenario variant: builds the fabric, installs the workload, schedules
 * the faults, runs, and returns a record of metrics (units in names) and counters.
 */
#ifndef METAROCE_SCENARIO_RUNNER_H
#define METAROCE_SCENARIO_RUNNER_H

#include "helper/run/progress-reporter.h"
#include "helper/scenario/result-columns.h"
#include "helper/scenario/run-record.h"
#include "helper/scenario/scenario.h"

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

namespace ns3
{
namespace metaroce
{

/// Runs one variant; a collective sweep gives one record per message size.
std::vector<RunRecord> RunScenario(const RunSpec& spec, ProgressReporter& progress);

/// For a collective workload: what each size would run (algorithm, NCCL protocol, channels,
/// NCCL's estimate), as the run would choose it, without building anything (--dry-run);
/// null for other workloads.
nlohmann::json CollectiveChoices(const RunSpec& spec);

/// Peak resident set of this process so far, in bytes.
uint64_t PeakRssBytes();

} // namespace metaroce
} // namespace ns3

#endif
