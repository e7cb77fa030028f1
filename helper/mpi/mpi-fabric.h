/*
 * A fabric simulated by several MPI processes. Every process builds the whole fabric;
 * FabricPartition says which nodes each one simulates. A link between two processes stays a
 * FabricChannel on both: the sender's copy hands each frame (and each PFC PAUSE/RESUME) to
 * MpiFabric, the process's FabricRemoteSink, which carries it to the process of the far end.
 * Frames sent by a node this process only holds a copy of are dropped (nothing sends them).
 *
 * Two engines, chosen by SimulatorImplementationType:
 * - the module's own (ns3::metaroce::FastSimulatorImpl in TieOrder::Node; metaroce-sim-mpi's
 *   default): MpiFabric is its Synchronizer. What crossed during a window goes over in one
 *   MPI_Alltoallv at the window's end, each frame entering the far copy of its link ahead of
 *   its arrival (FabricChannel::EnqueueRemote); one MPI_Allreduce then grants the next
 *   window: every event before the earliest pending event anywhere plus the lookahead (the
 *   smallest delay of a link between processes). Events at the same time run in an order
 *   each node's history fixes, so 1, 2 or 4 processes give the same bytes.
 * - ns-3's DistributedSimulatorImpl (granted time windows) or NullMessageSimulatorImpl: each
 *   frame is a Packet for MpiInterface::SendPacket, due at its arrival time, rebuilt by the
 *   far process's MpiReceiver. ns-3 orders a frame from another process after the receiver's
 *   own events of the same time, so results match one process's within a hair, not exactly.
 *
 * MpiRun is what a program on MPI creates first: it starts MPI (and ns-3's MpiInterface for
 * ns-3's engines), installs itself as the runner's DistributedRun, and stops MPI when
 * destroyed.
 */
#ifndef METAROCE_MPI_FABRIC_H
#define METAROCE_MPI_FABRIC_H

#include "helper/fabric-helper.h"
#include "helper/mpi/distributed-run.h"
#include "helper/mpi/fabric-partition.h"
#include "model/core/fast-simulator-impl.h"

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

class MpiFabric final : public FabricRemoteSink, public FastSimulatorImpl::Synchronizer
{
  public:
    /// Applies `partition` to `fabric` for the process of rank `rank` out of `ranks`;
    /// `ownEngine`: FastSimulatorImpl in TieOrder::Node runs it (else ns-3's engines).
    MpiFabric(Fabric& fabric, const FabricPartition& partition, uint32_t rank, uint32_t ranks,
              bool ownEngine);
    ~MpiFabric() override;
    MpiFabric(const MpiFabric&) = delete;
    MpiFabric& operator=(const MpiFabric&) = delete;

    void SendRemote(FabricChannel* link, uint32_t dir, FabricFrame&& frame, uint8_t downs) override;
    void SendPause(FabricChannel* link, uint32_t dir, int64_t atPs, uint8_t cls,
                   bool pause) override;

    // FastSimulatorImpl::Synchronizer
    void Exchange() override;
    uint64_t Grant(uint64_t nextTs, bool stopped) override;
    uint32_t SystemId() const override { return m_rank; }

    uint64_t GetFramesSent() const { return m_sent; }
    uint64_t GetFramesReceived() const { return m_received; }
    /// Wall time this process spent synchronizing (own engine), in nanoseconds.
    uint64_t GetSyncNs() const { return m_syncNs; }
    /// Synchronization rounds so far in this process: the own engine's windows, or ns-3's
    /// granted-time-window engine's MPI_Allgather calls (counted through MPI's profiling
    /// interface).
    static uint64_t GetSyncRounds();

    /// The bytes a frame crosses processes as (link index, direction, the link's down count
    /// when it was sent, the frame).
    static Ptr<Packet> Serialize(uint32_t link, uint32_t dir, uint8_t downs,
                                 const FabricFrame& frame);
    static FabricFrame Deserialize(Ptr<Packet> p, uint32_t& link, uint32_t& dir, uint8_t& downs);

  private:
    /// A record's kind, its first byte.
    enum class Kind : uint8_t
    {
        Frame = 1,
        Pause = 2,
    };
    static void AppendFrame(std::vector<uint8_t>& out, uint32_t link, uint32_t dir, uint8_t downs,
                            const FabricFrame& frame);
    static FabricFrame ParseFrame(const uint8_t* p, std::size_t n, uint32_t& link, uint32_t& dir,
                                  uint8_t& downs);
    /// Takes one record (ns-3's engines: at its time; the own engine: at the exchange).
    void Take(Kind kind, const uint8_t* p, std::size_t n);
    void Receive(Ptr<Packet> p);
    uint32_t RankOfFarEnd(FabricChannel* link, uint32_t dir) const;

    Fabric& m_fabric;
    uint32_t m_rank;
    uint32_t m_ranks;
    bool m_own;
    uint64_t m_lookaheadPs;
    std::unordered_map<const FabricChannel*, uint32_t> m_linkIndex;
    std::vector<std::vector<uint8_t>> m_out; //!< own engine: records for each rank
    std::vector<uint8_t> m_sendBuf;
    std::vector<uint8_t> m_recvBuf;
    uint64_t m_sent{0};
    uint64_t m_received{0};
    uint64_t m_syncNs{0};
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
    /// Whether the module's own engine runs (FastSimulatorImpl in TieOrder::Node).
    bool OwnEngine() const { return m_own; }
    /// 10 ms under NullMessageSimulatorImpl (it ends only at a stop time), else zero.
    Time StopAfter() const override { return m_nullMessage ? MilliSeconds(10) : Time(0); }
    /// Always under the own engine, so that 1, 2 and 4 processes give the same bytes (a
    /// run in parts ends at a window boundary: streams' end-of-run sender state is read
    /// there); under ns-3's engines on more than one process, or with METAROCE_RUN_IN_PARTS
    /// set (the test of that path on one).
    bool RunsInParts() const override
    {
        return m_own || m_ranks > 1 || std::getenv("METAROCE_RUN_IN_PARTS") != nullptr;
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
    bool m_own{true};
};

} // namespace metaroce
} // namespace ns3

#endif
