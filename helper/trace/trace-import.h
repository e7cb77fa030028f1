/*
 * Importing a training job's communication from the records its users already have: PyTorch
 * profiler traces (Kineto's Chrome-trace JSON, plain or gzip) and NCCL's own log
 * (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL, with INIT for sub-communicators).
 *
 * The result is, per rank, its collectives in the order the rank issued them: what each one is,
 * its size in nccl-tests' terms, its process group, the stream it ran on and the compute gap
 * before it on that stream. Errors are InputErrors naming the file, the event (or line) and the
 * field; events that move no data (wait, barrier) are counted, not replayed.
 */
#ifndef METAROCE_TRACE_IMPORT_H
#define METAROCE_TRACE_IMPORT_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ns3
{
namespace metaroce
{

/// One collective call of a rank.
struct TraceOp
{
    std::string name;  //!< as the trace names it (allreduce, _allgather_base, AllReduce, ...)
    std::string kind;  //!< allreduce, allgather, reducescatter, alltoall or broadcast
    uint64_t bytes{0}; //!< nccl-tests' S: the buffer reduced, gathered or sent (all-to-all)
    std::vector<uint64_t> inSplits;  //!< all-to-all-v: elements sent to each peer
    std::vector<uint64_t> outSplits; //!< all-to-all-v: elements received from each peer
    uint32_t group{0};               //!< index into TraceJob::groups
    uint32_t stream{0};              //!< the rank's stream (index in order of first use)
    int64_t gapPs{0};      //!< compute before it on its stream: after the stream's previous op
    double recordedUs{-1}; //!< its kernel's duration in the trace (< 0: none recorded)
    std::string source;    //!< "FILE event N" / "FILE line N", for messages
};

struct TraceGroup
{
    std::string name;
    std::vector<uint32_t> ranks; //!< global ranks, in the communicator's rank order
    uint32_t templateGroup{0};   //!< after scaling: the trace's group this one copies
};

struct TraceRank
{
    bool traced{false}; //!< false: no record of this rank (it copies a traced one)
    std::string file;
    std::vector<TraceOp> ops;
    double recordedSpanUs{-1}; //!< from its first kernel to its last collective's end
};

struct TraceJob
{
    std::string format; //!< pytorch-profiler or nccl-log
    std::string timing; //!< kernel (GPU timestamps), cpu (profiler CPU times) or none
    uint32_t worldSize{0};
    std::vector<TraceGroup> groups;
    std::vector<TraceRank> ranks; //!< worldSize entries
    //! events that move no data, counted by name (reported once, not replayed)
    std::map<std::string, uint64_t> skipped;
    uint32_t scaledFrom{0}; //!< the trace's world size when scaled (0: not scaled)
    uint32_t steps{0};      //!< profiler steps the trace covers (ProfilerStep#N; 0: unknown)
};

struct TraceImportOptions
{
    std::string format{"auto"}; //!< pytorch-profiler, nccl-log or auto (by content)
    double gapUs{0};            //!< NCCL logs: compute before every collective
};

/// Reads one trace, a trace per rank, or an NCCL log (gzip or plain). Throws InputError.
TraceJob ImportTrace(const std::vector<std::string>& files, const TraceImportOptions& opts);

/// The job on every rank of its world, scaled to `ranks` ranks (0: as recorded). Ranks without
/// a trace copy the lowest traced rank, which needs every group it uses to hold all ranks.
/// Scaling replicates the world ranks/world times (replica k holds ranks k*W .. k*W + W-1): a
/// group of every rank of the trace (the data-parallel group of a data-parallel job) widens to
/// every rank of the scaled world, keeping its sizes; any other group is copied into each
/// replica. Refused (InputError) for a world that does not divide `ranks` and for an
/// all-to-all over the whole world (widening would change who exchanges what). Checks that
/// the members of every group agree on its sequence of collectives.
TraceJob CompleteTrace(const TraceJob& job, uint32_t ranks);

/// "wait x6, barrier x1" (empty if nothing was skipped).
std::string DescribeSkipped(const TraceJob& job);

} // namespace metaroce
} // namespace ns3

#endif
