#include "metaroce-aimd.h"

#include "model/core/fast-simulator-impl.h"

#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/enum.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{
namespace metaroce
{

NS_OBJECT_ENSURE_REGISTERED(MetaRoceAimd);

TypeId
MetaRoceAimd::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::MetaRoceAimd")
            .SetParent<RdmaCongestionOps>()
            .SetGroupName("MetaRoce")
            .AddConstructor<MetaRoceAimd>()
            .AddAttribute("AdditiveIncrease",
                          "Packets added to a path's window per RTT without ECN. Assumption: 1.",
                          DoubleValue(1.0), MakeDoubleAccessor(&MetaRoceAimd::m_ai),
                          MakeDoubleChecker<double>(0.0, 1024))
            .AddAttribute("IncreaseBdpFraction",
                          "With IncreaseCoupling connection, the connection's additive increase "
                          "per RTT is at least this fraction of its bandwidth-delay product "
                          "(line rate x smallest RTT seen); 0: AdditiveIncrease packets only. "
                          "Assumption: 0.2 (the talk names additive increase but not its size; "
                          "a fixed packet count makes a fast connection's recovery from a cut "
                          "take hundreds of RTTs, a rate-scaled step is what NSCC and "
                          "high-speed TCP variants use; results/fidelity.md F6: with and without).",
                          DoubleValue(0.2), MakeDoubleAccessor(&MetaRoceAimd::m_aiBdp),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("EcnBeta",
                          "Decrease on ECN: pwnd *= 1 - EcnBeta x marked fraction / 2. "
                          "Assumption: 1 (DCTCP's rule).",
                          DoubleValue(1.0), MakeDoubleAccessor(&MetaRoceAimd::m_ecnBeta),
                          MakeDoubleChecker<double>(0.0, 2.0))
            .AddAttribute("EcnGain",
                          "EWMA gain of a path's marked fraction. Assumption: 1/16 (DCTCP's g).",
                          DoubleValue(1.0 / 16), MakeDoubleAccessor(&MetaRoceAimd::m_ecnGain),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("EcnResponse",
                          "How a path's window answers ECN: mark (every ACK echoing CE takes "
                          "EcnBeta x half the bytes it acknowledges) or rtt (at most once per "
                          "path RTT, by EcnBeta x the path's marked fraction / 2, at least "
                          "EcnGain / 2: about 3% for an isolated mark). Assumption: mark (with "
                          "rtt, a connection's cut depends on how many paths its packets "
                          "spread over).",
                          EnumValue(ECN_PER_MARK), MakeEnumAccessor(&MetaRoceAimd::m_ecnResponse),
                          MakeEnumChecker(ECN_PER_MARK, "mark", ECN_PER_RTT, "rtt"))
            .AddAttribute("LossThreshold",
                          "Losses within one RTT of a path before its window is cut (the talk's "
                          "N). Assumption: 3.",
                          UintegerValue(3), MakeUintegerAccessor(&MetaRoceAimd::m_lossThreshold),
                          MakeUintegerChecker<uint32_t>(1, 1024))
            .AddAttribute("LossBeta",
                          "Decrease after LossThreshold losses: pwnd *= 1 - LossBeta. "
                          "Assumption: 0.5.",
                          DoubleValue(0.5), MakeDoubleAccessor(&MetaRoceAimd::m_lossBeta),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("SlowStart",
                          "A path grows its window by what each ACK acknowledges (doubling per "
                          "RTT) until its first ECN mark, loss or timeout, as TCP does; without "
                          "it a 1.5 ms path would need ~100 RTTs to fill. Assumption: on.",
                          BooleanValue(true), MakeBooleanAccessor(&MetaRoceAimd::m_slowStart),
                          MakeBooleanChecker())
            .AddAttribute("WindowValidation",
                          "Grow a path's window only while the path fills it. Assumption: on.",
                          BooleanValue(true), MakeBooleanAccessor(&MetaRoceAimd::m_validate),
                          MakeBooleanChecker())
            .AddAttribute("IncreaseCoupling",
                          "How additive increase is shared across a connection's paths: "
                          "connection (AdditiveIncrease packets per RTT for the connection, "
                          "split over its paths by the ACKs they carry: more paths add no "
                          "aggression) or path (AdditiveIncrease per path per RTT). "
                          "Assumption: connection (the talk: adding paths does not raise the "
                          "overall aggressiveness; how it is achieved is not stated).",
                          EnumValue(COUPLE_CONNECTION), MakeEnumAccessor(&MetaRoceAimd::m_coupling),
                          MakeEnumChecker(COUPLE_CONNECTION, "connection", COUPLE_PATH, "path"))
            .AddAttribute("UseRateHints", "Pace the QP at the receiver's rate hint (RCN).",
                          BooleanValue(true), MakeBooleanAccessor(&MetaRoceAimd::m_useHints),
                          MakeBooleanChecker())
            .AddAttribute("HintStart",
                          "While no path of the connection has seen ECN, a loss or a timeout, "
                          "the receiver's rate hint is a floor on the connection's window: "
                          "hint x the QP's smallest RTT, spread evenly over its paths (each "
                          "within its cap). Assumption: on (the talk: receivers return rate "
                          "hints in ACKs; a sender told its rate need not find it by doubling "
                          "per RTT, which from 2 packets a path takes 4-5 RTTs to fill 1.5 ms).",
                          BooleanValue(true), MakeBooleanAccessor(&MetaRoceAimd::m_hintStart),
                          MakeBooleanChecker());
    return tid;
}

Ptr<RdmaCongestionOps>
MetaRoceAimd::Fork() const
{
    // Attribute values only (a path's state, its marked fraction too, is in CcState): one
    // instance serves every QP configured alike, not 112 bytes a connection.
    return Ptr<RdmaCongestionOps>(const_cast<MetaRoceAimd*>(this));
}

namespace
{
/// One multiplicative decrease per path RTT at most.
bool
MayDecrease(const CcPath& p, int64_t now)
{
    int64_t rtt = p.srttPs > 0 ? p.srttPs : 10000000;
    return p.lastDecreasePs < 0 || now - p.lastDecreasePs >= rtt;
}
} // namespace

void
MetaRoceAimd::OnAck(CcState& s, uint32_t path, uint64_t ackedBytes, int64_t rttPs, bool ecn)
{
    CcPath& p = s.paths[path];
    double& frac = p.ecnFrac;
    int64_t now = NowPs();
    frac = (1 - m_ecnGain) * frac + m_ecnGain * (ecn ? 1.0 : 0.0);
    double mtu = s.mtu;
    if (ecn)
    {
        p.slowStart = false;
        if (m_ecnResponse == ECN_PER_MARK)
        {
            // Per RTT the marked ACKs of a window of W take EcnBeta x fraction x W / 2, as
            // DCTCP's once-per-RTT cut does, but without needing a mark in each path's RTT.
            double cut = m_ecnBeta * static_cast<double>(std::max<uint64_t>(ackedBytes, 1)) / 2;
            p.cwndBytes = std::max(mtu, p.cwndBytes - cut);
            p.lastDecreasePs = now;
        }
        else if (MayDecrease(p, now))
        {
            double f = std::max(frac, m_ecnGain);
            p.cwndBytes = std::max(mtu, p.cwndBytes * (1 - m_ecnBeta * f / 2));
            p.lastDecreasePs = now;
        }
        return;
    }
    // Grow only a window that is in use, as RFC 7661 validates a TCP window (at least half of
    // it in flight): a path held back by its NIC port or the application keeps the window it
    // needs instead of drifting up to the cap.
    bool used = static_cast<double>(p.inflightBytes + ackedBytes) + mtu >= p.cwndBytes / 2;
    if (ackedBytes > 0 && (used || !m_validate))
    {
        // The connection's window (sum of the paths'): the coupled increase divides by it,
        // and the QP's cap (QpWindowBdps) bounds it.
        double total = 0;
        if (m_coupling == COUPLE_CONNECTION || s.qwndCapBytes > 0)
        {
            for (const CcPath& q : s.paths)
            {
                total += q.cwndBytes;
            }
        }
        if (s.qwndCapBytes > 0 && total >= s.qwndCapBytes)
        {
            return;
        }
        if (m_slowStart && p.slowStart)
        {
            p.cwndBytes += static_cast<double>(ackedBytes); // doubles every RTT
        }
        else
        {
            // Per RTT a path's ACKs add AdditiveIncrease x (its window / the divisor).
            double step = m_ai * mtu;
            double divisor = p.cwndBytes;
            if (m_coupling == COUPLE_CONNECTION)
            {
                step = std::max(step, m_aiBdp * s.bdpBytes);
                divisor = std::max(total, p.cwndBytes);
            }
            p.cwndBytes += step * static_cast<double>(ackedBytes) / divisor;
        }
        p.cwndBytes = std::min(p.cwndBytes, p.maxCwndBytes);
    }
}

void
MetaRoceAimd::OnLoss(CcState& s, uint32_t path, uint32_t lost)
{
    CcPath& p = s.paths[path];
    int64_t now = NowPs();
    int64_t rtt = p.srttPs > 0 ? p.srttPs : 10000000;
    if (now - p.lossWindowStartPs > rtt)
    {
        p.lossWindowStartPs = now;
        p.lossesInRtt = 0;
    }
    p.lossesInRtt += lost;
    p.slowStart = false;
    if (p.lossesInRtt >= m_lossThreshold && MayDecrease(p, now))
    {
        p.cwndBytes = std::max<double>(s.mtu, p.cwndBytes * (1 - m_lossBeta));
        p.lastDecreasePs = now;
        p.lossesInRtt = 0;
    }
}

void
MetaRoceAimd::OnTimeout(CcState& s, uint32_t path)
{
    s.paths[path].cwndBytes = s.mtu;
    s.paths[path].slowStart = false;
    s.paths[path].lastDecreasePs = NowPs();
}

void
MetaRoceAimd::OnRateHint(CcState& s, double bps)
{
    if (!m_useHints || bps <= 0)
    {
        return;
    }
    double r = std::min(bps, s.lineRateBps);
    if (m_hintStart)
    {
        HintFloor(s, r);
    }
    if (r != s.rateBps)
    {
        s.rateBps = r;
        if (s.onRateChange)
        {
            s.onRateChange();
        }
    }
}

void
MetaRoceAimd::HintFloor(CcState& s, double hintBps) const
{
    // Only while the connection has seen no congestion: the hint ends slow start's probing
    // for the rate, it never overrides what ECN or a loss said.
    // Runs on every ACK with a hint: it stops as soon as the answer is "nothing to do".
    if (s.bdpBytes <= 0)
    {
        return;
    }
    const double target = hintBps / s.lineRateBps * s.bdpBytes;
    uint32_t live = 0;
    double total = 0;
    for (const CcPath& p : s.paths)
    {
        if (p.cwndBytes <= 0)
        {
            continue; // retired
        }
        total += p.cwndBytes;
        if (!p.slowStart || total >= target)
        {
            return;
        }
        ++live;
    }
    if (live == 0)
    {
        return;
    }
    const double each = target / live;
    for (CcPath& p : s.paths)
    {
        if (p.cwndBytes > 0 && p.cwndBytes < each)
        {
            p.cwndBytes = std::min(each, p.maxCwndBytes);
        }
    }
}

void
MetaRoceAimd::OnRestart(CcState& s)
{
    if (m_useHints && s.rateBps != s.lineRateBps)
    {
        s.rateBps = s.lineRateBps;
        if (s.onRateChange)
        {
            s.onRateChange();
        }
    }
}

} // namespace metaroce
} // namespace ns3
