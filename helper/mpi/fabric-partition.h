/*
 * Which process simulates each node of a fabric in a distributed (MPI) run. A process owns
 * whole hosts together with the leaf switches they hang off, on every plane, so that a NIC's
 * traffic to its leaves never crosses processes; the switches above the leaves are spread
 * over the processes. Only links between a leaf and a spine (or higher) then cross, each
 * with its propagation delay as the synchronization lookahead.
 * MPI-free: the MPI side (helper/mpi-fabric.h) applies it.
 */
#ifndef METAROCE_FABRIC_PARTITION_H
#define METAROCE_FABRIC_PARTITION_H

#include "helper/fabric-helper.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ns3
{
namespace metaroce
{

struct FabricPartition
{
    uint32_t ranks{1};
    /// Rank of each of the fabric's nodes: hosts (by NIC id), then switches in
    /// Fabric::Switches() order.
    std::vector<uint32_t> hostRank;
    std::vector<uint32_t> switchRank;

    /// Links whose two ends are on different ranks, and the smallest propagation delay among
    /// them (the lookahead; 0 when none cross).
    uint64_t crossingLinks{0};
    int64_t minCrossingDelayPs{0};
};

/// The automatic partition over `ranks` processes: hosts sharing a leaf on any plane form a
/// group; groups, by their lowest NIC id, go to consecutive ranks with about N/ranks hosts
/// each; a leaf goes with its hosts; the k-th other switch goes to rank k mod ranks.
FabricPartition PartitionFabric(const Fabric& fabric, uint32_t ranks);

/// The same with the hosts' ranks given (`hostRank`, one per NIC): leaves go with their
/// hosts, other switches as above. Throws InputError if a leaf's hosts are on different
/// ranks or a rank is out of range.
FabricPartition PartitionFabric(const Fabric& fabric, uint32_t ranks,
                                const std::vector<uint32_t>& hostRank);

/// Sets each node's SystemId (ns-3's rank of a node) from the partition.
void ApplyPartition(Fabric& fabric, const FabricPartition& p);

} // namespace metaroce
} // namespace ns3

#endif
