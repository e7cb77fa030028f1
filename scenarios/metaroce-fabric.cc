/*
 * metaroce-fabric: builds a topology file's fabric, without traffic, and reports its size,
 * build time and memory as JSON (what scripts/bench records for the fabric-build cases).
 *
 *   metaroce-fabric TOPOLOGY.json
 *
 * Exit status: 0 done, 2 bad input.
 */
#include "helper/fabric-helper.h"
#include "helper/run/scenario-runner.h"
#include "helper/scenario/json-reader.h"

#include <chrono>
#include <iostream>

using namespace ns3;
using namespace ns3::metaroce;

int
main(int argc, char* argv[])
{
    if (argc != 2 || std::string(argv[1]) == "--help")
    {
        std::cerr << "usage: metaroce-fabric TOPOLOGY.json\n";
        return argc == 2 ? 0 : 2;
    }
    TopologySpec spec;
    try
    {
        spec = LoadTopologyFile(argv[1]);
    }
    catch (const InputError& e)
    {
        std::cerr << "metaroce-fabric: error: " << e.what() << "\n";
        return 2;
    }
    uint64_t rss0 = PeakRssBytes();
    auto t0 = std::chrono::steady_clock::now();
    auto fabric = FabricHelper().Build(spec);
    fabric->AssignStreams(1);
    double buildS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    uint64_t rss = PeakRssBytes();
    nlohmann::json j = {
        {"topology", spec.name},
        {"nics", fabric->NumNics()},
        {"planes", fabric->NumPlanes()},
        {"tiers", fabric->Geometry().tiers},
        {"switches", fabric->Switches().size()},
        {"links", fabric->Links().size()},
        {"ports", fabric->NumPorts()},
        {"build_wall_s", buildS},
        {"peak_rss_bytes", rss},
        {"fabric_bytes_per_link",
         fabric->Links().empty() ? 0.0 : static_cast<double>(rss - rss0) / fabric->Links().size()}};
    std::cout << j.dump(2) << "\n";
    return 0;
}
