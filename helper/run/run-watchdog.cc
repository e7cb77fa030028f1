#include "helper/run/run-watchdog.h"

#include "model/transport/rdma-nic.h"

#include "ns3/log.h"
#include "ns3/simulator.h"

#include <algorithm>
#include <sstream>

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("RunWatchdog");

const char*
ToString(RunEnd e)
{
    switch (e)
    {
        case RunEnd::Completed:
            return "completed";
        case RunEnd::Duration:
            return "duration_us";
        case RunEnd::Stalled:
            return "stalled";
        case RunEnd::WallLimit:
            return "max_wall_s";
        case RunEnd::Violation:
            return "invariant_violation";
    }
    return "?";
}

RunWatchdog::RunWatchdog(const Fabric& fabric, const std::vector<Ptr<RdmaNic>>* nics, Config cfg)
    : m_fabric(fabric)
    , m_nics(nics)
    , m_cfg(std::move(cfg))
{
    std::sort(m_cfg.faultTimes.begin(), m_cfg.faultTimes.end());
    // One check costs a pass over the NICs; a simulated microsecond of a large fabric costs
    // far more wall time than of a small one. ~6,400 NIC-microseconds a period keeps checks
    // a fraction of a percent of the events at every size and the wall limit within about
    // a second of wall time; it depends on the fabric only, so runs stay reproducible.
    double us = 6400.0 / std::max<uint32_t>(1, fabric.NumNics());
    us = std::min(std::max(us, 1.0), 1000.0);
    if (m_cfg.stallUs > 0)
    {
        us = std::min(us, m_cfg.stallUs / 4);
    }
    m_period = MicroSeconds(1) * us;
}

RunWatchdog::~RunWatchdog()
{
    m_event.Cancel();
}

void
RunWatchdog::Start(Time end)
{
    m_limit = end;
    m_wallStart = std::chrono::steady_clock::now();
    m_lastProgress = m_cfg.startAt;
    if (m_cfg.stallUs > 0 || m_cfg.maxWallS > 0 || !m_checks.empty())
    {
        m_event = Simulator::Schedule(m_period, &RunWatchdog::Check, this);
    }
}

uint64_t
RunWatchdog::Placed() const
{
    uint64_t sum = 0;
    if (m_nics != nullptr)
    {
        for (const auto& nic : *m_nics)
        {
            sum += nic->GetPlacedBytes();
        }
    }
    return sum;
}

void
RunWatchdog::Violation(const std::string& what)
{
    if (m_decided)
    {
        return;
    }
    m_decided = true;
    m_end = RunEnd::Violation;
    std::ostringstream os;
    os << "at " << Simulator::Now().GetNanoSeconds() / 1e3 << " us: " << what;
    m_diagnosis = os.str();
    if (m_stopOnDecision)
    {
        Simulator::Stop();
    }
}

void
RunWatchdog::Check()
{
    const Time now = Simulator::Now();
    for (const auto& check : m_checks)
    {
        std::string v = check();
        if (!v.empty())
        {
            Violation(v);
            return;
        }
    }
    if (m_cfg.maxWallS > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - m_wallStart).count() >=
            m_cfg.maxWallS)
    {
        m_decided = true;
        m_end = RunEnd::WallLimit;
        m_diagnosis = Diagnose(m_fabric, m_nics);
        Simulator::Stop();
        return;
    }
    if (m_cfg.stallUs > 0 && m_nics != nullptr && now > m_cfg.startAt)
    {
        uint64_t placed = Placed();
        // A fault changing the fabric (a link coming back) may be what the run waits for.
        while (m_nextFault < m_cfg.faultTimes.size() && m_cfg.faultTimes[m_nextFault] <= now)
        {
            m_lastProgress = std::max(m_lastProgress, m_cfg.faultTimes[m_nextFault++]);
        }
        if (placed != m_lastPlaced)
        {
            m_lastPlaced = placed;
            m_lastProgress = now;
        }
        else if ((now - m_lastProgress).GetPicoSeconds() >=
                 static_cast<int64_t>(m_cfg.stallUs * 1e6))
        {
            m_decided = true;
            m_end = RunEnd::Stalled;
            std::ostringstream os;
            os << "no payload placed at any receiver from " << m_lastProgress.GetNanoSeconds() / 1e3
               << " us to " << now.GetNanoSeconds() / 1e3 << " us (stall_us " << m_cfg.stallUs
               << "); " << Diagnose(m_fabric, m_nics);
            m_diagnosis = os.str();
            NS_LOG_WARN(m_diagnosis);
            Simulator::Stop();
            return;
        }
    }
    if (now + m_period <= m_limit)
    {
        m_event = Simulator::Schedule(m_period, &RunWatchdog::Check, this);
    }
}

