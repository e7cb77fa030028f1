#include "helper/mpi/mpi-fabric.h"

#include "helper/scenario/json-reader.h"
#include "model/transport/rdma-header.h"

#include "ns3/abort.h"
#include "ns3/config.h"
#include "ns3/enum.h"
#include "ns3/global-value.h"
#include "ns3/log.h"
#include "ns3/make-event.h"
#include "ns3/mpi-interface.h"
#include "ns3/mpi-receiver.h"
#include "ns3/simulator.h"
#include "ns3/string.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <mpi.h>

namespace
{
uint64_t g_allgathers = 0; // this process's; read between worlds
uint64_t g_windows = 0;    // the own engine's synchronization rounds
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
    return g_allgathers + g_windows;
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

/// A PFC PAUSE or RESUME crossing processes.
struct WirePause
{
    int64_t atPs;
    uint64_t tie; //!< the own engine's order for it (the sending switch's)
    uint32_t link;
    uint8_t dir;
    uint8_t cls;
    uint8_t pause;
};

/// A record in the own engine's exchange buffers: kind, then the length of what follows.
struct RecordHead
{
    uint8_t kind;
    uint32_t bytes;
};

template <typename T>
void
Put(std::vector<uint8_t>& out, const T& v)
{
    const std::size_t at = out.size();
    out.resize(at + sizeof(T));
    std::memcpy(out.data() + at, &v, sizeof(T));
}

} // namespace

MpiFabric::MpiFabric(Fabric& fabric, const FabricPartition& partition, uint32_t rank,
                     uint32_t ranks, bool ownEngine)
    : m_fabric(fabric)
    , m_rank(rank)
    , m_ranks(ranks)
    , m_own(ownEngine)
    , m_out(ranks)
{
    ApplyPartition(fabric, partition);
    FabricChannel::SetRemoteSink(this);
    // No crossing link: the processes never wait for each other.
    m_lookaheadPs = partition.crossingLinks > 0
                        ? static_cast<uint64_t>(partition.minCrossingDelayPs)
                        : std::numeric_limits<uint64_t>::max();
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
            if (!m_own && to == rank && from != rank && !toDev->GetObject<MpiReceiver>())
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

void
MpiFabric::AppendFrame(std::vector<uint8_t>& out, uint32_t link, uint32_t dir, uint8_t downs,
                       const FabricFrame& f)
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
    w.body = f.header ? Body::Rdma : f.packet ? Body::Packet : Body::None;
    Put(out, w);
    if (f.header)
    {
        auto* h = dynamic_cast<const RdmaFrameHeader*>(&*f.header);
        NS_ABORT_MSG_UNLESS(h != nullptr, "a frame header that cannot cross processes");
        WireRdma r{};
        RdmaHeaderData data;
        h->Get(data);
        r.fields = data;
        r.sack = data.sack;
        r.payloadBytes = h->PayloadBytes();
        Put(out, r);
    }
    else if (f.packet)
    {
        const uint32_t n = f.packet->GetSerializedSize();
        const std::size_t at = out.size();
        out.resize(at + n);
        NS_ABORT_MSG_UNLESS(f.packet->Serialize(out.data() + at, n) == 1, "packet serialization");
    }
}

