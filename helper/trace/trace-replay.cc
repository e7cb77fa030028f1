#include "helper/trace/trace-replay.h"

#include "helper/run/run-context.h"
#include "model/core/fabric-random.h"

#include "ns3/simulator.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

namespace ns3
{
namespace metaroce
{

namespace
{
/// Imported traces by their keys: the variants of a scenario share one import.
std::map<std::string, std::shared_ptr<const TraceJob>>&
ImportCache()
{
    static std::map<std::string, std::shared_ptr<const TraceJob>> cache;
    return cache;
}

/// The Communicator operation a trace's collective runs as (its own: a broadcast from the
/// group's first rank, an all-to-all-v as the uniform all-to-all of the same buffer).
std::string
ReplayedAs(const std::string& kind)
{
    return kind;
}

/// Total length of the union of intervals, and of its overlap with another union.
std::vector<std::pair<int64_t, int64_t>>
Union(std::vector<std::pair<int64_t, int64_t>> v)
{
    std::sort(v.begin(), v.end());
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const auto& iv : v)
    {
        if (iv.second <= iv.first)
        {
            continue;
        }
        if (!out.empty() && iv.first <= out.back().second)
        {
            out.back().second = std::max(out.back().second, iv.second);
        }
        else
        {
            out.push_back(iv);
        }
    }
    return out;
}

int64_t
Length(const std::vector<std::pair<int64_t, int64_t>>& u)
{
    int64_t t = 0;
    for (const auto& iv : u)
    {
        t += iv.second - iv.first;
    }
    return t;
}

int64_t
Overlap(const std::vector<std::pair<int64_t, int64_t>>& a,
        const std::vector<std::pair<int64_t, int64_t>>& b)
{
    int64_t t = 0;
    std::size_t i = 0;
    std::size_t j = 0;
    while (i < a.size() && j < b.size())
    {
        int64_t lo = std::max(a[i].first, b[j].first);
        int64_t hi = std::min(a[i].second, b[j].second);
        t += std::max<int64_t>(0, hi - lo);
        (a[i].second < b[j].second ? i : j)++;
    }
    return t;
}

/// Runs at most this many ranks and timeline entries keep the timeline (the Gantt figure).
constexpr uint32_t kTimelineRanks = 64;
constexpr uint64_t kTimelineEntries = 50000;
} // namespace

TraceWorkloadSpec
ParseTraceWorkload(const JsonReader& w, const TopologySpec& topo)
{
    TraceWorkloadSpec t;
    const nlohmann::json& f = w.Raw("file");
    if (f.is_string())
    {
        t.files.push_back(f.get<std::string>());
    }
    else if (f.is_array() && !f.empty())
    {
        for (std::size_t i = 0; i < f.size(); ++i)
        {
            if (!f[i].is_string())
            {
                throw InputError(w.ElementPath("file", i) + ": must be a file name");
            }
            t.files.push_back(f[i].get<std::string>());
        }
    }
    else
    {
        w.Fail("file", "must be a trace file or a list of them (one per rank)");
    }
    t.format = w.Choice("format", "auto", {"auto", "pytorch-profiler", "nccl-log"});
    t.gapUs = w.Number("gap_us", 0.0, 0.0, 1e9);
    t.scaleTo = static_cast<uint32_t>(w.UInt("scale_to", 0, 0, topo.Accelerators()));
    t.placement =
        w.Choice("placement", "contiguous", {"contiguous", "strided", "random", "explicit"});
    t.stride = static_cast<uint32_t>(w.UInt("stride", 1, 1, topo.Accelerators()));
    if (t.placement == "explicit")
    {
        std::set<uint64_t> seen;
        std::vector<uint64_t> nics = w.UIntList("nics", 0, topo.Accelerators() - 1);
        for (std::size_t i = 0; i < nics.size(); ++i)
        {
            if (!seen.insert(nics[i]).second)
            {
                throw InputError(w.ElementPath("nics", i) + ": NIC " + std::to_string(nics[i]) +
                                 " is listed twice");
            }
            t.nics.push_back(static_cast<uint32_t>(nics[i]));
        }
    }
    std::ostringstream key;
    for (const auto& file : t.files)
    {
        key << file << '\n';
    }
    key << t.format << '\n' << t.gapUs << '\n' << t.scaleTo;
    auto& cache = ImportCache();
    auto hit = cache.find(key.str());
    if (hit == cache.end())
    {
        TraceImportOptions opts;
        opts.format = t.format;
        opts.gapUs = t.gapUs;
        auto named = [&](const std::string& k, auto&& f)
        {
            try
            {
                return AsInputError(t.files[0], f);
            }
            catch (const InputError& e)
            {
                throw InputError(w.KeyPath(k) + ": " + e.what());
            }
        };
        TraceJob imported = named("file", [&]() { return ImportTrace(t.files, opts); });
        // Before completing it: a one-rank trace of a huge world would copy its rank that often.
        if (imported.worldSize > topo.Accelerators())
        {
            w.Fail("file", "the trace's world has " + std::to_string(imported.worldSize) +
                               " ranks, the topology " + std::to_string(topo.Accelerators()) +
                               " accelerators");
        }
        if (w.Has("gap_us") && imported.format != "nccl-log")
        {
            w.Fail("gap_us", "applies to NCCL logs only (a profiler trace's timestamps give the "
                             "gaps)");
        }
        auto job =
            std::make_shared<const TraceJob>(named(t.scaleTo != 0 ? "scale_to" : "file", [&]()
                                                   { return CompleteTrace(imported, t.scaleTo); }));
        hit = cache.emplace(key.str(), job).first;
    }
    t.job = hit->second;
    const uint32_t n = t.job->worldSize;
    if (n > topo.Accelerators())
    {
        w.Fail(w.Has("scale_to") ? "scale_to" : "file",
               "the job has " + std::to_string(n) + " ranks, the topology " +
                   std::to_string(topo.Accelerators()) + " accelerators");
    }
    if (t.placement == "explicit" && t.nics.size() != n)
    {
        w.Fail("nics", "lists " + std::to_string(t.nics.size()) + " NICs for the job's " +
                           std::to_string(n) + " ranks");
    }
    w.Finish();
    return t;
}

std::vector<uint32_t>
TracePlacement(const TraceWorkloadSpec& spec, uint32_t accelerators, int64_t& stream)
{
    return PlaceRanks(spec.placement, spec.stride, spec.nics, spec.job->worldSize, accelerators,
                      stream);
}

struct TraceReplay::Row
{
    const TraceOp* op{nullptr}; //!< as the lowest rank that runs it recorded it
    uint32_t templateGroup{0};
    uint32_t seq{0};
    uint32_t groupSize{0};
    uint32_t instances{0}; //!< group copies that run it
    uint32_t done{0};
    double maxTimeUs{-1};
    int64_t firstStartPs{-1};
    std::string algorithm;
    std::string protocol;
    uint32_t channels{0};
    double modelUs{-1};
};

struct TraceReplay::Group
{
    struct Arrival
    {
        uint32_t rank;
        uint32_t op;
        int64_t reachPs;
    };

