/*
 * Progress of a long run on stderr: simulated time, events per wall second and an ETA,
 * refreshed about once a second on one line. Silent unless stderr is a terminal (or when
 * disabled), so logs and CI output stay clean.
 */
#ifndef METAROCE_PROGRESS_REPORTER_H
#define METAROCE_PROGRESS_REPORTER_H

#include "ns3/nstime.h"

#include <chrono>
#include <string>

namespace ns3
{
namespace metaroce
{

class ProgressReporter
{
  public:
    /// enabled: report at all (false for --quiet); a non-terminal stderr disables it too.
    explicit ProgressReporter(bool enabled);
    /// Starts reporting a run expected to end near simulated time `end`.
    void Start(const std::string& label, Time end);
    /// Ends the line.
    void Finish();

  private:
    void Tick();

    bool m_enabled;
    bool m_printed{false};
    std::string m_label;
    Time m_end;
    Time m_step;
    std::chrono::steady_clock::time_point m_wallStart;
    std::chrono::steady_clock::time_point m_lastPrint;
    uint64_t m_eventsStart{0};
};

} // namespace metaroce
} // namespace ns3

#endif
