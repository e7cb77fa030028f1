/*
 * metaroce-sim: runs one scenario file and prints its table.
 *
 *   metaroce-sim SCENARIO.json [--set key.path=value ...] [--out FILE.json] [--quiet]
 *                [--dry-run] [--max-memory BYTES|NNG|NNM] [--pcap NIC:PLANE ...]
 *
 * Exit status: 0 done; 2 bad input (the message names the key; nothing is written) or a run
 * whose estimated peak memory exceeds the limit; 3 a run left work unfinished (results are
 * written; one warning line per run on stderr) unless the scenario says it expects that
 * (expect_unfinished); 4 an invariant of the model was broken (nothing is written); 1 anything
 * else (an allocation failure names the phase).
 */
#include "helper/run/results-writer.h"
#include "helper/run/scenario-runner.h"
#include "helper/scenario/json-reader.h"
#include "helper/scenario/memory-estimate.h"
#include "helper/scenario/scenario.h"
#include "model/core/bucket-scheduler.h"
#include "model/core/fast-simulator-impl.h"
#ifdef METAROCE_MPI
#include "helper/mpi/mpi-fabric.h"
#endif

#include "ns3/config.h"
#include "ns3/enum.h"
#include "ns3/global-value.h"
#include "ns3/scheduler.h"
#include "ns3/simulator-impl.h"
#include "ns3/string.h"
#include "ns3/type-id.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <new>
#include <sstream>

using namespace ns3;
using namespace ns3::metaroce;

