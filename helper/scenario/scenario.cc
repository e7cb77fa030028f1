#include "helper/scenario/scenario.h"

#include "helper/scenario/json-reader.h"
#include "helper/scenario/result-columns.h"
#include "helper/trace/trace-replay.h"
#include "model/collective/communicator.h"

#include "ns3/string.h"
#include "ns3/type-id.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

namespace ns3
{
namespace metaroce
{

namespace
{
/// One step of a key path: a key, or an array index written [n].
struct PathPart
{
    std::string key;
    bool bracket;
};

/// "a.b[0].c" or "a.b.0.c" into its parts.
std::vector<PathPart>
SplitPath(const std::string& path, const std::string& origin)
{
    std::vector<PathPart> parts;
    std::size_t i = 0;
    while (true)
    {
        if (i < path.size() && path[i] == '[')
        {
            std::size_t close = path.find(']', i);
            if (close == std::string::npos)
            {
                throw InputError(origin + ": " + path + ": '[' without ']'");
            }
            parts.push_back({path.substr(i + 1, close - i - 1), true});
            i = close + 1;
        }
        else
        {
            std::size_t end = path.find_first_of(".[", i);
            std::string key = path.substr(i, end == std::string::npos ? end : end - i);
            if (key.empty())
            {
                throw InputError(origin + ": " + path + ": empty key in path");
            }
            parts.push_back({key, false});
            i = end == std::string::npos ? path.size() : end;
        }
        if (i == path.size())
        {
            break;
        }
        if (path[i] == '.')
        {
            ++i; // a key follows (an empty one is an error above)
        }
        else if (path[i] != '[')
        {
            throw InputError(origin + ": " + path + ": expected '.' or '[' after ']'");
        }
    }
    if (parts.size() > kMaxJsonDepth)
    {
        throw InputError(origin + ": " + path.substr(0, 40) + "...: more than " +
                         std::to_string(kMaxJsonDepth) + " levels of keys");
    }
    return parts;
}

/// An array index: up to 9 digits.
bool
ParseIndex(const std::string& s, std::size_t& idx)
{
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
    {
        return false;
    }
    idx = std::stoul(s);
    return true;
}

void
SetPath(nlohmann::json& j, const std::string& path, const nlohmann::json& value,
        const std::string& origin)
{
    auto parts = SplitPath(path, origin);
    nlohmann::json* at = &j;
    std::string walked; // in the a.b[0].c form errors use everywhere
    for (std::size_t i = 0; i < parts.size(); ++i)
    {
        const PathPart& p = parts[i];
        bool last = i + 1 == parts.size();
        if (at->is_array())
        {
            walked += "[" + p.key + "]";
            std::size_t idx = 0;
            if (!ParseIndex(p.key, idx))
            {
                throw InputError(origin + ": " + walked + ": an array index must be a number");
            }
            if (idx >= at->size())
            {
                throw InputError(origin + ": " + walked + ": index out of range (size " +
                                 std::to_string(at->size()) + ")");
            }
            at = &(*at)[idx];
        }
        else if (at->is_object() && !p.bracket)
        {
            walked = JoinKey(walked, p.key);
            if (!last && !at->contains(p.key))
            {
                if (parts[i + 1].bracket)
                {
                    throw InputError(origin + ": " + walked + ": not present, so it has no [" +
                                     parts[i + 1].key + "] (set the whole array)");
                }
                (*at)[p.key] = nlohmann::json::object();
            }
            at = &(*at)[p.key];
        }
        else
        {
            throw InputError(origin + ": " + walked + ": is " + (at->is_object() ? "an " : "a ") +
                             std::string(at->type_name()) + ", cannot set " +
                             (p.bracket ? "[" + p.key + "]" : "key '" + p.key + "'") +
                             " inside it");
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
    // Without exceptions: a name that cannot be examined (a loop of symbolic links, too
    // long) is left for ReadTextFile, whose error names it and the reason.
    auto exists = [](const fs::path& p)
    {
        std::error_code ec;
        return fs::exists(p, ec);
    };
    if (name.empty() || exists(name))
    {
        return name;
    }
    fs::path dir = fs::path(scenarioFile).parent_path();
    for (const fs::path& base : {dir, dir / ".."})
    {
        fs::path p = base / name;
        if (exists(p))
        {
            return p.string();
        }
    }
    return name;
}

PatternSpec
ParsePattern(const JsonReader& w, const TopologySpec& topo)
{
    PatternSpec p;
    p.pattern = w.Choice(
        "pattern", {"permutation", "pairs", "incast", "explicit", "random-peers", "all-to-all"});
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
        for (uint64_t p : w.UIntList("planes", 0, topo.planes - 1))
        {
            r.planes.push_back(static_cast<uint32_t>(p));
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
    s.messageBytes = w.UInt("message_bytes", 1, 0xffffffffULL);
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
        c.sizes = w.UIntList("sizes_bytes", 0, 1ULL << 40);
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
    c.ranks = static_cast<uint32_t>(w.UInt("ranks", 0, 0, topo.Accelerators()));
    c.placement =
        w.Choice("placement", "contiguous", {"contiguous", "strided", "random", "explicit"});
    c.stride = static_cast<uint32_t>(w.UInt("stride", 1, 1, topo.Accelerators()));
    if (c.placement == "explicit")
    {
        std::map<uint64_t, std::size_t> rankOf;
        std::vector<uint64_t> nics = w.UIntList("nics", 0, topo.Accelerators() - 1);
        for (std::size_t i = 0; i < nics.size(); ++i)
        {
            auto [it, fresh] = rankOf.emplace(nics[i], i);
            if (!fresh)
            {
                throw InputError(w.ElementPath("nics", i) + ": NIC " + std::to_string(nics[i]) +
                                 " already runs rank " + std::to_string(it->second));
            }
            c.nics.push_back(static_cast<uint32_t>(nics[i]));
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
    if ((c.ranks == 0 ? topo.Accelerators() : c.ranks) % c.ranksPerHost != 0)
    {
        w.Fail("ranks_per_host", "must divide the number of ranks");
    }
    c.warmupIterations = static_cast<uint32_t>(w.UInt("warmup_iterations", 0, 0, 1000));
    c.iterations = static_cast<uint32_t>(w.UInt("iterations", 1, 1, 1000));
    c.channels = static_cast<uint32_t>(w.UInt("channels", 0, 0, 64));
    c.qpsPerConnection = static_cast<uint32_t>(w.UInt("qps_per_connection", 1, 1, 64));
    c.reducePsPerByte = w.Number("reduce_ps_per_byte", 0.0, 0.0, 1e6);
    c.protocol = w.Choice("protocol", "auto", {"auto", "LL", "LL128", "Simple"});
    c.pxn = w.Bool("pxn", false);
    if (c.pxn && (c.op != "alltoall" || topo.acceleratorsPerHost == 1))
    {
        w.Fail("pxn", "forwards all-to-all traffic between accelerators of a host: needs op "
                      "alltoall and a topology with accelerators_per_host > 1");
    }
    if (c.protocol != "auto" && c.op == "alltoall")
    {
        w.Fail("protocol", "all-to-all runs NCCL's p2p path, which uses Simple over the network");
    }
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
    job.ranks = static_cast<uint32_t>(j.UInt("ranks", 0, 0, topo.Accelerators()));
    uint32_t n = job.ranks == 0 ? topo.Accelerators() : job.ranks;
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

/// Whether ns-3 can parse `value` as a `valueType` without ending the program: its integer,
/// floating-point and time parsers abort on trailing text, "nan" or an unknown unit instead
/// of reporting an error.
bool
Ns3CanParse(const std::string& valueType, const std::string& value)
{
    auto digits = [](const std::string& s)
    {
        // 19 digits always fit in 64 bits; a larger count is out of every range used here
        return !s.empty() && s.size() <= 19 &&
               s.find_first_not_of("0123456789") == std::string::npos;
    };
    // A finite decimal number, all of it (no "inf", "nan", hexadecimal or trailing text).
    auto number = [](const std::string& s, double& x)
    {
        if (s.empty() || s.find_first_not_of("+-0123456789.eE") != std::string::npos)
        {
            return false;
        }
        char* end = nullptr;
        errno = 0;
        x = std::strtod(s.c_str(), &end);
        return errno == 0 && end == s.c_str() + s.size() && std::isfinite(x);
    };
    double x = 0;
    if (valueType == "ns3::UintegerValue")
    {
        return digits(value);
    }
    if (valueType == "ns3::IntegerValue")
    {
        return digits(!value.empty() && (value[0] == '-' || value[0] == '+') ? value.substr(1)
                                                                             : value);
    }
    if (valueType == "ns3::DoubleValue")
    {
        return number(value, x);
    }
    if (valueType == "ns3::TimeValue")
    {
        // a number and an optional unit, within +-9e6 s (64-bit picoseconds)
        static const std::map<std::string, double> unitSeconds = {
            {"", 1e-12},  {"fs", 1e-15}, {"ps", 1e-12},       {"ns", 1e-9},
            {"us", 1e-6}, {"ms", 1e-3},  {"s", 1.0},          {"min", 60},
            {"h", 3600},  {"d", 86400},  {"y", 365 * 86400.0}};
        std::size_t n = value.find_first_not_of("+-0123456789.eE");
        auto unit = unitSeconds.find(n == std::string::npos ? "" : value.substr(n));
        return unit != unitSeconds.end() && number(value.substr(0, n), x) &&
               std::fabs(x * unit->second) <= 9e6;
    }
    return true;
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
        if (it.key() == "CongestionControl")
        {
            // the transport sets it from congestion_control, after these overrides
            throw InputError(where + ": set by " + r.KeyPath("congestion_control"));
        }
        std::string value =
            it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
        if (!Ns3CanParse(info.checker->GetValueTypeName(), value) ||
            !info.checker->CreateValidValue(StringValue(value)))
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
        !ccTid.IsChildOf(TypeId::LookupByName("ns3::metaroce::RdmaCongestionOps")) ||
        !ccTid.HasConstructor())
    {
        t.Fail("congestion_control",
               "must be aimd, dcqcn, none or the TypeId name of an RdmaCongestionOps, got \"" + cc +
                   "\"");
    }
    s.qpAttributes = ParseAttributes(t, "attributes", TypeId::LookupByName(s.qpType));
    s.ccAttributes = ParseAttributes(t, "cc_attributes", ccTid);
    if (t.Has("hint_attributes") && s.kind != "metaroce")
    {
        t.Fail("hint_attributes", "rate hints are MetaRoCE's; this transport is " + s.kind);
    }
    s.hintAttributes = ParseAttributes(t, "hint_attributes",
                                       TypeId::LookupByName("ns3::metaroce::MetaRoceRateHint"));
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
            s.links = f.Choice("links", "all", {"all", "nic", "fabric", "long"});
            if (s.links == "long" && topo.sites < 2)
            {
                f.Fail("links", "\"long\" needs a topology of several sites");
            }
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
    run.workloadKind = w.Choice("kind", {"raw", "streams", "collective", "job", "trace"});
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
    else if (run.workloadKind == "trace")
    {
        run.trace = ParseTraceWorkload(w, run.topology);
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
    else if (run.workloadKind == "trace")
    {
        run.table = {"collective", "op",          "bytes",        "group_size", "algorithm",
                     "time_us",    "recorded_us", "iteration_us", "comm_us",    "exposed_comm_us"};
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
        if (o.Has("steady_from_us"))
        {
            run.steadyFromUs = o.Number("steady_from_us", 0.0, 0.0, 1e12);
            if (run.timeseriesBinUs <= 0 || run.workloadKind != "streams")
            {
                o.Fail("steady_from_us",
                       "needs a streams workload and outputs.timeseries_bin_us > 0 (it averages "
                       "the throughput bins)");
            }
        }
        run.flowsOutput = o.Bool("flows", false);
        if (o.Has("table"))
        {
            run.table = o.ChoiceList("table", ResultColumns(run.workloadKind));
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
    // The value joins the scenario, which is written out as JSON: it must be UTF-8 text.
    auto utf8 = [](const std::string& s)
    {
        try
        {
            nlohmann::json(s).dump();
            return true;
        }
        catch (const nlohmann::json::type_error&)
        {
            return false;
        }
    };
    if (!utf8(path))
    {
        throw InputError(origin + ": the key path is not valid UTF-8");
    }
    if (!utf8(text))
    {
        throw InputError(origin + ": " + path + ": the value is not valid UTF-8");
    }
    nlohmann::json value;
    try
    {
        value = ParseJson(text, path, "");
    }
    catch (const JsonTooDeep& e)
    {
        throw InputError(origin + ": " + e.what());
    }
    catch (const InputError&)
    {
        value = text; // not JSON: a bare word is a string
    }
    SetPath(j, path, value, origin);
}

Scenario
LoadScenarioText(const std::string& text, const std::string& file,
                 const std::vector<std::string>& sets, const std::vector<std::string>& select)
{
    try
    {
        nlohmann::json j = ParseJson(text, "", "");
        if (!j.is_object())
        {
            throw InputError("the scenario must be a JSON object");
        }
        // File references (topology, job) are read before the overrides, so that --set can
        // reach inside them, and again after, in case an override named another file.
        auto include = [&](nlohmann::json& at, const std::string& key)
        {
            std::string name = ResolveFile(at.get<std::string>(), file);
            std::string content;
            try
            {
                content = ReadTextFile(name);
            }
            catch (const InputError& e)
            {
                throw InputError(key + ": " + e.what());
            }
            at = ParseJson(content, key, name);
        };
        auto resolve = [&]()
        {
            if (j.contains("topology") && j["topology"].is_string())
            {
                include(j["topology"], "topology");
            }
            if (j.contains("workload") && j["workload"].is_object() &&
                j["workload"].contains("job") && j["workload"]["job"].is_string())
            {
                include(j["workload"]["job"], "workload.job");
            }
            // A trace is read by the workload's parser; its names are found as other files'.
            if (j.contains("workload") && j["workload"].is_object() &&
                j["workload"].value("kind", nlohmann::json()) == "trace" &&
                j["workload"].contains("file"))
            {
                nlohmann::json& f = j["workload"]["file"];
                if (f.is_string())
                {
                    f = ResolveFile(f.get<std::string>(), file);
                }
                for (auto& e : f.is_array() ? f : nlohmann::json::array())
                {
                    if (e.is_string())
                    {
                        e = ResolveFile(e.get<std::string>(), file);
                    }
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
        // Every variant's name, then only the selected variants built (and so validated).
        std::vector<JsonReader> entries;
        std::vector<std::string> names;
        if (j.contains("variants"))
        {
            entries = root.Array("variants");
            if (entries.empty())
            {
                root.Fail("variants", "must list at least one variant");
            }
            for (std::size_t i = 0; i < entries.size(); ++i)
            {
                std::string name = entries[i].String("name");
                auto same = std::find(names.begin(), names.end(), name);
                if (same != names.end())
                {
                    entries[i].Fail("name", "\"" + name + "\" is also the name of " +
                                                root.ElementPath("variants", same - names.begin()));
                }
                names.push_back(name);
            }
        }
        else
        {
            names.push_back("default");
        }
        for (const auto& n : select)
        {
            if (std::find(names.begin(), names.end(), n) == names.end())
            {
                std::string known;
                for (const auto& k : names)
                {
                    known += (known.empty() ? "'" : ", '") + k + "'";
                }
                throw InputError("--variant: no variant '" + n + "' in " + sc.name + " (it has " +
                                 known + ")");
            }
        }
        std::vector<std::pair<std::string, nlohmann::json>> variants;
        for (std::size_t i = 0; i < names.size(); ++i)
        {
            if (!select.empty() &&
                std::find(select.begin(), select.end(), names[i]) == select.end())
            {
                continue;
            }
            if (entries.empty())
            {
                variants.emplace_back(names[i], j);
                continue;
            }
            const JsonReader& v = entries[i];
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
            variants.emplace_back(names[i], copy);
        }
        for (auto& [name, vj] : variants)
        {
            try
            {
                sc.runs.push_back(ParseRun(vj, name));
            }
            catch (const InputError& e)
            {
                if (names.size() > 1)
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

Scenario
LoadScenario(const std::string& file, const std::vector<std::string>& sets,
             const std::vector<std::string>& variants)
{
    std::string text = ReadTextFile(file);
    return AsInputError(file, [&]() { return LoadScenarioText(text, file, sets, variants); });
}

} // namespace metaroce
} // namespace ns3
