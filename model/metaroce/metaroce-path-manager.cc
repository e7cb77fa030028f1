#include "metaroce-path-manager.h"

#include "model/core/fast-simulator-impl.h"

#include "ns3/log.h"

#include <cmath>
#include <deque>
#include <limits>

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("MetaRocePathManager");

void
MetaRocePathManager::Start(const Config& cfg, Owner* owner, uint64_t seed,
                           const std::vector<bool>& linkUp, int64_t* nicRtt)
{
    m_nicRtt = nicRtt;
    m_shared = Intern(cfg);
    m_owner = owner;
    m_rng.Seed(seed);
    m_planes.resize(linkUp.size());
    for (uint32_t p = 0; p < linkUp.size(); ++p)
    {
        m_planes[p].linkUp = linkUp[p];
    }
}

void
MetaRocePathManager::OpenInitialPaths()
{
    // Exact-size path table: a QP that never grows keeps no spare capacity (millions of
    // QPs). The paths opened here share one initial state (m_virginBody, and virginCc of the
    // shared configuration) until their first use.
    FreshBody(m_virginBody);
    if (!Cfg().openOnFirstUse)
    {
        m_heads.reserve(std::min(Cfg().minPaths, Cfg().maxPaths));
    }
    for (uint32_t i = 0; i < Cfg().minPaths && i < Cfg().maxPaths; ++i)
    {
        if (Cfg().openOnFirstUse)
        {
            ++m_planes[LeastPopulatedPlane()].owed; // opened by the plane's first pull
        }
        else
        {
            OpenPath(LeastPopulatedPlane(), PATH_ACTIVE, true, true);
        }
    }
}

void
MetaRocePathManager::OpenOwed(uint32_t plane, bool wake)
{
    Plane& pl = m_planes[plane];
    if (pl.owed == 0)
    {
        return;
    }
    m_heads.reserve(m_heads.size() + pl.owed); // exact-size table
    // The paths open untouched (their state is made at their first send: a one-packet
    // message touches one of its plane's twelve), with the shared initial state as of now.
    FreshBody(m_virginBody);
    while (pl.owed > 0)
    {
        --pl.owed; // first: a wake may pull this plane at once
        OpenPath(plane, PATH_ACTIVE, wake, true);
    }
}

void
MetaRocePathManager::OpenOwedPaths()
{
    for (uint32_t p = 0; p < m_planes.size(); ++p)
    {
        OpenOwed(p, true);
    }
}

bool
MetaRocePathManager::PlaneUsable(uint32_t plane) const
{
    return m_planes[plane].linkUp && !m_planes[plane].avoided;
}

uint32_t
MetaRocePathManager::LeastPopulatedPlane() const
{
    uint32_t best = 0;
    uint32_t bestCount = std::numeric_limits<uint32_t>::max();
    for (uint32_t p = 0; p < m_planes.size(); ++p)
    {
        if (!PlaneUsable(p))
        {
            continue;
        }
        uint32_t n = m_planes[p].owed;
        for (uint16_t i : m_planes[p].paths)
        {
            n += m_heads[i].state == PATH_ACTIVE ? 1 : 0;
        }
        if (n < bestCount)
        {
            best = p;
            bestCount = n;
        }
    }
    return best;
}

uint32_t
MetaRocePathManager::OpenPath(uint32_t plane, PathState state, bool wake, bool virgin,
                              PathEvent why)
{
    uint32_t slot = static_cast<uint32_t>(m_heads.size());
    for (uint32_t i = 0; i < m_heads.size(); ++i)
    {
        if (m_heads[i].state == PATH_RETIRED)
        {
            slot = i;
            break;
        }
    }
    if (slot == m_heads.size())
    {
        m_heads.emplace_back();
    }
    PathHead& hd = m_heads[slot];
    hd.epoch = static_cast<uint8_t>(hd.epoch + 1);
    hd.plane = static_cast<uint8_t>(plane);
    hd.state = state;
    // A fresh UDP source port: a new ECMP route, with its own PSN space from 0.
    hd.entropy = static_cast<uint16_t>(49152 + m_rng.Next() % 16384);
    NS_ASSERT(!virgin || state == PATH_ACTIVE);
    if (!virgin || hd.body != 0) // a reused slot's state is stale: made fresh
    {
        uint32_t d = Dense(slot);
        FreshPath(m_bodies[d], m_cc.paths[d], state);
    }
    m_planes[plane].paths.push_back(static_cast<uint16_t>(slot));
    ++m_pathsOpened;
    m_owner->PathChanged(slot, plane, why);
    if (wake)
    {
        m_owner->WakePlane(plane);
    }
    return slot;
}

// QPs whose configurations compare equal share one copy: a field added to Config must join
// its operator== (this size check is the reminder).
static_assert(sizeof(MetaRocePathManager::Config) == 80, "Config changed: update operator==");

