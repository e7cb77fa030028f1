#include "helper/scenario/json-reader.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace ns3
{
namespace metaroce
{

std::string
ReadTextFile(const std::string& path, std::size_t limit)
{
    if (path.find('\0') != std::string::npos)
    {
        throw InputError("cannot open file '" + path + "': the name holds a NUL character");
    }
    // POSIX calls rather than streams: each failure (a loop of symbolic links, a name too
    // long, no permission, a directory) comes back as an errno to report, not an exception.
    // O_NONBLOCK: opening a FIFO no one writes to would wait forever; once open, reads
    // block again (and a FIFO without a writer reads as empty at once).
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
    {
        throw InputError("cannot open file '" + path + "': " + std::strerror(errno));
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    struct Closer
    {
        int fd;

        ~Closer() { ::close(fd); }
    } closer{fd};

    struct stat st;
    if (::fstat(fd, &st) != 0)
    {
        throw InputError("cannot open file '" + path + "': " + std::strerror(errno));
    }
    if (S_ISDIR(st.st_mode))
    {
        throw InputError("cannot open file '" + path + "': it is a directory");
    }
    // A pipe is accepted (`<(command)`); a device or socket is not a file to read to its end.
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
    {
        throw InputError("cannot open file '" + path + "': not a regular file");
    }
    std::string text;
    char buf[65536];
    while (true)
    {
        ssize_t n = ::read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
        {
            continue;
        }
        if (n < 0)
        {
            throw InputError("cannot read file '" + path + "': " + std::strerror(errno));
        }
        if (n == 0)
        {
            break;
        }
        text.append(buf, static_cast<std::size_t>(n));
        if (text.size() > limit)
        {
            throw InputError("cannot read file '" + path + "': larger than " +
                             std::to_string(limit >> 20) + " MiB");
        }
    }
    if (text.empty() && S_ISFIFO(st.st_mode))
    {
        throw InputError("cannot read file '" + path + "': a pipe with nothing written to it");
    }
    return text;
}

std::string
JoinKey(const std::string& at, const std::string& key)
{
    return at.empty() ? key : key.empty() ? at : at + "." + key;
}

nlohmann::json
ParseJson(const std::string& text, const std::string& at, const std::string& file)
{
    // Where the parser is, for errors: one frame per open object (its current key, and
    // whether that key's value is complete) or array (the index of the element being read).
    struct Frame
    {
        bool array;
        std::string key;
        std::size_t index;
        bool done;
    };

    std::vector<Frame> frames;
    auto where = [&]()
    {
        std::string p = at;
        for (std::size_t i = 0; i < frames.size(); ++i)
        {
            const Frame& f = frames[i];
            if (i == 8)
            {
                p += "...";
                break;
            }
            if (f.array)
            {
                p += "[" + std::to_string(f.index) + "]";
            }
            else if (!f.key.empty())
            {
                p = JoinKey(p, f.key);
            }
        }
        if (p.empty())
        {
            return std::string("(root)");
        }
        return !frames.empty() && !frames.back().array && frames.back().done ? "after " + p : p;
    };
    const std::string in = file.empty() ? "" : " in '" + file + "'";
    auto advance = [&]()
    {
        if (!frames.empty())
        {
            frames.back().index += frames.back().array ? 1 : 0;
            frames.back().done = !frames.back().array;
        }
    };
    // Called while parsing, before the tree grows deeper than the limit.
    auto track = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed)
    {
        using E = nlohmann::json::parse_event_t;
        switch (event)
        {
            case E::object_start:
            case E::array_start:
                if (frames.size() >= kMaxJsonDepth)
                {
                    throw JsonTooDeep(where() + ": nested deeper than " +
                                      std::to_string(kMaxJsonDepth) + " levels" + in);
                }
                frames.push_back({event == E::array_start, "", 0, false});
                break;
            case E::key:
                frames.back().key = parsed.get<std::string>();
                frames.back().done = false;
                break;
            case E::object_end:
            case E::array_end:
                frames.pop_back();
                advance();
                break;
            case E::value:
                advance();
                break;
        }
        return true;
    };
    try
    {
        return nlohmann::json::parse(text, track);
    }
    catch (const nlohmann::json::exception& e)
    {
        throw InputError(where() + ": not valid JSON" + in + ": " + JsonErrorText(e));
    }
}

std::string
JsonErrorText(const nlohmann::json::exception& e)
{
    // Drop nlohmann's "[json.exception.parse_error.101] " tag, and the text it quotes from the
    // input ("; last read: '...'"): a file named by mistake (a key file, a password file)
    // must not be echoed.
    std::string what = e.what();
    auto tag = what.find("] ");
    if (what.rfind("[json.exception.", 0) == 0 && tag != std::string::npos)
    {
        what = what.substr(tag + 2);
    }
    auto read = what.find("; last read: ");
    if (read != std::string::npos)
    {
        auto expected = what.find("'; expected ", read);
        what =
            what.substr(0, read) + (expected == std::string::npos ? "" : what.substr(expected + 1));
    }
    return what;
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
        std::string p = ElementPath(key, i);
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

/// v as a whole number in min..max; `where` names it in the error.
uint64_t
ToUInt(const nlohmann::json& v, const std::string& where, uint64_t min, uint64_t max)
{
    bool ok = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
    if (!ok && v.is_number_float())
    {
        double d = v.get<double>();
        ok = d >= 0 && std::floor(d) == d && d < 1.8e19;
    }
    uint64_t x = 0;
    if (ok)
    {
        x = v.is_number_float() ? static_cast<uint64_t>(v.get<double>()) : v.get<uint64_t>();
    }
    if (!ok || x < min || x > max)
    {
        throw InputError(where + ": must be a whole number in " + std::to_string(min) + ".." +
                         std::to_string(max) + ", got " + Show(v));
    }
    return x;
}

/// v as one of `choices`; `where` names it in the error.
std::string
ToChoice(const nlohmann::json& v, const std::string& where, const std::vector<std::string>& choices)
{
    if (v.is_string())
    {
        for (const auto& c : choices)
        {
            if (c == v.get<std::string>())
            {
                return c;
            }
        }
    }
    std::string list;
    for (const auto& c : choices)
    {
        list += (list.empty() ? "" : ", ") + c;
    }
    throw InputError(where + ": must be one of " + list + ", got " + Show(v));
}
} // namespace

std::string
JsonReader::ElementPath(const std::string& key, std::size_t i) const
{
    return KeyPath(key) + "[" + std::to_string(i) + "]";
}

std::vector<uint64_t>
JsonReader::UIntList(const std::string& key, uint64_t min, uint64_t max) const
{
    const auto& v = Get(key);
    if (!v.is_array() || v.empty())
    {
        Fail(key, "must be a non-empty array of whole numbers, got " + Show(v));
    }
    std::vector<uint64_t> out;
    for (std::size_t i = 0; i < v.size(); ++i)
    {
        out.push_back(ToUInt(v[i], ElementPath(key, i), min, max));
    }
    return out;
}

std::vector<std::string>
JsonReader::ChoiceList(const std::string& key, const std::vector<std::string>& choices) const
{
    const auto& v = Get(key);
    if (!v.is_array() || v.empty())
    {
        Fail(key, "must be a non-empty array of strings, got " + Show(v));
    }
    std::vector<std::string> out;
    for (std::size_t i = 0; i < v.size(); ++i)
    {
        out.push_back(ToChoice(v[i], ElementPath(key, i), choices));
    }
    return out;
}

uint64_t
JsonReader::UInt(const std::string& key, uint64_t min, uint64_t max) const
{
    return ToUInt(Get(key), KeyPath(key), min, max);
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
    return ToChoice(Get(key), KeyPath(key), choices);
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
