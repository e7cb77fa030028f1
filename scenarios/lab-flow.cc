/*
 * A program of one's own with the module, no scenario file: the seeds' lab (two NICs of
 * 8 x 100G on eight planes), one MetaRoCE connection, 64 messages of 16 MiB, and the goodput.
 *
 *   lab-flow [TOPOLOGY.json]     (default: topologies/fpf-8x100g-lab.json)
 *
 * Built in the tree and, by the tests, against the installed package (find_package(metaroce)).
 */
#include "ns3/metaroce-module.h"
#include "ns3/simulator.h"

#include <iostream>

using namespace ns3;
using namespace ns3::metaroce;

int
main(int argc, char* argv[])
{
    const std::string file = argc > 1 ? argv[1] : "topologies/fpf-8x100g-lab.json";
    UseFastSimulator();
    TopologySpec topo;
    try
    {
        topo = LoadTopologyFile(file);
    }
    catch (const std::exception& e)
    {
        std::cerr << "lab-flow: error: " << e.what() << "\n";
        return 2;
    }
    double gbps = 0;
    uint32_t done = 0;
    const uint32_t messages = 64;
    {
        auto fabric = FabricHelper().Build(topo);
        RdmaHelper rdma(*fabric, 1 + fabric->AssignStreams(1));
        rdma.InstallNics();
        rdma.SetQueuePairType("ns3::metaroce::MetaRoceQueuePair");
        auto [tx, rx] = rdma.Connect(0, 1);
        const uint64_t bytes = 16 << 20;
        Time last;
        for (uint32_t i = 0; i < messages; ++i)
        {
            tx->PostSend(bytes, 0,
                         [&](const RdmaCompletion&)
                         {
                             last = Simulator::Now();
                             ++done;
                         });
        }
        Simulator::Run();
        gbps = done * bytes * 8.0 / last.GetSeconds() / 1e9;
    }
    Simulator::Destroy();
    if (done != messages)
    {
        std::cerr << "lab-flow: " << done << " of " << messages << " messages completed\n";
        return 3;
    }
    std::cout << "goodput_gbps " << gbps << "\n";
    return 0;
}
