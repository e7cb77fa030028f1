// libFuzzer target: the bytes are a topology file's contents. Any InputError is a correct
// answer; another exception, an abort or a sanitizer report is a fault of the loader.
#include "helper/scenario/json-reader.h"
#include "helper/topology-spec.h"

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
        TopologySpec t = LoadTopologyText(text, "fuzz.json");
        t.ToJson().dump();
    }
    catch (const InputError&)
    {
    }
    return 0;
}
