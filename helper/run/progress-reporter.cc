#include "helper/run/progress-reporter.h"

#include "ns3/simulator.h"

#include <cstdio>
#include <unistd.h>

namespace ns3
{
namespace metaroce
{

ProgressReporter::ProgressReporter(bool enabled)
    : m_enabled(enabled && isatty(STDERR_FILENO) == 1)
{
}

void
ProgressReporter::Start(const std::string& label, Time end)
{
    if (!m_enabled)
    {
        return;
    }
    m_label = label;
    m_end = end;
    // Check the wall clock 500 times over the run: cheap, and often enough to print each second.
    m_step = end.IsStrictlyPositive() ? end / 500 : MicroSeconds(1);
    if (!m_step.IsStrictlyPositive())
    {
        m_step = PicoSeconds(1);
    }
    m_wallStart = m_lastPrint = std::chrono::steady_clock::now();
    m_eventsStart = Simulator::GetEventCount();
    Simulator::Schedule(m_step, &ProgressReporter::Tick, this);
}

void
ProgressReporter::Tick()
{
    auto now = std::chrono::steady_clock::now();
    if (now - m_lastPrint >= std::chrono::seconds(1))
    {
        m_lastPrint = now;
        double wall = std::chrono::duration<double>(now - m_wallStart).count();
        double sim = Simulator::Now().GetSeconds();
        double end = m_end.GetSeconds();
        double evs = (Simulator::GetEventCount() - m_eventsStart) / std::max(wall, 1e-9);
        double eta = sim > 0 ? wall * (end - sim) / sim : 0;
        std::fprintf(stderr, "\r%s: sim %.1f/%.1f us, %.2f M events/s, ETA %.0f s   ",
                     m_label.c_str(), sim * 1e6, end * 1e6, evs / 1e6, std::max(eta, 0.0));
        m_printed = true;
    }
    if (Simulator::Now() + m_step <= m_end)
    {
        Simulator::Schedule(m_step, &ProgressReporter::Tick, this);
    }
}

void
ProgressReporter::Finish()
{
    if (m_printed)
    {
        std::fprintf(stderr, "\n");
        m_printed = false;
    }
}

} // namespace metaroce
} // namespace ns3
