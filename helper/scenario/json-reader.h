/*
 * Strict reading of the JSON files users write (topologies, scenarios): every value is
 * checked for type and range, every key must be known, and every error names the key path
 * ("topology.planes: must be an integer in 1..16, got 0").
 */
#ifndef METAROCE_JSON_READER_H
#define METAROCE_JSON_READER_H

#include <cstdint>
#include <new>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace ns3
{
namespace metaroce
{

/// A JSON library error as one line for the user: position and reason, never the input's
/// text (nlohmann quotes the last token it read).
std::string JsonErrorText(const nlohmann::json::exception& e);

/// Bad user input: the message names the key; programs exit with status 2.
class InputError : public std::runtime_error
{
  public:
    using std::runtime_error::runtime_error;
};

/// Runs load() and turns whatever else than an InputError (or running out of memory) it
/// raises into an InputError naming `file`: anything reading the input raised is still about
/// the input.
template <typename F>
auto
AsInputError(const std::string& file, F&& load) -> decltype(load())
{
    try
    {
        return load();
    }
    catch (const InputError&)
    {
        throw;
    }
    catch (const std::bad_alloc&)
    {
        throw;
    }
    catch (const std::exception& e)
    {
        throw InputError(file + ": " + e.what());
    }
}

/// Deepest nesting of arrays and objects accepted in a JSON document. Parsed documents are
/// copied, printed and destroyed recursively: an unbounded depth would overflow the stack.
constexpr std::size_t kMaxJsonDepth = 64;
/// Largest file read (bytes), far above any scenario or topology: /dev/zero ends too.
constexpr std::size_t kMaxInputFileBytes = 16 << 20;

/// JSON nested deeper than kMaxJsonDepth.
class JsonTooDeep : public InputError
{
  public:
    using InputError::InputError;
};

/// The contents of a file; a missing, unreadable or oversized (above `limit` bytes) file, or
/// a directory, is an InputError naming the path and the reason.
std::string ReadTextFile(const std::string& path, std::size_t limit = kMaxInputFileBytes);

/// Parses JSON text. `at` is the key path at which the document sits ("" for a file's root)
/// and `file` the file it came from ("": none); a syntax error or a number out of range is
/// an InputError naming the key path where parsing stopped (and the file).
nlohmann::json ParseJson(const std::string& text, const std::string& at, const std::string& file);

/// `at` + "." + `key`, or `key` alone when `at` is empty.
std::string JoinKey(const std::string& at, const std::string& key);

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
    /// The key path of element i of array `key`: key[i].
    std::string ElementPath(const std::string& key, std::size_t i) const;
    /// A non-empty array of whole numbers (required); an error names the element.
    std::vector<uint64_t> UIntList(const std::string& key, uint64_t min, uint64_t max) const;
    /// A non-empty array of strings from `choices` (required); an error names the element.
    std::vector<std::string> ChoiceList(const std::string& key,
                                        const std::vector<std::string>& choices) const;

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
