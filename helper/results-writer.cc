#include "results-writer.h"

#include <cstdio>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>
#include <stdexcept>

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

void
WriteFileAtomically(const std::string& path, const std::string& text)
{
    std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out)
        {
            throw std::runtime_error("cannot write '" + tmp + "'");
        }
        out << text;
        if (!out)
        {
            throw std::runtime_error("error writing '" + tmp + "'");
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
    {
        std::remove(tmp.c_str());
        throw std::runtime_error("cannot rename '" + tmp + "' to '" + path + "'");
    }
}

void
PrintTable(std::ostream& os, const std::vector<RunRecord>& runs,
           const std::vector<std::string>& columns)
{
    std::vector<std::string> head = {"variant"};
    head.insert(head.end(), columns.begin(), columns.end());
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
