/*
 * Results: a JSON document (schema version, one record per run) and its CSV twin (one row
 * per run, metrics and counters), written only once every run has finished and each through
 * a temporary file and a rename, so a failed run never leaves half a file. The CSV and the
 * JSON without its "cost" blocks are byte-identical for the same scenario and seed.
 */
#ifndef METAROCE_RESULTS_WRITER_H
#define METAROCE_RESULTS_WRITER_H

#include "helper/scenario/run-record.h"

#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace ns3
{
namespace metaroce
{

constexpr int kResultsSchemaVersion = 1;

nlohmann::json ResultsJson(const std::string& scenario, const std::vector<RunRecord>& runs);
std::string ResultsCsv(const std::vector<RunRecord>& runs);
/// Time series of all runs as CSV (variant, time_us, goodput_gbps); empty if none.
std::string TimeseriesCsv(const std::vector<RunRecord>& runs);
/// Per-flow completion times of all runs as CSV (variant, src, dst, bytes, fct_us).
std::string FlowsCsv(const std::vector<RunRecord>& runs);
/// The first MetaRoCE QP's per-path windows over time, as CSV; empty if none.
std::string PathsCsv(const std::vector<RunRecord>& runs);

/**
 * The files one run writes: FILE.json and, beside it, FILE.csv and optional companions
 * (FILE-paths.csv, ...). Check() proves before anything is simulated that every one of them
 * can be written: it refuses (InputError) a path that exists and is not a regular file (a
 * folder, a device, a symbolic link: never replaced or written through), a folder that is
 * missing or in which no file can be created, and a name too long to hold a temporary
 * beside it. Commit() writes every file to a temporary in its folder (created exclusively,
 * so nothing that exists is opened) and only then renames them all into place: a run
 * leaves all of its files or none.
 */
class OutputFiles
{
  public:
    /// jsonPath: the --out argument; "" writes nothing.
    explicit OutputFiles(std::string jsonPath);
    /// Takes back the temporaries of streamed files never committed (a run that failed).
    ~OutputFiles();
    OutputFiles(const OutputFiles&) = delete;
    OutputFiles& operator=(const OutputFiles&) = delete;
    OutputFiles& operator=(OutputFiles&& o) noexcept;
    const std::string& JsonPath() const { return m_json; }
    /// FILE.csv for FILE.json (FILE.csv beside any other name); suffix "-paths" etc.
    std::string CsvPath(const std::string& suffix = "") const;
    /// Throws InputError naming the option and the reason if any output cannot be written.
    void Check() const;
    /// Queues text for path (one of this set's paths); empty text writes no file.
    void Add(const std::string& path, std::string text);
    /// A file a writer streams during the run (pcap): checked with the others by Check(),
    /// written to the temporary Open() makes, put in place by Commit(). `option` names it
    /// in errors. A path given twice is an InputError.
    void AddStreamed(const std::string& path, const std::string& option);
    /// Creates the temporary beside a streamed path (after Check()); returns its name.
    std::string Open(const std::string& path);
    /// Writes every queued file (temporaries, then renames); throws std::runtime_error.
    void Commit();

  private:
    struct Streamed
    {
        std::string path;
        std::string option;
        std::string temp;
    };

    std::vector<std::string> AllPaths() const;
    /// The checks of one output path (refused with option's name); its folder is proven
    /// writable once, then noted in `probed`.
    static void CheckPath(const std::string& path, const std::string& option,
                          std::set<std::string>& probed);
    std::string m_json;
    std::vector<std::pair<std::string, std::string>> m_files;
    std::vector<Streamed> m_streamed;
};
/// Prints the records as an aligned table of the chosen columns (metrics or counters).
void PrintTable(std::ostream& os, const std::vector<RunRecord>& runs,
                const std::vector<std::string>& columns);

} // namespace metaroce
} // namespace ns3

#endif