const MetaRocePathManager::Shared*
MetaRocePathManager::Intern(const Config& cfg)
{
    // A deque keeps the addresses; a linear search: a run configures its QPs a few ways.
    static std::deque<Shared> configs;
    for (const Shared& s : configs)
    {
        if (s.cfg == cfg)
        {
            return &s;
        }
    }
    configs.push_back({cfg, InitialCc(cfg, PATH_ACTIVE)});
    return &configs.back();
}

CcPath
MetaRocePathManager::InitialCc(const Config& cfg, PathState state)
{
    CcPath c;
    c.maxCwndBytes = static_cast<double>(cfg.pathWindowCap) * cfg.mtu;
    c.cwndBytes =
        std::min(c.maxCwndBytes,
                 static_cast<double>(state == PATH_PROBING ? 1 : cfg.initialWindow) * cfg.mtu);
    return c;
}

void
MetaRocePathManager::FreshBody(SPath& p) const
{
    p.recs.Release();
    p = SPath();
    int64_t now = NowPs();
    p.lastSendPs = now;
    p.lastProgressPs = now;
    p.nextProbePs = now;
}

void
MetaRocePathManager::Materialize(PathHead& hd)
{
    // First write: the path leaves the shared initial state. Exact growth (most
    // connections touch one or two paths).
    m_bodies.reserve(m_bodies.size() + 1);
    m_cc.paths.reserve(m_cc.paths.size() + 1);
    m_bodies.push_back(m_virginBody);
    m_cc.paths.push_back(m_shared->virginCc);
    hd.body = static_cast<uint16_t>(m_bodies.size());
}

uint32_t
MetaRocePathManager::MoveInflightToRetx(uint32_t i)
{
    uint32_t n = 0;
    if (m_heads[i].body == 0)
    {
        return n; // never sent anything
    }
    SPath& p = m_bodies[m_heads[i].body - 1];
    for (uint32_t k = 0; k < p.recs.Size(); ++k)
    {
        TxRecord& r = p.recs.At(k);
        if (r.state == REC_INFLIGHT)
        {
            r.state = REC_LOST;
            if (r.msg != kProbe)
            {
                m_owner->Resend(r.msg, r.pkt);
                ++n;
            }
        }
    }
    m_cc.paths[m_heads[i].body - 1].inflightBytes = 0;
    return n;
}

void
MetaRocePathManager::RetirePath(uint32_t i, PathEvent why)
{
    PathHead& hd = m_heads[i];
    if (hd.state == PATH_RETIRED)
    {
        return;
    }
    MoveInflightToRetx(i);
    if (hd.body != 0)
    {
        m_bodies[hd.body - 1].recs.Release();
        // No window: the connection's (which the coupled increase divides by and
        // QpWindowBdps caps) is its live paths' alone.
        m_cc.paths[hd.body - 1].cwndBytes = 0;
    }
    hd.state = PATH_RETIRED;
    auto& list = m_planes[hd.plane].paths;
    list.erase(std::remove(list.begin(), list.end(), static_cast<uint16_t>(i)), list.end());
    ++Count().pathsRetired;
    m_owner->PathChanged(i, hd.plane, why);
}

int32_t
MetaRocePathManager::ProbeDue(uint32_t plane, int64_t now)
{
    int32_t probe = -1;
    for (uint16_t i : m_planes[plane].paths)
    {
        if (m_heads[i].state != PATH_PROBING)
        {
            continue;
        }
        AdvanceBase(i); // a probe that timed out is resolved: another may go
        if (Body(i).recs.Empty() && now >= Body(i).nextProbePs)
        {
            probe = i;
        }
    }
    return probe;
}

uint32_t
MetaRocePathManager::GetActivePaths() const
{
    uint32_t n = 0;
    for (const auto& p : m_heads)
    {
        n += p.state == PATH_ACTIVE ? 1 : 0;
    }
    return n;
}

uint32_t
MetaRocePathManager::GetActivePathsOnPlane(uint32_t plane) const
{
    uint32_t n = 0;
    if (plane < m_planes.size())
    {
        for (uint16_t i : m_planes[plane].paths)
        {
            n += m_heads[i].state == PATH_ACTIVE ? 1 : 0;
        }
    }
    return n;
}

// ---------------------------------------------------------------- timers and health

int64_t
MetaRocePathManager::NextDeadline() const
{
    int64_t next = std::numeric_limits<int64_t>::max();
    for (uint32_t i = 0; i < m_heads.size(); ++i)
    {
        if (m_heads[i].state != PATH_RETIRED && Cc(i).inflightBytes > 0)
        {
            next = std::min(next, Body(i).lastProgressPs + RtoPs(i));
        }
    }
    return next;
}

