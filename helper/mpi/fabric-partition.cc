#include "helper/mpi/fabric-partition.h"

#include "helper/scenario/json-reader.h"

#include "ns3/abort.h"
#include "ns3/log.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("FabricPartition");

namespace
{

/// The hosts a switch's ports lead to (none: not a leaf).
std::vector<uint32_t>
HostsOf(const Fabric& fabric, const FabricSwitch& sw)
{
    std::vector<uint32_t> hosts;
    const uint32_t n = fabric.NumNics();
    for (uint32_t i = 0; i < sw.GetNPorts(); ++i)
    {
        FabricNetDevice* port = sw.GetPort(i);
        Ptr<FabricChannel> link = port->GetFabricChannel();
        if (!link)
        {
            continue;
        }
        Ptr<Node> peer = link->GetPeer(port)->GetNode();
        if (peer && peer->GetId() < n && fabric.Host(peer->GetId()) == peer)
        {
            hosts.push_back(peer->GetId());
        }
    }
    return hosts;
}

uint32_t
Find(std::vector<uint32_t>& parent, uint32_t x)
{
    while (parent[x] != x)
    {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

void
CountCrossing(const Fabric& fabric, FabricPartition& p)
{
    auto rankOf = [&](const Ptr<Node>& node)
    {
        const uint32_t id = node->GetId();
        if (id < fabric.NumNics() && fabric.Host(id) == node)
        {
            return p.hostRank[id];
        }
        const auto& sws = fabric.Switches();
        // Switches were created after the hosts, in order: their ids follow.
        const uint32_t k = id - sws.front()->GetId();
        NS_ABORT_MSG_UNLESS(k < sws.size() && sws[k] == node, "unexpected node order");
        return p.switchRank[k];
    };
    p.crossingLinks = 0;
    p.minCrossingDelayPs = 0;
    for (const auto& link : fabric.Links())
    {
        if (rankOf(link->GetDevice(0)->GetNode()) != rankOf(link->GetDevice(1)->GetNode()))
        {
            const int64_t d = link->GetDelayPs();
            p.minCrossingDelayPs = p.crossingLinks == 0 ? d : std::min(p.minCrossingDelayPs, d);
            ++p.crossingLinks;
        }
    }
}

} // namespace

FabricPartition
PartitionFabric(const Fabric& fabric, uint32_t ranks)
{
    const uint32_t n = fabric.NumNics();
    // Hosts that share a leaf on some plane must share a rank.
    std::vector<uint32_t> parent(n);
    std::iota(parent.begin(), parent.end(), 0);
    for (const auto& sw : fabric.Switches())
    {
        auto hosts = HostsOf(fabric, *sw);
        for (std::size_t i = 1; i < hosts.size(); ++i)
        {
            uint32_t a = Find(parent, hosts[0]);
            uint32_t b = Find(parent, hosts[i]);
            parent[std::max(a, b)] = std::min(a, b); // the root is the group's lowest id
        }
    }
    std::vector<uint32_t> groupSize(n, 0);
    for (uint32_t h = 0; h < n; ++h)
    {
        ++groupSize[Find(parent, h)];
    }
    // Groups in order of their lowest NIC id, each to the rank where its first host falls
    // when the hosts are cut into `ranks` equal runs.
    std::vector<uint32_t> rankOfGroup(n, 0);
    uint64_t before = 0;
    for (uint32_t h = 0; h < n; ++h)
    {
        if (Find(parent, h) == h)
        {
            rankOfGroup[h] = static_cast<uint32_t>(before * ranks / std::max(n, 1u));
            before += groupSize[h];
        }
    }
    std::vector<uint32_t> hostRank(n);
    for (uint32_t h = 0; h < n; ++h)
    {
        hostRank[h] = rankOfGroup[Find(parent, h)];
    }
    return PartitionFabric(fabric, ranks, hostRank);
}

FabricPartition
PartitionFabric(const Fabric& fabric, uint32_t ranks, const std::vector<uint32_t>& hostRank)
{
    if (ranks == 0)
    {
        throw InputError("partition: ranks: must be at least 1");
    }
    if (hostRank.size() != fabric.NumNics())
    {
        std::ostringstream m;
        m << "partition: " << hostRank.size() << " host ranks given for " << fabric.NumNics()
          << " NICs";
        throw InputError(m.str());
    }
    FabricPartition p;
    p.ranks = ranks;
    p.hostRank = hostRank;
    for (uint32_t h = 0; h < hostRank.size(); ++h)
    {
        if (hostRank[h] >= ranks)
        {
            std::ostringstream m;
            m << "partition: NIC " << h << ": rank " << hostRank[h] << " is not below " << ranks;
            throw InputError(m.str());
        }
    }
    uint32_t spread = 0;
    for (const auto& sw : fabric.Switches())
    {
        auto hosts = HostsOf(fabric, *sw);
        if (hosts.empty())
        {
            p.switchRank.push_back(spread++ % ranks);
            continue;
        }
        const uint32_t r = hostRank[hosts.front()];
        for (uint32_t h : hosts)
        {
            if (hostRank[h] != r)
            {
                std::ostringstream m;
                m << "partition: NICs " << hosts.front() << " and " << h
                  << " share a leaf but not a rank";
                throw InputError(m.str());
            }
        }
        p.switchRank.push_back(r);
    }
    CountCrossing(fabric, p);
    return p;
}

void
ApplyPartition(Fabric& fabric, const FabricPartition& p)
{
    for (uint32_t h = 0; h < fabric.NumNics(); ++h)
    {
        fabric.Host(h)->SetAttribute("SystemId", UintegerValue(p.hostRank[h]));
    }
    const auto& sws = fabric.Switches();
    for (std::size_t k = 0; k < sws.size(); ++k)
    {
        sws[k]->SetAttribute("SystemId", UintegerValue(p.switchRank[k]));
    }
}

} // namespace metaroce
} // namespace ns3