FabricFrame
MpiFabric::ParseFrame(const uint8_t* p, std::size_t n, uint32_t& link, uint32_t& dir,
                      uint8_t& downs)
{
    NS_ABORT_MSG_UNLESS(n >= sizeof(WireFrame), "short frame from another process");
    WireFrame w;
    std::memcpy(&w, p, sizeof(w));
    FabricFrame f;
    if (w.body == Body::Rdma)
    {
        NS_ABORT_MSG_UNLESS(n == sizeof(WireFrame) + sizeof(WireRdma),
                            "bad RDMA frame from another process");
        WireRdma r;
        std::memcpy(&r, p + sizeof(WireFrame), sizeof(r));
        RdmaHeaderData data;
        static_cast<RdmaFields&>(data) = r.fields;
        data.sack = r.sack;
        f = FabricFrame::Make(RdmaFrameHeader::Make(data, r.payloadBytes), w.src, w.dst, w.entropy,
                              w.tc, w.ecn);
    }
    else if (w.body == Body::Packet)
    {
        auto q = Create<Packet>(p + sizeof(WireFrame), static_cast<uint32_t>(n - sizeof(WireFrame)),
                                true);
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

Ptr<Packet>
MpiFabric::Serialize(uint32_t link, uint32_t dir, uint8_t downs, const FabricFrame& f)
{
    std::vector<uint8_t> buf;
    AppendFrame(buf, link, dir, downs, f);
    return Create<Packet>(buf.data(), static_cast<uint32_t>(buf.size()));
}

FabricFrame
MpiFabric::Deserialize(Ptr<Packet> p, uint32_t& link, uint32_t& dir, uint8_t& downs)
{
    std::vector<uint8_t> buf(p->GetSize());
    p->CopyData(buf.data(), static_cast<uint32_t>(buf.size()));
    return ParseFrame(buf.data(), buf.size(), link, dir, downs);
}

uint32_t
MpiFabric::RankOfFarEnd(FabricChannel* link, uint32_t dir) const
{
    return link->GetDevice(1 - dir)->GetNode()->GetSystemId();
}

void
MpiFabric::SendRemote(FabricChannel* link, uint32_t dir, FabricFrame&& frame, uint8_t downs)
{
    if (link->GetDevice(dir)->GetNode()->GetSystemId() != m_rank)
    {
        return; // a copy of another process's node: nothing should send, nothing goes out
    }
    ++m_sent;
    if (m_own)
    {
        std::vector<uint8_t>& out = m_out[RankOfFarEnd(link, dir)];
        const std::size_t head = out.size();
        Put(out, RecordHead{static_cast<uint8_t>(Kind::Frame), 0});
        AppendFrame(out, m_linkIndex.at(link), dir, downs, frame);
        const uint32_t bytes = static_cast<uint32_t>(out.size() - head - sizeof(RecordHead));
        std::memcpy(out.data() + head + offsetof(RecordHead, bytes), &bytes, sizeof(bytes));
        return;
    }
    std::vector<uint8_t> buf;
    Put(buf, static_cast<uint8_t>(Kind::Frame));
    AppendFrame(buf, m_linkIndex.at(link), dir, downs, frame);
    Ptr<NetDevice> to = link->GetDevice(1 - dir);
    MpiInterface::SendPacket(Create<Packet>(buf.data(), static_cast<uint32_t>(buf.size())),
                             PicoSeconds(frame.readyPs), to->GetNode()->GetId(), to->GetIfIndex());
}

void
MpiFabric::SendPause(FabricChannel* link, uint32_t dir, int64_t atPs, uint8_t cls, bool pause)
{
    if (link->GetDevice(dir)->GetNode()->GetSystemId() != m_rank)
    {
        return;
    }
    WirePause w{};
    w.atPs = atPs;
    w.link = m_linkIndex.at(link);
    w.dir = static_cast<uint8_t>(dir);
    w.cls = cls;
    w.pause = pause ? 1 : 0;
    if (m_own)
    {
        // The tie the pause would have had on one process: this switch's next count.
        w.tie =
            static_cast<FastSimulatorImpl*>(PeekPointer(Simulator::GetImplementation()))->NextTie();
        std::vector<uint8_t>& out = m_out[RankOfFarEnd(link, dir)];
        Put(out, RecordHead{static_cast<uint8_t>(Kind::Pause), sizeof(WirePause)});
        Put(out, w);
        return;
    }
    std::vector<uint8_t> buf;
    Put(buf, static_cast<uint8_t>(Kind::Pause));
    Put(buf, w);
    Ptr<NetDevice> to = link->GetDevice(1 - dir);
    MpiInterface::SendPacket(Create<Packet>(buf.data(), static_cast<uint32_t>(buf.size())),
                             PicoSeconds(atPs), to->GetNode()->GetId(), to->GetIfIndex());
}

void
MpiFabric::Take(Kind kind, const uint8_t* p, std::size_t n)
{
    if (kind == Kind::Frame)
    {
        uint32_t link = 0;
        uint32_t dir = 0;
        uint8_t downs = 0;
        FabricFrame f = ParseFrame(p, n, link, dir, downs);
        ++m_received;
        FabricChannel* ch = PeekPointer(m_fabric.Links().at(link));
        if (m_own)
        {
            ch->EnqueueRemote(dir, std::move(f), downs);
        }
        else
        {
            ch->ReceiveRemote(dir, std::move(f), downs);
        }
        return;
    }
    NS_ABORT_MSG_UNLESS(kind == Kind::Pause && n == sizeof(WirePause),
                        "bad record from another process");
    WirePause w;
    std::memcpy(&w, p, sizeof(w));
    FabricChannel* ch = PeekPointer(m_fabric.Links().at(w.link));
    Ptr<FabricNetDevice> up = StaticCast<FabricNetDevice>(ch->GetDevice(1 - w.dir));
    const bool pause = w.pause != 0;
    if (m_own)
    {
        auto* sim = static_cast<FastSimulatorImpl*>(PeekPointer(Simulator::GetImplementation()));
        EventImpl* ev = MakeEvent(&FabricNetDevice::SetPaused, PeekPointer(up), w.cls, pause);
        sim->InsertWithTie(ev, static_cast<uint64_t>(w.atPs), up->GetNode()->GetId(), w.tie);
        return;
    }
    up->SetPaused(w.cls, pause); // ns-3's engines run this at atPs
}

void
MpiFabric::Receive(Ptr<Packet> p)
{
    std::vector<uint8_t> buf(p->GetSize());
    p->CopyData(buf.data(), static_cast<uint32_t>(buf.size()));
    NS_ABORT_MSG_UNLESS(!buf.empty(), "empty record from another process");
    Take(static_cast<Kind>(buf[0]), buf.data() + 1, buf.size() - 1);
}

void
MpiFabric::Exchange()
{
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<int> sendCounts(m_ranks);
    std::vector<int> recvCounts(m_ranks);
    std::vector<int> sendDispl(m_ranks);
    std::vector<int> recvDispl(m_ranks);
    std::size_t total = 0;
    for (uint32_t r = 0; r < m_ranks; ++r)
    {
        NS_ABORT_MSG_UNLESS(m_out[r].size() < (1u << 31), "over 2 GiB crossing in one window");
        sendCounts[r] = static_cast<int>(m_out[r].size());
        sendDispl[r] = static_cast<int>(total);
        total += m_out[r].size();
    }
    MPI_Alltoall(sendCounts.data(), 1, MPI_INT, recvCounts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    m_sendBuf.resize(total);
    for (uint32_t r = 0; r < m_ranks; ++r)
    {
        if (!m_out[r].empty())
        {
            std::memcpy(m_sendBuf.data() + sendDispl[r], m_out[r].data(), m_out[r].size());
        }
        m_out[r].clear();
    }
    std::size_t in = 0;
    for (uint32_t r = 0; r < m_ranks; ++r)
    {
        recvDispl[r] = static_cast<int>(in);
        in += static_cast<std::size_t>(recvCounts[r]);
    }
    NS_ABORT_MSG_UNLESS(in < (std::size_t(1) << 31), "over 2 GiB crossing in one window");
    m_recvBuf.resize(in);
    MPI_Alltoallv(m_sendBuf.data(), sendCounts.data(), sendDispl.data(), MPI_BYTE, m_recvBuf.data(),
                  recvCounts.data(), recvDispl.data(), MPI_BYTE, MPI_COMM_WORLD);
    // In rank order, each rank's records in the order sent: a link's frames keep their order.
    std::size_t at = 0;
    while (at < in)
    {
        RecordHead h;
        std::memcpy(&h, m_recvBuf.data() + at, sizeof(h));
        Take(static_cast<Kind>(h.kind), m_recvBuf.data() + at + sizeof(RecordHead), h.bytes);
        at += sizeof(RecordHead) + h.bytes;
    }
    m_syncNs += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count());
}

uint64_t
MpiFabric::Grant(uint64_t nextTs, bool stopped)
{
    // One reduction: the earliest pending event anywhere, and whether any process stopped.
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t v[2] = {nextTs, stopped ? 0u : 1u};
    MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    ++g_windows;
    m_syncNs += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count());
    if (v[0] == std::numeric_limits<uint64_t>::max() || v[1] == 0)
    {
        return 0;
    }
    const uint64_t limit = v[0] + m_lookaheadPs;
    return limit < v[0] ? std::numeric_limits<uint64_t>::max() : limit; // saturating
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
    m_own = engine.Get() == FastSimulatorImpl::GetTypeId().GetName();
    if (m_own)
    {
        // Every world's simulator orders ties by node from its first event on.
        Config::SetDefault("ns3::metaroce::FastSimulatorImpl::TieOrder",
                           EnumValue(static_cast<int>(FastSimulatorImpl::TieOrder::Node)));
    }
    else
    {
        // On a communicator of ours, so that each world can take it up again: ns-3's
        // interface serves one simulation (Simulator::Destroy frees its buffers).
        MpiInterface::Enable(MPI_COMM_WORLD);
    }
    SetDistributedRun(this);
}

MpiRun::~MpiRun()
{
    SetDistributedRun(nullptr);
    m_fabric.reset();
    if (!m_own)
    {
        MpiInterface::Disable();
    }
    MPI_Finalize();
}

void
MpiRun::Distribute(Fabric& fabric)
{
    if (m_fabric)
    {
        m_fabric.reset();
        if (!m_own)
        {
            // A world after the first: the previous one's Simulator::Destroy freed the buffers.
            MpiInterface::Disable();
            MpiInterface::Enable(MPI_COMM_WORLD);
        }
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
    m_fabric = std::make_unique<MpiFabric>(fabric, m_partition, m_rank, m_ranks, m_own);
    if (m_own)
    {
        auto sim = DynamicCast<FastSimulatorImpl>(Simulator::GetImplementation());
        NS_ABORT_MSG_UNLESS(sim && sim->NodeOrder(),
                            "the distributed engine needs FastSimulatorImpl in TieOrder node");
        sim->SetSynchronizer(m_ranks > 1 ? m_fabric.get() : nullptr);
    }
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
    std::vector<uint64_t> mine{nics,
                               events,
                               peakRssBytes,
                               m_fabric ? m_fabric->GetFramesSent() : 0,
                               MpiFabric::GetSyncRounds() - m_roundsAtStart,
                               m_fabric ? m_fabric->GetSyncNs() : 0};
    std::vector<uint64_t> all(mine.size() * m_ranks);
    MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T, all.data(),
                  static_cast<int>(mine.size()), MPI_UINT64_T, MPI_COMM_WORLD);
    nlohmann::json j = {{"ranks", m_ranks},
                        {"crossing_links", m_partition.crossingLinks},
                        {"lookahead_ns", m_partition.minCrossingDelayPs / 1e3}};
    // sync_ns: the own engine's time in Exchange and Grant (MPI calls, and waiting there for
    // the slowest process); 0 under ns-3's engines, which do not say.
    const char* names[] = {"nics",        "events", "peak_rss_bytes", "frames_sent_to_other_ranks",
                           "sync_rounds", "sync_ns"};
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
