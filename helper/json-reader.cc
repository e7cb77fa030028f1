#include "json-reader.h"

#include <cmath>
#include <fstream>
#include <sstream>

namespace ns3
{
namespace metaroce
{

nlohmann::json
ReadJsonFile(const std::string& path, const std::string& what)
{
    std::ifstream in(path);
    if (!in)
    {
        throw InputError(what + ": cannot open file '" + path + "'");
    }
    try
    {
        return nlohmann::json::parse(in);
    }
    catch (const nlohmann::json::parse_error& e)
    {
        throw InputError(what + ": '" + path + "' is not valid JSON: " + e.what());
    }
}

JsonReader::JsonReader(const nlohmann::json& j, std::string path)
    : m_j(&j)
    , m_path(std::move(path))
{
    if (!j.is_object())
    {
        throw InputError((m_path.empty() ? std::string("(root)") : m_path) + ": must be an object");
    }
}

std::string
JsonReader::KeyPath(const std::string& key) const
{
    return m_path.empty() ? key : m_path + "." + key;
}

void
JsonReader::Fail(const std::string& key, const std::string& reason) const
{
    throw InputError(KeyPath(key) + ": " + reason);
}

bool
JsonReader::Has(const std::string& key) const
{
    return m_j->contains(key);
}

const nlohmann::json&
JsonReader::Get(const std::string& key) const
{
    auto it = m_j->find(key);
    if (it == m_j->end())
    {
        Fail(key, "missing (required)");
    }
    m_used.insert(key);
    return *it;
}

const nlohmann::json&
JsonReader::Raw(const std::string& key) const
{
    return Get(key);
}

JsonReader
JsonReader::Object(const std::string& key) const
{
    const auto& v = Get(key);
    if (!v.is_object())
    {
        Fail(key, "must be an object");
    }
    return JsonReader(v, KeyPath(key));
}

std::vector<JsonReader>
JsonReader::Array(const std::string& key) const
{
    const auto& v = Get(key);
    if (!v.is_array())
    {
        Fail(key, "must be an array");
    }
    std::vector<JsonReader> out;
    for (std::size_t i = 0; i < v.size(); ++i)
    {
        std::string p = KeyPath(key) + "[" + std::to_string(i) + "]";
        if (!v[i].is_object())
        {
            throw InputError(p + ": must be an object");
        }
        out.emplace_back(v[i], p);
    }
    return out;
}

namespace
{
std::string
Show(const nlohmann::json& v)
{
    std::string s = v.dump();
    return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}
} // namespace

uint64_t
JsonReader::UInt(const std::string& key, uint64_t min, uint64_t max) const
{
    const auto& v = Get(key);
    bool ok = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
    if (!ok && v.is_number_float())
    {
        double d = v.get<double>();
        ok = d >= 0 && std::floor(d) == d && d < 1.8e19;
    }
    if (!ok)
    {
        Fail(key, "must be a whole number in " + std::to_string(min) + ".." + std::to_string(max) +
                      ", got " + Show(v));
    }
    uint64_t x = v.is_number_float() ? static_cast<uint64_t>(v.get<double>()) : v.get<uint64_t>();
    if (x < min || x > max)
    {
        Fail(key, "must be a whole number in " + std::to_string(min) + ".." + std::to_string(max) +
                      ", got " + Show(v));
    }
    return x;
}

uint64_t
JsonReader::UInt(const std::string& key, uint64_t def, uint64_t min, uint64_t max) const
{
    return Has(key) ? UInt(key, min, max) : def;
}

double
JsonReader::Number(const std::string& key, double min, double max) const
{
    const auto& v = Get(key);
    std::ostringstream range;
    range << "must be a number in " << min << ".." << max << ", got " << Show(v);
    if (!v.is_number())
    {
        Fail(key, range.str());
    }
    double x = v.get<double>();
    if (!(x >= min && x <= max))
    {
        Fail(key, range.str());
    }
    return x;
}

double
JsonReader::Number(const std::string& key, double def, double min, double max) const
{
    return Has(key) ? Number(key, min, max) : def;
}

bool
JsonReader::Bool(const std::string& key, bool def) const
{
    if (!Has(key))
    {
        return def;
    }
    const auto& v = Get(key);
    if (!v.is_boolean())
    {
        Fail(key, "must be true or false, got " + Show(v));
    }
    return v.get<bool>();
}

std::string
JsonReader::String(const std::string& key) const
{
    const auto& v = Get(key);
    if (!v.is_string())
    {
        Fail(key, "must be a string, got " + Show(v));
    }
    return v.get<std::string>();
}

std::string
JsonReader::String(const std::string& key, const std::string& def) const
{
    return Has(key) ? String(key) : def;
}

std::string
JsonReader::Choice(const std::string& key, const std::vector<std::string>& choices) const
{
    std::string s = String(key);
    for (const auto& c : choices)
    {
        if (c == s)
        {
            return s;
        }
    }
    std::string list;
    for (const auto& c : choices)
    {
        list += (list.empty() ? "" : ", ") + c;
    }
    Fail(key, "must be one of " + list + ", got \"" + s + "\"");
}

std::string
JsonReader::Choice(const std::string& key, const std::string& def,
                   const std::vector<std::string>& choices) const
{
    return Has(key) ? Choice(key, choices) : def;
}

void
JsonReader::Finish() const
{
    for (auto it = m_j->begin(); it != m_j->end(); ++it)
    {
        if (m_used.count(it.key()) == 0)
        {
            Fail(it.key(), "unknown key");
        }
    }
}

} // namespace metaroce
} // namespace ns3
