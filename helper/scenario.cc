#include "scenario.h"

#include "json-reader.h"
#include "model/collective/communicator.h"

#include "ns3/string.h"
#include "ns3/type-id.h"

#include <filesystem>

namespace ns3
{
namespace metaroce
{

namespace
{
std::vector<std::string>
SplitPath(const std::string& path)
{
    std::vector<std::string> parts;
    std::string cur;
    for (char c : path)
    {
        if (c == '.')
        {
            parts.push_back(cur);
            cur.clear();
        }
        else
        {
            cur += c;
        }
    }
    parts.push_back(cur);
    return parts;
}

void
SetPath(nlohmann::json& j, const std::string& path, const nlohmann::json& value,
        const std::string& origin)
{
    auto parts = SplitPath(path);
    nlohmann::json* at = &j;
    std::string walked;
    for (std::size_t i = 0; i < parts.size(); ++i)
    {
        const std::string& p = parts[i];
        if (p.empty())
        {
            throw InputError(origin + " " + path + ": empty key in path");
        }
        walked += (walked.empty() ? "" : ".") + p;
        bool last = i + 1 == parts.size();
        if (at->is_array())
        {
            std::size_t idx = 0;
            try
            {
                std::size_t used = 0;
                idx = std::stoul(p, &used);
                if (used != p.size())
                {
                    throw std::invalid_argument(p);
                }
            }
            catch (const std::exception&)
            {
                throw InputError(origin + " " + walked + ": an array index must be a number");
            }
            if (idx >= at->size())
            {
                throw InputError(origin + " " + walked + ": index out of range (size " +
                                 std::to_string(at->size()) + ")");
            }
            at = &(*at)[idx];
        }
        else if (at->is_object())
        {
            if (!last && !at->contains(p))
            {
                (*at)[p] = nlohmann::json::object();
            }
            at = &(*at)[p];
        }
        else
        {
            throw InputError(origin + " " + walked + ": cannot set a key inside a " +
                             std::string(at->type_name()));
        }
        if (last)
        {
            *at = value;
        }
    }
}

std::string
ResolveFile(const std::string& name, const std::string& scenarioFile)
{
    namespace fs = std::filesystem;
    if (fs::exists(name))
    {
        return name;
    }
    fs::path dir = fs::path(scenarioFile).parent_path();
    for (const fs::path& base : {dir, dir / ".."})
    {
        fs::path p = base / name;
        if (fs::exists(p))
        {
            return p.string();
        }
    }
    return name; // the error names it
}

PatternSpec
ParsePattern(const JsonReader& w, const TopologySpec& topo)
{
    PatternSpec p;
    p.pattern = w.Choice("pattern", {"permutation", "pairs", "incast", "explicit", "random-peers"});
    if (p.pattern == "random-peers")
    {
        p.peersPerNic =
            static_cast<uint32_t>(w.UInt("peers_per_nic", 1, std::max(1u, topo.nics - 1)));
    }
    if (p.pattern == "incast")
    {
        p.incastTarget = static_cast<uint32_t>(w.UInt("target", 0, 0, topo.nics - 1));
        p.senders =
            static_cast<uint32_t>(w.UInt("senders", topo.nics - 1, 1, std::max(1u, topo.nics - 1)));
    }
    if (p.pattern == "explicit")
    {
        for (const auto& f : w.Array("flows"))
        {
            uint32_t src = static_cast<uint32_t>(f.UInt("src", 0, topo.nics - 1));
            uint32_t dst = static_cast<uint32_t>(f.UInt("dst", 0, topo.nics - 1));
            if (src == dst)
            {
                f.Fail("dst", "must differ from src");
            }
            f.Finish();
            p.flows.emplace_back(src, dst);
        }
        if (p.flows.empty())
        {
            w.Fail("flows", "must list at least one flow");
        }
    }
    if (p.pattern != "explicit" && topo.nics < 2)
    {
        w.Fail("pattern", "needs at least 2 NICs");
    }
    return p;
}

RawWorkloadSpec
ParseRaw(const JsonReader& w, const TopologySpec& topo)
{
    RawWorkloadSpec r;
    r.who = ParsePattern(w, topo);
    if (w.Has("planes"))
    {
        const auto& arr = w.Raw("planes");
        if (!arr.is_array() || arr.empty())
        {
            w.Fail("planes", "must be a non-empty array of plane numbers");
        }
        for (const auto& v : arr)
        {
            if (!v.is_number_unsigned() || v.get<uint32_t>() >= topo.planes)
            {
                w.Fail("planes", "each plane must be a whole number below " +
                                     std::to_string(topo.planes) + ", got " + v.dump());
            }
            r.planes.push_back(v.get<uint32_t>());
        }
    }
    else
    {
        for (uint32_t p = 0; p < topo.planes; ++p)
        {
            r.planes.push_back(p);
        }
    }
    r.entropiesPerFlow = static_cast<uint32_t>(w.UInt("entropies_per_flow", 1, 1, 4096));
    r.payloadBytes = static_cast<uint32_t>(w.UInt("payload_bytes", 4096, 1, 9000));
    r.rateGbps = w.Number("rate_gbps", topo.nicPortGbps, 1e-6, topo.nicPortGbps);
    w.Finish();
    return r;
}

StreamsWorkloadSpec
ParseStreams(const JsonReader& w, const TopologySpec& topo)
{
    StreamsWorkloadSpec s;
    s.who = ParsePattern(w, topo);
    s.qpsPerFlow = static_cast<uint32_t>(w.UInt("qps_per_flow", 1, 1, 4096));
    s.messageBytes = w.UInt("message_bytes", 0, 0xffffffffULL);
    s.messagesPerQp = w.UInt("messages_per_qp", 1, 1, 1ULL << 32);
    s.outstandingPerQp = static_cast<uint32_t>(w.UInt("outstanding_per_qp", 1, 1, 4096));
    s.streamsPerQp = static_cast<uint32_t>(w.UInt("streams_per_qp", 1, 1, 65535));
    s.bidirectional = w.Bool("bidirectional", false);
    s.startUs = w.Number("start_us", 0.0, 0.0, 1e12);
    if (w.Has("victim"))
    {
        JsonReader v = w.Object("victim");
        s.victim = true;
        s.victimSrc = static_cast<uint32_t>(v.UInt("src", 0, topo.nics - 1));
        s.victimDst = static_cast<uint32_t>(v.UInt("dst", 0, topo.nics - 1));
        if (s.victimSrc == s.victimDst)
        {
            v.Fail("dst", "must differ from src");
        }
        s.victimBytes = v.UInt("message_bytes", 1, 0xffffffffULL);
        v.Finish();
    }
    w.Finish();
    return s;
}

CollectiveWorkloadSpec
ParseCollective(const JsonReader& w, const TopologySpec& topo)
{
    CollectiveWorkloadSpec c;
    c.op = w.Choice("op", CollectiveOpNames());
    c.algorithm = w.Choice("algorithm", "auto", CollectiveAlgorithmNames());
    if (c.algorithm == "pat" && c.op != "allgather" && c.op != "reducescatter")
    {
        w.Fail("algorithm", "pat runs all-gather and reduce-scatter only");
    }
    if (c.algorithm == "tree" && c.op != "allreduce")
    {
        w.Fail("algorithm", "tree runs all-reduce only");
    }
    if (c.algorithm == "direct" && c.op != "alltoall")
    {
        w.Fail("algorithm", "direct runs all-to-all only");
    }
    if (c.op == "alltoall" && c.algorithm == "ring")
    {
        w.Fail("algorithm", "all-to-all runs with direct (or auto)");
    }
    if (w.Has("sizes_bytes"))
    {
        const auto& arr = w.Raw("sizes_bytes");
        if (!arr.is_array() || arr.empty())
        {
            w.Fail("sizes_bytes", "must be a non-empty array of byte counts");
        }
        for (const auto& v : arr)
        {
            if (!v.is_number_unsigned() || v.get<uint64_t>() > (1ULL << 40))
            {
                w.Fail("sizes_bytes",
                       "each size must be a whole number up to 2^40, got " + v.dump());
            }
            c.sizes.push_back(v.get<uint64_t>());
        }
    }
    else
    {
        uint64_t lo = w.UInt("min_bytes", 0, 1ULL << 40);
        uint64_t hi = w.UInt("max_bytes", lo, 1ULL << 40);
        uint64_t f = w.UInt("step_factor", 2, 2, 1024);
        for (uint64_t b = lo; b <= hi; b = b == 0 ? 1 : b * f)
        {
            c.sizes.push_back(b);
            if (b == 0 && hi == 0)
            {
                break;
            }
        }
    }
    c.ranks = static_cast<uint32_t>(w.UInt("ranks", 0, 0, topo.nics));
    c.placement =
        w.Choice("placement", "contiguous", {"contiguous", "strided", "random", "explicit"});
    c.stride = static_cast<uint32_t>(w.UInt("stride", 1, 1, topo.nics));
    if (c.placement == "explicit")
    {
        const auto& arr = w.Raw("nics");
        std::vector<bool> seen(topo.nics, false);
        if (!arr.is_array() || arr.empty())
        {
            w.Fail("nics", "must list the NIC of every rank");
        }
        for (const auto& v : arr)
        {
            if (!v.is_number_unsigned() || v.get<uint64_t>() >= topo.nics ||
                seen[v.get<uint32_t>()])
            {
                w.Fail("nics", "each entry must be a distinct NIC below " +
                                   std::to_string(topo.nics) + ", got " + v.dump());
            }
            seen[v.get<uint32_t>()] = true;
            c.nics.push_back(v.get<uint32_t>());
        }
        if (c.ranks != 0 && c.ranks != c.nics.size())
        {
            w.Fail("ranks", "differs from the number of explicit nics");
        }
        c.ranks = static_cast<uint32_t>(c.nics.size());
    }
    c.ranksPerHost = static_cast<uint32_t>(w.UInt("ranks_per_host", 1, 1, 64));
    if (topo.acceleratorsPerHost > 1 && w.Has("ranks_per_host") &&
        c.ranksPerHost != topo.acceleratorsPerHost)
    {
        w.Fail("ranks_per_host", "the topology has " + std::to_string(topo.acceleratorsPerHost) +
                                     " accelerators per host, which is what NCCL sees; drop "
                                     "this key or make it agree");
    }
    if ((c.ranks == 0 ? topo.nics : c.ranks) % c.ranksPerHost != 0)
    {
        w.Fail("ranks_per_host", "must divide the number of ranks");
    }
    c.warmupIterations = static_cast<uint32_t>(w.UInt("warmup_iterations", 0, 0, 1000));
    c.iterations = static_cast<uint32_t>(w.UInt("iterations", 1, 1, 1000));
    c.channels = static_cast<uint32_t>(w.UInt("channels", 0, 0, 64));
    c.qpsPerConnection = static_cast<uint32_t>(w.UInt("qps_per_connection", 1, 1, 64));
    c.reducePsPerByte = w.Number("reduce_ps_per_byte", 0.0, 0.0, 1e6);
    w.Finish();
    return c;
}

JobWorkloadSpec
ParseJob(const JsonReader& j, const TopologySpec& topo)
{
    JobWorkloadSpec job;
    job.name = j.String("name", "job");
    j.String("description", "");
    job.iterations = static_cast<uint32_t>(j.UInt("iterations", 1, 1, 10000));
    job.ranks = static_cast<uint32_t>(j.UInt("ranks", 0, 0, topo.nics));
    uint32_t n = job.ranks == 0 ? topo.nics : job.ranks;
    for (const auto& p : j.Array("phases"))
    {
        JobPhaseSpec ph;
        ph.name = p.String("name");
        ph.op = p.Choice("op", CollectiveOpNames());
        ph.algorithm = p.Choice("algorithm", "auto", CollectiveAlgorithmNames());
        if ((ph.algorithm == "pat" && ph.op != "allgather" && ph.op != "reducescatter") ||
            (ph.algorithm == "tree" && ph.op != "allreduce") ||
            (ph.algorithm == "direct" && ph.op != "alltoall") ||
            (ph.algorithm == "ring" && ph.op == "alltoall"))
        {
            p.Fail("algorithm", "does not run " + ph.op);
        }
        ph.bytes = p.UInt("bytes", 0, 1ULL << 40);
        ph.groupSize = static_cast<uint32_t>(p.UInt("group_size", n, 1, n));
        if (n % ph.groupSize != 0)
        {
            p.Fail("group_size", "must divide the job's " + std::to_string(n) + " ranks");
        }
        ph.layout = p.Choice("layout", "contiguous", {"contiguous", "strided"});
        ph.withPrevious = p.Bool("with_previous", false);
        if (ph.withPrevious && job.phases.empty())
        {
            p.Fail("with_previous", "the first phase has no previous phase");
        }
        p.Finish();
        job.phases.push_back(ph);
    }
    if (job.phases.empty())
    {
        j.Fail("phases", "must list at least one phase");
    }
    j.Finish();
    return job;
}

/// Attribute overrides: each key must be an attribute of `tid` and its value valid for it.
std::vector<std::pair<std::string, std::string>>
ParseAttributes(const JsonReader& r, const std::string& key, TypeId tid)
{
    std::vector<std::pair<std::string, std::string>> out;
    if (!r.Has(key))
    {
        return out;
    }
    const auto& obj = r.Raw(key);
    if (!obj.is_object())
    {
        r.Fail(key, "must be an object of attribute: value");
    }
    for (auto it = obj.begin(); it != obj.end(); ++it)
    {
        std::string where = r.KeyPath(key) + "." + it.key();
        TypeId::AttributeInformation info;
        if (!tid.LookupAttributeByName(it.key(), &info))
        {
            std::string known;
            for (TypeId t = tid;; t = t.GetParent())
            {
                for (std::size_t i = 0; i < t.GetAttributeN(); ++i)
                {
                    known += (known.empty() ? "" : ", ") + t.GetAttribute(i).name;
                }
                if (t == t.GetParent())
                {
                    break;
                }
            }
            throw InputError(where + ": not an attribute of " + tid.GetName() + " (it has " +
                             known + ")");
        }
        std::string value =
            it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
        if (!info.checker->CreateValidValue(StringValue(value)))
        {
            throw InputError(where + ": '" + value + "' is not a valid value (" +
                             info.checker->GetUnderlyingTypeInformation() + ")");
        }
        out.emplace_back(it.key(), value);
    }
    return out;
}

TransportSpec
ParseTransport(const JsonReader& t)
{
    TransportSpec s;
    s.kind = t.Choice("kind", {"metaroce", "rocev2"});
    s.qpType = s.kind == "metaroce" ? "ns3::metaroce::MetaRoceQueuePair"
                                    : "ns3::metaroce::RoceV2QueuePair";
    std::string cc = t.String("congestion_control", s.kind == "metaroce" ? "aimd" : "dcqcn");
    if (cc == "aimd")
    {
        s.ccType = "ns3::metaroce::MetaRoceAimd";
    }
    else if (cc == "dcqcn")
    {
        s.ccType = "ns3::metaroce::Dcqcn";
    }
    else if (cc == "none")
    {
        s.ccType = "ns3::metaroce::RdmaNoCongestionControl";
    }
    else
    {
        s.ccType = cc;
    }
    TypeId ccTid;
    if (!TypeId::LookupByNameFailSafe(s.ccType, &ccTid) ||
        !ccTid.IsChildOf(TypeId::LookupByName("ns3::metaroce::RdmaCongestionOps")))
    {
        t.Fail("congestion_control",
               "must be aimd, dcqcn, none or the TypeId name of an RdmaCongestionOps, got \"" + cc +
                   "\"");
    }
    s.qpAttributes = ParseAttributes(t, "attributes", TypeId::LookupByName(s.qpType));
    s.ccAttributes = ParseAttributes(t, "cc_attributes", ccTid);
    t.Finish();
    return s;
}

std::vector<FaultSpec>
ParseFaults(const JsonReader& r, const TopologySpec& topo, double durationUs)
{
    std::vector<FaultSpec> out;
    for (const auto& f : r.Array("faults"))
    {
        FaultSpec s;
        s.kind = f.Choice("kind", {"plane_down", "link_down", "loss"});
        if (s.kind == "plane_down")
        {
            s.scope = f.Choice("scope", "all", {"all", "fabric"});
        }
        if (s.kind == "loss")
        {
            s.rate = f.Number("rate", 0.0, 1.0);
            s.allPlanes = !f.Has("plane");
            if (!s.allPlanes)
            {
                s.plane = static_cast<uint32_t>(f.UInt("plane", 0, topo.planes - 1));
            }
            // A burst: from at_us (default: the start) until until_us (default: the end).
            s.atUs = f.Number("at_us", 0.0, 0.0, 1e12);
        }
        else
        {
            s.plane = static_cast<uint32_t>(f.UInt("plane", 0, topo.planes - 1));
            if (s.kind == "link_down")
            {
                s.nic = static_cast<uint32_t>(f.UInt("nic", 0, topo.nics - 1));
            }
            s.atUs = f.Number("at_us", 0.0, 1e12);
        }
        s.untilUs = f.Number("until_us", -1.0, 0.0, 1e12);
        if (f.Has("until_us") && s.untilUs <= s.atUs)
        {
            f.Fail("until_us", "must be later than at_us");
        }
        f.Finish();
        out.push_back(s);
    }
    return out;
}

RunSpec
ParseRun(const nlohmann::json& j, const std::string& variant)
{
    JsonReader r(j, "");
    RunSpec run;
    run.variant = variant;
    run.scenario = r.String("name");
    r.String("description", "");
    run.seed = r.UInt("seed", 1, 1, (1ULL << 53));
    run.durationUs = r.Number("duration_us", 1e-3, 1e12);
    run.stallUs = r.Number("stall_us", 10000.0, 0.0, 1e12);
    run.expectUnfinished = r.Bool("expect_unfinished", false);
    run.checkInvariants = r.Bool("check_invariants", true);
    run.topology = ParseTopology(r.Raw("topology"), "topology");
    JsonReader w = r.Object("workload");
    run.workloadKind = w.Choice("kind", {"raw", "streams", "collective", "job"});
    if (run.workloadKind == "raw")
    {
        run.raw = ParseRaw(w, run.topology);
        if (r.Has("transport"))
        {
            r.Fail("transport", "a raw workload uses no transport");
        }
    }
    else if (run.workloadKind == "streams")
    {
        run.streams = ParseStreams(w, run.topology);
        run.transport = ParseTransport(r.Object("transport"));
    }
    else if (run.workloadKind == "collective")
    {
        run.collective = ParseCollective(w, run.topology);
        run.transport = ParseTransport(r.Object("transport"));
    }
    else
    {
        run.job = ParseJob(w.Object("job"), run.topology);
        w.Finish();
        run.transport = ParseTransport(r.Object("transport"));
    }
    if (r.Has("faults"))
    {
        run.faults = ParseFaults(r, run.topology, run.durationUs);
    }
    if (run.workloadKind == "raw")
    {
        run.table = {"offered_goodput_gbps",
                     "delivered_goodput_gbps",
                     "delivery_ratio",
                     "drops_buffer",
                     "ecn_marks",
                     "max_latency_us"};
    }
    else if (run.workloadKind == "streams")
    {
        run.table = {"goodput_gbps", "completion_us", "msg_fct_p99_us", "retransmitted_packets",
                     "timeouts",     "drops_buffer",  "pfc_pauses"};
    }
    else if (run.workloadKind == "collective")
    {
        // nccl-tests' layout (size, count, type, redop, root, time, algbw, busbw, #wrong),
        // with the algorithm the run used.
        run.table = {"size_bytes",
                     "count",
                     "type",
                     "redop",
                     "root",
                     "algorithm",
                     "protocol",
                     "time_us",
                     "algbw_gbytes_per_s",
                     "busbw_gbytes_per_s",
                     "wrong"};
    }
    else
    {
        run.table = {
            "phase",       "op", "bytes", "groups", "algorithm", "time_us", "fastest_group_us",
            "iteration_us"};
    }
    if (r.Has("outputs"))
    {
        JsonReader o = r.Object("outputs");
        run.timeseriesBinUs = o.Number("timeseries_bin_us", 0.0, 0.0, 1e9);
        run.flowsOutput = o.Bool("flows", false);
        if (o.Has("table"))
        {
            const auto& t = o.Raw("table");
            if (!t.is_array() || t.empty())
            {
                o.Fail("table", "must be a non-empty array of metric or counter names");
            }
            run.table.clear();
            for (const auto& c : t)
            {
                if (!c.is_string())
                {
                    o.Fail("table", "must hold column names (strings), got " + c.dump());
                }
                run.table.push_back(c.get<std::string>());
            }
        }
        o.Finish();
    }
    if (r.Has("variants"))
    {
        r.Raw("variants"); // validated by LoadScenario
    }
    r.Finish();
    run.resolved = j;
    run.resolved.erase("variants");
    return run;
}
} // namespace

void
ApplySet(nlohmann::json& j, const std::string& assignment, const std::string& origin)
{
    auto eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0)
    {
        throw InputError(origin + " '" + assignment + "': expected key.path=value");
    }
    std::string path = assignment.substr(0, eq);
    std::string text = assignment.substr(eq + 1);
    nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
    if (value.is_discarded())
    {
        value = text; // a bare word is a string
    }
    SetPath(j, path, value, origin);
}

Scenario
LoadScenario(const std::string& file, const std::vector<std::string>& sets)
{
    nlohmann::json j = ReadJsonFile(file, "scenario");
    if (!j.is_object())
    {
        throw InputError(file + ": the scenario must be a JSON object");
    }
    try
    {
        // File references (topology, job) are read before the overrides, so that --set can
        // reach inside them, and again after, in case an override named another file.
        auto resolve = [&]()
        {
            if (j.contains("topology") && j["topology"].is_string())
            {
                std::string t = ResolveFile(j["topology"].get<std::string>(), file);
                try
                {
                    j["topology"] = ReadJsonFile(t, "topology");
                }
                catch (const InputError& e)
                {
                    throw InputError(std::string("topology: ") + e.what());
                }
            }
            if (j.contains("workload") && j["workload"].is_object() &&
                j["workload"].contains("job") && j["workload"]["job"].is_string())
            {
                std::string jf = ResolveFile(j["workload"]["job"].get<std::string>(), file);
                try
                {
                    j["workload"]["job"] = ReadJsonFile(jf, "job");
                }
                catch (const InputError& e)
                {
                    throw InputError(std::string("workload.job: ") + e.what());
                }
            }
        };
        resolve();
        for (const auto& s : sets)
        {
            ApplySet(j, s, "--set");
        }
        resolve();
        Scenario sc;
        JsonReader root(j, "");
        sc.name = root.String("name");
        sc.description = root.String("description", "");
        std::vector<std::pair<std::string, nlohmann::json>> variants;
        if (j.contains("variants"))
        {
            for (const auto& v : root.Array("variants"))
            {
                std::string name = v.String("name");
                nlohmann::json copy = j;
                copy.erase("variants");
                if (v.Has("set"))
                {
                    const auto& set = v.Raw("set");
                    if (!set.is_object())
                    {
                        v.Fail("set", "must be an object of key.path: value");
                    }
                    for (auto it = set.begin(); it != set.end(); ++it)
                    {
                        SetPath(copy, it.key(), it.value(), v.KeyPath("set"));
                    }
                }
                v.Finish();
                variants.emplace_back(name, copy);
            }
            if (variants.empty())
            {
                root.Fail("variants", "must list at least one variant");
            }
        }
        else
        {
            variants.emplace_back("default", j);
        }
        for (auto& [name, vj] : variants)
        {
            try
            {
                sc.runs.push_back(ParseRun(vj, name));
            }
            catch (const InputError& e)
            {
                if (variants.size() > 1)
                {
                    throw InputError(std::string("variant '") + name + "': " + e.what());
                }
                throw;
            }
        }
        return sc;
    }
    catch (const InputError& e)
    {
        throw InputError(file + ": " + e.what());
    }
}

} // namespace metaroce
} // namespace ns3
