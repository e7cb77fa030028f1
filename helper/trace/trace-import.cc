#include "helper/trace/trace-import.h"

#include "helper/scenario/json-reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <zlib.h>

namespace ns3
{
namespace metaroce
{

namespace
{
/// Largest trace read, uncompressed: far above a real job's, and a bound on a gzip bomb.
constexpr std::size_t kMaxTraceBytes = std::size_t{8} << 30;

/// A file's contents, gunzipped if it starts as gzip: every member in turn, each checked
/// (its CRC and length), and nothing after the last one. A damaged, cut-off or padded gzip
/// is an error, not a shorter trace.
std::string
ReadMaybeGzip(const std::string& path)
{
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
    {
        throw InputError(
            path + ": " +
            (std::filesystem::exists(path, ec) ? "not a regular file" : "no such file"));
    }
    std::string raw = ReadTextFile(path, kMaxTraceBytes);
    auto gzipAt = [&raw](std::size_t i)
    {
        return i + 1 < raw.size() && static_cast<unsigned char>(raw[i]) == 0x1f &&
               static_cast<unsigned char>(raw[i + 1]) == 0x8b;
    };
    if (!gzipAt(0))
    {
        return raw;
    }
    std::string out;
    std::vector<char> buf(1 << 20);
    std::size_t at = 0;
    while (at < raw.size())
    {
        if (!gzipAt(at))
        {
            throw InputError(path + ": " + std::to_string(raw.size() - at) +
                             " bytes after the end of the gzip data (a damaged or padded file)");
        }
        z_stream z{};
        if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        {
            throw InputError(path + ": cannot start gunzip");
        }
        z.next_in = reinterpret_cast<Bytef*>(&raw[at]);
        z.avail_in = static_cast<uInt>(std::min<std::size_t>(raw.size() - at, UINT_MAX));
        int rc = Z_OK;
        while (rc != Z_STREAM_END)
        {
            const std::size_t used = reinterpret_cast<char*>(z.next_in) - raw.data();
            if (z.avail_in == 0 && used < raw.size())
            {
                z.avail_in = static_cast<uInt>(std::min<std::size_t>(raw.size() - used, UINT_MAX));
            }
            z.next_out = reinterpret_cast<Bytef*>(buf.data());
            z.avail_out = static_cast<uInt>(buf.size());
            rc = inflate(&z, Z_NO_FLUSH);
            if (rc != Z_OK && rc != Z_STREAM_END)
            {
                const std::string why = rc == Z_BUF_ERROR  ? "cut off before its end"
                                        : z.msg != nullptr ? z.msg
                                                           : "damaged";
                inflateEnd(&z);
                throw InputError(path + ": not a valid gzip file: " + why);
            }
            out.append(buf.data(), buf.size() - z.avail_out);
            if (out.size() > kMaxTraceBytes)
            {
                inflateEnd(&z);
                throw InputError(path + ": larger than " + std::to_string(kMaxTraceBytes >> 30) +
                                 " GiB (uncompressed)");
            }
        }
        at = static_cast<std::size_t>(reinterpret_cast<char*>(z.next_in) - raw.data());
        inflateEnd(&z);
    }
    return out;
}

/// Bytes of one element of a PyTorch dtype (as record_param_comms prints it); 0 if unknown.
uint32_t
TorchDtypeBytes(const std::string& d)
{
    static const std::map<std::string, uint32_t> sizes = {{"Float", 4},
                                                          {"Double", 8},
                                                          {"Half", 2},
                                                          {"BFloat16", 2},
                                                          {"Long", 8},
                                                          {"Int", 4},
                                                          {"Short", 2},
                                                          {"Char", 1},
                                                          {"Byte", 1},
                                                          {"Bool", 1},
                                                          {"Float8_e4m3fn", 1},
                                                          {"Float8_e5m2", 1},
                                                          {"Float8_e4m3fnuz", 1},
                                                          {"Float8_e5m2fnuz", 1},
                                                          {"ComplexHalf", 4},
                                                          {"ComplexFloat", 8},
                                                          {"ComplexDouble", 16},
                                                          {"UInt16", 2},
                                                          {"UInt32", 4},
                                                          {"UInt64", 8}};
    auto it = sizes.find(d);
    return it == sizes.end() ? 0 : it->second;
}

/// Bytes of one element of NCCL's ncclDataType_t; 0 if unknown.
uint32_t
NcclDtypeBytes(uint64_t d)
{
    // int8, uint8, int32, uint32, int64, uint64, float16, float32, float64, bfloat16,
    // fp8 e4m3, fp8 e5m2
    static const uint32_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    return d < sizeof(sizes) / sizeof(sizes[0]) ? sizes[d] : 0;
}

/// What the simulator replays a trace's collective name as: allreduce, allgather,
/// reducescatter, alltoall, broadcast; "skip" for calls that move no data; "" if it is a
/// collective the simulator cannot replay; "?" if unknown.
std::string
KindOfTorchName(const std::string& name)
{
    std::string n;
    for (char c : name)
    {
        if (c != '_')
        {
            n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        }
    }
    auto starts = [&](const char* p) { return n.rfind(p, 0) == 0; };
    // wait: a stream waits for a collective; barrier: a one-element all-reduce; coalesced: the
    // end of a group of calls each recorded on its own; init: a process group's creation.
    if (n == "wait" || n == "barrier" || n == "coalesced" || n == "init")
    {
        return "skip";
    }
    if (starts("allreduce"))
    {
        return "allreduce";
    }
    if (starts("allgather"))
    {
        return "allgather";
    }
    if (starts("reducescatter"))
    {
        return "reducescatter";
    }
    if (starts("alltoall"))
    {
        return "alltoall";
    }
    if (n == "broadcast" || n == "broadcastcoalesced")
    {
        return "broadcast";
    }
    if (n == "reduce" || n == "gather" || n == "scatter" || n == "send" || n == "recv" ||
        n == "isend" || n == "irecv")
    {
        return "";
    }
    return "?";
}

uint64_t
CheckedMul(uint64_t a, uint64_t b, const std::string& where)
{
    if (b != 0 && a > std::numeric_limits<uint64_t>::max() / b)
    {
        throw InputError(where + ": size overflows 64 bits");
    }
    return a * b;
}

/// One collective's bytes, elements x element size, within what a scenario may give a
/// collective (sizes_bytes, a job phase's bytes: 1 TiB), so the plan's counts stay in range.
uint64_t
CollectiveBytes(uint64_t elems, uint64_t esize, const std::string& where)
{
    constexpr uint64_t kMax = uint64_t{1} << 40;
    const uint64_t bytes = CheckedMul(elems, esize, where);
    if (bytes > kMax)
    {
        throw InputError(where + ": " + std::to_string(bytes) +
                         " bytes in one collective, more than 1 TiB (the bound of sizes_bytes)");
    }
    return bytes;
}

/// "[0, 1, 2]" (or a JSON array) into numbers; false if it is not such a list.
bool
ParseIntList(const nlohmann::json& v, std::vector<uint64_t>& out)
{
    out.clear();
    nlohmann::json arr;
    if (v.is_array())
    {
        arr = v;
    }
    else if (v.is_string())
    {
        try
        {
            arr = nlohmann::json::parse(v.get<std::string>());
        }
        catch (const nlohmann::json::exception&)
        {
            return false;
        }
        if (!arr.is_array())
        {
            return false;
        }
    }
    else
    {
        return false;
    }
    for (const auto& x : arr)
    {
        if (!x.is_number_unsigned() && !(x.is_number_integer() && x.get<int64_t>() >= 0))
        {
            return false;
        }
        out.push_back(x.get<uint64_t>());
    }
    return true;
}

/// The group key and members, shared by the files of one job.
struct GroupTable
{
    std::map<std::string, uint32_t> index;
    std::vector<TraceGroup> groups;

