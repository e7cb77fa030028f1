#include "mpi-fabric.h"

#include "json-reader.h"
#include "model/transport/rdma-header.h"

#include "ns3/abort.h"
#include "ns3/global-value.h"
#include "ns3/log.h"
#include "ns3/mpi-interface.h"
#include "ns3/mpi-receiver.h"
#include "ns3/simulator.h"
#include "ns3/string.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mpi.h>

namespace
{
uint64_t g_allgathers = 0; // this process's; read between worlds
} // namespace

/// DistributedSimulatorImpl synchronizes once per round with one MPI_Allgather (its lower
/// bound time stamps); MPI's profiling interface lets us count them without changing ns-3.
extern "C" int
MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
              int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    ++g_allgathers;
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("MpiFabric");

uint64_t
MpiFabric::GetSyncRounds()
{
    return g_allgathers;
}

namespace
{

/// What follows the fixed part of a frame on the wire between processes.
enum class Body : uint8_t
{
    None = 0,   //!< no transport bytes
    Packet = 1, //!< an ns-3 Packet, serialized with its tags and metadata
    Rdma = 2,   //!< an RdmaFrameHeader: every field and the payload size
};

/// The frame's fields, the link and the send time, as laid out between processes (both
/// ends run the same program on the same kind of machine: plain bytes suffice).
struct WireFrame
{
    int64_t readyPs;
    uint32_t link;
    uint32_t src;
    uint32_t dst;
    uint32_t wireBytes;
    uint16_t entropy;
    uint16_t ingress;
    uint8_t downs; //!< the link's down count when the frame was sent
    uint8_t dir;
    uint8_t ecn;
    uint8_t tc;
    Body body;
};

struct WireRdma
{
    RdmaFields fields;
    std::array<uint64_t, 4> sack;
    uint32_t payloadBytes;
};

} // namespace

MpiFabric::MpiFabric(Fabric& fabric, const FabricPartition& partition, uint32_t rank)
    : m_fabric(fabric)
    , m_rank(rank)
{
    ApplyPartition(fabric, partition);
    FabricChannel::SetRemoteSink(this);
    const auto& links = fabric.Links();
    for (uint32_t i = 0; i < links.size(); ++i)
    {
        FabricChannel* link = PeekPointer(links[i]);
        m_linkIndex[link] = i;
        for (uint32_t d = 0; d < 2; ++d)
        {
            const uint32_t from = link->GetDevice(d)->GetNode()->GetSystemId();
            Ptr<NetDevice> toDev = link->GetDevice(1 - d);
            const uint32_t to = toDev->GetNode()->GetSystemId();
            // What another process's node would send here goes nowhere (SendRemote).
            link->SetRemote(d, from != rank || to != rank);
            if (to == rank && from != rank && !toDev->GetObject<MpiReceiver>())
            {
                auto rx = CreateObject<MpiReceiver>();
                rx->SetReceiveCallback(MakeCallback(&MpiFabric::Receive, this));
                toDev->AggregateObject(rx);
            }
        }
    }
}

MpiFabric::~MpiFabric()
{
    if (FabricChannel::GetRemoteSink() == this)
    {
        FabricChannel::SetRemoteSink(nullptr);
    }
}

Ptr<Packet>
MpiFabric::Serialize(uint32_t link, uint32_t dir, uint8_t downs, const FabricFrame& f)
{
    WireFrame w{};
    w.downs = downs;
    w.readyPs = f.readyPs;
    w.link = link;
    w.src = f.src;
    w.dst = f.dst;
    w.wireBytes = f.wireBytes;
    w.entropy = f.entropy;
    w.ingress = f.ingress;
    w.dir = static_cast<uint8_t>(dir);
    w.ecn = f.ecn;
    w.tc = f.tc;
    std::vector<uint8_t> buf(sizeof(WireFrame));
    if (f.header)
    {
        auto* h = dynamic_cast<const RdmaFrameHeader*>(&*f.header);
        NS_ABORT_MSG_UNLESS(h != nullptr, "a frame header that cannot cross processes");
        w.body = Body::Rdma;
        WireRdma r{};
        RdmaHeaderData data;
        h->Get(data);
        r.fields = data;
        r.sack = data.sack;
        r.payloadBytes = h->PayloadBytes();
        buf.resize(sizeof(WireFrame) + sizeof(WireRdma));
        std::memcpy(buf.data() + sizeof(WireFrame), &r, sizeof(r));
    }
    else if (f.packet)
    {
        w.body = Body::Packet;
        const uint32_t n = f.packet->GetSerializedSize();
        buf.resize(sizeof(WireFrame) + n);
        NS_ABORT_MSG_UNLESS(f.packet->Serialize(buf.data() + sizeof(WireFrame), n) == 1,
                            "packet serialization");
    }
    else
    {
        w.body = Body::None;
    }
    std::memcpy(buf.data(), &w, sizeof(w));
    return Create<Packet>(buf.data(), static_cast<uint32_t>(buf.size()));
}

