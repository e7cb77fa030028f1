/*
 * Strict reading of the JSON files users write (topologies, scenarios): every value is
 * checked for type and range, every key must be known, and every error names the key path
 * ("topology.planes: must be an integer in 1..16, got 0").
 */
#ifndef METAROCE_JSON_READER_H
#define METAROCE_JSON_READER_H

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace ns3
{
namespace metaroce
{

/// Bad user input: the message names the key; programs exit with status 2.
class InputError : public std::runtime_error
{
  public:
    using std::runtime_error::runtime_error;
};

/// Reads a JSON file; a missing file or a syntax error is an InputError naming `what`.
nlohmann::json ReadJsonFile(const std::string& path, const std::string& what);

class JsonReader
{
  public:
    /// j must outlive the reader; path is the key path of j ("" for the root).
    JsonReader(const nlohmann::json& j, std::string path);

    const std::string& Path() const { return m_path; }
    std::string KeyPath(const std::string& key) const;
    bool Has(const std::string& key) const;
    const nlohmann::json& Raw(const std::string& key) const;

    /// A nested object (required).
    JsonReader Object(const std::string& key) const;
    /// Elements of an array (required); each element's path is key[i].
    std::vector<JsonReader> Array(const std::string& key) const;

    uint64_t UInt(const std::string& key, uint64_t min, uint64_t max) const;
    uint64_t UInt(const std::string& key, uint64_t def, uint64_t min, uint64_t max) const;
    double Number(const std::string& key, double min, double max) const;
    double Number(const std::string& key, double def, double min, double max) const;
    bool Bool(const std::string& key, bool def) const;
    std::string String(const std::string& key) const;
    std::string String(const std::string& key, const std::string& def) const;
    /// A string restricted to `choices`.
    std::string Choice(const std::string& key, const std::vector<std::string>& choices) const;
    std::string Choice(const std::string& key, const std::string& def,
                       const std::vector<std::string>& choices) const;

    /// Throws for the first key that was never read.
    void Finish() const;
    /// Throws an InputError for key with reason.
    [[noreturn]] void Fail(const std::string& key, const std::string& reason) const;

  private:
    const nlohmann::json& Get(const std::string& key) const;

    const nlohmann::json* m_j;
    std::string m_path;
    mutable std::set<std::string> m_used;
};

} // namespace metaroce
} // namespace ns3

#endif
