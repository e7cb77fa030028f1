/*
 * DCQCN (Zhu et al., SIGCOMM'15), reaction point, in the variant that NIC firmware and the
 * HPCC/ConWeave ns-3 simulators implement ("mlx"): timer-driven increases (no byte counter),
 * a first-CNP rule, a rate-decrease check every RateDecreaseInterval and an alpha update every
 * AlphaResumeInterval. Default parameters follow ConWeave's run.py set at 100G (the reference
 * simulators' common baseline): g = 1/256, alpha every 1 us, decrease check every 4 us,
 * increase timer 300 us, F = 1, R_AI = 40 Mb/s, R_HAI = 100 Mb/s, minimum 100 Mb/s.
 *
 * The periodic alpha and decrease timers are evaluated lazily (on the next CNP or check),
 * which gives the same values without an event per microsecond per QP.
 */
#ifndef METAROCE_DCQCN_H
#define METAROCE_DCQCN_H

#include "model/transport/rdma-congestion-ops.h"

#include "ns3/data-rate.h"
#include "ns3/event-id.h"
#include "ns3/nstime.h"

namespace ns3
{
namespace metaroce
{

class Dcqcn : public RdmaCongestionOps
{
  public:
    static TypeId GetTypeId();
    Dcqcn();
    ~Dcqcn() override;
    std::string GetName() const override { return "dcqcn"; }
    Ptr<RdmaCongestionOps> Fork() const override;
    void Init(CcState& s) override;
    void OnCnp(CcState& s) override;

    double GetAlpha() const { return m_alpha; }
    double GetTargetRate() const { return m_rt; }

    bool HasPendingEvents() const override
    {
        return m_decreaseEvent.IsRunning() || m_increaseEvent.IsRunning();
    }

  protected:
    void DoDispose() override;

  private:
    void AdvanceAlpha(int64_t nowPs);
    void CheckDecrease();
    void IncreaseTimer();
    void SetRate(double bps);

    // parameters
    double m_g{1.0 / 256};
    Time m_alphaInterval;
    Time m_decreaseInterval;
    Time m_increaseInterval;
    uint32_t m_fastRecoverySteps{1};
    DataRate m_rai{"40Mb/s"};
    DataRate m_rhai{"100Mb/s"};
    DataRate m_minRate{"100Mb/s"};
    double m_rateOnFirstCnp{1.0};
    bool m_clampTarget{false};
    // state
    CcState* m_state{nullptr};
    double m_rt{0};
    double m_alpha{1.0};
    int64_t m_lastAlphaTickPs{0};
    int64_t m_decreasePhasePs{0}; //!< decrease checks fall on this phase of their period
    bool m_alphaCnp{false};
    bool m_decreaseCnp{false};
    bool m_active{false};
    uint32_t m_stage{0};
    EventId m_decreaseEvent;
    EventId m_increaseEvent;
};

} // namespace metaroce
} // namespace ns3

#endif