FabricFrame
MpiFabric::Deserialize(Ptr<Packet> p, uint32_t& link, uint32_t& dir, uint8_t& downs)
{
    std::vector<uint8_t> buf(p->GetSize());
    p->CopyData(buf.data(), static_cast<uint32_t>(buf.size()));
    NS_ABORT_MSG_UNLESS(buf.size() >= sizeof(WireFrame), "short frame from another process");
    WireFrame w;
    std::memcpy(&w, buf.data(), sizeof(w));
    FabricFrame f;
    if (w.body == Body::Rdma)
    {
        NS_ABORT_MSG_UNLESS(buf.size() == sizeof(WireFrame) + sizeof(WireRdma),
                            "bad RDMA frame from another process");
        WireRdma r;
        std::memcpy(&r, buf.data() + sizeof(WireFrame), sizeof(r));
        RdmaHeaderData data;
        static_cast<RdmaFields&>(data) = r.fields;
        data.sack = r.sack;
        f = FabricFrame::Make(RdmaFrameHeader::Make(data, r.payloadBytes), w.src, w.dst, w.entropy,
                              w.tc, w.ecn);
    }
    else if (w.body == Body::Packet)
    {
        auto q = Create<Packet>(buf.data() + sizeof(WireFrame),
                                static_cast<uint32_t>(buf.size() - sizeof(WireFrame)), true);
        f = FabricFrame::Make(q, w.src, w.dst, w.entropy, w.tc, w.ecn);
    }
    f.readyPs = w.readyPs;
    f.src = w.src;
    f.dst = w.dst;
    f.wireBytes = w.wireBytes;
    f.entropy = w.entropy;
    f.ingress = w.ingress;
    f.ecn = w.ecn;
    f.tc = w.tc;
    link = w.link;
    dir = w.dir;
    downs = w.downs;
    return f;
}

void
MpiFabric::SendRemote(FabricChannel* link, uint32_t dir, FabricFrame&& frame, uint8_t downs)
{
    if (link->GetDevice(dir)->GetNode()->GetSystemId() != m_rank)
    {
        return; // a copy of another process's node: nothing should send, nothing goes out
    }
    Ptr<NetDevice> to = link->GetDevice(1 - dir);
    Ptr<Packet> p = Serialize(m_linkIndex.at(link), dir, downs, frame);
    MpiInterface::SendPacket(p, PicoSeconds(frame.readyPs), to->GetNode()->GetId(),
                             to->GetIfIndex());
    ++m_sent;
}

void
MpiFabric::Receive(Ptr<Packet> p)
{
    uint32_t link = 0;
    uint32_t dir = 0;
    uint8_t downs = 0;
    FabricFrame f = Deserialize(p, link, dir, downs);
    ++m_received;
    m_fabric.Links().at(link)->ReceiveRemote(dir, std::move(f), downs);
}

std::vector<uint32_t>
MpiRun::ReadHostRanks(const std::string& file)
{
    const std::string what = "METAROCE_HOST_RANKS: " + file;
    std::ifstream in(file);
    if (!in)
    {
        throw InputError(what + ": cannot open the file");
    }
    nlohmann::json j;
    try
    {
        in >> j;
    }
    catch (const nlohmann::json::exception& e)
    {
        throw InputError(what + ": not JSON (" + e.what() + ")");
    }
    if (!j.is_array())
    {
        throw InputError(what + ": expected an array with each NIC's rank");
    }
    std::vector<uint32_t> ranks;
    for (const auto& v : j)
    {
        if (!v.is_number_unsigned())
        {
            throw InputError(what + ": element " + std::to_string(ranks.size()) +
                             " is not a rank (an integer from 0)");
        }
        ranks.push_back(v.get<uint32_t>());
    }
    return ranks;
}

