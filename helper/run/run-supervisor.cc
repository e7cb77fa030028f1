#include "helper/run/run-supervisor.h"

#include "helper/mpi/distributed-run.h"
#include "helper/scenario/memory-estimate.h"

#include "ns3/simulator.h"

#include <algorithm>
#include <chrono>
#include <sstream>

namespace ns3
{
namespace metaroce
{

RunSupervisor::RunSupervisor(const RunSpec& spec, const Fabric& fabric,
                             const std::vector<Ptr<RdmaNic>>* nics, Time start)
    : m_spec(spec)
    , m_fabric(fabric)
    , m_nics(nics)
    , m_dog(fabric, nics, Config(spec, nics, start))
{
    if (spec.checkInvariants)
    {
        if (nics != nullptr)
        {
            for (const auto& nic : *nics)
            {
                nic->TraceConnectWithoutContext("InvariantViolation",
                                                MakeCallback(&RunSupervisor::OnViolation, this));
            }
        }
        m_dog.AddPeriodicCheck([this]() { return RunWatchdog::CheckSwitches(m_fabric); });
    }
}

RunSupervisor::~RunSupervisor()
{
    if (m_spec.checkInvariants && m_nics != nullptr)
    {
        for (const auto& nic : *m_nics)
        {
            nic->TraceDisconnectWithoutContext("InvariantViolation",
                                               MakeCallback(&RunSupervisor::OnViolation, this));
        }
    }
}

RunEnd
RunSupervisor::Run(ProgressReporter& progress, Time limit, const std::function<bool()>& done,
                   bool hardLimit)
{
    if (DistributedRun* d = SeveralProcesses(); d != nullptr && m_nics != nullptr)
    {
        return RunWindows(*d, progress, limit, done);
    }
    m_dog.Start(limit);
    progress.Start(m_spec.scenario + "/" + m_spec.variant, limit);
    if (hardLimit)
    {
        Simulator::Stop(limit - Simulator::Now());
    }
    SetRunPhase("simulating");
    Simulator::Run();
    progress.Finish();
    ThrowIfViolated();
    if (m_spec.checkInvariants)
    {
        Fail(RunWatchdog::CheckSwitches(m_fabric));
    }
    // The watchdog's verdict (a stall, the wall limit) stands even if the workload would
    // count as done by its own test.
    m_end = m_dog.Decided() ? m_dog.End() : done() ? RunEnd::Completed : RunEnd::Duration;
    m_diagnosis = m_dog.Diagnosis();
    if (m_end == RunEnd::Duration && Simulator::Now() < limit)
    {
        // Nothing left to happen, yet the work is not done.
        m_end = RunEnd::Stalled;
        m_diagnosis = "no event left to simulate at " +
                      std::to_string(Simulator::Now().GetNanoSeconds() / 1e3) + " us; " +
                      RunWatchdog::Diagnose(m_fabric, m_nics);
    }
    return m_end;
}

RunEnd
RunSupervisor::RunWindows(DistributedRun& d, ProgressReporter& progress, Time limit,
                          const std::function<bool()>& done)
{
    // No process can end the run alone: the work is done when every process's part is, and
    // a process stopped by itself would hold the others' time back for good. So the
    // processes run in windows of the watchdog's period, all stopping at the same simulated
    // time, and decide together between windows (done, stalled, over the wall limit, or an
    // invariant broken anywhere). A run thus ends at the first window boundary after the
    // work ends, not at that instant (results/distributed.md).
    m_dog.SetStopOnDecision(false);
    progress.Start(m_spec.scenario + "/" + m_spec.variant, limit);
    SetRunPhase("simulating");
    const auto wall0 = std::chrono::steady_clock::now();
    const Time period = m_dog.Period();
    const Time start = Simulator::Now();
    const RunWatchdog::Config cfg = Config(m_spec, m_nics, start);
    Time lastProgress = cfg.startAt;
    uint64_t lastPlaced = 0;
    std::size_t nextFault = 0;
    uint64_t window = 0;
    while (true)
    {
        ++window;
        const Time until = std::min(start + period * static_cast<int64_t>(window), limit);
        Simulator::Stop(until - Simulator::Now());
        Simulator::Run();
        if (m_between)
        {
            m_between(d);
        }
        const Time now = Simulator::Now();
        std::string broken;
        if (!m_dog.Violated() && m_spec.checkInvariants)
        {
            broken = RunWatchdog::CheckSwitches(m_fabric);
            if (!broken.empty())
            {
                m_dog.Violation(broken);
            }
        }
        const double wallS =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
        std::vector<uint64_t> sums{done() ? 0u : 1u, m_dog.Placed(), m_dog.Violated() ? 1u : 0u,
                                   m_spec.maxWallS > 0 && wallS >= m_spec.maxWallS ? 1u : 0u};
        d.Sum(sums);
        if (sums[2] > 0)
        {
            progress.Finish();
            if (!m_dog.Violated())
            {
                m_dog.Violation("an invariant was broken on another process");
            }
            ThrowIfViolated();
        }
        if (sums[0] == 0)
        {
            m_end = RunEnd::Completed;
            break;
        }
        if (sums[3] > 0)
        {
            m_end = RunEnd::WallLimit;
            m_diagnosis = RunWatchdog::Diagnose(m_fabric, m_nics);
            break;
        }
        if (cfg.stallUs > 0 && now > cfg.startAt)
        {
            // The watchdog's rule on the payload placed anywhere.
            while (nextFault < cfg.faultTimes.size() && cfg.faultTimes[nextFault] <= now)
            {
                lastProgress = std::max(lastProgress, cfg.faultTimes[nextFault++]);
            }
            if (sums[1] != lastPlaced)
            {
                lastPlaced = sums[1];
                lastProgress = now;
            }
            else if ((now - lastProgress).GetPicoSeconds() >=
                     static_cast<int64_t>(cfg.stallUs * 1e6))
            {
                std::ostringstream os;
                os << "no payload placed at any receiver from "
                   << lastProgress.GetNanoSeconds() / 1e3 << " us to " << now.GetNanoSeconds() / 1e3
                   << " us (stall_us " << cfg.stallUs << "); "
                   << RunWatchdog::Diagnose(m_fabric, m_nics);
                m_end = RunEnd::Stalled;
                m_diagnosis = os.str();
                break;
            }
        }
        if (now >= limit)
        {
            m_end = RunEnd::Duration;
            break;
        }
    }
    m_dog.Decide(m_end, m_diagnosis);
    progress.Finish();
    return m_end;
}

void
RunSupervisor::Finish(RunRecord& rec, const std::string& left)
{
    rec.metrics["ended_by"] = ToString(m_end);
    rec.expectUnfinished = m_spec.expectUnfinished;
    if (m_end != RunEnd::Completed)
    {
        rec.unfinished = left + "; ended by " + ToString(m_end) +
                         (m_diagnosis.empty() ? "" : ": " + m_diagnosis);
    }
    Drain();
}

void
RunSupervisor::Drain()
{
    if (!m_spec.checkInvariants || m_nics == nullptr || m_end != RunEnd::Completed)
    {
        return;
    }

    // Acknowledgements lost to a fault arrive only after the fault ends and a timeout
    // resends: the interval counts from the last fault's end. A fault in force to the end
    // (a link down, a lossy link) may keep them from ever arriving, or let each resend
    // fail again: then the rule is not asserted (the drain still runs).
    double lastChangeUs = 0;
    bool lasting = false;
    for (const auto& f : m_spec.faults)
    {
        if (f.kind == "loss" && f.rate <= 0)
        {
            continue;
        }
        lasting = lasting || f.untilUs < 0;
        lastChangeUs = std::max({lastChangeUs, f.atUs, f.untilUs});
    }
    const Time completed = Simulator::Now();
    const Time until = std::max(completed, MicroSeconds(1) * lastChangeUs) +
                       MicroSeconds(1) * (m_spec.stallUs > 0 ? m_spec.stallUs : 10000);
    const Time step = MicroSeconds(1);
    if (DistributedRun* d = SeveralProcesses())
    {
        DrainWindows(*d, completed, until, step, lasting);
        return;
    }
    std::function<void()> poll = [&]()
    {
        if (Unacknowledged() == 0)
        {
            Simulator::Stop();
            return;
        }
        if (Simulator::Now() + step < until)
        {
            Simulator::Schedule(step, poll);
        }
    };
    Simulator::Schedule(step, poll);
    // The run's own limit may still stop the simulator on the way: go on until drained.
    while (Unacknowledged() > 0 && Simulator::Now() < until)
    {
        Simulator::Stop(until - Simulator::Now());
        Simulator::Run();
        ThrowIfViolated();
    }
    if (Unacknowledged() > 0 && !lasting)
    {
        Fail("a completed run ends with messages unacknowledged " +
             std::to_string((Simulator::Now() - completed).GetMicroSeconds()) +
             " us after the workload completed (rule: every QP ends with nothing "
             "unacknowledged): " +
             RunWatchdog::Diagnose(m_fabric, m_nics));
    }
    uint64_t posted = 0;
    uint64_t placed = 0;
    for (const auto& nic : *m_nics)
    {
        posted += nic->GetPostedBytes();
        placed += nic->GetPlacedBytes();
    }
    if (posted != placed)
    {
        Fail(std::to_string(posted) + " bytes posted, " + std::to_string(placed) +
             " placed (rule: every posted byte delivered exactly once)");
    }
    Fail(RunWatchdog::CheckSwitches(m_fabric));
}

void
RunSupervisor::DrainWindows(DistributedRun& d, Time completed, Time until, Time step, bool lasting)
{
    // Drain's rule with the processes deciding together, a window per polling step.
    std::vector<uint64_t> left{Unacknowledged()};
    d.Sum(left);
    while (left[0] > 0 && Simulator::Now() < until)
    {
        Simulator::Stop(std::min(step, until - Simulator::Now()));
        Simulator::Run();
        if (m_between)
        {
            m_between(d);
        }
        left = {Unacknowledged(), m_dog.Violated() ? 1u : 0u};
        d.Sum(left);
        if (left[1] > 0)
        {
            if (!m_dog.Violated())
            {
                m_dog.Violation("an invariant was broken on another process");
            }
            ThrowIfViolated();
        }
    }
    if (left[0] > 0 && !lasting)
    {
        Fail("a completed run ends with messages unacknowledged " +
             std::to_string((Simulator::Now() - completed).GetMicroSeconds()) +
             " us after the workload completed (rule: every QP ends with nothing "
             "unacknowledged): " +
             RunWatchdog::Diagnose(m_fabric, m_nics));
    }
    std::vector<uint64_t> bytes{0, 0};
    for (const auto& nic : *m_nics)
    {
        bytes[0] += nic->GetPostedBytes();
        bytes[1] += nic->GetPlacedBytes();
    }
    d.Sum(bytes);
    std::string broken = RunWatchdog::CheckSwitches(m_fabric);
    std::vector<uint64_t> anyBroken{broken.empty() ? 0u : 1u};
    d.Sum(anyBroken);
    if (bytes[0] != bytes[1])
    {
        Fail(std::to_string(bytes[0]) + " bytes posted, " + std::to_string(bytes[1]) +
             " placed (rule: every posted byte delivered exactly once)");
    }
    if (anyBroken[0] > 0)
    {
        Fail(broken.empty() ? "a switch on another process broke its conservation rule" : broken);
    }
}

RunWatchdog::Config
RunSupervisor::Config(const RunSpec& spec, const std::vector<Ptr<RdmaNic>>* nics, Time start)
{
    RunWatchdog::Config c;
    c.stallUs = nics != nullptr ? spec.stallUs : 0;
    c.maxWallS = spec.maxWallS;
    c.startAt = start;
    for (const auto& f : spec.faults)
    {
        c.faultTimes.push_back(MicroSeconds(1) * f.atUs);
        if (f.untilUs >= 0)
        {
            c.faultTimes.push_back(MicroSeconds(1) * f.untilUs);
        }
    }
    return c;
}

uint64_t
RunSupervisor::Unacknowledged() const
{
    uint64_t n = 0;
    for (const auto& nic : *m_nics)
    {
        for (uint32_t q = 1; q <= nic->GetNQueuePairs(); ++q)
        {
            Ptr<QueuePair> qp = nic->GetQueuePair(q);
            n += qp ? qp->GetPendingSends() : 0;
        }
    }
    return n;
}

void
RunSupervisor::ThrowIfViolated() const
{
    if (m_dog.Violated())
    {
        throw InvariantViolation(m_spec.scenario + "/" + m_spec.variant + ": " + m_dog.Diagnosis());
    }
}

void
RunSupervisor::Fail(const std::string& what) const
{
    if (!what.empty())
    {
        std::ostringstream os;
        os << m_spec.scenario << "/" << m_spec.variant << ": at "
           << Simulator::Now().GetNanoSeconds() / 1e3 << " us: " << what;
        throw InvariantViolation(os.str());
    }
}

} // namespace metaroce
} // namespace ns3
