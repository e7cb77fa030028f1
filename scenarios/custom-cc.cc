/*
 * A congestion control of one's own, plugged into MetaRoCE through RdmaCongestionOps: a
 * delay-target window per path (one packet more per RTT while the path's RTT stays under
 * TargetDelay; above it, once per RTT, a cut in proportion to the excess), against the
 * module's AIMD, on an 8-to-1 incast over the 64-NIC fabric. Prints each one's completion
 * time and the deepest queue of the receiver's ports, read from the ports' QueueBytes traces.
 *
 *   custom-cc [TOPOLOGY.json]     (default: topologies/fpf-8plane-64.json)
 *
 * Built in the tree and, by the tests, against the installed package (find_package(metaroce)).
 */
#include "ns3/metaroce-module.h"
#include "ns3/simulator.h"

#include <algorithm>
#include <iostream>

using namespace ns3;
using namespace ns3::metaroce;

namespace
{
class DelayTargetCc : public RdmaCongestionOps
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid =
            TypeId("DelayTargetCc")
                .SetParent<RdmaCongestionOps>()
                .AddConstructor<DelayTargetCc>()
                .AddAttribute("TargetDelay", "The RTT a path's window aims at.",
                              TimeValue(MicroSeconds(6)),
                              MakeTimeAccessor(&DelayTargetCc::m_target), MakeTimeChecker());
        return tid;
    }

    std::string GetName() const override { return "delay-target"; }

    // Each QP forks its own instance from the one its factory made (same attributes).
    Ptr<RdmaCongestionOps> Fork() const override { return CopyObject<DelayTargetCc>(this); }

    // `path` indexes s.paths; the windows are in bytes, capped at maxCwndBytes.
    void OnAck(CcState& s, uint32_t path, uint64_t ackedBytes, int64_t rttPs, bool ecn) override
    {
        CcPath& p = s.paths[path];
        const double mtu = s.mtu;
        const int64_t target = m_target.GetPicoSeconds();
        const int64_t now = Simulator::Now().GetPicoSeconds();
        if (rttPs < 0)
        {
            return; // no sample on this ACK
        }
        if (rttPs <= target)
        {
            p.cwndBytes += mtu * static_cast<double>(ackedBytes) / std::max(p.cwndBytes, mtu);
        }
        else if (p.lastDecreasePs < 0 || now - p.lastDecreasePs >= p.srttPs)
        {
            const double excess = static_cast<double>(rttPs - target) / static_cast<double>(rttPs);
            p.cwndBytes *= std::max(1.0 - excess, 0.5);
            p.lastDecreasePs = now;
        }
        p.cwndBytes = std::clamp(p.cwndBytes, mtu, p.maxCwndBytes);
    }

    void OnLoss(CcState& s, uint32_t path, uint32_t lost) override
    {
        s.paths[path].cwndBytes = std::max(s.paths[path].cwndBytes / 2, double(s.mtu));
    }

    void OnTimeout(CcState& s, uint32_t path) override { s.paths[path].cwndBytes = s.mtu; }

  private:
    Time m_target;
};

NS_OBJECT_ENSURE_REGISTERED(DelayTargetCc);

struct Outcome
{
    double finishUs{0};
    uint64_t deepestQueueBytes{0};
    uint32_t completed{0};
};

/// NICs 1..8 each send 4 MiB to NIC 0 over MetaRoCE with congestion control `cc`.
Outcome
Incast(const TopologySpec& topo, TypeId cc)
{
    Outcome out;
    {
        auto fabric = FabricHelper().Build(topo);
        RdmaHelper rdma(*fabric, 1 + fabric->AssignStreams(1));
        rdma.InstallNics();
        rdma.SetQueuePairType("ns3::metaroce::MetaRoceQueuePair");
        rdma.QpFactory().Set("CongestionControl", TypeIdValue(cc));
        // The receiver's ports are the far ends of NIC 0's links: trace their queues.
        for (uint32_t plane = 0; plane < fabric->NumPlanes(); ++plane)
        {
            FabricNetDevice* port = fabric->HostPort(0, plane)->GetPeer();
            port->TraceConnectWithoutContext("QueueBytes",
                                             Callback<void, uint64_t, uint64_t>(
                                                 [&out](uint64_t, uint64_t bytes) {
                                                     out.deepestQueueBytes =
                                                         std::max(out.deepestQueueBytes, bytes);
                                                 }));
        }
        for (uint32_t src = 1; src <= 8; ++src)
        {
            auto [tx, rx] = rdma.Connect(src, 0);
            tx->PostSend(4 << 20, 0,
                         [&out](const RdmaCompletion& c)
                         {
                             out.finishUs = std::max(out.finishUs, c.completedPs / 1e6);
                             ++out.completed;
                         });
        }
        Simulator::Run();
    }
    Simulator::Destroy();
    return out;
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
        std::cerr << "custom-cc: error: " << e.what() << "\n";
        return 2;
    }
    for (TypeId cc : {MetaRoceAimd::GetTypeId(), DelayTargetCc::GetTypeId()})
    {
        const Outcome o = Incast(topo, cc);
        if (o.completed != 8)
        {
            std::cerr << "custom-cc: " << o.completed << " of 8 messages completed\n";
            return 3;
        }
        std::cout << cc.GetName() << ": incast_finish_us " << o.finishUs << " deepest_queue_bytes "
                  << o.deepestQueueBytes << "\n";
    }
    return 0;
}
