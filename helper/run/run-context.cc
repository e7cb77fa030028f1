// What the workload runners share (run-context.h).
#include "helper/run/run-context.h"

#include "helper/mpi/distributed-run.h"
#include "helper/scenario/json-reader.h"

#include "ns3/object-factory.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

namespace ns3
{
namespace metaroce
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
static void
SetLossAt(Fabric& fabric, const std::vector<FaultSpec>& loss, double tUs)
{
    const std::pair<const char*, Fabric::LinkKind> kinds[] = {
        {"nic", Fabric::LINKS_NIC}, {"fabric", Fabric::LINKS_FABRIC}, {"long", Fabric::LINKS_LONG}};
    for (uint32_t p = 0; p < fabric.NumPlanes(); ++p)
    {
        for (const auto& [name, kind] : kinds)
        {
            double rate = 0;
            for (const auto& f : loss)
            {
                if ((f.allPlanes || f.plane == p) && (f.links == "all" || f.links == name) &&
                    f.atUs <= tUs && (f.untilUs < 0 || tUs < f.untilUs))
                {
                    rate = f.rate;
                }
            }
            fabric.SetLossRate(rate, static_cast<int32_t>(p), kind);
        }
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

std::function<bool(uint32_t)>
LocalAccelerators(const Fabric& fabric, const TopologySpec& t,
                  const std::vector<Ptr<RdmaNic>>& nics)
{
    DistributedRun* d = SeveralProcesses();
    if (d == nullptr)
    {
        return nullptr;
    }
    auto local = std::make_shared<std::vector<bool>>(nics.size());
    const uint32_t perHost = std::max<uint32_t>(1, t.acceleratorsPerHost);
    for (uint32_t a = 0; a < nics.size(); ++a)
    {
        Ptr<Node> node = fabric.Host(nics[a]->GetNicId());
        const uint32_t first = a - a % perHost;
        const uint32_t rank = node->GetSystemId();
        const uint32_t firstRank = fabric.Host(nics[first]->GetNicId())->GetSystemId();
        if (rank != firstRank)
        {
            throw InputError("topology: host " + std::to_string(a / perHost) +
                             "'s accelerators are simulated by processes " +
                             std::to_string(firstRank) + " and " + std::to_string(rank) +
                             " (a host's scale-up domain cannot span processes; give its NICs "
                             "one rank in METAROCE_HOST_RANKS)");
        }
        (*local)[a] = rank == d->Rank();
    }
    return [local](uint32_t a) { return (*local)[a]; };
}

void
ExchangeRetired(DistributedRun& d, const std::vector<Communicator*>& comms)
{
    std::vector<int64_t> mine;
    for (std::size_t k = 0; k < comms.size(); ++k)
    {
        for (const auto& r : comms[k]->TakeRetiredSenders())
        {
            mine.insert(mine.end(), {static_cast<int64_t>(k), r.src, r.dst, r.senderQuiet});
        }
    }
    const std::vector<int64_t> all = d.Gather(mine);
    std::vector<std::vector<Communicator::Retired>> byComm(comms.size());
    for (std::size_t i = 0; i + 3 < all.size(); i += 4)
    {
        byComm.at(static_cast<std::size_t>(all[i]))
            .push_back({static_cast<uint32_t>(all[i + 1]), static_cast<uint32_t>(all[i + 2]),
                        all[i + 3] != 0});
    }
    for (std::size_t k = 0; k < comms.size(); ++k)
    {
        if (!byComm[k].empty())
        {
            comms[k]->RetireReceivers(byComm[k]);
        }
    }
}

std::vector<uint32_t>
PlaceRanks(const std::string& placement, uint32_t stride, const std::vector<uint32_t>& explicitList,
           uint32_t n, uint32_t accelerators, int64_t& stream)
{
    if (placement == "explicit")
    {
        return explicitList;
    }
    std::vector<uint32_t> ranks(n);
    if (placement == "random")
    {
        std::vector<uint32_t> all(accelerators);
        std::iota(all.begin(), all.end(), 0u);
        FastRng rng(static_cast<uint64_t>(stream++));
        for (uint32_t i = accelerators - 1; i > 0; --i)
        {
            std::swap(all[i], all[rng.Next() % (i + 1)]);
        }
        std::copy(all.begin(), all.begin() + n, ranks.begin());
        return ranks;
    }
    stride = placement == "strided" ? stride : 1;
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
    return ranks;
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

} // namespace metaroce
} // namespace ns3