int64_t
MetaRocePathManager::Housekeeping(int64_t now, bool work)
{
    int64_t next = std::numeric_limits<int64_t>::max();
    uint32_t active = GetActivePaths();
    for (uint32_t i = 0; i < m_heads.size(); ++i)
    {
        // (p is not used after a call that may open paths: that may move it)
        const uint8_t state = m_heads[i].state;
        const SPath& p = Body(i);
        if (state == PATH_RETIRED)
        {
            continue;
        }
        bool outstanding =
            Cc(i).inflightBytes > 0 || (state == PATH_PROBING && !p.recs.Empty() &&
                                        p.recs.At(p.recs.Size() - 1).state == REC_INFLIGHT);
        if (outstanding)
        {
            int64_t deadline = p.lastProgressPs + RtoPs(i);
            if (now >= deadline)
            {
                PathTimeout(i, now);
                if (m_heads[i].state != PATH_RETIRED)
                {
                    next = std::min(next, now + RtoPs(i));
                }
            }
            else
            {
                next = std::min(next, deadline);
                if (Cfg().nicRttForRto && Cc(i).srttPs == 0 && m_qpSrttPs == 0)
                {
                    next = std::min(next, now + TimerPs(i)); // the NIC may learn an RTT
                }
            }
        }
        else if (state == PATH_ACTIVE && active > Cfg().minPaths)
        {
            int64_t idleAt = p.lastSendPs + Cfg().idleTimeoutPs;
            if (now >= idleAt)
            {
                RetirePath(i, PathEvent::ClosedIdle);
                --active;
                ++Count().pathsClosedIdle;
            }
            else if (work)
            {
                next = std::min(next, idleAt);
            }
        }
        else if (state == PATH_PROBING && work)
        {
            if (now >= p.nextProbePs)
            {
                m_owner->WakePlane(m_heads[i].plane);
                next = std::min(next, now + Cfg().probeIntervalPs);
            }
            else
            {
                next = std::min(next, p.nextProbePs);
            }
        }
        else if (state == PATH_DRAINING)
        {
            RetirePath(i);
        }
    }
    return next;
}

void
MetaRocePathManager::PathTimeout(uint32_t i, int64_t now)
{
    uint32_t d = Dense(i);
    SPath& p = m_bodies[d];
    const bool probing = m_heads[i].state == PATH_PROBING;
    Count().lossesTimeout += MoveInflightToRetx(i);
    p.lastProgressPs = now;
    m_owner->PathChanged(i, m_heads[i].plane, PathEvent::TimedOut);
    m_owner->PathTimedOut(d, probing);
    if (probing)
    {
        return; // the plane is still silent: probe again at the next interval
    }
    PathSilent(i, now);
}

void
MetaRocePathManager::PathSilent(uint32_t i, int64_t now)
{
    SPath& p = m_bodies[Dense(i)];
    const bool guessed = RtoGuessed(i);
    ++p.consecutiveTimeouts;
    if (!guessed && p.consecutiveTimeouts >= Cfg().pathFailTimeouts)
    {
        uint32_t plane = m_heads[i].plane;
        Plane& pl = m_planes[plane];
        if (pl.retiredInRow < std::numeric_limits<uint16_t>::max())
        {
            ++pl.retiredInRow;
        }
        RetirePath(i);
        if (pl.retiredInRow >= Cfg().planeFailPaths && !pl.avoided)
        {
            AvoidPlane(plane, now);
        }
        else
        {
            OpenPath(plane); // new entropy: maybe a working route in the same plane
        }
    }
    m_owner->WakeAllPlanes();
}

uint32_t
MetaRocePathManager::LeavePlane(uint32_t plane, int64_t now)
{
    ++Count().planeFailovers;
    Count().lastPlaneAvoidedPs = now;
    if (Count().firstPlaneAvoidedPs < 0)
    {
        Count().firstPlaneAvoidedPs = now;
    }
    m_owner->PlaneStateChanged(plane, false);
    Plane& pl = m_planes[plane];
    uint32_t lost = pl.owed; // paths owed here open on the other planes instead
    pl.owed = 0;
    OpenOwedPaths();
    for (uint16_t i : std::vector<uint16_t>(pl.paths.begin(), pl.paths.end()))
    {
        lost += m_heads[i].state == PATH_ACTIVE ? 1 : 0;
        RetirePath(i);
    }
    return lost;
}

