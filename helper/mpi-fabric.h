/*
 * A fabric simulated by several MPI processes on ns-3's distributed simulator
 * (DistributedSimulatorImpl with granted time windows, or NullMessageSimulatorImpl). Every
 * process builds the whole fabric; FabricPartition says which nodes each one simulates.
 * A link between two processes stays a FabricChannel on both: the sender's copy hands each
 * frame to MpiFabric (a FabricRemoteSink), which serializes it with its transport header
 * into a Packet for MpiInterface::SendPacket, due at the frame's arrival time; the receiver's
 * MpiReceiver rebuilds the frame and gives it to its copy of the link. The link's delay is
 * the lookahead ns-3 computes from it. Frames sent by a node this process only holds a copy
 * of are dropped (nothing should send them).
 *
 * MpiRun is what a program on MPI creates first: it starts MPI (MpiInterface::Enable) with
 * the simulator implementation bound in SimulatorImplementationType, installs itself as the
 * runner's DistributedRun, and stops MPI when destroyed.
 */
#ifndef METAROCE_MPI_FABRIC_H
#define METAROCE_MPI_FABRIC_H

#include "distributed-run.h"
#include "fabric-helper.h"
#include "fabric-partition.h"

#include "ns3/packet.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

namespace ns3
{
namespace metaroce
{

class MpiFabric final : public FabricRemoteSink
{
  public:
    /// Applies `partition` to `fabric` for the process of rank `rank`.
    MpiFabric(Fabric& fabric, const FabricPartition& partition, uint32_t rank);
    ~MpiFabric() override;
    MpiFabric(const MpiFabric&) = delete;
    MpiFabric& operator=(const MpiFabric&) = delete;

    void SendRemote(FabricChannel* link, uint32_t dir, FabricFrame&& frame, uint8_t downs) override;

    uint64_t GetFramesSent() const { return m_sent; }
    /// Synchronization rounds of ns-3's granted-time-window engine so far in this process
    /// (its MPI_Allgather calls, counted through MPI's profiling interface).
    static uint64_t GetSyncRounds();
    uint64_t GetFramesReceived() const { return m_received; }

    /// The bytes a frame crosses processes as (link index, direction, the link's down count
    /// when it was sent, the frame).
    static Ptr<Packet> Serialize(uint32_t link, uint32_t dir, uint8_t downs,
                                 const FabricFrame& frame);
    static FabricFrame Deserialize(Ptr<Packet> p, uint32_t& link, uint32_t& dir, uint8_t& downs);

  private:
    void Receive(Ptr<Packet> p);

    Fabric& m_fabric;
    uint32_t m_rank;
    std::unordered_map<const FabricChannel*, uint32_t> m_linkIndex;
    uint64_t m_sent{0};
    uint64_t m_received{0};
};

class MpiRun final : public DistributedRun
{
  public:
    MpiRun(int* argc, char*** argv);
    ~MpiRun() override;
    MpiRun(const MpiRun&) = delete;
    MpiRun& operator=(const MpiRun&) = delete;

    uint32_t Rank() const override { return m_rank; }
    uint32_t Ranks() const override { return m_ranks; }
    void Distribute(Fabric& fabric) override;
    void Sum(std::vector<uint64_t>& v) override;
    void Max(std::vector<int64_t>& v) override;
    void Min(std::vector<int64_t>& v) override;
    std::vector<int64_t> Gather(const std::vector<int64_t>& mine) override;
    nlohmann::json RankCosts(uint64_t events, uint64_t peakRssBytes) override;
    /// 10 ms under NullMessageSimulatorImpl (it ends only at a stop time), else zero.
    Time StopAfter() const override { return m_nullMessage ? MilliSeconds(10) : Time(0); }
    /// Also on one process with METAROCE_RUN_IN_PARTS set (the test of that path).
    bool RunsInParts() const override
    {
        return m_ranks > 1 || std::getenv("METAROCE_RUN_IN_PARTS") != nullptr;
    }

    /// Host ranks to use instead of the automatic partition (one per NIC; empty: automatic,
    /// or the JSON array in the file METAROCE_HOST_RANKS names if that is set).
    void SetHostRanks(std::vector<uint32_t> r) { m_hostRanks = std::move(r); }
    /// A JSON array of ranks, one per NIC (InputError naming the file otherwise).
    static std::vector<uint32_t> ReadHostRanks(const std::string& file);
    const FabricPartition& LastPartition() const { return m_partition; }

  private:
    uint32_t m_rank{0};
    uint32_t m_ranks{1};
    std::vector<uint32_t> m_hostRanks;
    FabricPartition m_partition;
    std::unique_ptr<MpiFabric> m_fabric;
    uint64_t m_roundsAtStart{0};
    bool m_nullMessage{false};
};

} // namespace metaroce
} // namespace ns3

#endif
