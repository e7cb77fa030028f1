/*
 * A collective from C++: NCCL's all-reduce of 8 MiB over the 64 accelerators of the 64-NIC,
 * 8-plane fabric, under MetaRoCE and under RoCEv2 (PFC, no congestion control), with the
 * algorithm, protocol and channels NCCL's cost model picks.
 *
 *   collective-64 [TOPOLOGY.json]     (default: topologies/fpf-8plane-64.json)
 *
 * Built in the tree and, by the tests, against the installed package (find_package(metaroce)).
 */
#include "ns3/boolean.h"
#include "ns3/metaroce-module.h"
#include "ns3/simulator.h"
#include "ns3/string.h"

#include <iostream>
#include <numeric>

using namespace ns3;
using namespace ns3::metaroce;

namespace
{
/// One all-reduce of `bytes` on a fresh fabric; returns what the communicator reports.
CollectiveResult
AllReduce(const TopologySpec& topo, const std::string& qpType, uint64_t bytes)
{
    CollectiveResult result;
    {
        FabricHelper fh;
        if (qpType == "ns3::metaroce::RoceV2QueuePair")
        {
            fh.SetSwitchAttribute("PfcEnabled", BooleanValue(true)); // RoCEv2 as deployed
        }
        auto fabric = fh.Build(topo);
        RdmaHelper rdma(*fabric, 1 + fabric->AssignStreams(1));
        rdma.InstallNics();
        rdma.SetQueuePairType(qpType);
        if (qpType == "ns3::metaroce::RoceV2QueuePair")
        {
            rdma.QpFactory().Set("CongestionControl",
                                 StringValue("ns3::metaroce::RdmaNoCongestionControl"));
        }
        std::vector<Ptr<RdmaNic>> nics;
        for (uint32_t i = 0; i < rdma.NumNics(); ++i)
        {
            nics.push_back(rdma.Nic(i));
        }
        std::vector<uint32_t> ranks(nics.size());
        std::iota(ranks.begin(), ranks.end(), 0u);
        Communicator comm(ranks, &nics, rdma.QpFactory(), CollectiveConfig{});
        comm.Start(CollectiveOp::AllReduce, CollectiveAlgorithm::Auto, bytes,
                   [&result](const CollectiveResult& r)
                   {
                       result = r;
                       Simulator::Stop();
                   });
        Simulator::Run();
    }
    Simulator::Destroy();
    return result;
}
} // namespace

int
main(int argc, char* argv[])
{
    const std::string file = argc > 1 ? argv[1] : "topologies/fpf-8plane-64.json";
    UseFastSimulator();
    TopologySpec topo;
    try
    {
        topo = LoadTopologyFile(file);
    }
    catch (const std::exception& e)
    {
        std::cerr << "collective-64: error: " << e.what() << "\n";
        return 2;
    }
    const uint64_t bytes = 8 << 20;
    for (const char* qp : {"ns3::metaroce::MetaRoceQueuePair", "ns3::metaroce::RoceV2QueuePair"})
    {
        CollectiveResult r = AllReduce(topo, qp, bytes);
        if (r.endPs <= r.startPs)
        {
            std::cerr << "collective-64: " << qp << ": the all-reduce did not finish\n";
            return 3;
        }
        std::cout << qp << " " << ToString(r.algorithm) << "/" << ToString(r.protocol)
                  << " channels " << r.channels << " time_us " << (r.endPs - r.startPs) / 1e6
                  << "\n";
    }
    return 0;
}
