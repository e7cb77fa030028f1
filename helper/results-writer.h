/*
 * Results: a JSON document (schema version, one record per run) and its CSV twin (one row
 * per run, metrics and counters), written only once every run has finished and each through
 * a temporary file and a rename, so a failed run never leaves half a file. The CSV and the
 * JSON without its "cost" blocks are byte-identical for the same scenario and seed.
 */
#ifndef METAROCE_RESULTS_WRITER_H
#define METAROCE_RESULTS_WRITER_H

#include "scenario-runner.h"

#include <ostream>
#include <string>
#include <vector>

namespace ns3
{
namespace metaroce
{

constexpr int kResultsSchemaVersion = 1;

nlohmann::json ResultsJson(const std::string& scenario, const std::vector<RunRecord>& runs);
std::string ResultsCsv(const std::vector<RunRecord>& runs);
/// Time series of all runs as CSV (variant, time_us, goodput_gbps); empty if none.
std::string TimeseriesCsv(const std::vector<RunRecord>& runs);
/// Per-flow completion times of all runs as CSV (variant, src, dst, bytes, fct_us).
std::string FlowsCsv(const std::vector<RunRecord>& runs);
/// The first MetaRoCE QP's per-path windows over time, as CSV; empty if none.
std::string PathsCsv(const std::vector<RunRecord>& runs);
/// Writes text to path atomically (temporary file + rename).
void WriteFileAtomically(const std::string& path, const std::string& text);
/// Prints the records as an aligned table of the chosen columns (metrics or counters).
void PrintTable(std::ostream& os, const std::vector<RunRecord>& runs,
                const std::vector<std::string>& columns);

} // namespace metaroce
} // namespace ns3

#endif
