// libFuzzer target: the bytes are a job file's contents, read the way a scenario reads its
// job (from a file that names it in "workload.job"). Any InputError is a correct answer;
// another exception, an abort or a sanitizer report is a fault of the loader.
#include "helper/scenario/json-reader.h"
#include "helper/scenario/scenario.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

using namespace ns3::metaroce;

namespace
{
std::string g_jobFile;
std::string g_scenario;
} // namespace

extern "C" int
LLVMFuzzerInitialize(int*, char***)
{
    char name[] = "/tmp/metaroce-fuzz-job-XXXXXX";
    int fd = mkstemp(name);
    if (fd < 0)
    {
        std::perror("mkstemp");
        std::abort();
    }
    close(fd);
    g_jobFile = name;
    std::atexit([]() { std::remove(g_jobFile.c_str()); });
    g_scenario = R"({"name": "fuzz-job", "duration_us": 1000,
                     "topology": "topologies/fpf-8plane-64.json",
                     "transport": {"kind": "rocev2"},
                     "workload": {"kind": "job", "job": ")" +
                 g_jobFile + "\"}}";
    return 0;
}

extern "C" int
LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size)
{
    FILE* f = std::fopen(g_jobFile.c_str(), "wb");
    if (f == nullptr || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0)
    {
        std::perror(g_jobFile.c_str());
        std::abort();
    }
    try
    {
        Scenario sc =
            LoadScenarioText(g_scenario, METAROCE_SOURCE_DIR "/scenarios/fuzz.json", {}, {});
        for (const auto& r : sc.runs)
        {
            r.resolved.dump();
        }
    }
    catch (const InputError&)
    {
    }
    return 0;
}
