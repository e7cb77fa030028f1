// The fuzzers' seed corpora (test/fuzz/corpus/), inputs that once crashed the runner among
// them, through the same loaders as the fuzz targets, in the default build: each input loads
// or is an InputError, and a header deserializes from it or takes nothing.
#include "helper/scenario/json-reader.h"
#include "helper/scenario/scenario.h"
#include "helper/topology-spec.h"
#include "model/fabric/fabric-header.h"
#include "model/fabric/raw-traffic.h"
#include "model/transport/rdma-header.h"

#include "ns3/buffer.h"

#include <catch2/catch.hpp>
#include <filesystem>

using namespace ns3;
using namespace ns3::metaroce;

namespace
{
/// The corpus files of a fuzz target, by path (the tests run from the source folder).
std::vector<std::string>
Corpus(const std::string& target)
{
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator("test/fuzz/corpus/" + target))
    {
        files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    REQUIRE(!files.empty());
    return files;
}

/// Runs load(); true if it loaded, false on an InputError (any other exception fails).
template <typename F>
bool
Loads(const std::string& file, F load)
{
    INFO(file);
    try
    {
        load();
        return true;
    }
    catch (const InputError&)
    {
        return false;
    }
}
} // namespace

TEST_CASE("every seed scenario, topology, job and --set loads or is an input error", "[input]")
{
    const std::string scenarios = "scenarios/fuzz.json"; // where the fuzz target reads them
    int loaded = 0;
    int refused = 0;
    auto count = [&](bool ok) { ++(ok ? loaded : refused); };
    for (const auto& f : Corpus("scenario"))
    {
        count(Loads(f, [&]() { LoadScenarioText(ReadTextFile(f), scenarios, {}, {}); }));
    }
    for (const auto& f : Corpus("topology"))
    {
        count(Loads(f, [&]() { LoadTopologyText(ReadTextFile(f), f); }));
    }
    for (const auto& f : Corpus("job"))
    {
        std::string scenario = R"({"name": "job", "duration_us": 1000,
            "topology": "topologies/fpf-8plane-64.json", "transport": {"kind": "rocev2"},
            "workload": {"kind": "job", "job": ")" +
                               f + "\"}}";
        count(Loads(f, [&]() { LoadScenarioText(scenario, scenarios, {}, {}); }));
    }
    const std::string plane = "scenarios/plane-failure.json";
    for (const auto& f : Corpus("set"))
    {
        count(Loads(f, [&]()
                    { LoadScenarioText(ReadTextFile(plane), plane, {ReadTextFile(f)}, {}); }));
    }
    // The shipped files load; the crash inputs do not.
    CHECK(loaded >= 20);
    CHECK(refused >= 10);
}

TEST_CASE("every seed header deserializes or takes nothing, within its bytes", "[header]")
{
    for (const auto& f : Corpus("headers"))
    {
        INFO(f);
        std::string bytes = ReadTextFile(f);
        REQUIRE(!bytes.empty());
        Buffer b;
        b.AddAtStart(bytes.size() - 1);
        b.Begin().Write(reinterpret_cast<const uint8_t*>(bytes.data()) + 1, bytes.size() - 1);
        RdmaHeader rdma;
        FabricHeader fabric;
        RawHeader raw;
        Header* h = bytes[0] % 3 == 0   ? static_cast<Header*>(&rdma)
                    : bytes[0] % 3 == 1 ? static_cast<Header*>(&fabric)
                                        : static_cast<Header*>(&raw);
        uint32_t used = h->Deserialize(b.Begin());
        bool truncated = f.find("truncated") != std::string::npos;
        CHECK(used == (truncated ? 0 : h->GetSerializedSize()));
        CHECK(used <= bytes.size() - 1);
    }
}