namespace
{
const char* kUsage =
    "usage: metaroce-sim SCENARIO.json [--set key.path=value ...] [--variant NAME ...] "
    "[--out FILE.json] [--max-wall-s S] [--max-memory SIZE] [--quiet] [--dry-run]\n"
    "       [--pcap NIC:PLANE ...] [--tie-order scheduled|node]\n"
    "  --set      override any scenario key (repeatable), e.g. --set workload.rate_gbps=50\n"
    "  --variant  run only this variant of the scenario (repeatable; default: all)\n"
    "  --out      write results as JSON to FILE.json and as CSV beside it (FILE.csv)\n"
    "  --max-wall-s  end each run after S seconds of wall time (its work then counts as\n"
    "             unfinished: exit 3)\n"
    "  --quiet    no progress on stderr\n"
    "  --dry-run  validate, print the resolved scenario, the fabric's size and the estimated\n"
    "             peak memory, run nothing\n"
    "  --max-memory  refuse (exit 2) a run whose estimated peak memory exceeds SIZE (bytes, or\n"
    "             with K, M, G, T: 512M, 20G); default: MemAvailable in /proc/meminfo\n"
    "  --pcap     write the link of NIC's port on PLANE (both directions) to a pcap file\n"
    "             (repeatable): OUT-VARIANT-NIC-PLANE.pcap, OUT being --out without .json\n"
    "             (default: the scenario's name); Wireshark decodes it as RoCEv2\n"
    "  --tie-order  how events at the same instant are ordered: scheduled (ns-3's order, the\n"
    "             default) or node (metaroce-sim-mpi's: the same results on any number of\n"
    "             processes; metaroce-sim-mpi accepts only node)\n";

struct Options
{
    std::string scenario;
    std::vector<std::string> sets;
    std::vector<std::string> variants;
    std::string out;
    double maxWallS{0};
    bool quiet{false};
    bool dryRun{false};
    MemoryLimit memory;                              //!< --max-memory, if given
    std::vector<std::pair<uint32_t, uint32_t>> pcap; //!< --pcap NIC:PLANE
    std::string tieOrder;                            //!< --tie-order, if given
};

/// NIC:PLANE of --pcap.
std::pair<uint32_t, uint32_t>
ParsePort(const std::string& v)
{
    const auto colon = v.find(':');
    try
    {
        if (colon != std::string::npos && v.find_first_not_of("0123456789:") == std::string::npos &&
            colon > 0 && colon + 1 < v.size() && v.find(':', colon + 1) == std::string::npos)
        {
            return {static_cast<uint32_t>(std::stoul(v.substr(0, colon))),
                    static_cast<uint32_t>(std::stoul(v.substr(colon + 1)))};
        }
    }
    catch (const std::out_of_range&)
    {
    }
    throw InputError("--pcap: expected NIC:PLANE (two numbers), got '" + v + "'");
}

/// Whether this process reports bad input read before MPI starts. Under mpirun every
/// process reads the same command line and files and finds the same error: the first alone
/// says it (the launcher's environment names the process before MPI_Init), not each of 64.
bool
ReportsInputErrors()
{
#ifdef METAROCE_MPI
    for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    {
        if (const char* rank = std::getenv(var))
        {
            return std::string(rank) == "0";
        }
    }
#endif
    return true;
}

Options
ParseArgs(int argc, char* argv[])
{
    Options o;
    for (int i = 1; i < argc; ++i)
    {
        std::string a = argv[i];
        auto value = [&](const std::string& name)
        {
            // An option in place of the value (`--variant --out f`) means the value is missing.
            if (i + 1 >= argc || std::string(argv[i + 1]).rfind("--", 0) == 0)
            {
                throw InputError(name + ": needs a value");
            }
            return std::string(argv[++i]);
        };
        if (a == "--help" || a == "-h")
        {
            std::cout << kUsage;
            std::exit(0);
        }
        else if (a == "--set")
        {
            o.sets.push_back(value(a));
        }
        else if (a.rfind("--set=", 0) == 0)
        {
            o.sets.push_back(a.substr(6));
        }
        else if (a == "--variant")
        {
            o.variants.push_back(value(a));
        }
        else if (a.rfind("--variant=", 0) == 0)
        {
            o.variants.push_back(a.substr(10));
        }
        else if (a == "--out" || a.rfind("--out=", 0) == 0)
        {
            o.out = a == "--out" ? value(a) : a.substr(6);
            if (o.out.empty())
            {
                throw InputError("--out: an empty path names no file");
            }
        }
        else if (a == "--max-wall-s" || a.rfind("--max-wall-s=", 0) == 0)
        {
            std::string v = a == "--max-wall-s" ? value(a) : a.substr(13);
            char* end = nullptr;
            errno = 0;
            double x = std::strtod(v.c_str(), &end);
            if (v.empty() || *end != '\0' || errno != 0 || !(x > 0) || x > 1e9)
            {
                throw InputError("--max-wall-s: must be a number of seconds in (0, 1e9], got '" +
                                 v + "'");
            }
            o.maxWallS = x;
        }
        else if (a == "--quiet")
        {
            o.quiet = true;
        }
        else if (a == "--dry-run")
        {
            o.dryRun = true;
        }
        else if (a == "--max-memory" || a.rfind("--max-memory=", 0) == 0)
        {
            std::string v = a == "--max-memory" ? value("--max-memory") : a.substr(13);
            o.memory = {ParseMemorySize(v, "--max-memory"), "--max-memory", true};
        }
        else if (a == "--pcap")
        {
            o.pcap.push_back(ParsePort(value(a)));
        }
        else if (a.rfind("--pcap=", 0) == 0)
        {
            o.pcap.push_back(ParsePort(a.substr(7)));
        }
        else if (a == "--tie-order" || a.rfind("--tie-order=", 0) == 0)
        {
            o.tieOrder = a == "--tie-order" ? value(a) : a.substr(12);
            if (o.tieOrder != "scheduled" && o.tieOrder != "node")
            {
                throw InputError("--tie-order: expected scheduled or node, got '" + o.tieOrder +
                                 "'");
            }
#ifdef METAROCE_MPI
            if (o.tieOrder != "node")
            {
                throw InputError("--tie-order: metaroce-sim-mpi orders ties by node (the only "
                                 "order that gives the same results on any number of processes)");
            }
#endif
        }
        else if (!a.empty() && a[0] == '-')
        {
            throw InputError(a + ": unknown option");
        }
        else if (o.scenario.empty())
        {
            o.scenario = a;
        }
        else
        {
            throw InputError(a + ": only one scenario file may be given");
        }
    }
    if (o.scenario.empty())
    {
        throw InputError("no scenario file given");
    }
    return o;
}

} // namespace

/// A name made safe to be one file name: letters, digits, '-', '.' and '_' (others become
/// '_'), no leading '.', at most 64 characters.
std::string
SafeName(const std::string& s)
{
    std::string out = s.substr(0, 64);
    for (char& c : out)
    {
        c = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_';
    }
    if (!out.empty() && out[0] == '.')
    {
        out[0] = '_';
    }
    return out;
}

