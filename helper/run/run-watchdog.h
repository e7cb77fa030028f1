/*
 * Watches a run from inside the simulation, one event per period: ends it when no payload
 * has been placed at any receiver for a stall interval while work is outstanding (with a
 * diagnosis: which queue pairs still wait for acknowledgements, which ports are down or
 * paused), when the wall-clock limit is reached, or when an invariant check fails. The
 * period is derived from the fabric's size only, so the events it adds, and hence the run,
 * are the same on every machine; it reads state and changes none.
 */
#ifndef METAROCE_RUN_WATCHDOG_H
#define METAROCE_RUN_WATCHDOG_H

#include "helper/fabric-helper.h"

#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/ptr.h"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace ns3
{
namespace metaroce
{

class RdmaNic;

/// How a run ended.
enum class RunEnd : uint8_t
{
    Completed, //!< the workload finished
    Duration,  //!< the scenario's duration_us ended it
    Stalled,   //!< no delivery progress for the stall interval
    WallLimit, //!< --max-wall-s
    Violation, //!< an invariant check failed
};

const char* ToString(RunEnd e);

class RunWatchdog
{
  public:
    struct Config
    {
        double stallUs{0};            //!< 0: no stall detection
        double maxWallS{0};           //!< 0: no wall-clock limit
        Time startAt;                 //!< work begins here (nothing is outstanding before)
        std::vector<Time> faultTimes; //!< a fault changing the fabric restarts the interval
    };

    /// nics: the run's NICs (empty for raw traffic: only the wall limit applies).
    RunWatchdog(const Fabric& fabric, const std::vector<Ptr<RdmaNic>>* nics, Config cfg);
    ~RunWatchdog();

    /// Schedules the first check. `end`: the run's own time limit (no check beyond it).
    void Start(Time end);
    /// The interval between checks (it depends on the fabric and the stall interval only).
    Time Period() const { return m_period; }
    /// Payload placed so far at the run's receivers.
    uint64_t Placed() const;
    /// Whether a decision stops the simulator (default). A run over several processes
    /// decides between time windows instead: one process stopping alone would wait
    /// forever for the others.
    void SetStopOnDecision(bool stop) { m_stopOnDecision = stop; }
    /// Records a decision taken outside the watchdog's own checks.
    void Decide(RunEnd end, const std::string& diagnosis)
    {
        m_decided = true;
        m_end = end;
        m_diagnosis = diagnosis;
    }
    /// Ends the run now for a failed invariant (the message names what and where).
    void Violation(const std::string& what);

    /// Whether the watchdog ended the run (a stall, the wall limit or a violation).
    bool Decided() const { return m_decided; }
    /// After Simulator::Run: how the run ended.
    RunEnd End() const { return m_decided ? m_end : RunEnd::Duration; }
    /// The diagnosis of a stall or the violation's message ("" otherwise).
    const std::string& Diagnosis() const { return m_diagnosis; }
    /// Checks run after a run: extra checks may add a violation here.
    bool Violated() const { return m_decided && m_end == RunEnd::Violation; }

    /// Checked every period while the run lasts (e.g. fabric conservation); returns a
    /// violation message or "".
    void AddPeriodicCheck(std::function<std::string()> check)
    {
        m_checks.push_back(std::move(check));
    }

    /// Per switch: frames in = out + dropped + queued, and a lossless class drops nothing.
    /// Returns the first violation found (naming the switch and the rule), or "".
    static std::string CheckSwitches(const Fabric& fabric);

    /// Text naming stuck queue pairs and down or paused ports (at most `limit` of each).
    static std::string Diagnose(const Fabric& fabric, const std::vector<Ptr<RdmaNic>>* nics,
                                std::size_t limit = 4);

  private:
    void Check();

    const Fabric& m_fabric;
    const std::vector<Ptr<RdmaNic>>* m_nics;
    Config m_cfg;
    Time m_period;
    Time m_limit;
    EventId m_event;
    uint64_t m_lastPlaced{0};
    Time m_lastProgress;
    std::size_t m_nextFault{0};
    std::chrono::steady_clock::time_point m_wallStart;
    std::vector<std::function<std::string()>> m_checks;
    RunEnd m_end{RunEnd::Duration};
    bool m_decided{false};
    bool m_stopOnDecision{true};
    std::string m_diagnosis;
};

} // namespace metaroce
} // namespace ns3

#endif
