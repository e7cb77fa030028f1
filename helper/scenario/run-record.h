/*
 * What one run leaves: its record (parameters, metrics, counters, cost, optional series) and
 * the error a broken model invariant raises. Below the runner: the workloads, the trace
 * replay and the results writer fill or read it without the runner.
 */
#ifndef METAROCE_RUN_RECORD_H
#define METAROCE_RUN_RECORD_H

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

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

} // namespace metaroce
} // namespace ns3

#endif
