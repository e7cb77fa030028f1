#include "scenario-runner.h"

#include "distributed-run.h"
#include "fabric-helper.h"
#include "json-reader.h"
#include "memory-estimate.h"
#include "model/collective/communicator.h"
#include "model/fabric/raw-traffic.h"
#include "model/metaroce/metaroce-queue-pair.h"
#include "model/transport/scale-up.h"
#include "rdma-helper.h"
#include "run-supervisor.h"
#include "run-watchdog.h"

#include "ns3/config.h"
#include "ns3/log.h"
#include "ns3/object-factory.h"
#include "ns3/rng-seed-manager.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <sys/resource.h>

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("ScenarioRunner");

uint64_t
PeakRssBytes()
{
    // VmHWM, this program's own peak: getrusage's ru_maxrss keeps the peak of the process
    // image before exec, so a run started by a large parent (a Python script that loaded
    // matplotlib: 47 MB) reported that as its own.
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
    {
        if (line.rfind("VmHWM:", 0) == 0)
        {
            return std::stoull(line.substr(6)) * 1024; // "VmHWM:   123456 kB"
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<uint64_t>(ru.ru_maxrss) * 1024;
}

namespace
{
/// (src, dst) pairs of a traffic pattern over n NICs.
std::vector<std::pair<uint32_t, uint32_t>>
PatternFlows(const PatternSpec& w, uint32_t n, FastRng& rng)
{
    std::vector<std::pair<uint32_t, uint32_t>> flows;
    if (w.pattern == "explicit")
    {
        return w.flows;
    }
    if (w.pattern == "pairs")
    {
        for (uint32_t i = 0; i + 1 < n; i += 2)
        {
            flows.emplace_back(i, i + 1);
        }
    }
    else if (w.pattern == "incast")
    {
        for (uint32_t i = 0; i < n && flows.size() < w.senders; ++i)
        {
            if (i != w.incastTarget)
            {
                flows.emplace_back(i, w.incastTarget);
            }
        }
    }
    else if (w.pattern == "all-to-all")
    {
        // Every ordered pair, by source then destination.
        flows.reserve(static_cast<std::size_t>(n) * (n - 1));
        for (uint32_t i = 0; i < n; ++i)
        {
            for (uint32_t j = 0; j < n; ++j)
            {
                if (j != i)
                {
                    flows.emplace_back(i, j);
                }
            }
        }
    }
    else if (w.pattern == "random-peers")
    {
        // Every NIC connects to peersPerNic distinct others, chosen at random.
        std::vector<uint32_t> others(n);
        for (uint32_t i = 0; i < n; ++i)
        {
            std::iota(others.begin(), others.end(), 0u);
            std::swap(others[i], others[n - 1]);
            for (uint32_t k = 0; k < w.peersPerNic; ++k)
            {
                uint32_t j = k + static_cast<uint32_t>(rng.Next() % (n - 1 - k));
                std::swap(others[k], others[j]);
                flows.emplace_back(i, others[k]);
            }
        }
    }
    else
    {
        // A random derangement (Sattolo's algorithm gives one cycle: nobody sends to itself).
        std::vector<uint32_t> perm(n);
        std::iota(perm.begin(), perm.end(), 0u);
        for (uint32_t i = n - 1; i > 0; --i)
        {
            uint32_t j = static_cast<uint32_t>(rng.Next() % i);
            std::swap(perm[i], perm[j]);
        }
        for (uint32_t i = 0; i < n; ++i)
        {
            flows.emplace_back(i, perm[i]);
        }
    }
    return flows;
}

/// Percentile of a sorted vector (nearest rank).
double
Percentile(const std::vector<double>& sorted, double q)
{
    if (sorted.empty())
    {
        return 0;
    }
    std::size_t k = static_cast<std::size_t>(std::ceil(q * sorted.size()));
    return sorted[std::min(sorted.size() - 1, k == 0 ? 0 : k - 1)];
}

/// Sets each plane's loss rate to what the loss faults give at time t: the rate of the last
/// one in file order that is active there and covers the plane (as when every fault holds
/// from the start, the later one applies), 0 if none does.
void
SetLossAt(Fabric& fabric, const std::vector<FaultSpec>& loss, double tUs)
{
    for (uint32_t p = 0; p < fabric.NumPlanes(); ++p)
    {
        double rate = 0;
        for (const auto& f : loss)
        {
            if ((f.allPlanes || f.plane == p) && f.atUs <= tUs &&
                (f.untilUs < 0 || tUs < f.untilUs))
            {
                rate = f.rate;
            }
        }
        fabric.SetLossRate(rate, static_cast<int32_t>(p));
    }
}

void
ScheduleFaults(Fabric& fabric, const std::vector<FaultSpec>& faults)
{
    // Loss bursts: the rates change only where a loss fault begins or ends; a file whose
    // loss faults all hold from the start schedules nothing.
    auto loss = std::make_shared<std::vector<FaultSpec>>();
    std::vector<double> changes;
    for (const auto& f : faults)
    {
        if (f.kind == "loss")
        {
            loss->push_back(f);
            if (f.atUs > 0)
            {
                changes.push_back(f.atUs);
            }
            if (f.untilUs >= 0)
            {
                changes.push_back(f.untilUs);
            }
        }
    }
    if (!loss->empty())
    {
        SetLossAt(fabric, *loss, 0);
    }
    std::sort(changes.begin(), changes.end());
    changes.erase(std::unique(changes.begin(), changes.end()), changes.end());
    Fabric* fab = &fabric;
    for (double t : changes)
    {
        Simulator::Schedule(MicroSeconds(1) * t, [fab, loss, t]() { SetLossAt(*fab, *loss, t); });
    }
    for (const auto& f : faults)
    {
        Time at = MicroSeconds(1) * f.atUs;
        Time until = MicroSeconds(1) * f.untilUs;
        if (f.kind == "plane_down")
        {
            // scope "fabric": the plane's switches lose their links, the NICs' own stay up
            // (the NICs learn of it only from timeouts).
            auto [b, e] = fabric.PlaneLinkRange(f.plane);
            for (std::size_t i = b; i < e; ++i)
            {
                Ptr<FabricChannel> l = fabric.Links()[i];
                bool nicLink = DynamicCast<FabricSwitch>(l->GetDevice(0)->GetNode()) == nullptr ||
                               DynamicCast<FabricSwitch>(l->GetDevice(1)->GetNode()) == nullptr;
                if (f.scope == "fabric" && nicLink)
                {
                    continue;
                }
                fabric.ScheduleLinkState(l, at, false);
                if (f.untilUs >= 0)
                {
                    fabric.ScheduleLinkState(l, until, true);
                }
            }
        }
        else if (f.kind == "link_down")
        {
            Ptr<FabricChannel> link = fabric.HostPort(f.nic, f.plane)->GetFabricChannel();
            fabric.ScheduleLinkState(link, at, false);
            if (f.untilUs >= 0)
            {
                fabric.ScheduleLinkState(link, until, true);
            }
        }
    }
}

/// The endpoint latencies of a topology: NcclEndpoint's defaults and the `endpoint` keys.
EndpointLatency
BuildEndpoint(const TopologySpec& t)
{
    static const std::map<std::string, std::string> kAttribute = {{"kernel_step_ns", "KernelStep"},
                                                                  {"proxy_ns", "Proxy"},
                                                                  {"doorbell_ns", "Doorbell"},
                                                                  {"completion_ns", "Completion"},
                                                                  {"flush_ns", "Flush"}};
    ObjectFactory f;
    f.SetTypeId(NcclEndpoint::GetTypeId());
    for (const auto& [key, ns] : t.endpointNs)
    {
        f.Set(kAttribute.at(key), TimeValue(PicoSeconds(static_cast<int64_t>(ns * 1e3))));
    }
    return f.Create<NcclEndpoint>()->Get();
}

/// The scale-up domains of a topology with accelerator hosts (null when every NIC is a host).
std::unique_ptr<ScaleUpFabric>
BuildScaleUp(const TopologySpec& t)
{
    if (t.acceleratorsPerHost <= 1)
    {
        return nullptr;
    }
    ObjectFactory f;
    f.SetTypeId(ScaleUpDomain::GetTypeId());
    if (t.scaleUpGbps)
    {
        f.Set("DataRate", DataRateValue(DataRate(static_cast<uint64_t>(*t.scaleUpGbps * 1e9))));
    }
    if (t.scaleUpLatencyNs)
    {
        f.Set("Latency", TimeValue(PicoSeconds(static_cast<int64_t>(*t.scaleUpLatencyNs * 1e3))));
    }
    if (t.scaleUpChunkBytes)
    {
        f.Set("ChunkBytes", UintegerValue(*t.scaleUpChunkBytes));
    }
    auto su = std::make_unique<ScaleUpFabric>();
    su->acceleratorsPerHost = t.acceleratorsPerHost;
    for (uint32_t h = 0; h < t.Accelerators() / t.acceleratorsPerHost; ++h)
    {
        Ptr<ScaleUpDomain> d = f.Create<ScaleUpDomain>();
        d->SetAccelerators(t.acceleratorsPerHost);
        su->hosts.push_back(d);
    }
    return su;
}

/// The NIC of every accelerator (accelerator a uses NIC a / acceleratorsPerNic): what a
/// communicator indexes by rank placement.
std::vector<Ptr<RdmaNic>>
AcceleratorNics(const TopologySpec& t, const std::vector<Ptr<RdmaNic>>& nics)
{
    std::vector<Ptr<RdmaNic>> out;
    out.reserve(t.Accelerators());
    for (uint32_t a = 0; a < t.Accelerators(); ++a)
    {
        out.push_back(nics[a / t.acceleratorsPerNic]);
    }
    return out;
}

/// The collective configuration a collective workload runs with (scale-up domains apart).
CollectiveConfig
CollectiveConfigOf(const RunSpec& spec)
{
    const CollectiveWorkloadSpec& w = spec.collective;
    CollectiveConfig cfg;
    cfg.maxChannels = w.channels;
    cfg.qpsPerConnection = w.qpsPerConnection;
    cfg.reducePsPerByte = w.reducePsPerByte;
    cfg.ranksPerHost =
        spec.topology.acceleratorsPerHost > 1 ? spec.topology.acceleratorsPerHost : w.ranksPerHost;
    cfg.protocol = NcclProtoOf(w.protocol);
    cfg.pxn = w.pxn;
    cfg.endpoint = BuildEndpoint(spec.topology);
    return cfg;
}

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

/// Applies the transport's QP type, congestion control and attribute overrides to a factory;
/// returns the defaults to restore after the run.
std::vector<std::pair<std::string, std::string>>
ConfigureTransport(const TransportSpec& t, QueuePairFactory& f)
{
    f.SetTypeId(t.qpType);
    for (const auto& [k, v] : t.qpAttributes)
    {
        f.Set(k, StringValue(v));
    }
    f.Set("CongestionControl", TypeIdValue(TypeId::LookupByName(t.ccType)));
    // Congestion-control and rate-hint objects are created by the QPs and NICs themselves:
    // their overrides go in as defaults for this run and are restored after it.
    std::vector<std::pair<std::string, std::string>> restore;
    auto setDefaults = [&restore](const std::string& type, const auto& attributes)
    {
        for (const auto& [k, v] : attributes)
        {
            TypeId::AttributeInformation info;
            TypeId::LookupByName(type).LookupAttributeByName(k, &info);
            restore.emplace_back(type + "::" + k,
                                 info.initialValue->SerializeToString(info.checker));
            Config::SetDefault(type + "::" + k, StringValue(v));
        }
    };
    setDefaults(t.ccType, t.ccAttributes);
    setDefaults("ns3::metaroce::MetaRoceRateHint", t.hintAttributes);
    return restore;
}

/// NICs on every host with the run's transport configured; on destruction the NICs are
/// disposed (by the helper) and the congestion-control defaults the run changed restored.
struct TransportSetup
{
    TransportSetup(const TransportSpec& t, Fabric& fabric, int64_t& stream)
        : rdma(fabric, stream++)
        , fabricRef(fabric)
    {
        rdma.InstallNics();
        restore = ConfigureTransport(t, rdma.QpFactory());
        for (uint32_t i = 0; i < rdma.NumNics(); ++i)
        {
            nics.push_back(rdma.Nic(i));
        }
    }

    ~TransportSetup()
    {
        for (auto& nic : nics)
        {
            fabricRef.NoteQueuePairs(nic->GetNQueuePairs());
        }
        for (const auto& [k, v] : restore)
        {
            Config::SetDefault(k, StringValue(v));
        }
    }

    TransportSetup(const TransportSetup&) = delete;
    TransportSetup& operator=(const TransportSetup&) = delete;

    RdmaHelper rdma;
    Fabric& fabricRef;
    std::vector<Ptr<RdmaNic>> nics;
    std::vector<std::pair<std::string, std::string>> restore;
};

/// RDMA streams over a transport.
void
RunStreams(const RunSpec& spec, Fabric& fabric, int64_t& stream, ProgressReporter& progress,
           RunRecord& rec)
{
    const StreamsWorkloadSpec& w = spec.streams;
    const TransportSpec& t = spec.transport;
    TransportSetup setup(t, fabric, stream);
    RdmaHelper& rdma = setup.rdma;
    FastRng rng(static_cast<uint64_t>(stream++));
    auto flows = PatternFlows(w.who, fabric.NumNics(), rng);
    if (w.bidirectional)
    {
        std::size_t n = flows.size();
        for (std::size_t i = 0; i < n; ++i)
        {
            flows.emplace_back(flows[i].second, flows[i].first);
        }
    }

    struct QpRun
    {
        Ptr<QueuePair> tx;
        Ptr<QueuePair> rx;
        uint64_t posted{0};
        std::map<std::pair<uint16_t, uint32_t>, int64_t> postedAt;
        uint32_t src{0};
        uint32_t dst{0};
        int64_t lastDonePs{-1};
    };

    std::vector<QpRun> qps;
    qps.reserve(flows.size() * w.qpsPerFlow);
    std::vector<double> fctUs;
    uint64_t completed = 0;
    int64_t lastDonePs = 0;
    const uint64_t total = flows.size() * w.qpsPerFlow * w.messagesPerQp;
    const int64_t startPs = static_cast<int64_t>(w.startUs * 1e6);
    for (const auto& [src, dst] : flows)
    {
        for (uint32_t q = 0; q < w.qpsPerFlow; ++q)
        {
            auto [a, b] = rdma.Connect(src, dst);
            qps.push_back(QpRun{a, b, 0, {}, src, dst, -1});
        }
    }
    // The victim: one message beside the pattern's traffic.
    int64_t victimDonePs = -1;
    bool victimPending = w.victim;
    if (w.victim)
    {
        auto [a, b] = rdma.Connect(w.victimSrc, w.victimDst);
        b->SetReceiveHandler(
            [&](const RdmaCompletion& c)
            {
                victimDonePs = c.completedPs;
                victimPending = false;
                if (completed == total)
                {
                    Simulator::Stop();
                }
            });
        Ptr<QueuePair> tx = a;
        uint64_t vb = w.victimBytes;
        Simulator::Schedule(PicoSeconds(startPs), [tx, vb]() { tx->PostSend(vb, 0, nullptr); });
    }
    std::function<void(std::size_t)> post = [&](std::size_t i)
    {
        QpRun& r = qps[i];
        if (r.posted >= w.messagesPerQp)
        {
            return;
        }
        uint16_t st = static_cast<uint16_t>(r.posted % w.streamsPerQp);
        ++r.posted;
        uint32_t seq =
            r.tx->PostSend(w.messageBytes, st, [&post, i](const RdmaCompletion&) { post(i); });
        r.postedAt[{st, seq}] = Simulator::Now().GetPicoSeconds();
    };
    for (std::size_t i = 0; i < qps.size(); ++i)
    {
        qps[i].rx->SetReceiveHandler(
            [&, i](const RdmaCompletion& c)
            {
                auto it = qps[i].postedAt.find({c.stream, c.seq});
                if (it != qps[i].postedAt.end())
                {
                    fctUs.push_back((c.completedPs - it->second) / 1e6);
                    qps[i].postedAt.erase(it);
                }
                ++completed;
                qps[i].lastDonePs = c.completedPs;
                lastDonePs = std::max(lastDonePs, c.completedPs);
                if (completed == total && !victimPending)
                {
                    Simulator::Stop(); // done: timers still pending need not run
                }
            });
        Simulator::Schedule(PicoSeconds(startPs),
                            [&post, &w, i]()
                            {
                                for (uint32_t k = 0; k < w.outstandingPerQp; ++k)
                                {
                                    post(i);
                                }
                            });
    }

    // Optional time series: delivered throughput, and for an incast the bytes queued towards
    // the target (every plane's last hop).
    struct Sample
    {
        double timeUs;
        double goodputGbps;
        uint64_t queueBytes;
        double qwndPackets; //!< MetaRoCE: mean QWND (sum of path windows) over the QPs
        double activePaths; //!< MetaRoCE: mean active paths per QP
    };

    std::vector<Sample> series;
    nlohmann::json pathRows = nlohmann::json::array();
    uint64_t lastBytes = 0;
    std::vector<FabricNetDevice*> lastHops;
    if (w.who.pattern == "incast")
    {
        for (uint32_t p = 0; p < fabric.NumPlanes(); ++p)
        {
            lastHops.push_back(fabric.HostPort(w.who.incastTarget, p)->GetPeer());
        }
    }
    std::function<void()> sample = [&]()
    {
        uint64_t bytes = 0;
        for (const auto& r : qps)
        {
            bytes += r.rx->GetCounters().bytesDelivered;
        }
        uint64_t q = 0;
        for (auto* d : lastHops)
        {
            q += d->GetQueueBytes();
        }
        double qwnd = 0;
        double paths = 0;
        uint32_t meta = 0;
        for (const auto& r : qps)
        {
            if (auto m = DynamicCast<MetaRoceQueuePair>(r.tx))
            {
                qwnd += m->GetQpWindowBytes() / m->GetMtu();
                paths += m->GetActivePaths();
                ++meta;
            }
        }
        series.push_back({static_cast<double>(Simulator::Now().GetNanoSeconds()) / 1e3,
                          (bytes - lastBytes) * 8.0 / (spec.timeseriesBinUs * 1e3), q,
                          meta ? qwnd / meta : 0.0, meta ? paths / meta : 0.0});
        // Every path of the first QP (MetaRoCE): its window, bytes in flight and RTT.
        if (auto m = qps.empty() ? nullptr : DynamicCast<MetaRoceQueuePair>(qps[0].tx))
        {
            for (uint32_t i = 0; i < m->GetNPathSlots(); ++i)
            {
                auto pv = m->GetPath(i);
                if (pv.state == MetaRoceQueuePair::PATH_RETIRED)
                {
                    continue;
                }
                pathRows.push_back({{"time_us", series.back().timeUs},
                                    {"path", i},
                                    {"plane", pv.plane},
                                    {"entropy", pv.entropy},
                                    {"cwnd_packets", pv.cwndBytes / m->GetMtu()},
                                    {"inflight_packets", pv.inflightBytes / m->GetMtu()},
                                    {"srtt_us", pv.srttPs / 1e6}});
            }
        }
        lastBytes = bytes;
        if (completed < total)
        {
            Simulator::Schedule(MicroSeconds(1) * spec.timeseriesBinUs, sample);
        }
    };
    if (spec.timeseriesBinUs > 0)
    {
        Simulator::Schedule(MicroSeconds(1) * spec.timeseriesBinUs, sample);
    }

    Time limit = MicroSeconds(1) * spec.durationUs;
    RunSupervisor supervisor(spec, fabric, &setup.nics, PicoSeconds(startPs));
    supervisor.Run(progress, limit, [&]() { return completed == total && !victimPending; });

    // Metrics: rates cover completed messages only, from the workload's start to the last
    // completion; bytes of unfinished messages are counted apart (bytes_delivered).
    uint64_t bytes = 0;
    QueuePair::Counters sum;
    uint64_t stuck = 0;
    MetaRoceQueuePair::PathCounters pc;
    uint64_t maxActivePaths = 0;
    double qwndSum = 0;
    uint64_t metaQps = 0;
    for (const auto& r : qps)
    {
        const auto& c = r.tx->GetCounters();
        const auto& d = r.rx->GetCounters();
        bytes += d.bytesDelivered;
        sum.retransmittedPackets += c.retransmittedPackets;
        sum.spuriousRetransmissions += c.spuriousRetransmissions;
        sum.timeouts += c.timeouts;
        sum.dataPacketsSent += c.dataPacketsSent;
        sum.acksSent += d.acksSent;
        sum.naksSent += d.naksSent;
        sum.cnpsSent += d.cnpsSent;
        sum.duplicatePackets += d.duplicatePackets;
        sum.outOfOrderDropped += d.outOfOrderDropped;
        sum.ecnMarkedReceived += d.ecnMarkedReceived;
        // (the run stops at the last receiver completion: the last ACKs may be in flight)
        stuck += d.messagesReceived < w.messagesPerQp ? 1 : 0;
        if (auto m = DynamicCast<MetaRoceQueuePair>(r.tx))
        {
            const auto& p = m->GetPathCounters();
            pc.pathsOpened += p.pathsOpened;
            pc.pathsGrown += p.pathsGrown;
            pc.lossesDetected += p.lossesDetected;
            pc.lossesTail += p.lossesTail;
            pc.lossesTimeout += p.lossesTimeout;
            pc.planeFailovers += p.planeFailovers;
            pc.planeRecoveries += p.planeRecoveries;
            pc.lastPlaneAvoidedPs = std::max(pc.lastPlaneAvoidedPs, p.lastPlaneAvoidedPs);
            // the slowest QP's first detection
            pc.firstPlaneAvoidedPs = std::max(pc.firstPlaneAvoidedPs, p.firstPlaneAvoidedPs);
            pc.lastPlaneRecoveredPs = std::max(pc.lastPlaneRecoveredPs, p.lastPlaneRecoveredPs);
            maxActivePaths = std::max<uint64_t>(maxActivePaths, m->GetActivePaths());
            qwndSum += m->GetQpWindowBytes();
            ++metaQps;
        }
    }
    std::sort(fctUs.begin(), fctUs.end());
    double spanUs = (lastDonePs - startPs) / 1e6;
    double mean =
        fctUs.empty() ? 0 : std::accumulate(fctUs.begin(), fctUs.end(), 0.0) / fctUs.size();
    const uint64_t completedBytes = completed * w.messageBytes;
    rec.metrics = {
        {"goodput_gbps", spanUs > 0 ? completedBytes * 8.0 / (spanUs * 1e3) : 0.0},
        {"completion_us", spanUs},
        {"msg_fct_mean_us", mean},
        {"msg_fct_p50_us", Percentile(fctUs, 0.5)},
        {"msg_fct_p99_us", Percentile(fctUs, 0.99)},
        {"msg_fct_max_us", fctUs.empty() ? 0.0 : fctUs.back()},
        {"messages_completed", completed},
        {"messages_total", total},
        {"bytes_completed", completedBytes},
        {"bytes_delivered", bytes},
    };
    rec.counters = {
        {"qps", qps.size()},
        {"qps_unfinished", stuck},
        {"data_packets_sent", sum.dataPacketsSent},
        {"retransmitted_packets", sum.retransmittedPackets},
        {"spurious_retransmissions", sum.spuriousRetransmissions},
        {"timeouts", sum.timeouts},
        {"acks", sum.acksSent},
        {"naks", sum.naksSent},
        {"cnps", sum.cnpsSent},
        {"duplicate_packets", sum.duplicatePackets},
        {"out_of_order_dropped", sum.outOfOrderDropped},
        {"ecn_marked_received", sum.ecnMarkedReceived},
    };
    if (spec.flowsOutput)
    {
        // Per-flow completion: the QP's last message received, from the workload's start.
        nlohmann::json flows = nlohmann::json::array();
        for (const auto& r : qps)
        {
            flows.push_back({{"src", r.src},
                             {"dst", r.dst},
                             {"bytes", r.rx->GetCounters().bytesDelivered},
                             {"fct_us", r.lastDonePs < 0 ? -1.0 : (r.lastDonePs - startPs) / 1e6}});
        }
        rec.flows = flows;
    }
    if (!qps.empty())
    {
        // What a full data frame and an ACK take on the wire: with the ACK count, the share of
        // a link that ACKs take from data coming the other way.
        bool meta = metaQps > 0;
        rec.counters["data_frame_wire_bytes"] =
            FrameWireBytes(RdmaHeader::SizeOf(meta ? RdmaOpcode::PathData : RdmaOpcode::Data) +
                           qps[0].tx->GetMtu());
        rec.counters["ack_frame_wire_bytes"] =
            FrameWireBytes(RdmaHeader::SizeOf(meta ? RdmaOpcode::PathAck : RdmaOpcode::Ack));
    }
    if (w.victim)
    {
        rec.metrics["victim_fct_us"] = victimDonePs < 0 ? -1.0 : (victimDonePs - startPs) / 1e6;
    }
    if (metaQps > 0)
    {
        rec.counters["paths_opened"] = pc.pathsOpened;
        rec.counters["paths_grown"] = pc.pathsGrown;
        // Data packets found lost, by how: a SACK gap, the tail-loss rule, a path's timeout.
        rec.counters["losses_sack"] = pc.lossesDetected;
        rec.counters["losses_tail"] = pc.lossesTail;
        rec.counters["losses_timeout"] = pc.lossesTimeout;
        rec.counters["plane_failovers"] = pc.planeFailovers;
        rec.counters["plane_recoveries"] = pc.planeRecoveries;
        rec.metrics["max_active_paths"] = maxActivePaths;
        rec.metrics["mean_qwnd_packets"] = qwndSum / metaQps / qps[0].tx->GetMtu();
        for (const auto& f : spec.faults)
        {
            if (f.kind == "plane_down" && pc.firstPlaneAvoidedPs >= 0)
            {
                rec.metrics["plane_detection_us"] = pc.firstPlaneAvoidedPs / 1e6 - f.atUs;
            }
        }
    }
    if (!series.empty())
    {
        nlohmann::json ts = nlohmann::json::array();
        for (const auto& x : series)
        {
            nlohmann::json row = {{"time_us", x.timeUs}, {"goodput_gbps", x.goodputGbps}};
            if (spec.transport.kind == "metaroce")
            {
                row["qwnd_packets"] = x.qwndPackets;
                row["active_paths"] = x.activePaths;
            }
            if (!lastHops.empty())
            {
                row["queue_bytes"] = x.queueBytes;
            }
            ts.push_back(row);
        }
        rec.timeseries = ts;
        if (!pathRows.empty())
        {
            rec.paths = pathRows;
        }
        std::vector<double> bins;
        for (const auto& x : series)
        {
            bins.push_back(x.goodputGbps);
        }
        std::sort(bins.begin(), bins.end());
        rec.metrics["goodput_median_bin_gbps"] = Percentile(bins, 0.5);
        if (spec.steadyFromUs >= 0)
        {
            // Steady state: long-lived connections measured after their warm-up.
            double sum = 0;
            int n = 0;
            for (const auto& x : series)
            {
                if (x.timeUs - spec.timeseriesBinUs >= spec.steadyFromUs)
                {
                    sum += x.goodputGbps;
                    ++n;
                }
            }
            rec.metrics["steady_goodput_gbps"] = n ? sum / n : 0.0;
        }
        // Throughput around a plane outage: before it, in its second half (settled), and
        // after recovery once the first bins have passed.
        for (const auto& f : spec.faults)
        {
            if (f.kind != "plane_down" || f.untilUs < 0)
            {
                continue;
            }
            auto mean = [&](double from, double to)
            {
                double sum = 0;
                int n = 0;
                for (const auto& x : series)
                {
                    if (x.timeUs - spec.timeseriesBinUs >= from && x.timeUs <= to)
                    {
                        sum += x.goodputGbps;
                        ++n;
                    }
                }
                return n ? sum / n : 0.0;
            };
            double end = series.back().timeUs;
            rec.metrics["goodput_before_fault_gbps"] = mean(w.startUs + 200, f.atUs);
            rec.metrics["goodput_during_fault_gbps"] = mean((f.atUs + f.untilUs) / 2, f.untilUs);
            rec.metrics["goodput_after_recovery_gbps"] = mean((f.untilUs + end) / 2, end);
        }
        if (!lastHops.empty())
        {
            // Incast: the peak queue at the last hop, and when it settled for good (below a
            // tenth of its peak and never again above a fifth).
            uint64_t peak = 0;
            std::size_t peakAt = 0;
            for (std::size_t i = 0; i < series.size(); ++i)
            {
                if (series[i].queueBytes > peak)
                {
                    peak = series[i].queueBytes;
                    peakAt = i;
                }
            }
            double settle = -1;
            for (std::size_t i = peakAt; i < series.size(); ++i)
            {
                bool stays = true;
                for (std::size_t k = i; k < series.size() && stays; ++k)
                {
                    stays = series[k].queueBytes * 5 <= peak;
                }
                if (series[i].queueBytes * 10 <= peak && stays)
                {
                    settle = series[i].timeUs - w.startUs;
                    break;
                }
            }
            double tail = 0;
            std::size_t n = 0;
            for (std::size_t i = series.size() / 2; i < series.size(); ++i)
            {
                tail += series[i].queueBytes;
                ++n;
            }
            rec.metrics["peak_queue_bytes"] = peak;
            rec.metrics["queue_settle_us"] = settle;
            rec.metrics["steady_queue_bytes"] = n ? tail / n : 0.0;
        }
    }
    std::ostringstream left;
    left << total - completed << " of " << total << " messages unfinished"
         << (victimPending ? " and the victim message" : "") << " (" << stuck << " of "
         << qps.size() << " QPs)";
    supervisor.Finish(rec, left.str());
}

/// A collective over a list of sizes, each repeated `iterations` times, back to back.
std::vector<RunRecord>
RunCollective(const RunSpec& spec, Fabric& fabric, int64_t& stream, ProgressReporter& progress)
{
    const CollectiveWorkloadSpec& w = spec.collective;
    TransportSetup setup(spec.transport, fabric, stream);
    const QueuePairFactory& qpf = setup.rdma.QpFactory();
    // Ranks live on accelerators, each served by its NIC.
    const std::vector<Ptr<RdmaNic>> nics = AcceleratorNics(spec.topology, setup.nics);
    const uint32_t accelerators = static_cast<uint32_t>(nics.size());
    // Placement of ranks on accelerators.
    uint32_t n = w.ranks == 0 ? accelerators : w.ranks;
    std::vector<uint32_t> ranks(n);
    if (w.placement == "explicit")
    {
        ranks = w.nics;
    }
    else if (w.placement == "random")
    {
        std::vector<uint32_t> all(accelerators);
        std::iota(all.begin(), all.end(), 0u);
        FastRng rng(static_cast<uint64_t>(stream++));
        for (uint32_t i = static_cast<uint32_t>(all.size()) - 1; i > 0; --i)
        {
            std::swap(all[i], all[rng.Next() % (i + 1)]);
        }
        std::copy(all.begin(), all.begin() + n, ranks.begin());
    }
    else
    {
        uint32_t stride = w.placement == "strided" ? w.stride : 1;
        std::vector<bool> used(accelerators, false);
        uint32_t at = 0;
        for (uint32_t i = 0; i < n; ++i)
        {
            while (used[at])
            {
                at = (at + 1) % accelerators;
            }
            ranks[i] = at;
            used[at] = true;
            at = (at + stride) % accelerators;
        }
    }
    auto scaleUp = BuildScaleUp(spec.topology);
    CollectiveConfig cfg = CollectiveConfigOf(spec);
    cfg.scaleUp = scaleUp.get();
    Communicator comm(ranks, &nics, qpf, cfg);

    struct SizeResult
    {
        std::vector<CollectiveResult> iters;
    };

    std::vector<SizeResult> results(w.sizes.size());
    std::size_t sizeIdx = 0;
    uint32_t iter = 0;
    std::function<void()> next;
    const uint32_t perSize = w.warmupIterations + w.iterations;
    std::function<void(const CollectiveResult&)> onDone = [&](const CollectiveResult& r)
    {
        if (iter >= w.warmupIterations)
        {
            results[sizeIdx].iters.push_back(r); // timed
        }
        if (++iter == perSize)
        {
            iter = 0;
            ++sizeIdx;
        }
        if (sizeIdx < w.sizes.size())
        {
            next();
        }
        else
        {
            Simulator::Stop();
        }
    };
    next = [&]()
    {
        bool last = sizeIdx + 1 == w.sizes.size() && iter + 1 == perSize;
        comm.Start(CollectiveOpOf(w.op), CollectiveAlgorithmOf(w.algorithm), w.sizes[sizeIdx],
                   onDone, last);
    };
    Simulator::ScheduleNow(next);
    Time limit = MicroSeconds(1) * spec.durationUs;
    RunSupervisor supervisor(spec, fabric, &setup.nics, Time(0));
    supervisor.Run(progress, limit, [&]() { return sizeIdx == w.sizes.size(); });

    QueuePair::Counters sum = comm.SendCounters();
    std::vector<RunRecord> out;
    for (std::size_t i = 0; i < w.sizes.size(); ++i)
    {
        RunRecord rec;
        rec.scenario = spec.scenario;
        rec.variant = spec.variant;
        rec.parameters = spec.resolved;
        const auto& it = results[i].iters;
        rec.metrics["size_bytes"] = w.sizes[i];
        rec.metrics["count"] = w.sizes[i] / 4; // nccl-tests' float elements
        rec.metrics["op"] = w.op;
        // nccl-tests' columns: float elements, sum where the op reduces, no root, and no data
        // to check (the simulator moves no values): #wrong is N/A, as with nccl-tests -c 0.
        rec.metrics["type"] = "float";
        rec.metrics["redop"] = w.op == "allreduce" || w.op == "reducescatter" ? "sum" : "none";
        rec.metrics["root"] = -1;
        rec.metrics["wrong"] = "N/A";
        rec.metrics["ranks"] = n;
        rec.metrics["warmup_iterations"] = w.warmupIterations;
        rec.metrics["iterations"] = w.iterations;
        if (it.size() < w.iterations)
        {
            // The duration limit ended the sweep before this size finished.
            rec.metrics["completed"] = false;
            out.push_back(rec);
            continue;
        }
        double t = 0;
        double spread = 0;
        for (const auto& r : it)
        {
            t += (r.endPs - r.startPs) / 1e6;
            spread += (r.endPs - r.fastestRankPs) / 1e6;
        }
        t /= it.size();
        spread /= it.size();
        double algbw = t > 0 ? w.sizes[i] / (t * 1e-6) / 1e9 : 0.0;
        rec.metrics["completed"] = true;
        rec.metrics["algorithm"] = ToString(it[0].algorithm);
        // What NCCL would run it with, and NCCL's own estimate (the wire carries Simple).
        rec.metrics["protocol"] = ToString(it[0].protocol);
        if (it[0].ncclModelUs >= 0)
        {
            rec.metrics["nccl_model_us"] = it[0].ncclModelUs;
        }
        rec.metrics["channels"] = it[0].channels;
        rec.metrics["time_us"] = t;
        rec.metrics["algbw_gbytes_per_s"] = algbw;
        rec.metrics["busbw_gbytes_per_s"] = algbw * BusBwFactor(CollectiveOpOf(w.op), n);
        rec.metrics["rank_spread_us"] = spread;
        rec.metrics["wire_bytes_per_rank"] = it[0].wireBytesPerRank;
        rec.counters["messages"] = it[0].messages;
        out.push_back(rec);
    }
    if (!out.empty())
    {
        out[0].counters["qps"] = comm.QueuePairs();
        out[0].counters["retransmitted_packets"] = sum.retransmittedPackets;
        out[0].counters["timeouts"] = sum.timeouts;
        out[0].counters["data_packets_sent"] = sum.dataPacketsSent;
        std::ostringstream left;
        left << w.sizes.size() - std::min(sizeIdx, w.sizes.size()) << " of " << w.sizes.size()
             << " sizes unfinished (from " << (sizeIdx < w.sizes.size() ? w.sizes[sizeIdx] : 0)
             << " bytes on)";
        supervisor.Finish(out[0], left.str());
        for (auto& r : out)
        {
            r.metrics["ended_by"] = out[0].metrics["ended_by"];
        }
    }
    return out;
}

/// A job: phases of collectives on groups of ranks, concurrent or in sequence, repeated.
std::vector<RunRecord>
RunJob(const RunSpec& spec, Fabric& fabric, int64_t& stream, ProgressReporter& progress)
{
    const JobWorkloadSpec& job = spec.job;
    TransportSetup setup(spec.transport, fabric, stream);
    const QueuePairFactory& qpf = setup.rdma.QpFactory();
    const std::vector<Ptr<RdmaNic>> nics = AcceleratorNics(spec.topology, setup.nics);
    const uint32_t n = job.ranks == 0 ? static_cast<uint32_t>(nics.size()) : job.ranks;

    struct PhaseRun
    {
        std::vector<std::unique_ptr<Communicator>> comms;
        std::vector<double> timeUs;    //!< per iteration: stage start to the last group's end
        std::vector<double> fastestUs; //!< per iteration: to the first group's end
        int64_t firstEndPs{-1};
        int64_t lastEndPs{-1};
        std::string algorithm;
    };

    auto scaleUp = BuildScaleUp(spec.topology);
    CollectiveConfig jobCfg;
    jobCfg.scaleUp = scaleUp.get();
    jobCfg.endpoint = BuildEndpoint(spec.topology);
    std::vector<PhaseRun> phases(job.phases.size());
    for (std::size_t p = 0; p < job.phases.size(); ++p)
    {
        const JobPhaseSpec& ph = job.phases[p];
        uint32_t groups = n / ph.groupSize;
        for (uint32_t g = 0; g < groups; ++g)
        {
            std::vector<uint32_t> ranks(ph.groupSize);
            for (uint32_t i = 0; i < ph.groupSize; ++i)
            {
                ranks[i] = ph.layout == "contiguous" ? g * ph.groupSize + i : g + i * groups;
            }
            phases[p].comms.push_back(std::make_unique<Communicator>(ranks, &nics, qpf, jobCfg));
        }
    }
    // Stages: a phase marked with_previous joins the stage before it.
    std::vector<std::vector<std::size_t>> stages;
    for (std::size_t p = 0; p < job.phases.size(); ++p)
    {
        if (!job.phases[p].withPrevious || stages.empty())
        {
            stages.emplace_back();
        }
        stages.back().push_back(p);
    }
    uint32_t iteration = 0;
    std::size_t stage = 0;
    uint64_t outstanding = 0;
    int64_t stageStartPs = 0;
    int64_t iterStartPs = 0;
    std::vector<double> iterUs;
    std::function<void()> startStage;
    startStage = [&]()
    {
        stageStartPs = Simulator::Now().GetPicoSeconds();
        if (stage == 0)
        {
            iterStartPs = stageStartPs;
        }
        for (std::size_t p : stages[stage])
        {
            const JobPhaseSpec& ph = job.phases[p];
            PhaseRun& pr = phases[p];
            pr.firstEndPs = pr.lastEndPs = -1;
            for (auto& comm : pr.comms)
            {
                ++outstanding;
                comm->Start(
                    CollectiveOpOf(ph.op), CollectiveAlgorithmOf(ph.algorithm), ph.bytes,
                    [&, p](const CollectiveResult& r)
                    {
                        PhaseRun& q = phases[p];
                        q.algorithm = ToString(r.algorithm);
                        q.firstEndPs = q.firstEndPs < 0 ? r.endPs : std::min(q.firstEndPs, r.endPs);
                        q.lastEndPs = std::max(q.lastEndPs, r.endPs);
                        if (--outstanding > 0)
                        {
                            return;
                        }
                        for (std::size_t x : stages[stage])
                        {
                            phases[x].timeUs.push_back((phases[x].lastEndPs - stageStartPs) / 1e6);
                            phases[x].fastestUs.push_back((phases[x].firstEndPs - stageStartPs) /
                                                          1e6);
                        }
                        if (++stage == stages.size())
                        {
                            stage = 0;
                            iterUs.push_back((Simulator::Now().GetPicoSeconds() - iterStartPs) /
                                             1e6);
                            if (++iteration == job.iterations)
                            {
                                Simulator::Stop();
                                return;
                            }
                        }
                        Simulator::ScheduleNow(startStage);
                    },
                    iteration + 1 == job.iterations);
            }
        }
    };
    Simulator::ScheduleNow(startStage);
    Time limit = MicroSeconds(1) * spec.durationUs;
    RunSupervisor supervisor(spec, fabric, &setup.nics, Time(0));
    supervisor.Run(progress, limit, [&]() { return iteration == job.iterations; });

    auto mean = [](const std::vector<double>& v)
    { return v.empty() ? -1.0 : std::accumulate(v.begin(), v.end(), 0.0) / v.size(); };
    std::vector<RunRecord> out;
    for (std::size_t p = 0; p < job.phases.size(); ++p)
    {
        const JobPhaseSpec& ph = job.phases[p];
        RunRecord rec;
        rec.scenario = spec.scenario;
        rec.variant = spec.variant;
        rec.parameters = spec.resolved;
        double t = mean(phases[p].timeUs);
        rec.metrics["phase"] = ph.name;
        rec.metrics["op"] = ph.op;
        rec.metrics["bytes"] = ph.bytes;
        rec.metrics["group_size"] = ph.groupSize;
        rec.metrics["groups"] = static_cast<uint32_t>(phases[p].comms.size());
        rec.metrics["algorithm"] = phases[p].algorithm;
        rec.metrics["iterations_completed"] = static_cast<uint32_t>(phases[p].timeUs.size());
        rec.metrics["time_us"] = t;
        rec.metrics["fastest_group_us"] = mean(phases[p].fastestUs);
        double algbw = t > 0 ? ph.bytes / (t * 1e-6) / 1e9 : 0.0;
        rec.metrics["busbw_gbytes_per_s"] =
            algbw * BusBwFactor(CollectiveOpOf(ph.op), ph.groupSize);
        rec.metrics["iteration_us"] = mean(iterUs);
        QueuePair::Counters sent;
        for (const auto& comm : phases[p].comms)
        {
            sent.Add(comm->SendCounters());
        }
        rec.metrics["payload_bytes_posted"] = sent.bytesPosted; // all groups, all iterations
        rec.metrics["iterations"] = job.iterations;
        out.push_back(rec);
    }
    if (!out.empty())
    {
        std::ostringstream left;
        left << job.iterations - iteration << " of " << job.iterations << " iterations unfinished";
        supervisor.Finish(out[0], left.str());
        for (auto& r : out)
        {
            r.metrics["ended_by"] = out[0].metrics["ended_by"];
        }
    }
    return out;
}
} // namespace

namespace
{
/// One world: builds the fabric, runs the workload, collects the fabric's counters.
std::vector<RunRecord>
RunWorld(const RunSpec& spec, ProgressReporter& progress)
{
    auto wall0 = std::chrono::steady_clock::now();
    uint64_t startRss = PeakRssBytes();
    // The scenario's seed selects ns-3's run number: independent streams per seed.
    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(spec.seed);
    UsePicosecondTime();

    SetRunPhase("building the fabric");
    auto fabric = FabricHelper().Build(spec.topology);
    SetRunPhase("installing the workload");
    int64_t stream = 1;
    stream += fabric->AssignStreams(stream);
    if (DistributedRun* d = CurrentDistributedRun())
    {
        if (spec.workloadKind != "raw" && d->Ranks() > 1)
        {
            throw InputError("workload.kind: '" + spec.workloadKind +
                             "' does not run on several processes yet (raw does)");
        }
        d->Distribute(*fabric);
    }
    double buildS = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    uint64_t buildRss = PeakRssBytes();
    ScheduleFaults(*fabric, spec.faults);

    std::vector<RunRecord> recs(1);
    RunRecord& rec = recs[0];
    rec.scenario = spec.scenario;
    rec.variant = spec.variant;
    rec.parameters = spec.resolved;
    auto run0 = std::chrono::steady_clock::now();
    uint64_t ev0 = Simulator::GetEventCount();
    if (spec.workloadKind == "raw")
    {
        RunRaw(spec, *fabric, stream, progress, rec);
    }
    else if (spec.workloadKind == "streams")
    {
        RunStreams(spec, *fabric, stream, progress, rec);
    }
    else if (spec.workloadKind == "collective")
    {
        recs = RunCollective(spec, *fabric, stream, progress);
    }
    else
    {
        recs = RunJob(spec, *fabric, stream, progress);
    }
    RunRecord& head = recs.front();
    double runS = std::chrono::duration<double>(std::chrono::steady_clock::now() - run0).count();
    uint64_t events = Simulator::GetEventCount() - ev0;

    auto t = fabric->CollectTotals();
    uint64_t maxBuffer = 0;
    uint64_t pausedNow = 0;
    uint64_t hops = 0; // link transmissions of every frame, data and control
    for (const auto& sw : fabric->Switches())
    {
        maxBuffer = std::max(maxBuffer, sw->GetCounters().maxBufferUsed);
    }
    for (const auto& l : fabric->Links())
    {
        for (std::size_t d = 0; d < 2; ++d)
        {
            auto dev = StaticCast<FabricNetDevice>(l->GetDevice(d));
            pausedNow += dev->IsPaused(3) ? 1 : 0;
            hops += dev->GetCounters().txPackets;
        }
    }
    if (DistributedRun* d = CurrentDistributedRun())
    {
        // Each process's part: the copies of the others' nodes saw no traffic.
        std::vector<uint64_t> sums{t.switchDropsBuffer,
                                   t.switchDropsNoRoute,
                                   t.portDropsLinkDown,
                                   t.portDropsCorrupt,
                                   t.lostInFlight,
                                   t.ecnMarks,
                                   t.pauses,
                                   pausedNow,
                                   hops,
                                   t.forwarded};
        std::vector<int64_t> maxima{static_cast<int64_t>(maxBuffer)};
        d->Sum(sums);
        d->Max(maxima);
        t.switchDropsBuffer = sums[0];
        t.switchDropsNoRoute = sums[1];
        t.portDropsLinkDown = sums[2];
        t.portDropsCorrupt = sums[3];
        t.lostInFlight = sums[4];
        t.ecnMarks = sums[5];
        t.pauses = sums[6];
        pausedNow = sums[7];
        hops = sums[8];
        t.forwarded = sums[9];
        maxBuffer = static_cast<uint64_t>(maxima[0]);
    }
    head.metrics["max_switch_buffer_bytes"] = maxBuffer;
    head.counters["drops_buffer"] = t.switchDropsBuffer;
    head.counters["drops_no_route"] = t.switchDropsNoRoute;
    head.counters["drops_link_down"] = t.portDropsLinkDown;
    head.counters["drops_corrupt"] = t.portDropsCorrupt;
    head.counters["lost_in_flight"] = t.lostInFlight;
    head.counters["ecn_marks"] = t.ecnMarks;
    head.counters["pfc_pauses"] = t.pauses;
    // A port still paused when the run ends never got its RESUME: a possible PFC deadlock.
    head.counters["pfc_ports_paused_at_end"] = pausedNow;
    head.counters["switch_forwards"] = t.forwarded;
    head.cost = {
        {"build_wall_s", buildS},
        {"run_wall_s", runS},
        {"events", events},
        {"events_per_wall_s", runS > 0 ? events / runS : 0.0},
        {"packet_hops", hops},
        {"packet_hops_per_wall_s", runS > 0 ? hops / runS : 0.0},
        {"peak_rss_bytes", PeakRssBytes()},
        {"start_rss_bytes", startRss},
        {"build_peak_rss_bytes", buildRss},
        {"switches", fabric->Switches().size()},
        {"links", fabric->Links().size()},
        {"queue_pairs", fabric->GetQueuePairs()},
        {"simulated_us", Simulator::Now().GetMicroSeconds()},
    };
    if (DistributedRun* d = CurrentDistributedRun())
    {
        head.cost["distributed"] = d->RankCosts(events, PeakRssBytes());
    }
    fabric.reset();
    Simulator::Destroy();
    return recs;
}
} // namespace

std::vector<RunRecord>
RunScenario(const RunSpec& spec, ProgressReporter& progress)
{
    if (spec.workloadKind != "collective")
    {
        return RunWorld(spec, progress);
    }
    // Each size in a world of its own, seeded alike: a size's result cannot depend on the
    // sizes run before it (no congestion-control, rate-hint or queue state carries over).
    // Warm-up iterations within a size play nccl-tests' part.
    std::vector<RunRecord> out;
    for (uint64_t size : spec.collective.sizes)
    {
        RunSpec one = spec;
        one.collective.sizes = {size};
        for (auto& rec : RunWorld(one, progress))
        {
            out.push_back(std::move(rec));
        }
    }
    return out;
}

const std::vector<std::string>&
ResultColumns(const std::string& workloadKind)
{
    // Kept beside the code that fills the records (RunRaw, RunStreams, RunCollective, RunJob,
    // the watchdog's ended_by and RunWorld's fabric totals); the CLI test checks a run's
    // columns against it.
    static const std::vector<std::string> fabric = {
        "ended_by",        "max_switch_buffer_bytes", "drops_buffer",   "drops_no_route",
        "drops_link_down", "drops_corrupt",           "lost_in_flight", "ecn_marks",
        "pfc_pauses",      "pfc_ports_paused_at_end", "switch_forwards"};
    auto with = [](std::vector<std::string> own)
    {
        own.insert(own.end(), fabric.begin(), fabric.end());
        return own;
    };
    static const std::map<std::string, std::vector<std::string>> columns = {
        {"raw", with({"offered_goodput_gbps", "delivered_goodput_gbps", "delivery_ratio",
                      "mean_latency_us", "max_latency_us", "duration_us", "flows", "packets_sent",
                      "packets_delivered", "out_of_order"})},
        {"streams", with({"goodput_gbps",
                          "completion_us",
                          "msg_fct_mean_us",
                          "msg_fct_p50_us",
                          "msg_fct_p99_us",
                          "msg_fct_max_us",
                          "messages_completed",
                          "messages_total",
                          "bytes_completed",
                          "bytes_delivered",
                          "qps",
                          "qps_unfinished",
                          "data_packets_sent",
                          "retransmitted_packets",
                          "spurious_retransmissions",
                          "timeouts",
                          "acks",
                          "data_frame_wire_bytes",
                          "ack_frame_wire_bytes",
                          "naks",
                          "cnps",
                          "duplicate_packets",
                          "out_of_order_dropped",
                          "ecn_marked_received",
                          "victim_fct_us",
                          "paths_opened",
                          "paths_grown",
                          "losses_sack",
                          "losses_tail",
                          "losses_timeout",
                          "plane_failovers",
                          "plane_recoveries",
                          "max_active_paths",
                          "mean_qwnd_packets",
                          "plane_detection_us",
                          "goodput_median_bin_gbps",
                          "steady_goodput_gbps",
                          "goodput_before_fault_gbps",
                          "goodput_during_fault_gbps",
                          "goodput_after_recovery_gbps",
                          "peak_queue_bytes",
                          "queue_settle_us",
                          "steady_queue_bytes"})},
        {"collective", with({"size_bytes",
                             "count",
                             "op",
                             "type",
                             "redop",
                             "root",
                             "wrong",
                             "ranks",
                             "warmup_iterations",
                             "iterations",
                             "completed",
                             "algorithm",
                             "protocol",
                             "nccl_model_us",
                             "channels",
                             "time_us",
                             "algbw_gbytes_per_s",
                             "busbw_gbytes_per_s",
                             "rank_spread_us",
                             "wire_bytes_per_rank",
                             "messages",
                             "qps",
                             "retransmitted_packets",
                             "timeouts",
                             "data_packets_sent"})},
        {"job", with({"phase", "op", "bytes", "group_size", "groups", "algorithm",
                      "iterations_completed", "time_us", "fastest_group_us", "busbw_gbytes_per_s",
                      "iteration_us", "payload_bytes_posted", "iterations"})},
    };
    static const std::vector<std::string> none;
    auto it = columns.find(workloadKind);
    return it == columns.end() ? none : it->second;
}

nlohmann::json
CollectiveChoices(const RunSpec& spec)
{
    if (spec.workloadKind != "collective")
    {
        return nullptr;
    }
    const CollectiveWorkloadSpec& w = spec.collective;
    uint32_t k = w.placement == "explicit"
                     ? static_cast<uint32_t>(w.nics.size())
                     : (w.ranks == 0 ? spec.topology.Accelerators() : w.ranks);
    CollectiveConfig cfg = CollectiveConfigOf(spec);
    if (k % cfg.ranksPerHost != 0)
    {
        cfg.ranksPerHost = 1; // a group spread unevenly over hosts: one rank per node
    }
    nlohmann::json out = nlohmann::json::array();
    for (uint64_t size : w.sizes)
    {
        CollectiveChoice c =
            Communicator::ChooseFor(CollectiveOpOf(w.op), CollectiveAlgorithmOf(w.algorithm), size,
                                    k, spec.topology.AcceleratorBytesPerSecond(), cfg);
        nlohmann::json e = {{"size_bytes", size},
                            {"algorithm", ToString(c.algorithm)},
                            {"protocol", ToString(c.protocol)},
                            {"channels", c.channels}};
        if (c.modelUs >= 0)
        {
            e["nccl_model_us"] = c.modelUs;
        }
        out.push_back(e);
    }
    return out;
}

} // namespace metaroce
} // namespace ns3
