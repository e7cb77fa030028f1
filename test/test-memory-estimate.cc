// The memory estimate's arithmetic: sizes, what grows it, the limit's parsing, the messages.
#include "helper/scenario/json-reader.h"
#include "helper/scenario/memory-estimate.h"

#include <catch2/catch.hpp>

using namespace ns3;
using namespace ns3::metaroce;

namespace
{
RunSpec
Demo(std::vector<std::string> sets, const std::string& variant = "MetaRoCE")
{
    for (const auto& r : LoadScenario("scenarios/demo.json", sets).runs)
    {
        if (r.variant == variant)
        {
            return r;
        }
    }
    FAIL("no variant " << variant);
    return {};
}
} // namespace

TEST_CASE("memory estimate grows with queue pairs, messages in flight and ranks", "[memory]")
{
    const std::string big = "topology.switch_radix=512";
    // the 64-NIC demo's streams: more QPs, then more bytes outstanding per QP
    uint64_t q1 = EstimatePeakMemory(Demo({"workload.qps_per_flow=1"})).bytes;
    uint64_t q64 = EstimatePeakMemory(Demo({"workload.qps_per_flow=64"})).bytes;
    CHECK(q64 > q1);
    // (4 KiB messages: with the demo's 1 MiB, one alone fills a QP's in-flight bound)
    uint64_t o1 =
        EstimatePeakMemory(Demo({"workload.message_bytes=4096", "workload.outstanding_per_qp=1"}))
            .bytes;
    uint64_t o8 =
        EstimatePeakMemory(Demo({"workload.message_bytes=4096", "workload.outstanding_per_qp=8"}))
            .bytes;
    CHECK(o8 > o1);
    // An all-to-all opens a connection per ordered pair of ranks: quadratic in the ranks.
    auto a2a = [&](uint32_t ranks)
    {
        return EstimatePeakMemory(Demo(
            {R"(variants=[{"name":"MetaRoCE","set":{}}])", "topology.nics=4096", big,
             "outputs={}", // the demo's table names streams columns
             R"(workload={"kind":"collective","op":"alltoall","sizes_bytes":[262144],"ranks":)" +
                 std::to_string(ranks) + "}"}));
    };
    MemoryEstimate r256 = a2a(256);
    MemoryEstimate r1024 = a2a(1024);
    CHECK(r256.connections == 256u * 255u);
    CHECK(r1024.connections == 1024u * 1023u);
    // Connections alive at once: every peer of a rank on 256 ranks, 256 of 1,023 (NCCL's p2p
    // channels x sends per batch) on 1,024; the closed ones leave a record each.
    CHECK(r1024.workloadBytes > 4 * r256.workloadBytes);
    // The plans are part of the workload, and grow with the peers.
    CHECK(r256.planBytes > 0);
    CHECK(r1024.planBytes <= r1024.workloadBytes);
    CHECK(r1024.planBytes > 10 * r256.planBytes);
    // The parts add up to the total.
    CHECK(r1024.bytes == r1024.processBytes + r1024.fabricBytes + r1024.nicBytes +
                             r1024.workloadBytes + r1024.trafficBytes);
}

TEST_CASE("memory sizes parse as bytes or with a binary unit", "[memory]")
{
    CHECK(ParseMemorySize("512", "--max-memory") == 512u);
    CHECK(ParseMemorySize("1M", "--max-memory") == 1u << 20);
    CHECK(ParseMemorySize("2g", "--max-memory") == 2ull << 30);
    CHECK(ParseMemorySize("1.5K", "--max-memory") == 1536u);
    CHECK(ParseMemorySize("3GiB", "--max-memory") == 3ull << 30);
    CHECK(ParseMemorySize("1TB", "--max-memory") == 1ull << 40);
    for (const char* bad : {"", "lots", "12X", "0", "-5", "1.2.3G", "G", "5 G", "1KK"})
    {
        INFO(bad);
        CHECK_THROWS_WITH(ParseMemorySize(bad, "--max-memory"), Catch::Contains("--max-memory"));
    }
}

TEST_CASE("a refusal names the estimate and the limit; an allocation failure the phase", "[memory]")
{
    std::vector<RunSpec> runs = {Demo({}, "MetaRoCE")};
    MemoryLimit none;
    CHECK(MemoryRefusal(runs, none).empty()); // no limit known: nothing refused
    MemoryLimit tiny{1 << 20, "--max-memory", true};
    std::string why = MemoryRefusal(runs, tiny);
    CHECK_THAT(why, Catch::Contains("'MetaRoCE'") && Catch::Contains("1.0 MiB") &&
                        Catch::Contains("--max-memory"));
    MemoryLimit roomy{1ull << 40, "--max-memory", true};
    CHECK(MemoryRefusal(runs, roomy).empty());

    SetRunPhase("simulating", "MetaRoCE");
    CHECK_THAT(OutOfMemoryMessage(runs), Catch::StartsWith("out of memory while simulating") &&
                                             Catch::Contains("variant 'MetaRoCE'"));
    SetRunPhase("writing results", "");
    CHECK(OutOfMemoryMessage(runs) == "out of memory while writing results");
    SetRunPhase("loading the scenario", "");
}