void
MetaRocePathManager::AvoidPlane(uint32_t plane, int64_t now)
{
    Plane& pl = m_planes[plane];
    pl.avoided = true;
    uint32_t lost = LeavePlane(plane, now);
    // Keep the connection's path count: replacements go to the usable planes.
    bool any = false;
    for (uint32_t p = 0; p < m_planes.size(); ++p)
    {
        any = any || PlaneUsable(p);
    }
    for (uint32_t k = 0; k < std::max(lost, 1u) && any; ++k)
    {
        OpenPath(LeastPopulatedPlane());
    }
    if (pl.linkUp)
    {
        uint32_t probe = OpenPath(plane, PATH_PROBING);
        m_bodies[Dense(probe)].nextProbePs = now + Cfg().probeIntervalPs;
        m_owner->ArmTimerAt(now + Cfg().probeIntervalPs);
    }
    m_owner->WakeAllPlanes();
}

void
MetaRocePathManager::PlaneUsable(uint32_t plane, int64_t now)
{
    Plane& pl = m_planes[plane];
    pl.avoided = false;
    pl.retiredInRow = 0;
    ++Count().planeRecoveries;
    Count().lastPlaneRecoveredPs = now;
    m_owner->PlaneStateChanged(plane, true);
    for (uint16_t i : pl.paths)
    {
        if (m_heads[i].state == PATH_PROBING)
        {
            m_heads[i].state = PATH_ACTIVE;
            m_cc.paths[Dense(i)].cwndBytes = static_cast<double>(Cfg().initialWindow) * Cfg().mtu;
        }
    }
    Rebalance();
    m_owner->WakeAllPlanes();
}

void
MetaRocePathManager::Rebalance()
{
    // Even spread over the usable planes: open paths on planes below the mean and let the
    // surplus of the others drain (no data is cut off in flight).
    OpenOwedPaths();
    uint32_t usable = 0;
    uint32_t total = 0;
    for (uint32_t p = 0; p < m_planes.size(); ++p)
    {
        if (PlaneUsable(p))
        {
            ++usable;
            total += GetActivePathsOnPlane(p);
        }
    }
    if (usable == 0)
    {
        return;
    }
    total = std::max(total, Cfg().minPaths);
    uint32_t floorShare = total / usable;
    for (uint32_t p = 0; p < m_planes.size(); ++p)
    {
        while (PlaneUsable(p) && GetActivePathsOnPlane(p) < floorShare)
        {
            OpenPath(p);
        }
    }
    for (uint32_t p = 0; p < m_planes.size(); ++p)
    {
        uint32_t have = GetActivePathsOnPlane(p);
        for (uint16_t i : m_planes[p].paths)
        {
            if (have <= floorShare + 1 || GetActivePaths() <= total)
            {
                break;
            }
            if (m_heads[i].state == PATH_ACTIVE)
            {
                m_heads[i].state = PATH_DRAINING;
                --have;
            }
        }
    }
    m_owner->ArmTimerAt(NowPs() + Cfg().rtoMinPs);
}

void
MetaRocePathManager::PortState(uint32_t plane, bool up, int64_t now)
{
    Plane& pl = m_planes[plane];
    if (!up)
    {
        // The NIC sees its own link fail: no need to wait for timeouts.
        pl.linkUp = false;
        uint32_t lost = LeavePlane(plane, now);
        for (uint32_t k = 0; k < lost; ++k)
        {
            OpenPath(LeastPopulatedPlane());
        }
        m_owner->WakeAllPlanes();
    }
    else
    {
        pl.linkUp = true;
        PlaneUsable(plane, now);
    }
}

void
MetaRocePathManager::MaybeGrow(int64_t now)
{
    if (!Cfg().growPaths || !m_windowLimited)
    {
        return;
    }
    uint32_t active = GetActivePaths();
    if (active >= Cfg().maxPaths || now - m_lastGrowPs < m_qpSrttPs)
    {
        return;
    }
    if (m_lastEcnPs >= 0 && now - m_lastEcnPs < m_qpSrttPs)
    {
        return; // the network pushes back: more paths would only add aggression
    }
    double cap = static_cast<double>(Cfg().pathWindowCap) * Cfg().mtu;
    for (uint32_t i = 0; i < m_heads.size(); ++i)
    {
        if (m_heads[i].state == PATH_ACTIVE && Cc(i).cwndBytes < 0.9 * cap)
        {
            return; // some path can still grow its own window
        }
    }
    // Every window is at its cap: open as many paths as the bandwidth-delay product of the
    // QP's rate needs (QWND / per-path cap), within MaxPaths.
    double bdp = m_cc.rateBps / 8e12 * static_cast<double>(m_qpMinRttPs); // base RTT
    uint32_t target = static_cast<uint32_t>(std::ceil(bdp / cap));
    target = std::min(target, Cfg().maxPaths);
    OpenOwedPaths();
    for (uint32_t k = active; k < target; ++k)
    {
        OpenPath(LeastPopulatedPlane(), PATH_ACTIVE, true, false, PathEvent::Grown);
        ++Count().pathsGrown;
    }
    m_lastGrowPs = now;
    m_windowLimited = false;
}

} // namespace metaroce
} // namespace ns3
