/*
 * Replaying an imported job (trace-import.h) on the simulated cluster: every rank issues its
 * collectives in trace order, each when its stream's previous operation has ended plus the
 * recorded compute gap (a timer: no traffic), and a collective on a group starts when all of
 * its members have reached it, as NCCL's kernels wait for their peers. Each group runs its
 * collectives on one Communicator, the one the collective workload uses (same algorithm
 * choice by NCCL's cost model).
 */
#ifndef METAROCE_TRACE_REPLAY_H
#define METAROCE_TRACE_REPLAY_H

#include "helper/scenario/json-reader.h"
#include "helper/scenario/run-record.h"
#include "helper/scenario/scenario.h"
#include "helper/trace/trace-import.h"
#include "model/collective/communicator.h"

#include <memory>
#include <string>
#include <vector>

namespace ns3
{
namespace metaroce
{

/// The workload keys of a trace run (after "kind"): file, format, scale_to, gap_us,
/// placement, stride, nics. Imports, completes and scales the trace (once per distinct set
/// of keys in a process); every error is an InputError naming the key or the trace's file.
TraceWorkloadSpec ParseTraceWorkload(const JsonReader& w, const TopologySpec& topo);

/// Trace rank i runs on accelerator TracePlacement()[i]; random placement takes the run's
/// next random stream.
std::vector<uint32_t> TracePlacement(const TraceWorkloadSpec& spec, uint32_t accelerators,
                                     int64_t& stream);

class TraceReplay
{
  public:
    /// accelerators per host: what NCCL's cost model sees of each group's nodes.
    TraceReplay(const TraceJob& job, std::vector<uint32_t> placement,
                const std::vector<Ptr<RdmaNic>>* nics, QueuePairFactory qpFactory,
                CollectiveConfig cfg, uint32_t acceleratorsPerHost);
    ~TraceReplay();

    /// Schedules every rank's first collective; stops the simulator when all have ended.
    void Start();
    bool Done() const { return m_done == m_total; }
    /// "3 of 54 collectives unfinished (...)"; "" when done.
    std::string Unfinished() const;
    /// One record per collective of the trace (its copies in replicas together), each with
    /// the run's iteration, communication and exposed communication time; the first record
    /// carries the per-rank timeline for small runs.
    std::vector<RunRecord> Records(const RunSpec& spec) const;

  private:
    struct Interval
    {
        int64_t startPs;
        int64_t endPs;
    };
    struct Row;
    struct Group;

    void StreamFree(uint32_t rank, uint32_t stream);
    void Reach(uint32_t rank, uint32_t opIndex);
    void TryStart(uint32_t group);
    void Ended(uint32_t group, const CollectiveResult& r);

    const TraceJob& m_job;
    std::vector<uint32_t> m_placement;
    std::vector<std::unique_ptr<Group>> m_groups;
    std::vector<Row> m_rows;
    //! per rank: its ops' sequence number within their group, their row, and its streams'
    //! queues of op indices
    std::vector<std::vector<uint32_t>> m_seq;
    std::vector<std::vector<uint32_t>> m_rowOf;
    std::vector<std::vector<std::vector<uint32_t>>> m_streamOps;
    std::vector<std::vector<uint32_t>> m_streamNext;
    std::vector<std::vector<Interval>> m_compute; //!< per rank: its compute gaps
    std::vector<std::vector<Interval>> m_comm;    //!< per rank: reached to ended
    std::vector<int64_t> m_lastEndPs;
    uint64_t m_done{0};
    uint64_t m_total{0};
    bool m_timeline{false};
    nlohmann::json m_events; //!< the timeline, when kept
};

} // namespace metaroce
} // namespace ns3

#endif