namespace
{
std::string
PortName(FabricNetDevice* dev)
{
    std::ostringstream os;
    Ptr<Node> node = dev->GetNode();
    if (auto sw = DynamicCast<FabricSwitch>(node))
    {
        const SwitchCoord& c = sw->GetCoord();
        os << "switch (site " << c.site << ", plane " << c.plane << ", tier "
           << static_cast<uint32_t>(c.tier) << ", index " << c.index << ") port "
           << dev->GetIfIndex();
    }
    else
    {
        os << "NIC " << node->GetId() << " port " << dev->GetIfIndex();
    }
    return os.str();
}
} // namespace

std::string
RunWatchdog::Diagnose(const Fabric& fabric, const std::vector<Ptr<RdmaNic>>* nics,
                      std::size_t limit)
{
    std::ostringstream os;
    std::size_t stuck = 0;
    std::ostringstream qps;
    if (nics != nullptr)
    {
        for (const auto& nic : *nics)
        {
            for (uint32_t q = 1; q <= nic->GetNQueuePairs(); ++q)
            {
                Ptr<QueuePair> qp = nic->GetQueuePair(q);
                if (!qp || qp->GetPendingSends() == 0)
                {
                    continue;
                }
                if (stuck++ < limit)
                {
                    qps << (stuck > 1 ? "; " : "") << "NIC " << nic->GetNicId() << " QP " << q
                        << " -> NIC " << qp->GetRemoteNic() << " QP " << qp->GetRemoteQpn() << ": "
                        << qp->GetPendingSends() << " message(s) unacknowledged";
                }
            }
        }
    }
    os << stuck << " queue pair(s) with messages unacknowledged";
    if (stuck > 0)
    {
        os << " (" << qps.str() << (stuck > limit ? "; ..." : "") << ")";
    }
    std::size_t down = 0;
    std::size_t paused = 0;
    std::ostringstream downs;
    std::ostringstream pauses;
    for (const auto& link : fabric.Links())
    {
        for (std::size_t d = 0; d < 2; ++d)
        {
            auto* dev = static_cast<FabricNetDevice*>(PeekPointer(link->GetDevice(d)));
            if (!dev->IsLinkUp())
            {
                if (down++ < limit)
                {
                    downs << (down > 1 ? "; " : "") << PortName(dev);
                }
                continue;
            }
            for (uint8_t tc = 0; tc < 8; ++tc)
            {
                if (dev->IsPaused(tc))
                {
                    if (paused++ < limit)
                    {
                        pauses << (paused > 1 ? "; " : "") << PortName(dev) << " (class "
                               << static_cast<uint32_t>(tc) << ")";
                    }
                    break;
                }
            }
        }
    }
    os << "; " << down << " port(s) down";
    if (down > 0)
    {
        os << " (" << downs.str() << (down > limit ? "; ..." : "") << ")";
    }
    os << "; " << paused << " port(s) paused by PFC";
    if (paused > 0)
    {
        os << " (" << pauses.str() << (paused > limit ? "; ..." : "") << ")";
    }
    return os.str();
}

std::string
RunWatchdog::CheckSwitches(const Fabric& fabric)
{
    for (const auto& sw : fabric.Switches())
    {
        uint64_t in = 0;
        uint64_t out = 0;
        uint64_t dropped = 0;
        uint64_t queued = 0;
        for (uint32_t i = 0; i < sw->GetNPorts(); ++i)
        {
            FabricNetDevice* port = sw->GetPort(i);
            auto c = port->GetCounters();
            in += c.rxPackets;
            out += c.txPackets;
            dropped += c.dropLinkDown - c.dropLinkDownRx; // sent towards a down link
            queued += port->GetQueuePackets();
        }
        auto c = sw->GetCounters();
        dropped += c.dropBuffer + c.dropNoRoute;
        if (in == out + dropped + queued && c.dropLossless == 0)
        {
            continue; // the common case: no text built
        }
        const SwitchCoord& at = sw->GetCoord();
        std::ostringstream name;
        name << "switch (site " << at.site << ", plane " << at.plane << ", tier "
             << static_cast<uint32_t>(at.tier) << ", index " << at.index << ")";
        if (in != out + dropped + queued)
        {
            return name.str() + ": " + std::to_string(in) + " frames in, " + std::to_string(out) +
                   " out, " + std::to_string(dropped) + " dropped, " + std::to_string(queued) +
                   " queued (rule: in = out + dropped + queued)";
        }
        if (c.dropLossless > 0)
        {
            return name.str() + ": dropped " + std::to_string(c.dropLossless) +
                   " frames of its lossless class (rule: a lossless fabric drops nothing; "
                   "PFC headroom exhausted)";
        }
    }
    return "";
}

} // namespace metaroce
} // namespace ns3