    std::unique_ptr<Communicator> comm; //!< null for a group of one rank
    uint32_t size{0};
    uint32_t total{0}; //!< collectives on the group
    uint32_t nextSeq{0};
    bool running{false};
    int64_t startPs{0};
    std::map<uint32_t, std::vector<Arrival>> arrivals; //!< by sequence number
    std::vector<Arrival> members;                      //!< of the running collective
};

TraceReplay::TraceReplay(const TraceJob& job, std::vector<uint32_t> placement,
                         const std::vector<Ptr<RdmaNic>>* nics, QueuePairFactory qpFactory,
                         CollectiveConfig cfg, uint32_t acceleratorsPerHost)
    : m_job(job)
    , m_placement(std::move(placement))
{
    const uint32_t n = job.worldSize;
    for (const auto& g : job.groups)
    {
        auto grp = std::make_unique<Group>();
        grp->size = static_cast<uint32_t>(g.ranks.size());
        if (grp->size > 1)
        {
            std::vector<uint32_t> accel;
            std::map<uint32_t, uint32_t> perHost;
            for (uint32_t r : g.ranks)
            {
                accel.push_back(m_placement[r]);
                ++perHost[m_placement[r] / std::max(1u, acceleratorsPerHost)];
            }
            // NCCL's cost model sees nodes of equal rank counts; uneven ones as one per node.
            CollectiveConfig c = cfg;
            c.ranksPerHost = 1;
            if (acceleratorsPerHost > 1)
            {
                uint32_t k = perHost.begin()->second;
                bool even = std::all_of(perHost.begin(), perHost.end(),
                                        [&](const auto& e) { return e.second == k; });
                c.ranksPerHost = even ? k : 1;
            }
            grp->comm = std::make_unique<Communicator>(accel, nics, qpFactory, c);
        }
        m_groups.push_back(std::move(grp));
    }
    m_seq.resize(n);
    m_rowOf.resize(n);
    m_streamOps.resize(n);
    m_streamNext.resize(n);
    m_compute.resize(n);
    m_comm.resize(n);
    m_lastEndPs.assign(n, 0);
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> rowIndex;
    std::set<std::pair<uint32_t, uint32_t>> rowGroups; // (row, group) pairs seen
    uint64_t entries = 0;
    for (uint32_t r = 0; r < n; ++r)
    {
        std::vector<uint32_t> count(m_groups.size(), 0);
        for (uint32_t i = 0; i < job.ranks[r].ops.size(); ++i)
        {
            const TraceOp& op = job.ranks[r].ops[i];
            uint32_t seq = count[op.group]++;
            m_seq[r].push_back(seq);
            uint32_t tmpl = job.groups[op.group].templateGroup;
            auto [it, fresh] =
                rowIndex.emplace(std::make_pair(tmpl, seq), static_cast<uint32_t>(m_rows.size()));
            if (fresh)
            {
                Row row;
                row.op = &op;
                row.templateGroup = tmpl;
                row.seq = seq;
                row.groupSize = static_cast<uint32_t>(job.groups[op.group].ranks.size());
                m_rows.push_back(row);
            }
            if (rowGroups.emplace(it->second, op.group).second)
            {
                ++m_rows[it->second].instances;
            }
            m_rowOf[r].push_back(it->second);
            if (op.stream >= m_streamOps[r].size())
            {
                m_streamOps[r].resize(op.stream + 1);
            }
            m_streamOps[r][op.stream].push_back(i);
            entries += 2;
        }
        m_streamNext[r].assign(m_streamOps[r].size(), 0);
        for (uint32_t g = 0; g < m_groups.size(); ++g)
        {
            // every member counts the same (CompleteTrace checked): take the group's own
            if (count[g] > 0 && job.groups[g].ranks[0] == r)
            {
                m_groups[g]->total = count[g];
                m_total += count[g];
            }
        }
    }
    m_timeline = n <= kTimelineRanks && entries <= kTimelineEntries;
    // Reported when a run starts (a load that fails says only why), once per trace, not per
    // variant: the variants share the import.
    static std::set<const TraceJob*> reported;
    if (!job.skipped.empty() && reported.insert(&job).second)
    {
        std::cerr << "metaroce-sim: " << job.ranks[0].file
                  << ": not replayed (they move no data): " << DescribeSkipped(job) << "\n";
    }
    if (m_timeline)
    {
        m_events = nlohmann::json::array();
    }
}

TraceReplay::~TraceReplay() = default;

void
TraceReplay::Start()
{
    if (Done())
    {
        Simulator::Stop();
        return;
    }
    for (uint32_t r = 0; r < m_job.worldSize; ++r)
    {
        for (uint32_t s = 0; s < m_streamOps[r].size(); ++s)
        {
            StreamFree(r, s);
        }
    }
}

void
TraceReplay::StreamFree(uint32_t rank, uint32_t stream)
{
    uint32_t& next = m_streamNext[rank][stream];
    if (next == m_streamOps[rank][stream].size())
    {
        return;
    }
    uint32_t i = m_streamOps[rank][stream][next++];
    const TraceOp& op = m_job.ranks[rank].ops[i];
    int64_t now = Simulator::Now().GetPicoSeconds();
    if (op.gapPs > 0)
    {
        m_compute[rank].push_back({now, now + op.gapPs});
        if (m_timeline)
        {
            m_events.push_back({{"rank", rank},
                                {"what", "compute"},
                                {"collective", m_rowOf[rank][i]},
                                {"start_us", now / 1e6},
                                {"end_us", (now + op.gapPs) / 1e6}});
        }
    }
    Simulator::Schedule(PicoSeconds(op.gapPs), &TraceReplay::Reach, this, rank, i);
}

void
TraceReplay::Reach(uint32_t rank, uint32_t opIndex)
{
    const TraceOp& op = m_job.ranks[rank].ops[opIndex];
    Group& g = *m_groups[op.group];
    g.arrivals[m_seq[rank][opIndex]].push_back({rank, opIndex, Simulator::Now().GetPicoSeconds()});
    TryStart(op.group);
}

void
TraceReplay::TryStart(uint32_t group)
{
    Group& g = *m_groups[group];
    auto it = g.arrivals.find(g.nextSeq);
    if (g.running || it == g.arrivals.end() || it->second.size() < g.size)
    {
        return;
    }
    g.running = true;
    g.members = std::move(it->second);
    g.arrivals.erase(it);
    g.startPs = Simulator::Now().GetPicoSeconds();
    const TraceOp& op = m_job.ranks[g.members[0].rank].ops[g.members[0].op];
    if (!g.comm)
    {
        CollectiveResult r{};
        r.startPs = r.endPs = g.startPs;
        Simulator::ScheduleNow(&TraceReplay::Ended, this, group, r);
        return;
    }
    g.comm->Start(
        CollectiveOpOf(ReplayedAs(op.kind)), CollectiveAlgorithm::Auto, op.bytes,
        [this, group](const CollectiveResult& r) { Ended(group, r); }, g.nextSeq + 1 == g.total);
}

void
TraceReplay::Ended(uint32_t group, const CollectiveResult& r)
{
    Group& g = *m_groups[group];
    const int64_t now = Simulator::Now().GetPicoSeconds();
    Row& row = m_rows[m_rowOf[g.members[0].rank][g.members[0].op]];
    double us = (now - g.startPs) / 1e6;
    row.maxTimeUs = std::max(row.maxTimeUs, us);
    row.firstStartPs = row.firstStartPs < 0 ? g.startPs : std::min(row.firstStartPs, g.startPs);
    ++row.done;
    if (g.comm)
    {
        row.algorithm = ToString(r.algorithm);
        row.protocol = ToString(r.protocol);
        row.channels = r.channels;
        row.modelUs = r.ncclModelUs;
    }
    std::vector<Group::Arrival> members = std::move(g.members);
    g.members.clear();
    g.running = false;
    ++g.nextSeq;
    ++m_done;
    for (const auto& m : members)
    {
        m_comm[m.rank].push_back({m.reachPs, now});
        m_lastEndPs[m.rank] = std::max(m_lastEndPs[m.rank], now);
        if (m_timeline)
        {
            uint32_t rowIdx = m_rowOf[m.rank][m.op];
            if (g.startPs > m.reachPs)
            {
                m_events.push_back({{"rank", m.rank},
                                    {"what", "wait"},
                                    {"collective", rowIdx},
                                    {"start_us", m.reachPs / 1e6},
                                    {"end_us", g.startPs / 1e6}});
            }
            m_events.push_back({{"rank", m.rank},
                                {"what", "collective"},
                                {"collective", rowIdx},
                                {"start_us", g.startPs / 1e6},
                                {"end_us", now / 1e6}});
        }
        StreamFree(m.rank, m_job.ranks[m.rank].ops[m.op].stream);
    }
    TryStart(group);
    if (Done())
    {
        Simulator::Stop();
    }
}

std::string
TraceReplay::Unfinished() const
{
    if (Done())
    {
        return "";
    }
    std::ostringstream os;
    os << m_total - m_done << " of " << m_total << " collectives unfinished";
    for (uint32_t g = 0; g < m_groups.size(); ++g)
    {
        if (m_groups[g]->nextSeq < m_groups[g]->total)
        {
            os << " (first: group " << m_job.groups[g].name << ", collective "
               << m_groups[g]->nextSeq << ")";
            break;
        }
    }
    return os.str();
}

std::vector<RunRecord>
TraceReplay::Records(const RunSpec& spec) const
{
    const uint32_t n = m_job.worldSize;
    // The run's times: from the start of the trace (its first kernel) to the last rank's end;
    // per rank, communication is the union of its collectives from reaching them to their
    // end, exposed communication the part of it that no compute gap of its overlaps.
    int64_t iterPs = 0;
    double commSum = 0;
    double exposedSum = 0;
    for (uint32_t r = 0; r < n; ++r)
    {
        iterPs = std::max(iterPs, m_lastEndPs[r]);
        std::vector<std::pair<int64_t, int64_t>> c;
        std::vector<std::pair<int64_t, int64_t>> k;
        for (const auto& iv : m_comm[r])
        {
            c.emplace_back(iv.startPs, iv.endPs);
        }
        for (const auto& iv : m_compute[r])
        {
            k.emplace_back(iv.startPs, iv.endPs);
        }
        auto cu = Union(c);
        auto ku = Union(k);
        int64_t comm = Length(cu);
        commSum += comm;
        exposedSum += comm - Overlap(cu, ku);
    }
    double recordedSpan = -1;
    for (const auto& tr : m_job.ranks)
    {
        if (tr.traced)
        {
            recordedSpan = std::max(recordedSpan, tr.recordedSpanUs);
        }
    }
    QueuePair::Counters sent;
    uint64_t qps = 0;
    for (const auto& g : m_groups)
    {
        if (g->comm)
        {
            sent.Add(g->comm->SendCounters());
            qps += g->comm->QueuePairs();
        }
    }
    std::vector<RunRecord> out;
    for (uint32_t i = 0; i < m_rows.size(); ++i)
    {
        const Row& row = m_rows[i];
        RunRecord rec;
        rec.scenario = spec.scenario;
        rec.variant = spec.variant;
        rec.parameters = spec.resolved;
        auto& m = rec.metrics;
        m["collective"] = i;
        m["op"] = row.op->kind;
        m["trace_name"] = row.op->name;
        m["replayed_as"] = ReplayedAs(row.op->kind);
        m["bytes"] = row.op->bytes;
        m["group"] = m_job.groups[row.templateGroup].name;
        m["group_size"] = row.groupSize;
        m["instances"] = row.instances;
        m["completed"] = row.done == row.instances;
        if (row.done > 0)
        {
            m["algorithm"] = row.algorithm.empty() ? "none" : row.algorithm;
            m["protocol"] = row.protocol.empty() ? "none" : row.protocol;
            m["channels"] = row.channels;
            if (row.modelUs >= 0)
            {
                m["nccl_model_us"] = row.modelUs;
            }
            m["time_us"] = row.maxTimeUs;
            m["start_us"] = row.firstStartPs / 1e6;
        }
        if (row.op->recordedUs >= 0)
        {
            m["recorded_us"] = row.op->recordedUs;
        }
        m["ranks"] = n;
        m["iteration_us"] = iterPs / 1e6;
        if (recordedSpan >= 0)
        {
            m["recorded_iteration_us"] = recordedSpan;
        }
        if (m_job.steps > 0)
        {
            // the window holds the profiler's steps: their mean, as a training step's time
            m["steps"] = m_job.steps;
            m["step_us"] = iterPs / 1e6 / m_job.steps;
        }
        m["comm_us"] = commSum / n / 1e6;
        m["exposed_comm_us"] = exposedSum / n / 1e6;
        m["collectives_completed"] = m_done;
        m["collectives_total"] = m_total;
        m["timing"] = m_job.timing;
        if (!m_job.skipped.empty())
        {
            m["skipped_events"] = DescribeSkipped(m_job);
        }
        out.push_back(std::move(rec));
    }
    if (out.empty())
    {
        RunRecord rec;
        rec.scenario = spec.scenario;
        rec.variant = spec.variant;
        rec.parameters = spec.resolved;
        rec.metrics["ranks"] = n;
        rec.metrics["iteration_us"] = 0.0;
        rec.metrics["collectives_completed"] = 0;
        rec.metrics["collectives_total"] = 0;
        out.push_back(std::move(rec));
    }
    out[0].counters["qps"] = qps;
    out[0].counters["retransmitted_packets"] = sent.retransmittedPackets;
    out[0].counters["timeouts"] = sent.timeouts;
    out[0].counters["data_packets_sent"] = sent.dataPacketsSent;
    if (m_timeline)
    {
        out[0].timeline = m_events;
    }
    return out;
}

} // namespace metaroce
} // namespace ns3