    uint32_t Add(const std::string& key, const std::string& name, std::vector<uint32_t> ranks)
    {
        auto [it, fresh] = index.emplace(key, static_cast<uint32_t>(groups.size()));
        if (fresh)
        {
            TraceGroup g;
            g.name = name;
            g.ranks = std::move(ranks);
            g.templateGroup = it->second;
            groups.push_back(std::move(g));
        }
        return it->second;
    }
};

/// What the streaming parse keeps of an NCCL kernel.
struct Kernel
{
    double ts{0};
    double dur{0};
    int64_t stream{0};
};

/// One PyTorch profiler trace: one rank's collectives into job.ranks[rank].
void
ImportProfiler(const std::string& file, const std::string& text, TraceJob& job, GroupTable& table)
{
    nlohmann::json dist;
    std::vector<nlohmann::json> comms; // record_param_comms events, with "__index"
    std::map<int64_t, Kernel> kernels; // NCCL kernels by External id
    double minKernelTs = std::numeric_limits<double>::infinity();
    double minCpuTs = std::numeric_limits<double>::infinity();
    std::set<std::string> steps; // the profiler's steps (ProfilerStep#N)
    std::string topKey;
    uint64_t eventIndex = 0;
    bool sawEvents = false;
    // Streamed: every event is looked at once and dropped, so memory holds the text and the
    // few events kept, whatever the trace's size.
    auto cb = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) -> bool
    {
        using E = nlohmann::json::parse_event_t;
        // Parsed values are destroyed recursively: bound the nesting as every loader does.
        if ((ev == E::object_start || ev == E::array_start) &&
            depth >= static_cast<int>(kMaxJsonDepth))
        {
            throw InputError(file + ": event " + std::to_string(eventIndex) +
                             ": nested more than " + std::to_string(kMaxJsonDepth) +
                             " levels deep");
        }
        if (depth == 1 && ev == E::key)
        {
            topKey = parsed.get<std::string>();
            sawEvents = sawEvents || topKey == "traceEvents";
            return true;
        }
        if (depth == 2 && ev == E::object_end && topKey == "traceEvents")
        {
            uint64_t idx = eventIndex++;
            if (!parsed.is_object())
            {
                return false;
            }
            auto name = parsed.find("name");
            auto cat = parsed.find("cat");
            auto ts = parsed.find("ts");
            bool timed = ts != parsed.end() && ts->is_number();
            if (cat != parsed.end() && cat->is_string())
            {
                const std::string& c = cat->get_ref<const std::string&>();
                if (c == "kernel" && timed)
                {
                    minKernelTs = std::min(minKernelTs, ts->get<double>());
                    if (name != parsed.end() && name->is_string() &&
                        name->get_ref<const std::string&>().rfind("nccl", 0) == 0)
                    {
                        auto args = parsed.find("args");
                        auto dur = parsed.find("dur");
                        if (args != parsed.end() && args->is_object() && dur != parsed.end() &&
                            dur->is_number())
                        {
                            auto ext = args->find("External id");
                            auto stream = args->find("stream");
                            if (ext != args->end() && ext->is_number_integer())
                            {
                                Kernel k{ts->get<double>(), dur->get<double>(),
                                         stream != args->end() && stream->is_number_integer()
                                             ? stream->get<int64_t>()
                                             : 0};
                                auto [it, fresh] = kernels.emplace(ext->get<int64_t>(), k);
                                if (!fresh)
                                {
                                    // a collective of several kernels: from the first to the last
                                    double end =
                                        std::max(it->second.ts + it->second.dur, k.ts + k.dur);
                                    it->second.ts = std::min(it->second.ts, k.ts);
                                    it->second.dur = end - it->second.ts;
                                }
                            }
                        }
                    }
                }
                else if (c == "cpu_op" && timed)
                {
                    minCpuTs = std::min(minCpuTs, ts->get<double>());
                }
                else if (c == "user_annotation" && name != parsed.end() && name->is_string() &&
                         name->get_ref<const std::string&>().rfind("ProfilerStep#", 0) == 0)
                {
                    steps.insert(name->get<std::string>());
                }
            }
            if (name != parsed.end() && name->is_string() &&
                name->get_ref<const std::string&>() == "record_param_comms")
            {
                parsed["__index"] = idx;
                comms.push_back(std::move(parsed));
            }
            return false;
        }
        if (depth == 1 && ev == E::object_end && topKey == "distributedInfo")
        {
            dist = parsed;
        }
        return true;
    };
    try
    {
        nlohmann::json rest = nlohmann::json::parse(text, cb); // the events dropped
        (void) rest;
    }
    catch (const nlohmann::json::exception& e)
    {
        throw InputError(file + ": not a PyTorch profiler trace (JSON): " + JsonErrorText(e));
    }
    if (!sawEvents)
    {
        throw InputError(file + ": traceEvents: missing (not a PyTorch profiler trace)");
    }
    if (!dist.is_object())
    {
        throw InputError(file + ": distributedInfo: missing (a trace of a torch.distributed run "
                                "has it: rank, world_size, process groups)");
    }
    auto distInt = [&](const char* key)
    {
        auto it = dist.find(key);
        if (it == dist.end() || !it->is_number_unsigned())
        {
            throw InputError(file + ": distributedInfo." + key +
                             ": missing or not a non-negative integer");
        }
        return it->get<uint64_t>();
    };
    uint64_t world = distInt("world_size");
    uint64_t rank = distInt("rank");
    if (world == 0 || world > (1u << 20))
    {
        throw InputError(file + ": distributedInfo.world_size: " + std::to_string(world) +
                         " is out of range (1 to 1048576)");
    }
    if (rank >= world)
    {
        throw InputError(file + ": distributedInfo.rank: " + std::to_string(rank) +
                         " is not below world_size " + std::to_string(world));
    }
    if (job.worldSize == 0)
    {
        job.worldSize = static_cast<uint32_t>(world);
        job.ranks.resize(world);
    }
    else if (job.worldSize != world)
    {
        throw InputError(file + ": distributedInfo.world_size: " + std::to_string(world) +
                         ", but " + job.ranks[0].file + " says " + std::to_string(job.worldSize));
    }
    TraceRank& tr = job.ranks[rank];
    if (tr.traced)
    {
        throw InputError(file + ": distributedInfo.rank: rank " + std::to_string(rank) +
                         " is also the rank of " + tr.file);
    }
    tr.traced = true;
    tr.file = file;