/// The --pcap files of every run, OUT-VARIANT-NIC-PLANE.pcap (OUT: --out without .json; with
/// no --out, the scenario's name made safe, in the working folder), as outputs of the set.
void
AddPcapFiles(const Options& opt, Scenario& sc, OutputFiles& outputs)
{
    std::string base = opt.out.empty() ? SafeName(sc.name) : opt.out;
    if (base.empty())
    {
        base = "metaroce-sim";
    }
    if (!opt.out.empty() && base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0)
    {
        base.resize(base.size() - 5);
    }
    for (auto& r : sc.runs)
    {
        const std::string variant = SafeName(r.variant);
        const std::string prefix = variant.empty() ? base : base + "-" + variant;
        for (const auto& [nic, plane] : opt.pcap)
        {
            std::string path =
                prefix + "-" + std::to_string(nic) + "-" + std::to_string(plane) + ".pcap";
            outputs.AddStreamed(path, "--pcap");
            r.pcapFiles.push_back({nic, plane, path});
        }
    }
}

int
main(int argc, char* argv[])
{
    Options opt;
    Scenario sc;
    OutputFiles outputs("");
    try
    {
        opt = ParseArgs(argc, argv);
        sc = LoadScenario(opt.scenario, opt.sets, opt.variants);
        for (auto& r : sc.runs)
        {
            r.maxWallS = opt.maxWallS;
            for (const auto& [nic, plane] : opt.pcap)
            {
                if (nic >= r.topology.nics || plane >= r.topology.planes)
                {
                    throw InputError("--pcap " + std::to_string(nic) + ":" + std::to_string(plane) +
                                     ": the topology has " + std::to_string(r.topology.nics) +
                                     " NICs and " + std::to_string(r.topology.planes) + " planes");
                }
            }
        }
        // Every output is proven writable before anything is simulated.
        outputs = OutputFiles(opt.out);
        AddPcapFiles(opt, sc, outputs);
        outputs.Check();
        for (auto& r : sc.runs)
        {
            for (auto& f : r.pcapFiles)
            {
                f.path = outputs.Open(f.path);
            }
        }
    }
    catch (const InputError& e)
    {
        if (ReportsInputErrors())
        {
            // One line, as the README promises; an option's error points at --help.
            const std::string what = e.what();
            std::cerr << "metaroce-sim: error: " << what
                      << (what.rfind("-", 0) == 0 ? " (try --help)" : "") << "\n";
        }
        return 2;
    }
    catch (const std::bad_alloc&)
    {
        std::cerr << "metaroce-sim: " << OutOfMemoryMessage(sc.runs) << "\n";
        return 1;
    }
    // Same event order as ns-3's own scheduler and simulator, less work per event (see
    // BucketScheduler, FastSimulatorImpl). ns-3's NS_GLOBAL_VALUE="SchedulerType=...;
    // SimulatorImplementationType=..." picks others (to compare them); applied here because
    // ns-3 reads it before this module's types exist and would silently ignore ours.
    struct Choice
    {
        const char* key;
        std::string type;
        TypeId parent;
    };
    Choice choices[] = {
        {"SchedulerType", BucketScheduler::GetTypeId().GetName(), Scheduler::GetTypeId()},
#ifdef METAROCE_MPI
        // metaroce-sim-mpi: the module's own engine, its ties ordered by node (the same results
        // on any number of processes); ns-3's DistributedSimulatorImpl or
        // NullMessageSimulatorImpl when chosen.
        {"SimulatorImplementationType", FastSimulatorImpl::GetTypeId().GetName(),
         SimulatorImpl::GetTypeId()},
#else
        {"SimulatorImplementationType", FastSimulatorImpl::GetTypeId().GetName(),
         SimulatorImpl::GetTypeId()},
#endif
    };
    if (const char* globals = std::getenv("NS_GLOBAL_VALUE"))
    {
        std::istringstream in(globals);
        std::string item;
        while (std::getline(in, item, ';'))
        {
            for (Choice& c : choices)
            {
                std::string prefix = std::string(c.key) + "=";
                if (item.rfind(prefix, 0) == 0)
                {
                    c.type = item.substr(prefix.size());
                }
            }
        }
    }
    for (const Choice& c : choices)
    {
        TypeId tid;
        if (!TypeId::LookupByNameFailSafe(c.type, &tid) || !tid.IsChildOf(c.parent))
        {
            if (ReportsInputErrors())
            {
                std::cerr << "metaroce-sim: error: NS_GLOBAL_VALUE: " << c.key << ": '" << c.type
                          << "' is not an ns-3 " << c.parent.GetName() << " type\n";
            }
            return 2;
        }
        GlobalValue::Bind(c.key, StringValue(c.type)); // each checker takes the name
    }
    if (!opt.tieOrder.empty())
    {
        Config::SetDefault("ns3::metaroce::FastSimulatorImpl::TieOrder",
                           EnumValue(static_cast<int>(
                               opt.tieOrder == "node" ? FastSimulatorImpl::TieOrder::Node
                                                      : FastSimulatorImpl::TieOrder::Scheduled)));
    }
#ifdef METAROCE_MPI
    // One simulation over all processes; rank 0 alone prints and writes the results.
    MpiRun mpi(&argc, &argv);
    const bool writer = mpi.Rank() == 0;
#else
    const bool writer = true;
#endif

    if (opt.dryRun)
    {
        for (const auto& r : sc.runs)
        {
            const auto& g = r.topology.geometry;
            uint64_t switches = 0;
            uint64_t ports = static_cast<uint64_t>(g.TotalNics()) * g.planes;
            for (uint32_t t = 0; t < g.tiers; ++t)
            {
                uint64_t n = static_cast<uint64_t>(g.SwitchesInTier(t)) * g.planes * g.sites;
                switches += n;
                ports += n * g.PortsInTier(t);
            }
            MemoryEstimate mem = EstimatePeakMemory(r);
            nlohmann::json j = {
                {"variant", r.variant},
                {"resolved", r.resolved},
                {"fabric",
                 {{"topology", r.topology.ToJson()}, {"switches", switches}, {"ports", ports}}},
                {"estimated_peak_memory_bytes", mem.bytes},
                {"estimated_peak_memory", FormatBytes(mem.bytes)},
                {"memory_estimate", mem.ToJson()}};
            if (nlohmann::json c = CollectiveChoices(r); !c.is_null())
            {
                j["collective_choices"] = c;
            }
            if (writer)
            {
                std::cout << j.dump(2) << "\n";
            }
        }
    }

    // Refused before anything is built: a run that cannot fit would otherwise end minutes
    // later in an allocation failure. A dry run says so too, with the same status.
    const MemoryLimit limit = opt.memory.known ? opt.memory : AvailableMemory();
    if (std::string why = MemoryRefusal(sc.runs, limit); !why.empty())
    {
        std::cerr << "metaroce-sim: error: " << why << "\n";
        return 2;
    }
    if (opt.dryRun)
    {
        return 0;
    }

    try
    {
        ProgressReporter progress(!opt.quiet && writer);
        std::vector<RunRecord> records;
        for (const auto& run : sc.runs)
        {
            SetRunPhase("building the fabric", run.variant);
            if (!opt.quiet && writer)
            {
                std::cerr << "metaroce-sim: " << EstimateLine(run, limit) << "\n";
            }
            for (auto& rec : RunScenario(run, progress))
            {
                records.push_back(std::move(rec));
            }
        }
        if (writer)
        {
            std::cout << "# " << sc.name << (sc.description.empty() ? "" : ": " + sc.description)
                      << "\n";
            PrintTable(std::cout, records, sc.runs.front().table);
        }
        SetRunPhase("writing results", "");
        if (!opt.out.empty() && writer)
        {
            outputs.Add(outputs.JsonPath(), ResultsJson(sc.name, records).dump(2) + "\n");
            outputs.Add(outputs.CsvPath(), ResultsCsv(records));
            outputs.Add(outputs.CsvPath("-paths"), PathsCsv(records));
            outputs.Add(outputs.CsvPath("-flows"), FlowsCsv(records));
            outputs.Add(outputs.CsvPath("-timeseries"), TimeseriesCsv(records));
        }
        if (writer)
        {
            outputs.Commit(); // the results and the pcap files, all or none
        }
        // Unfinished work is never silent: one line per run, and its own exit status.
        bool unexpected = false;
        for (const auto& rec : records)
        {
            if (!rec.unfinished.empty())
            {
                if (writer)
                {
                    std::cerr << "metaroce-sim: warning: " << rec.scenario << "/" << rec.variant
                              << ": unfinished: " << rec.unfinished
                              << (rec.expectUnfinished ? " (expected by the scenario)" : "")
                              << "\n";
                }
                unexpected = unexpected || !rec.expectUnfinished;
            }
        }
        if (unexpected)
        {
            return 3;
        }
    }
    catch (const InputError& e)
    {
        std::cerr << "metaroce-sim: error: " << e.what() << "\n";
        return 2;
    }
    catch (const InvariantViolation& e)
    {
        std::cerr << "metaroce-sim: invariant violated: " << e.what() << "\n";
        return 4;
    }
    catch (const std::bad_alloc&)
    {
        std::cerr << "metaroce-sim: " << OutOfMemoryMessage(sc.runs) << "\n";
        return 1;
    }
    catch (const std::exception& e)
    {
        std::cerr << "metaroce-sim: failed: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
