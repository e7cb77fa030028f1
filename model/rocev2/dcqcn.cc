#include "dcqcn.h"

#include "model/core/fast-simulator-impl.h"

#include "ns3/boolean.h"
#include "ns3/data-rate.h"
#include "ns3/double.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <cmath>

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("Dcqcn");
NS_OBJECT_ENSURE_REGISTERED(Dcqcn);

TypeId
Dcqcn::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::Dcqcn")
            .SetParent<RdmaCongestionOps>()
            .SetGroupName("MetaRoce")
            .AddConstructor<Dcqcn>()
            .AddAttribute("G", "EWMA gain of alpha.", DoubleValue(1.0 / 256),
                          MakeDoubleAccessor(&Dcqcn::m_g), MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("AlphaResumeInterval", "Period of the alpha update.",
                          TimeValue(MicroSeconds(1)), MakeTimeAccessor(&Dcqcn::m_alphaInterval),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("RateDecreaseInterval",
                          "Period of the rate-decrease check (a decrease needs a CNP in it).",
                          TimeValue(MicroSeconds(4)), MakeTimeAccessor(&Dcqcn::m_decreaseInterval),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("RateIncreaseInterval", "Rate-increase timer (rpg_time_reset).",
                          TimeValue(MicroSeconds(300)),
                          MakeTimeAccessor(&Dcqcn::m_increaseInterval),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("FastRecoverySteps", "Increase steps spent in fast recovery (F).",
                          UintegerValue(1), MakeUintegerAccessor(&Dcqcn::m_fastRecoverySteps),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("AdditiveIncrease", "Target-rate step of active increase (R_AI).",
                          DataRateValue(DataRate("40Mb/s")), MakeDataRateAccessor(&Dcqcn::m_rai),
                          MakeDataRateChecker())
            .AddAttribute("HyperIncrease", "Target-rate step of hyper increase (R_HAI).",
                          DataRateValue(DataRate("100Mb/s")), MakeDataRateAccessor(&Dcqcn::m_rhai),
                          MakeDataRateChecker())
            .AddAttribute("MinRate", "Lowest rate a decrease can reach.",
                          DataRateValue(DataRate("100Mb/s")),
                          MakeDataRateAccessor(&Dcqcn::m_minRate), MakeDataRateChecker())
            .AddAttribute("RateOnFirstCnp", "Fraction of the current rate kept on the first CNP.",
                          DoubleValue(1.0), MakeDoubleAccessor(&Dcqcn::m_rateOnFirstCnp),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("ClampTargetRate",
                          "Always set the target rate to the current rate on a decrease.",
                          BooleanValue(false), MakeBooleanAccessor(&Dcqcn::m_clampTarget),
                          MakeBooleanChecker());
    return tid;
}

Dcqcn::Dcqcn()
    : m_alphaInterval(MicroSeconds(1))
    , m_decreaseInterval(MicroSeconds(4))
    , m_increaseInterval(MicroSeconds(300))
{
}

Dcqcn::~Dcqcn() = default;

void
Dcqcn::DoDispose()
{
    m_decreaseEvent.Cancel();
    m_increaseEvent.Cancel();
    m_state = nullptr;
    RdmaCongestionOps::DoDispose();
}

Ptr<RdmaCongestionOps>
Dcqcn::Fork() const
{
    // The prototype holds only attribute values (no state yet): a copy is a fresh instance.
    return CopyObject<Dcqcn>(this);
}

void
Dcqcn::Init(CcState& s)
{
    m_state = &s;
    m_rt = s.lineRateBps;
}

void
Dcqcn::SetRate(double bps)
{
    m_state->rateBps = bps;
    if (m_state->onRateChange)
    {
        m_state->onRateChange();
    }
}

void
Dcqcn::AdvanceAlpha(int64_t now)
{
    int64_t step = m_alphaInterval.GetPicoSeconds();
    int64_t n = (now - m_lastAlphaTickPs) / step;
    if (n <= 0)
    {
        return;
    }
    // The first tick since the last evaluation sees whether a CNP arrived; later ones do not.
    m_alpha = (1 - m_g) * m_alpha + (m_alphaCnp ? m_g : 0.0);
    m_alphaCnp = false;
    if (n > 1)
    {
        m_alpha *= std::pow(1 - m_g, static_cast<double>(n - 1));
    }
    m_lastAlphaTickPs += n * step;
}

void
Dcqcn::OnCnp(CcState& s)
{
    int64_t now = NowPs();
    if (!m_active)
    {
        m_active = true;
        m_alpha = 1.0;
        m_alphaCnp = false;
        m_lastAlphaTickPs = now;
        m_decreaseCnp = true;
        m_decreasePhasePs = (now + 1) % m_decreaseInterval.GetPicoSeconds();
        m_rt = s.rateBps * m_rateOnFirstCnp;
        SetRate(m_rt);
        // one picosecond after the alpha tick, as the decrease must see the updated alpha
        m_decreaseEvent =
            Simulator::Schedule(m_decreaseInterval + PicoSeconds(1), &Dcqcn::CheckDecrease, this);
        return;
    }
    AdvanceAlpha(now);
    m_alphaCnp = true;
    m_decreaseCnp = true;
    if (!IsPending(m_decreaseEvent))
    {
        // The check runs on its fixed period since the first CNP: find the next slot.
        int64_t period = m_decreaseInterval.GetPicoSeconds();
        int64_t phase = m_decreasePhasePs;
        int64_t r = ((now - phase) % period + period) % period;
        int64_t next = now - r + period;
        m_decreaseEvent = Simulator::Schedule(PicoSeconds(next - now), &Dcqcn::CheckDecrease, this);
    }
}

void
Dcqcn::CheckDecrease()
{
    if (!m_decreaseCnp)
    {
        return; // nothing arrived in the period: the check idles until the next CNP
    }
    AdvanceAlpha(NowPs());
    if (m_clampTarget || m_stage != 0)
    {
        m_rt = m_state->rateBps;
    }
    SetRate(std::max(static_cast<double>(m_minRate.GetBitRate()),
                     m_state->rateBps * (1 - m_alpha / 2)));
    m_stage = 0;
    m_decreaseCnp = false;
    m_increaseEvent.Cancel();
    m_increaseEvent = Simulator::Schedule(m_increaseInterval, &Dcqcn::IncreaseTimer, this);
    m_decreaseEvent = Simulator::Schedule(m_decreaseInterval, &Dcqcn::CheckDecrease, this);
}

void
Dcqcn::IncreaseTimer()
{
    double line = m_state->lineRateBps;
    if (m_stage < m_fastRecoverySteps)
    {
        // fast recovery: halve the distance to the target
    }
    else if (m_stage == m_fastRecoverySteps)
    {
        m_rt = std::min(m_rt + m_rai.GetBitRate(), line);
    }
    else
    {
        m_rt = std::min(m_rt + m_rhai.GetBitRate(), line);
    }
    double rc = (m_state->rateBps + m_rt) / 2;
    ++m_stage;
    SetRate(rc);
    if (rc < line * (1 - 1e-9) || m_rt < line)
    {
        m_increaseEvent = Simulator::Schedule(m_increaseInterval, &Dcqcn::IncreaseTimer, this);
    }
    else
    {
        SetRate(line);
    }
}

} // namespace metaroce
} // namespace ns3