    struct Raw
    {
        TraceOp op;
        double cpuTs;
        double cpuEnd;
        const Kernel* kernel;
    };
    std::vector<Raw> raws;
    for (const auto& e : comms)
    {
        std::string at = file + ": event " + std::to_string(e["__index"].get<uint64_t>()) +
                         " (record_param_comms)";
        auto args = e.find("args");
        if (args == e.end() || !args->is_object())
        {
            throw InputError(at + ": args: missing");
        }
        auto field = [&](const char* key) -> const nlohmann::json&
        {
            auto it = args->find(key);
            if (it == args->end() || it->is_null())
            {
                throw InputError(at + ": args.\"" + key + "\": missing");
            }
            return *it;
        };
        auto count = [&](const char* key)
        {
            const auto& v = field(key);
            if (!v.is_number_unsigned())
            {
                throw InputError(at + ": args.\"" + key + "\": " + v.dump() +
                                 " is not a non-negative integer");
            }
            return v.get<uint64_t>();
        };
        const auto& nameV = field("Collective name");
        if (!nameV.is_string())
        {
            throw InputError(at + ": args.\"Collective name\": not a string");
        }
        std::string name = nameV.get<std::string>();
        std::string kind = KindOfTorchName(name);
        if (kind == "skip")
        {
            ++job.skipped[name];
            continue;
        }
        if (kind == "?")
        {
            throw InputError(at + ": args.\"Collective name\": unknown collective \"" + name +
                             "\"");
        }
        if (kind.empty())
        {
            throw InputError(at + ": args.\"Collective name\": \"" + name +
                             "\" cannot be replayed (the simulator runs all-reduce, all-gather, "
                             "reduce-scatter, all-to-all and broadcast)");
        }
        uint64_t in = count("In msg nelems");
        uint64_t out = count("Out msg nelems");
        const auto& dt = field("dtype");
        uint32_t esize = dt.is_string() ? TorchDtypeBytes(dt.get<std::string>()) : 0;
        if (esize == 0)
        {
            throw InputError(at + ": args.\"dtype\": unknown dtype " + dt.dump());
        }
        TraceOp op;
        op.name = name;
        op.kind = kind;
        op.source = at;
        uint64_t elems = kind == "allgather" || kind == "reducescatter" ? std::max(in, out) : in;
        op.bytes = CollectiveBytes(elems, esize, at + ": args.\"In msg nelems\"");
        if (kind == "alltoall")
        {
            for (auto [key, dst] : {std::make_pair("In split size", &op.inSplits),
                                    std::make_pair("Out split size", &op.outSplits)})
            {
                auto it = args->find(key);
                if (it != args->end() && !ParseIntList(*it, *dst))
                {
                    throw InputError(at + ": args.\"" + key + "\": " + it->dump() +
                                     " is not a list of element counts");
                }
            }
        }
        // The group: its ranks as listed, else as start and stride.
        std::vector<uint64_t> members;
        auto pgr = args->find("Process Group Ranks");
        bool listed = pgr != args->end() && ParseIntList(*pgr, members) && !members.empty();
        auto gsIt = args->find("Group size");
        if (!listed)
        {
            uint64_t size = count("Group size");
            uint64_t start = args->contains("Global rank start") ? count("Global rank start") : 0;
            uint64_t stride =
                args->contains("Global rank stride") ? count("Global rank stride") : 1;
            if (pgr != args->end() && !(args->contains("Global rank start")))
            {
                throw InputError(at + ": args.\"Process Group Ranks\": " + pgr->dump() +
                                 " is not a list of ranks");
            }
            for (uint64_t i = 0; i < size; ++i)
            {
                members.push_back(start + i * stride);
            }
        }
        else if (gsIt != args->end() && gsIt->is_number_unsigned() &&
                 gsIt->get<uint64_t>() != members.size())
        {
            throw InputError(at + ": args.\"Group size\": " + gsIt->dump() + ", but " +
                             "\"Process Group Ranks\" lists " + std::to_string(members.size()));
        }
        std::vector<uint32_t> ranks;
        std::set<uint64_t> seen;
        for (uint64_t m : members)
        {
            if (m >= world || !seen.insert(m).second)
            {
                throw InputError(at + ": args.\"Process Group Ranks\": rank " + std::to_string(m) +
                                 (m >= world ? " is not below world_size " + std::to_string(world)
                                             : " appears twice"));
            }
            ranks.push_back(static_cast<uint32_t>(m));
        }
        if (!seen.count(rank))
        {
            throw InputError(at +
                             ": args.\"Process Group Ranks\": the group does not hold this "
                             "trace's rank " +
                             std::to_string(rank));
        }
        std::string pgName;
        auto pn = args->find("Process Group Name");
        if (pn != args->end() && pn->is_string())
        {
            pgName = pn->get<std::string>();
        }
        std::string key = pgName + "|";
        for (uint32_t r : ranks)
        {
            key += std::to_string(r) + ",";
        }
        auto pd = args->find("Process Group Description");
        std::string shown = pd != args->end() && pd->is_string() ? pd->get<std::string>() : pgName;
        op.group = table.Add(key, shown.empty() ? "group" : shown, ranks);

        Raw raw{op, 0, 0, nullptr};
        auto ts = e.find("ts");
        auto dur = e.find("dur");
        if (ts == e.end() || !ts->is_number())
        {
            throw InputError(at + ": ts: missing");
        }
        raw.cpuTs = ts->get<double>();
        raw.cpuEnd = raw.cpuTs + (dur != e.end() && dur->is_number() ? dur->get<double>() : 0);
        auto ext = args->find("External id");
        if (ext != args->end() && ext->is_number_integer())
        {
            auto k = kernels.find(ext->get<int64_t>());
            raw.kernel = k == kernels.end() ? nullptr : &k->second;
        }
        raws.push_back(std::move(raw));
    }
    // Issue order: the CPU's (a stream runs its work in the order it was launched).
    std::stable_sort(raws.begin(), raws.end(),
                     [](const Raw& a, const Raw& b) { return a.cpuTs < b.cpuTs; });
    bool gpu = !raws.empty() &&
               std::all_of(raws.begin(), raws.end(), [](const Raw& r) { return r.kernel; });
    std::string timing = raws.empty() ? job.timing : (gpu ? "kernel" : "cpu");
    if (!job.timing.empty() && !raws.empty() && job.timing != timing)
    {
        timing = "mixed";
    }
    job.timing = timing;
    double origin = gpu ? minKernelTs : minCpuTs;
    std::map<int64_t, uint32_t> streamIndex;
    std::map<uint32_t, double> prevEnd;
    double lastEnd = origin;
    for (auto& r : raws)
    {
        // Kernels: their stream. CPU times: one stream per process group, as PyTorch's
        // NCCL process groups run theirs.
        int64_t key = gpu ? r.kernel->stream : static_cast<int64_t>(r.op.group);
        auto [it, fresh] = streamIndex.emplace(key, static_cast<uint32_t>(streamIndex.size()));
        r.op.stream = it->second;
        double start = gpu ? r.kernel->ts : r.cpuTs;
        double end = gpu ? r.kernel->ts + r.kernel->dur : r.cpuEnd;
        auto pe = prevEnd.emplace(r.op.stream, std::isfinite(origin) ? origin : start).first;
        r.op.gapPs = static_cast<int64_t>(std::llround(std::max(0.0, start - pe->second) * 1e6));
        pe->second = std::max(pe->second, end);
        if (gpu)
        {
            r.op.recordedUs = r.kernel->dur;
        }
        lastEnd = std::max(lastEnd, end);
        tr.ops.push_back(std::move(r.op));
    }
    tr.recordedSpanUs = gpu ? lastEnd - origin : -1;
    job.steps = std::max(job.steps, static_cast<uint32_t>(steps.size()));
}

/// The words of a line after `from`, split on spaces.
std::vector<std::string>
Words(const std::string& s)
{
    std::vector<std::string> out;
    std::istringstream is(s);
    std::string w;
    while (is >> w)
    {
        out.push_back(w);
    }
    return out;
}

bool
ParseUnsigned(const std::string& s, uint64_t& v, int base = 10)
{
    if (s.empty())
    {
        return false;
    }
    errno = 0;
    char* end = nullptr;
    unsigned long long x = std::strtoull(s.c_str(), &end, base);
    if (errno != 0 || end != s.c_str() + s.size() || s[0] == '-')
    {
        return false;
    }
    v = x;
    return true;
}

/// An NCCL log (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=COLL and optionally INIT).
void
ImportNcclLog(const std::string& file, const std::string& text, const TraceImportOptions& opts,
              TraceJob& job, GroupTable& table)
{
    struct Comm
    {
        uint64_t nranks{0};
        int64_t rank{-1};    //!< from its Init line
        std::string commId;  //!< from its Init line (shared by every member)
        std::string firstAt; //!< where it was first used
    };
    struct Call
    {
        TraceOp op;
        std::string comm;
        std::string stream;
        uint64_t perRankCount;
        uint32_t esize;
        uint64_t nranks;
        std::string at;
    };
    struct Process
    {
        std::map<std::string, Comm> comms;
        std::vector<Call> calls;
    };
    std::vector<std::string> order; // processes in order of appearance
    std::map<std::string, Process> procs;
    std::size_t lineNo = 0;
    std::size_t pos = 0;
    while (pos < text.size())
    {
        std::size_t eol = text.find('\n', pos);
        if (eol == std::string::npos)
        {
            eol = text.size();
        }
        std::string line = text.substr(pos, eol - pos);
        pos = eol + 1;
        ++lineNo;
        std::size_t info = line.find(" NCCL INFO ");
        if (info == std::string::npos)
        {
            continue;
        }
        std::string at = file + ": line " + std::to_string(lineNo);
        // "host:pid:tid [dev]": the process is host:pid
        std::string prefix = line.substr(0, info);
        std::size_t c1 = prefix.find(':');
        std::size_t c2 = c1 == std::string::npos ? c1 : prefix.find(':', c1 + 1);
        std::string proc = c2 == std::string::npos ? "" : prefix.substr(0, c2);
        if (!procs.count(proc))
        {
            order.push_back(proc);
        }
        Process& p = procs[proc];
        std::string rest = line.substr(info + 11);
        std::vector<std::string> w = Words(rest);
        if (w.size() >= 2 && w[0].size() > 1 && w[0].back() == ':' && w[1] == "opCount")
        {
            std::string name = w[0].substr(0, w[0].size() - 1);
            std::map<std::string, std::string> kv;
            for (std::size_t i = 1; i + 1 < w.size(); i += 2)
            {
                if (w[i].rfind("[nranks=", 0) == 0)
                {
                    kv["nranks"] = w[i].substr(8, w[i].size() - 9);
                    --i; // a single word
                    continue;
                }
                kv[w[i]] = w[i + 1];
            }
            if (!w.empty() && w.back().rfind("[nranks=", 0) == 0)
            {
                kv["nranks"] = w.back().substr(8, w.back().size() - 9);
            }
            std::string kind;
            if (name == "AllReduce")
            {
                kind = "allreduce";
            }
            else if (name == "AllGather")
            {
                kind = "allgather";
            }
            else if (name == "ReduceScatter")
            {
                kind = "reducescatter";
            }
            else if (name == "Broadcast")
            {
                kind = "broadcast";
            }
            else if (name == "Reduce" || name == "Send" || name == "Recv")
            {
                throw InputError(at + ": collective name: \"" + name +
                                 "\" cannot be replayed (the simulator runs AllReduce, AllGather, "
                                 "ReduceScatter and Broadcast from NCCL logs)");
            }
            else
            {
                throw InputError(at + ": collective name: unknown collective \"" + name + "\"");
            }
            uint64_t cnt = 0;
            uint64_t dtype = 0;
            if (!kv.count("count") || !ParseUnsigned(kv["count"], cnt))
            {
                throw InputError(at + ": count: missing or not a number");
            }
            if (!kv.count("datatype") || !ParseUnsigned(kv["datatype"], dtype))
            {
                throw InputError(at + ": datatype: missing or not a number");
            }
            uint32_t esize = NcclDtypeBytes(dtype);
            if (esize == 0)
            {
                throw InputError(at + ": datatype: unknown ncclDataType_t " + kv["datatype"]);
            }
            if (!kv.count("comm"))
            {
                throw InputError(at + ": comm: missing");
            }
            Call call;
            call.op.name = name;
            call.op.kind = kind;
            call.op.source = at;
            call.comm = kv["comm"];
            call.stream = kv.count("stream") ? kv["stream"] : "";
            call.perRankCount = cnt;
            call.esize = esize;
            call.at = at;
            uint64_t nr = 0;
            if (kv.count("nranks") && (!ParseUnsigned(kv["nranks"], nr) || nr == 0))
            {
                throw InputError(at + ": nranks: \"" + kv["nranks"] + "\" is not a rank count");
            }
            call.nranks = nr;
            Comm& cm = p.comms[call.comm];
            if (cm.firstAt.empty())
            {
                cm.firstAt = at;
            }
            if (nr != 0)
            {
                cm.nranks = nr;
            }
            p.calls.push_back(std::move(call));
            continue;
        }
        // "comm 0x... rank R nranks N ... commId 0x... - Init COMPLETE"
        if (w.size() >= 6 && w[0] == "comm" && w[2] == "rank" && w[4] == "nranks")
        {
            uint64_t r = 0;
            uint64_t nr = 0;
            if (!ParseUnsigned(w[3], r) || !ParseUnsigned(w[5], nr) || nr == 0 || r >= nr)
            {
                continue; // another message that starts alike
            }
            Comm& cm = p.comms[w[1]];
            cm.rank = static_cast<int64_t>(r);
            cm.nranks = nr;
            for (std::size_t i = 6; i + 1 < w.size(); ++i)
            {
                if (w[i] == "commId")
                {
                    cm.commId = w[i + 1];
                }
            }
        }
    }
    uint64_t world = 0;
    bool anyCall = false;
    for (auto& [name, p] : procs)
    {
        for (auto& [ptr, cm] : p.comms)
        {
            world = std::max(world, cm.nranks);
        }
        anyCall = anyCall || !p.calls.empty();
    }
    if (!anyCall)
    {
        throw InputError(file + ": no collective lines (\"NCCL INFO AllReduce: opCount ...\"): log "
                                "with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL");
    }
    for (auto& [name, p] : procs)
    {
        for (auto& c : p.calls)
        {
            if (p.comms[c.comm].nranks == 0)
            {
                throw InputError(c.at + ": nranks: missing ([nranks=N], or the communicator's "
                                        "Init line with NCCL_DEBUG_SUBSYS=INIT)");
            }
        }
    }
    if (world > (1u << 20))
    {
        throw InputError(file + ": nranks: " + std::to_string(world) + " is above 1048576");
    }
    if (job.worldSize != 0)
    {
        throw InputError(file + ": an NCCL log holds every rank's lines: give it alone");
    }
    job.worldSize = static_cast<uint32_t>(world);
    job.ranks.resize(world);
    // Global ranks: a process's rank in a communicator of the whole world.
    std::vector<std::string> active;
    for (const auto& name : order)
    {
        if (!procs[name].calls.empty())
        {
            active.push_back(name);
        }
    }
    std::map<std::string, uint32_t> rankOf;
    std::set<uint32_t> used;
    for (const auto& name : active)
    {
        for (const auto& [ptr, cm] : procs[name].comms)
        {
            if (cm.nranks == world && cm.rank >= 0)
            {
                rankOf[name] = static_cast<uint32_t>(cm.rank);
            }
        }
    }
    for (std::size_t i = 0; i < active.size(); ++i)
    {
        if (!rankOf.count(active[i]))
        {
            if (!rankOf.empty() || (active.size() != 1 && active.size() != world))
            {
                throw InputError(file + ": process " + active[i] +
                                 ": its rank is not in the log (log with "
                                 "NCCL_DEBUG_SUBSYS=INIT,COLL)");
            }
            rankOf[active[i]] = static_cast<uint32_t>(i); // every rank logged: any order
        }
        if (!used.insert(rankOf[active[i]]).second)
        {
            throw InputError(file + ": process " + active[i] + ": rank " +
                             std::to_string(rankOf[active[i]]) + " is another process's too");
        }
    }
    // Sub-communicators: their members by commId.
    std::map<std::string, std::vector<int64_t>> members; // commId -> global rank by comm rank
    for (const auto& name : active)
    {
        for (const auto& [ptr, cm] : procs[name].comms)
        {
            if (cm.nranks < world && !cm.commId.empty() && cm.rank >= 0)
            {
                auto& m = members[cm.commId];
                m.resize(cm.nranks, -1);
                m[cm.rank] = rankOf[name];
            }
        }
    }
    const int64_t gapPs = static_cast<int64_t>(std::llround(opts.gapUs * 1e6));
    for (const auto& name : active)
    {
        Process& p = procs[name];
        TraceRank& tr = job.ranks[rankOf[name]];
        tr.traced = true;
        tr.file = file;
        std::map<std::string, uint32_t> streams;
        std::map<std::string, uint32_t> worldOrdinal;
        for (auto& c : p.calls)
        {
            const Comm& cm = p.comms[c.comm];
            uint64_t n = cm.nranks;
            uint64_t elems = c.op.kind == "allgather" || c.op.kind == "reducescatter"
                                 ? CheckedMul(c.perRankCount, n, c.at + ": count")
                                 : c.perRankCount;
            c.op.bytes = CollectiveBytes(elems, c.esize, c.at + ": count");
            if (n == world)
            {
                std::string key =
                    cm.commId.empty()
                        ? "world#" +
                              std::to_string(
                                  worldOrdinal.emplace(c.comm, worldOrdinal.size()).first->second)
                        : cm.commId;
                std::vector<uint32_t> all(world);
                for (uint32_t i = 0; i < world; ++i)
                {
                    all[i] = i;
                }
                c.op.group = table.Add(key, key.rfind("world", 0) == 0 ? key : "comm " + key, all);
            }
            else
            {
                if (cm.commId.empty() || cm.rank < 0)
                {
                    throw InputError(c.at + ": comm: " + c.comm + " has " + std::to_string(n) +
                                     " of the " + std::to_string(world) +
                                     " ranks and the log does not say which (log with "
                                     "NCCL_DEBUG_SUBSYS=INIT,COLL)");
                }
                std::vector<uint32_t> ranks;
                for (int64_t g : members[cm.commId])
                {
                    if (g < 0)
                    {
                        throw InputError(c.at + ": comm: " + c.comm + " (commId " + cm.commId +
                                         "): not every member's Init line is in the log");
                    }
                    ranks.push_back(static_cast<uint32_t>(g));
                }
                c.op.group = table.Add(cm.commId, "comm " + cm.commId, ranks);
            }
            c.op.stream =
                streams.emplace(c.stream, static_cast<uint32_t>(streams.size())).first->second;
            c.op.gapPs = gapPs;
            tr.ops.push_back(std::move(c.op));
        }
    }
    job.timing = "none";
}

std::string
Describe(const TraceOp& op)
{
    return op.kind + " of " + std::to_string(op.bytes) + " bytes";
}
} // namespace

TraceJob
ImportTrace(const std::vector<std::string>& files, const TraceImportOptions& opts)
{
    if (files.empty())
    {
        throw InputError("no trace file given");
    }
    TraceJob job;
    GroupTable table;
    for (const auto& file : files)
    {
        std::string text = ReadMaybeGzip(file);
        std::string format = opts.format;
        if (format == "auto")
        {
            std::size_t first = text.find_first_not_of(" \t\r\n");
            if (first != std::string::npos && text[first] == '{')
            {
                format = "pytorch-profiler";
            }
            else if (text.find(" NCCL INFO ") != std::string::npos)
            {
                format = "nccl-log";
            }
            else
            {
                throw InputError(file + ": neither a PyTorch profiler trace (JSON) nor an NCCL log "
                                        "(no \"NCCL INFO\" line)");
            }
        }
        if (!job.format.empty() && job.format != format)
        {
            throw InputError(file + ": a " + format + ", but " + files[0] + " is a " + job.format);
        }
        job.format = format;
        if (format == "pytorch-profiler")
        {
            ImportProfiler(file, text, job, table);
        }
        else
        {
            ImportNcclLog(file, text, opts, job, table);
        }
    }
    job.groups = std::move(table.groups);
    return job;
}

TraceJob
CompleteTrace(const TraceJob& in, uint32_t ranks)
{
    TraceJob job = in;
    const uint32_t w = job.worldSize;
    // Ranks without a trace run the lowest traced rank's collectives.
    uint32_t ref = w;
    for (uint32_t r = 0; r < w && ref == w; ++r)
    {
        ref = job.ranks[r].traced ? r : w;
    }
    if (ref == w)
    {
        throw InputError("the trace records no rank");
    }
    for (uint32_t r = 0; r < w; ++r)
    {
        if (job.ranks[r].traced)
        {
            continue;
        }
        for (const auto& op : job.ranks[ref].ops)
        {
            if (job.groups[op.group].ranks.size() != w)
            {
                throw InputError(
                    op.source + ": rank " + std::to_string(r) +
                    " has no trace, and this collective's group (" + job.groups[op.group].name +
                    ", " + std::to_string(job.groups[op.group].ranks.size()) + " of " +
                    std::to_string(w) + " ranks) does not say what it runs: give a trace per rank");
            }
        }
        job.ranks[r].ops = job.ranks[ref].ops;
        job.ranks[r].file = job.ranks[ref].file;
    }
    // The members of a group must agree on its collectives, in order.
    for (uint32_t g = 0; g < job.groups.size(); ++g)
    {
        std::vector<const TraceOp*> first;
        uint32_t firstRank = 0;
        bool have = false;
        for (uint32_t r : job.groups[g].ranks)
        {
            std::vector<const TraceOp*> seq;
            for (const auto& op : job.ranks[r].ops)
            {
                if (op.group == g)
                {
                    seq.push_back(&op);
                }
            }
            if (!have)
            {
                first = seq;
                firstRank = r;
                have = true;
                continue;
            }
            for (std::size_t i = 0; i < std::max(seq.size(), first.size()); ++i)
            {
                std::string what = "group " + job.groups[g].name + ", collective " +
                                   std::to_string(i) + ": rank " + std::to_string(r);
                if (i >= seq.size())
                {
                    throw InputError(first[i]->source + ": " + what + " has no such collective (" +
                                     std::to_string(seq.size()) + " on the group), rank " +
                                     std::to_string(firstRank) + " runs " + Describe(*first[i]));
                }
                if (i >= first.size())
                {
                    throw InputError(seq[i]->source + ": " + what + " runs " + Describe(*seq[i]) +
                                     ", rank " + std::to_string(firstRank) + " has " +
                                     std::to_string(first.size()) + " collectives on the group");
                }
                bool sameSize = seq[i]->bytes == first[i]->bytes || seq[i]->kind == "alltoall";
                if (seq[i]->kind != first[i]->kind || !sameSize)
                {
                    throw InputError(
                        seq[i]->source + ": " +
                        (seq[i]->kind != first[i]->kind ? "Collective name" : "In msg nelems") +
                        ": " + what + " runs " + Describe(*seq[i]) + ", rank " +
                        std::to_string(firstRank) + " " + Describe(*first[i]) + " (" +
                        first[i]->source + ")");
                }
            }
        }
    }
    if (ranks == 0 || ranks == w)
    {
        return job;
    }
    if (ranks < w || ranks % w != 0)
    {
        throw InputError(std::to_string(ranks) + " is not a multiple of the " +
                         "trace's world of " + std::to_string(w) + " ranks (the job scales by " +
                         "whole data-parallel replicas)");
    }
    const uint32_t copies = ranks / w;
    for (uint32_t g = 0; g < job.groups.size(); ++g)
    {
        if (job.groups[g].ranks.size() != w)
        {
            continue;
        }
        for (const auto& op : job.ranks[job.groups[g].ranks[0]].ops)
        {
            if (op.group == g && op.kind == "alltoall")
            {
                throw InputError(op.source + ": an all-to-all over the whole " +
                                 "world cannot be scaled (a wider world changes who exchanges " +
                                 "what with whom)");
            }
        }
    }
    TraceJob out;
    out.format = job.format;
    out.timing = job.timing;
    out.skipped = job.skipped;
    out.steps = job.steps;
    out.worldSize = ranks;
    out.scaledFrom = w;
    // copyOf[g][k]: the group replica k uses for the trace's group g.
    std::vector<std::vector<uint32_t>> copyOf(job.groups.size());
    for (uint32_t g = 0; g < job.groups.size(); ++g)
    {
        const TraceGroup& tg = job.groups[g];
        if (tg.ranks.size() == w)
        {
            TraceGroup wide{tg.name, {}, g};
            for (uint32_t k = 0; k < copies; ++k)
            {
                for (uint32_t r : tg.ranks)
                {
                    wide.ranks.push_back(k * w + r);
                }
            }
            copyOf[g].assign(copies, static_cast<uint32_t>(out.groups.size()));
            out.groups.push_back(std::move(wide));
            continue;
        }
        for (uint32_t k = 0; k < copies; ++k)
        {
            TraceGroup c{tg.name, {}, g};
            for (uint32_t r : tg.ranks)
            {
                c.ranks.push_back(k * w + r);
            }
            copyOf[g].push_back(static_cast<uint32_t>(out.groups.size()));
            out.groups.push_back(std::move(c));
        }
    }
    out.ranks.resize(ranks);
    for (uint32_t k = 0; k < copies; ++k)
    {
        for (uint32_t r = 0; r < w; ++r)
        {
            TraceRank& dst = out.ranks[k * w + r];
            dst = job.ranks[r];
            dst.traced = job.ranks[r].traced && k == 0;
            for (auto& op : dst.ops)
            {
                op.group = copyOf[op.group][k];
            }
        }
    }
    return out;
}

std::string
DescribeSkipped(const TraceJob& job)
{
    std::string s;
    for (const auto& [name, n] : job.skipped)
    {
        s += (s.empty() ? "" : ", ") + name + " x" + std::to_string(n);
    }
    return s;
}

} // namespace metaroce
} // namespace ns3
