// libFuzzer target: the bytes are one --set argument (key.path=value), applied to a shipped
// scenario with streams, faults and variants. Any InputError is a correct answer; another
// exception, an abort or a sanitizer report is a fault of the loader.
#include "helper/scenario/json-reader.h"
#include "helper/scenario/scenario.h"

#include <cstddef>
#include <cstdint>
#include <string>

using namespace ns3::metaroce;

namespace
{
const char* kScenario = METAROCE_SOURCE_DIR "/scenarios/plane-failure.json";
std::string g_text;
} // namespace

extern "C" int
LLVMFuzzerInitialize(int*, char***)
{
    g_text = ReadTextFile(kScenario);
    return 0;
}

extern "C" int
LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size)
{
    std::string set(reinterpret_cast<const char*>(data), size);
    if (set.find('\0') != std::string::npos)
    {
        return 0; // a command-line argument holds no NUL
    }
    try
    {
        Scenario sc = LoadScenarioText(g_text, kScenario, {set}, {});
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
