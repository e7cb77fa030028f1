/*
 * How much memory a run will need at its peak, from the sizes in its resolved scenario alone
 * (nothing is built), so that a run that cannot fit is refused before it starts rather than
 * ending minutes later in an allocation failure. Per-object costs are measured (see the .cc);
 * the estimate errs on the high side.
 *
 * Also here: the memory limit a run is held to (--max-memory or MemAvailable) and the phase a
 * run is in, so that an allocation failure can say where it happened.
 */
#ifndef METAROCE_MEMORY_ESTIMATE_H
#define METAROCE_MEMORY_ESTIMATE_H

#include "helper/scenario/scenario.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ns3
{
namespace metaroce
{

/// A run's estimated peak resident memory, in bytes, and its parts.
struct MemoryEstimate
{
    uint64_t bytes{0};         //!< the total: the run's estimated peak RSS
    uint64_t processBytes{0};  //!< the program, ns-3 and the allocator before any object
    uint64_t fabricBytes{0};   //!< switches, ports, links and host nodes
    uint64_t nicBytes{0};      //!< one RDMA NIC (or raw endpoint) per host and its ports
    uint64_t workloadBytes{0}; //!< queue pairs, connections, collective plans, flow records
    //! of workloadBytes, the collective plans of every rank (built whole by every process of
    //! a distributed run when its collectives start, then kept for its own ranks only)
    uint64_t planBytes{0};
    uint64_t trafficBytes{0}; //!< state of data in flight: frames, windows, paths
    uint64_t switches{0};
    uint64_t links{0};
    uint64_t queuePairs{0};  //!< both ends; collectives: those the plans open
    uint64_t connections{0}; //!< QP pairs (streams) or (src, dst) connections (collectives)

    nlohmann::json ToJson() const;
};

/// Estimates the peak memory of one resolved run.
MemoryEstimate EstimatePeakMemory(const RunSpec& spec);

/// "1.5 GiB", "340.0 MiB", "512 B".
std::string FormatBytes(uint64_t bytes);

/// Parses a --max-memory value: BYTES, or a number with K, M, G or T (powers of 1024, an
/// optional trailing "B" or "iB"); anything else, or zero, is an InputError naming `option`.
uint64_t ParseMemorySize(const std::string& text, const std::string& option);

/// The memory a run may use and where that figure comes from.
struct MemoryLimit
{
    uint64_t bytes{0};
    std::string source; //!< "--max-memory" or "MemAvailable in /proc/meminfo"
    bool known{false};  //!< false: no limit could be found (nothing is refused)
};

/// MemAvailable from /proc/meminfo, or what the address-space limit (ulimit -v) leaves if
/// that is less; unknown if neither is known.
MemoryLimit AvailableMemory();

/// The one-line reason the runs cannot fit under `limit`, or "" if they can. Variants run one
/// after another in one process, so the largest estimate is the one that counts.
std::string MemoryRefusal(const std::vector<RunSpec>& runs, const MemoryLimit& limit);

/// "demo/MetaRoCE: estimated peak memory 25.9 MiB (limit 2.0 GiB, --max-memory)": what a
/// run says before it builds anything.
std::string EstimateLine(const RunSpec& run, const MemoryLimit& limit);

/// What the program is doing now, for an allocation failure's message: set at each phase
/// change ("loading the scenario", "building the fabric", "installing the workload",
/// "simulating", "writing results"), never per event. `variant`: the run it belongs to, if
/// one.
void SetRunPhase(const char* phase, const std::string& variant);
/// The phase, keeping the variant set last (a run's phases inside the runner).
void SetRunPhase(const char* phase);
const char* RunPhase();

/// "out of memory while simulating (variant 'x', estimated peak 1.2 GiB)": the message of an
/// allocation failure; `runs` give the variant's estimate.
std::string OutOfMemoryMessage(const std::vector<RunSpec>& runs);

} // namespace metaroce
} // namespace ns3

#endif
