// The trace importer on the hand-written traces of test/data/traces: what each rank's
// collectives are, their gaps and groups, and how scaling copies and widens the groups.
#include "helper/scenario/json-reader.h"
#include "helper/trace/trace-import.h"

#include <catch2/catch.hpp>

using namespace ns3::metaroce;

namespace
{
std::vector<std::string>
Known()
{
    std::vector<std::string> files;
    for (int r = 0; r < 4; ++r)
    {
        files.push_back("test/data/traces/known-4rank-rank" + std::to_string(r) + ".json");
    }
    return files;
}
} // namespace

TEST_CASE("A profiler trace per rank: sizes, gaps from kernel times, one group", "[trace]")
{
    TraceJob job = ImportTrace(Known(), {});
    REQUIRE(job.format == "pytorch-profiler");
    REQUIRE(job.timing == "kernel");
    REQUIRE(job.worldSize == 4);
    REQUIRE(job.groups.size() == 1);
    REQUIRE(job.groups[0].ranks == std::vector<uint32_t>{0, 1, 2, 3});
    REQUIRE(job.skipped.at("wait") == 4);
    for (uint32_t r = 0; r < 4; ++r)
    {
        const auto& ops = job.ranks[r].ops;
        REQUIRE(job.ranks[r].traced);
        REQUIRE(ops.size() == 2);
        REQUIRE(ops[0].kind == "allreduce");
        REQUIRE(ops[0].bytes == 2097152); // 1,048,576 Half
        REQUIRE(ops[0].recordedUs == 40);
        // the first after the rank's first kernel (10 us of compute), the second after the
        // first ended: 100 us, rank 3 300 us
        REQUIRE(ops[0].gapPs == 10'000'000);
        REQUIRE(ops[1].gapPs == (r == 3 ? 300'000'000 : 100'000'000));
        REQUIRE(ops[0].stream == ops[1].stream);
        REQUIRE(job.ranks[r].recordedSpanUs == (r == 3 ? 390 : 190));
    }
}

TEST_CASE("An NCCL log: ranks and sub-communicators from Init lines, scaled by replicas", "[trace]")
{
    TraceImportOptions opts;
    opts.gapUs = 20;
    TraceJob job = ImportTrace({"test/data/traces/known-4rank.nccl.log"}, opts);
    REQUIRE(job.format == "nccl-log");
    REQUIRE(job.worldSize == 4);
    REQUIRE(job.groups.size() == 3);
    // the all-gathers: 131,072 bf16 per rank over 2 ranks
    REQUIRE(job.ranks[2].ops.size() == 2);
    REQUIRE(job.ranks[2].ops[0].bytes == 1048576);
    REQUIRE(job.ranks[2].ops[1].bytes == 524288);
    REQUIRE(job.ranks[2].ops[1].gapPs == 20'000'000);
    REQUIRE(job.groups[job.ranks[2].ops[1].group].ranks == std::vector<uint32_t>{0, 2});
    REQUIRE(job.groups[job.ranks[3].ops[1].group].ranks == std::vector<uint32_t>{1, 3});

    TraceJob scaled = CompleteTrace(job, 8);
    REQUIRE(scaled.worldSize == 8);
    REQUIRE(scaled.scaledFrom == 4);
    REQUIRE(scaled.groups.size() == 5); // the world widened, two pairs copied twice
    const auto& world = scaled.groups[scaled.ranks[5].ops[0].group];
    REQUIRE(world.ranks == std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7});
    REQUIRE(scaled.groups[scaled.ranks[5].ops[1].group].ranks == std::vector<uint32_t>{5, 7});
    REQUIRE(scaled.ranks[5].ops[0].bytes == 1048576); // a widened group keeps its sizes
    REQUIRE_THROWS_AS(CompleteTrace(job, 6), InputError);
    REQUIRE_THROWS_AS(CompleteTrace(job, 2), InputError);
}

TEST_CASE("One rank's trace: the others run its collectives", "[trace]")
{
    TraceJob job = CompleteTrace(ImportTrace({Known()[3]}, {}), 0);
    REQUIRE(job.worldSize == 4);
    REQUIRE(!job.ranks[0].traced);
    REQUIRE(job.ranks[0].ops.size() == 2);
    REQUIRE(job.ranks[0].ops[1].gapPs == 300'000'000); // rank 3's
}
