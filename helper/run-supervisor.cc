#include "run-supervisor.h"

#include "memory-estimate.h"

#include "ns3/simulator.h"

#include <algorithm>
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
