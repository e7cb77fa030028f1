// The raw-traffic workload: packets without a transport.
#include "helper/mpi/distributed-run.h"
#include "helper/run/run-context.h"
#include "helper/run/run-supervisor.h"
#include "model/fabric/raw-traffic.h"

#include "ns3/simulator.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <vector>

namespace ns3
{
namespace metaroce
{

/// Raw traffic: returns the workload's metrics and counters.
void
RunRaw(const RunSpec& spec, Fabric& fabric, int64_t& stream, ProgressReporter& progress,
       RunRecord& rec)
{
    const RawWorkloadSpec& w = spec.raw;
    const uint32_t n = fabric.NumNics();
    std::vector<Ptr<RawTrafficEndpoint>> eps(n);
    for (uint32_t i = 0; i < n; ++i)
    {
        eps[i] = CreateObject<RawTrafficEndpoint>();
        eps[i]->Install(fabric.Host(i), i);
    }
    FastRng rng(static_cast<uint64_t>(stream++));
    auto flows = PatternFlows(w.who, n, rng);
    const Time stop = MicroSeconds(1) * spec.durationUs;
    const uint32_t wireBytes =
        FabricFrame::Make(Create<Packet>(w.payloadBytes + 16), 0, 0, 0, 0, 0).wireBytes;
    const int64_t portGapPs = static_cast<int64_t>(wireBytes * 8e3 / w.rateGbps);
    uint64_t nflows = 0;
    for (const auto& [src, dst] : flows)
    {
        for (uint32_t p : w.planes)
        {
            for (uint32_t e = 0; e < w.entropiesPerFlow; ++e)
            {
                RawTrafficEndpoint::FlowSpec fs;
                fs.dst = dst;
                fs.port = p;
                fs.entropy = static_cast<uint16_t>(rng.Next());
                fs.payloadBytes = w.payloadBytes;
                fs.rate = DataRate(static_cast<uint64_t>(w.rateGbps * 1e9 / w.entropiesPerFlow));
                // Sub-flow e starts e port-packet-times late: together they are smooth.
                fs.start = PicoSeconds(portGapPs * e);
                fs.stop = stop;
                if (IsLocal(fabric.Host(src))) // another process's, in a distributed run
                {
                    eps[src]->AddFlow(fs);
                }
                ++nflows;
            }
        }
    }
    // Frames in flight at the end still arrive: the run ends when the fabric is empty.
    RunSupervisor supervisor(spec, fabric, nullptr, Time(0));
    Time limit = stop;
    bool hardLimit = false;
    if (DistributedRun* d = CurrentDistributedRun(); d && d->StopAfter().IsStrictlyPositive())
    {
        limit = stop + d->StopAfter(); // an engine that ends only at a stop time
        hardLimit = true;
    }
    supervisor.Run(
        progress, limit, []() { return true; }, hardLimit);
    const double endedUs = Simulator::Now().GetNanoSeconds() / 1e3;

    uint64_t sent = 0;
    uint64_t received = 0;
    uint64_t payload = 0;
    uint64_t outOfOrder = 0;
    int64_t latSum = 0;
    int64_t latMax = 0;
    for (const auto& ep : eps)
    {
        sent += ep->GetSentPackets();
        const auto& s = ep->GetSinkStats();
        received += s.packets;
        payload += s.payloadBytes;
        outOfOrder += s.outOfOrder;
        latSum += s.latencySumPs;
        latMax = std::max(latMax, s.latencyMaxPs);
    }
    if (DistributedRun* d = CurrentDistributedRun())
    {
        std::vector<uint64_t> sums{sent, received, payload, outOfOrder,
                                   static_cast<uint64_t>(latSum)};
        std::vector<int64_t> maxima{latMax};
        d->Sum(sums);
        d->Max(maxima);
        sent = sums[0];
        received = sums[1];
        payload = sums[2];
        outOfOrder = sums[3];
        latSum = static_cast<int64_t>(sums[4]);
        latMax = maxima[0];
    }
    // Goodput: payload of frames sent during the run (and delivered), over the run's length.
    const double perUs = 8.0 / (spec.durationUs * 1e3);
    rec.metrics = {
        {"offered_goodput_gbps", static_cast<double>(sent) * w.payloadBytes * perUs},
        {"delivered_goodput_gbps", payload * perUs},
        {"delivery_ratio", sent ? static_cast<double>(received) / sent : 0.0},
        {"mean_latency_us", received ? latSum / 1e6 / received : 0.0},
        {"max_latency_us", latMax / 1e6},
        {"duration_us", spec.durationUs},
    };
    rec.counters = {{"flows", nflows},
                    {"packets_sent", sent},
                    {"packets_delivered", received},
                    {"out_of_order", outOfOrder}};
    std::ostringstream left;
    left << "traffic stopped at " << endedUs << " of " << spec.durationUs << " us";
    supervisor.Finish(rec, left.str());
    for (auto& ep : eps)
    {
        ep->Dispose();
    }
}

} // namespace metaroce
} // namespace ns3