MpiRun::MpiRun(int* argc, char*** argv)
{
    MPI_Init(argc, argv);
    int rank = 0;
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    m_rank = static_cast<uint32_t>(rank);
    m_ranks = static_cast<uint32_t>(size);
    StringValue engine;
    GlobalValue::GetValueByName("SimulatorImplementationType", engine);
    m_nullMessage = engine.Get() == "ns3::NullMessageSimulatorImpl";
    // On a communicator of ours, so that each world can take it up again: ns-3's interface
    // serves one simulation (Simulator::Destroy frees its buffers).
    MpiInterface::Enable(MPI_COMM_WORLD);
    SetDistributedRun(this);
}

MpiRun::~MpiRun()
{
    SetDistributedRun(nullptr);
    m_fabric.reset();
    MpiInterface::Disable();
    MPI_Finalize();
}

void
MpiRun::Distribute(Fabric& fabric)
{
    if (m_fabric)
    {
        // A world after the first: the previous one's Simulator::Destroy freed the buffers.
        m_fabric.reset();
        MpiInterface::Disable();
        MpiInterface::Enable(MPI_COMM_WORLD);
    }
    std::vector<uint32_t> hostRanks = m_hostRanks;
    if (hostRanks.empty())
    {
        if (const char* file = std::getenv("METAROCE_HOST_RANKS"))
        {
            hostRanks = ReadHostRanks(file);
        }
    }
    m_partition = hostRanks.empty() ? PartitionFabric(fabric, m_ranks)
                                    : PartitionFabric(fabric, m_ranks, hostRanks);
    if (m_ranks > 1 && m_partition.crossingLinks > 0 && m_partition.minCrossingDelayPs <= 0)
    {
        throw InputError("topology: links between processes need a delay above zero (the "
                         "synchronization lookahead)");
    }
    m_fabric = std::make_unique<MpiFabric>(fabric, m_partition, m_rank);
    m_roundsAtStart = MpiFabric::GetSyncRounds();
}

void
MpiRun::Sum(std::vector<uint64_t>& v)
{
    MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_UINT64_T, MPI_SUM,
                  MPI_COMM_WORLD);
}

nlohmann::json
MpiRun::RankCosts(uint64_t events, uint64_t peakRssBytes)
{
    // The rounds of this world: those counted since it was distributed.
    const uint64_t nics = static_cast<uint64_t>(
        std::count(m_partition.hostRank.begin(), m_partition.hostRank.end(), m_rank));
    std::vector<uint64_t> mine{nics, events, peakRssBytes, m_fabric ? m_fabric->GetFramesSent() : 0,
                               MpiFabric::GetSyncRounds() - m_roundsAtStart};
    std::vector<uint64_t> all(mine.size() * m_ranks);
    MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T, all.data(),
                  static_cast<int>(mine.size()), MPI_UINT64_T, MPI_COMM_WORLD);
    nlohmann::json j = {{"ranks", m_ranks},
                        {"crossing_links", m_partition.crossingLinks},
                        {"lookahead_ns", m_partition.minCrossingDelayPs / 1e3}};
    const char* names[] = {"nics", "events", "peak_rss_bytes", "frames_sent_to_other_ranks",
                           "sync_rounds"};
    for (std::size_t k = 0; k < mine.size(); ++k)
    {
        nlohmann::json col = nlohmann::json::array();
        for (uint32_t r = 0; r < m_ranks; ++r)
        {
            col.push_back(all[r * mine.size() + k]);
        }
        j[names[k]] = col;
    }
    return j;
}

void
MpiRun::Max(std::vector<int64_t>& v)
{
    MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_INT64_T, MPI_MAX,
                  MPI_COMM_WORLD);
}

void
MpiRun::Min(std::vector<int64_t>& v)
{
    MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_INT64_T, MPI_MIN,
                  MPI_COMM_WORLD);
}

std::vector<int64_t>
MpiRun::Gather(const std::vector<int64_t>& mine)
{
    int n = static_cast<int>(mine.size());
    std::vector<int> counts(m_ranks);
    MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::vector<int> offsets(m_ranks);
    int total = 0;
    for (uint32_t r = 0; r < m_ranks; ++r)
    {
        offsets[r] = total;
        total += counts[r];
    }
    std::vector<int64_t> all(total);
    MPI_Allgatherv(mine.data(), n, MPI_INT64_T, all.data(), counts.data(), offsets.data(),
                   MPI_INT64_T, MPI_COMM_WORLD);
    return all;
}

} // namespace metaroce
} // namespace ns3
