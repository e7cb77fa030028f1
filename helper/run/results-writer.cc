#include "helper/run/results-writer.h"

#include "helper/scenario/json-reader.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace ns3
{
namespace metaroce
{

nlohmann::json
ResultsJson(const std::string& scenario, const std::vector<RunRecord>& runs)
{
    nlohmann::json j = {{"schema_version", kResultsSchemaVersion},
                        {"scenario", scenario},
                        {"runs", nlohmann::json::array()}};
    for (const auto& r : runs)
    {
        nlohmann::json run = {{"variant", r.variant},
                              {"parameters", r.parameters},
                              {"metrics", r.metrics},
                              {"counters", r.counters},
                              {"cost", r.cost}};
        if (!r.timeseries.is_null())
        {
            run["timeseries"] = r.timeseries;
        }
        if (!r.flows.is_null())
        {
            run["flows"] = r.flows;
        }
        if (!r.paths.is_null())
        {
            run["paths"] = r.paths;
        }
        if (!r.timeline.is_null())
        {
            run["timeline"] = r.timeline;
        }
        j["runs"].push_back(run);
    }
    return j;
}

namespace
{
std::string
Cell(const nlohmann::json& v)
{
    if (v.is_number_float())
    {
        std::ostringstream os;
        os << std::setprecision(9) << v.get<double>();
        return os.str();
    }
    if (v.is_string())
    {
        return v.get<std::string>();
    }
    return v.dump();
}

/// A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
std::string
CsvField(const std::string& v)
{
    if (v.find_first_of(",\"\n") == std::string::npos)
    {
        return v;
    }
    std::string q = "\"";
    for (char c : v)
    {
        q += c == '"' ? std::string("\"\"") : std::string(1, c);
    }
    return q + "\"";
}

const nlohmann::json*
Lookup(const RunRecord& r, const std::string& col)
{
    if (r.metrics.contains(col))
    {
        return &r.metrics[col];
    }
    if (r.counters.contains(col))
    {
        return &r.counters[col];
    }
    return nullptr;
}
} // namespace

std::string
ResultsCsv(const std::vector<RunRecord>& runs)
{
    std::ostringstream os;
    if (runs.empty())
    {
        return "";
    }
    // Columns: the union over runs (transports report different counters), in order.
    std::vector<std::string> cols;
    std::set<std::string> seen;
    for (const auto& r : runs)
    {
        for (const auto* part : {&r.metrics, &r.counters})
        {
            for (auto it = part->begin(); it != part->end(); ++it)
            {
                if (seen.insert(it.key()).second)
                {
                    cols.push_back(it.key());
                }
            }
        }
    }
    os << "scenario,variant";
    for (const auto& c : cols)
    {
        os << ',' << c;
    }
    os << '\n';
    for (const auto& r : runs)
    {
        os << CsvField(r.scenario) << ',' << CsvField(r.variant);
        for (const auto& c : cols)
        {
            const nlohmann::json* v = Lookup(r, c);
            os << ',' << (v ? Cell(*v) : "");
        }
        os << '\n';
    }
    return os.str();
}

std::string
TimeseriesCsv(const std::vector<RunRecord>& runs)
{
    // Columns: the union of the samples' keys, time first.
    std::vector<std::string> cols = {"time_us"};
    std::set<std::string> seen = {"time_us"};
    for (const auto& r : runs)
    {
        if (r.timeseries.is_null())
        {
            continue;
        }
        for (const auto& p : r.timeseries)
        {
            for (auto it = p.begin(); it != p.end(); ++it)
            {
                if (seen.insert(it.key()).second)
                {
                    cols.push_back(it.key());
                }
            }
        }
    }
    if (cols.size() == 1)
    {
        return "";
    }
    std::ostringstream os;
    os << "variant";
    for (const auto& c : cols)
    {
        os << ',' << c;
    }
    os << '\n';
    for (const auto& r : runs)
    {
        if (r.timeseries.is_null())
        {
            continue;
        }
        for (const auto& p : r.timeseries)
        {
            os << CsvField(r.variant);
            for (const auto& c : cols)
            {
                os << ',' << (p.contains(c) ? Cell(p[c]) : "");
            }
            os << '\n';
        }
    }
    return os.str();
}

std::string
PathsCsv(const std::vector<RunRecord>& runs)
{
    std::ostringstream os;
    bool any = false;
    os << "variant,time_us,path,plane,entropy,cwnd_packets,inflight_packets,srtt_us\n";
    for (const auto& r : runs)
    {
        if (r.paths.is_null())
        {
            continue;
        }
        for (const auto& p : r.paths)
        {
            any = true;
            os << CsvField(r.variant);
            for (const char* c : {"time_us", "path", "plane", "entropy", "cwnd_packets",
                                  "inflight_packets", "srtt_us"})
            {
                os << ',' << Cell(p[c]);
            }
            os << '\n';
        }
    }
    return any ? os.str() : "";
}

std::string
FlowsCsv(const std::vector<RunRecord>& runs)
{
    std::ostringstream os;
    bool any = false;
    os << "variant,src,dst,bytes,fct_us\n";
    for (const auto& r : runs)
    {
        if (r.flows.is_null())
        {
            continue;
        }
        for (const auto& f : r.flows)
        {
            any = true;
            os << CsvField(r.variant) << ',' << f["src"] << ',' << f["dst"] << ',' << f["bytes"]
               << ',' << Cell(f["fct_us"]) << '\n';
        }
    }
    return any ? os.str() : "";
}

namespace
{
/// The folder a path's file lives in ("." for a bare name).
std::string
FolderOf(const std::string& path)
{
    auto slash = path.rfind('/');
    if (slash == std::string::npos)
    {
        return ".";
    }
    return slash == 0 ? "/" : path.substr(0, slash);
}

std::string
BaseOf(const std::string& path)
{
    auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// Creates an empty temporary beside `path` (exclusively: never an existing file); returns
/// its name and open descriptor, or an empty name and errno.
std::pair<std::string, int>
MakeTemporary(const std::string& path)
{
    std::string dir = FolderOf(path);
    std::string tmpl = (dir == "/" ? "" : dir) + "/." + BaseOf(path) + ".XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    int fd = mkstemp(buf.data());
    if (fd < 0)
    {
        return {"", errno};
    }
    // mkstemp creates 0600; results are ordinary files, as the umask allows.
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    return {std::string(buf.data()), fd};
}

// A temporary's name adds "." before the name and ".XXXXXX" after it.
constexpr std::size_t kTemporaryExtra = 8;
} // namespace

OutputFiles::OutputFiles(std::string jsonPath)
    : m_json(std::move(jsonPath))
{
}

std::string
OutputFiles::CsvPath(const std::string& suffix) const
{
    const std::string ext = ".json";
    bool json = m_json.size() > ext.size() &&
                m_json.compare(m_json.size() - ext.size(), ext.size(), ext) == 0 &&
                BaseOf(m_json) != ext;
    std::string stem = json ? m_json.substr(0, m_json.size() - ext.size()) : m_json;
    return stem + suffix + ".csv";
}

std::vector<std::string>
OutputFiles::AllPaths() const
{
    return {m_json, CsvPath(), CsvPath("-paths"), CsvPath("-flows"), CsvPath("-timeseries")};
}

OutputFiles::~OutputFiles()
{
    for (const auto& f : m_streamed)
    {
        if (!f.temp.empty())
        {
            unlink(f.temp.c_str());
        }
    }
}

OutputFiles&
OutputFiles::operator=(OutputFiles&& o) noexcept
{
    std::swap(m_json, o.m_json);
    std::swap(m_files, o.m_files);
    std::swap(m_streamed, o.m_streamed);
    return *this;
}

void
OutputFiles::CheckPath(const std::string& path, const std::string& option,
                       std::set<std::string>& probed)
{
    auto refuse = [&](const std::string& why)
    { throw InputError(option + ": '" + path + "' " + why); };
    if (path.empty() || path.back() == '/')
    {
        refuse("names a folder, not a file");
    }
    if (BaseOf(path).size() + kTemporaryExtra > NAME_MAX)
    {
        refuse("has a name too long to write (at most " +
               std::to_string(NAME_MAX - kTemporaryExtra) + " characters)");
    }
    struct stat st;
    if (lstat(path.c_str(), &st) == 0)
    {
        if (S_ISLNK(st.st_mode))
        {
            refuse("is a symbolic link (results are not written through links)");
        }
        if (!S_ISREG(st.st_mode))
        {
            refuse(std::string("exists and is not a regular file (") +
                   (S_ISDIR(st.st_mode) ? "a folder" : "a device, pipe or socket") + ")");
        }
    }
    else if (errno != ENOENT)
    {
        refuse(std::string("cannot be used: ") + std::strerror(errno));
    }
    std::string dir = FolderOf(path);
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    {
        throw InputError(option + ": folder '" + dir + "' does not exist");
    }
    if (!probed.insert(dir).second)
    {
        return; // this folder was proven writable already
    }
    // Whether files can be created there (permissions, read-only or pseudo file systems,
    // path length) is best proven by creating one.
    auto [probe, fd] = MakeTemporary(path);
    if (probe.empty())
    {
        throw InputError(option + ": cannot create files in '" + dir + "': " + std::strerror(fd));
    }
    close(fd);
    unlink(probe.c_str());
}

void
OutputFiles::Check() const
{
    std::set<std::string> probed;
    if (!m_json.empty())
    {
        for (const auto& path : AllPaths())
        {
            CheckPath(path, "--out", probed);
        }
    }
    for (const auto& f : m_streamed)
    {
        CheckPath(f.path, f.option, probed);
    }
}

void
OutputFiles::AddStreamed(const std::string& path, const std::string& option)
{
    std::vector<std::string> taken = m_json.empty() ? std::vector<std::string>{} : AllPaths();
    for (const auto& f : m_streamed)
    {
        taken.push_back(f.path);
    }
    if (std::find(taken.begin(), taken.end(), path) != taken.end())
    {
        throw InputError(option + ": '" + path + "' would be written twice (two variants or " +
                         "ports give the same name)");
    }
    m_streamed.push_back({path, option, ""});
}

std::string
OutputFiles::Open(const std::string& path)
{
    for (auto& f : m_streamed)
    {
        if (f.path == path && f.temp.empty())
        {
            auto [tmp, fd] = MakeTemporary(path);
            if (tmp.empty())
            {
                throw std::runtime_error("cannot create a file beside '" + path +
                                         "': " + std::strerror(fd));
            }
            close(fd);
            f.temp = tmp;
            return tmp;
        }
    }
    throw std::logic_error("OutputFiles::Open: '" + path + "' is not a streamed output");
}

void
OutputFiles::Add(const std::string& path, std::string text)
{
    if (!text.empty())
    {
        m_files.emplace_back(path, std::move(text));
    }
}

void
OutputFiles::Commit()
{
    std::vector<std::string> temps;
    auto cleanup = [&]()
    {
        for (const auto& t : temps)
        {
            unlink(t.c_str());
        }
    };
    for (const auto& [path, text] : m_files)
    {
        auto [tmp, fd] = MakeTemporary(path);
        if (tmp.empty())
        {
            cleanup();
            throw std::runtime_error("cannot create a file beside '" + path +
                                     "': " + std::strerror(fd));
        }
        temps.push_back(tmp);
        std::size_t done = 0;
        while (done < text.size())
        {
            ssize_t n = write(fd, text.data() + done, text.size() - done);
            if (n <= 0)
            {
                int err = errno;
                close(fd);
                cleanup();
                throw std::runtime_error("cannot write '" + tmp + "': " + std::strerror(err));
            }
            done += static_cast<std::size_t>(n);
        }
        if (close(fd) != 0)
        {
            int err = errno;
            cleanup();
            throw std::runtime_error("cannot write '" + tmp + "': " + std::strerror(err));
        }
    }
    // Streamed files join the renames: all or none.
    for (auto& f : m_streamed)
    {
        if (!f.temp.empty())
        {
            m_files.emplace_back(f.path, "");
            temps.push_back(f.temp);
            f.temp.clear();
        }
    }
    for (std::size_t i = 0; i < m_files.size(); ++i)
    {
        const std::string& path = m_files[i].first;
        struct stat st;
        bool replaceable = lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode);
        if (!replaceable || rename(temps[i].c_str(), path.c_str()) != 0)
        {
            int err = replaceable ? errno : EEXIST;
            // All or none: take back the files already put in place.
            for (std::size_t k = 0; k < i; ++k)
            {
                unlink(m_files[k].first.c_str());
            }
            temps.erase(temps.begin(), temps.begin() + static_cast<std::ptrdiff_t>(i));
            cleanup();
            throw std::runtime_error(
                "cannot put '" + path + "' in place: " +
                (replaceable ? std::strerror(err) : "it is no longer a regular file"));
        }
    }
    m_files.clear();
}

namespace
{
/// How much of a record's work finished: "done/total" messages or iterations, or yes/no for
/// one collective size; "" when the workload has no such notion (raw traffic).
std::string
CompletedCell(const RunRecord& r)
{
    const auto& m = r.metrics;
    auto count = [&](const char* done, const char* total)
    { return m[done].dump() + "/" + m[total].dump(); };
    if (m.contains("messages_total") && m.contains("messages_completed"))
    {
        return count("messages_completed", "messages_total");
    }
    if (m.contains("iterations") && m.contains("iterations_completed"))
    {
        return count("iterations_completed", "iterations");
    }
    if (m.contains("completed") && m["completed"].is_boolean())
    {
        return m["completed"].get<bool>() ? "yes" : "no";
    }
    return "";
}
} // namespace

void
PrintTable(std::ostream& os, const std::vector<RunRecord>& runs,
           const std::vector<std::string>& columns)
{
    std::vector<std::string> head = {"variant"};
    head.insert(head.end(), columns.begin(), columns.end());
    // Every table says how much of the work finished: a figure never hides unfinished work.
    bool completion = false;
    for (const auto& r : runs)
    {
        completion = completion || !CompletedCell(r).empty();
    }
    if (completion)
    {
        head.push_back("completed");
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : runs)
    {
        std::vector<std::string> row = {r.variant};
        for (const auto& c : columns)
        {
            const nlohmann::json* v = Lookup(r, c);
            if (v == nullptr)
            {
                row.push_back("-");
            }
            else if (v->is_number_float())
            {
                std::ostringstream s;
                s << std::fixed << std::setprecision(v->get<double>() < 10 ? 3 : 1)
                  << v->get<double>();
                row.push_back(s.str());
            }
            else
            {
                row.push_back(Cell(*v));
            }
        }
        if (completion)
        {
            std::string c = CompletedCell(r);
            row.push_back(c.empty() ? "-" : c);
        }
        rows.push_back(row);
    }
    std::vector<std::size_t> width(head.size());
    for (std::size_t i = 0; i < head.size(); ++i)
    {
        width[i] = head[i].size();
        for (const auto& row : rows)
        {
            width[i] = std::max(width[i], row[i].size());
        }
    }
    auto line = [&](const std::vector<std::string>& cells)
    {
        for (std::size_t i = 0; i < cells.size(); ++i)
        {
            os << (i ? "  " : "") << (i ? std::right : std::left) << std::setw(width[i])
               << cells[i];
        }
        os << '\n';
    };
    line(head);
    for (const auto& row : rows)
    {
        line(row);
    }
}

} // namespace metaroce
} // namespace ns3
