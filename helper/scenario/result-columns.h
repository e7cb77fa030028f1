/*
 * The metric and counter names a run's record can carry, per workload kind: what a scenario's
 * outputs.table may name. Below the runner, so the loader checks a table without it.
 */
#ifndef METAROCE_RESULT_COLUMNS_H
#define METAROCE_RESULT_COLUMNS_H

#include <string>
#include <vector>

namespace ns3
{
namespace metaroce
{

/// The metric and counter names a record of this workload kind ("raw", "streams",
/// "collective", "job") can carry: the columns outputs.table may name. Some appear only with
/// one transport, a victim, faults or a time series; a table prints "-" where one is absent.
const std::vector<std::string>& ResultColumns(const std::string& workloadKind);

} // namespace metaroce
} // namespace ns3

#endif
