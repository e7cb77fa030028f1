// libFuzzer target: the bytes are a scenario file's contents. Any InputError is a correct
// answer; another exception, an abort or a sanitizer report is a fault of the loader.
#include "helper/scenario/json-reader.h"
#include "helper/scenario/scenario.h"

#include <cstddef>
#include <cstdint>
#include <string>

using namespace ns3::metaroce;

extern "C" int
LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size)
{
    std::string text(reinterpret_cast<const char*>(data), size);
    try
    {
        // In scenarios/, so that names such as topologies/fpf-8plane-64.json resolve.
        Scenario sc = LoadScenarioText(text, METAROCE_SOURCE_DIR "/scenarios/fuzz.json", {}, {});
        for (const auto& r : sc.runs)
        {
            // what --dry-run prints next
            r.resolved.dump();
            r.topology.ToJson().dump();
        }
    }
    catch (const InputError&)
    {
    }
    return 0;
}
