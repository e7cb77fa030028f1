/*
 * MetaRoCE's baseline congestion control: AIMD on every path's window (PWND) separately.
 *  - slow start on a path until it sees its first congestion signal, then additive
 *    increase: AdditiveIncrease packets per RTT on ACKs without ECN echo;
 *  - multiplicative decrease on ECN, on that path only, at most once per path RTT, by
 *    EcnBeta x the path's marked fraction (a DCTCP-style EWMA, gain EcnGain);
 *  - on losses only after LossThreshold of them within one RTT: pwnd *= (1 - LossBeta);
 *  - a timeout leaves the path one packet;
 *  - the receiver's rate hint becomes the QP's pacing rate; a QP that had nothing
 *    outstanding starts new work unpaced (the last hint described the receiver's load
 *    while the finished work was received, not now) until the first ACK brings a hint.
 * The constants are assumptions: the talk names the mechanisms (ECN MD per path, MD after N
 * drops, AI on ACKs) but not their values.
 */
#ifndef METAROCE_METAROCE_AIMD_H
#define METAROCE_METAROCE_AIMD_H

#include "model/transport/rdma-congestion-ops.h"

#include <vector>

namespace ns3
{
namespace metaroce
{

class MetaRoceAimd : public RdmaCongestionOps
{
  public:
    static TypeId GetTypeId();
    std::string GetName() const override { return "metaroce-aimd"; }
    Ptr<RdmaCongestionOps> Fork() const override;
    void OnAck(CcState& s, uint32_t path, uint64_t ackedBytes, int64_t rttPs, bool ecn) override;
    void OnLoss(CcState& s, uint32_t path, uint32_t lost) override;
    void OnTimeout(CcState& s, uint32_t path) override;
    void OnRateHint(CcState& s, double bps) override;
    void OnRestart(CcState& s) override;

    /// The marked-fraction estimate of a path.
    double GetEcnFraction(uint32_t path) const
    {
        return path < m_ecnFrac.size() ? m_ecnFrac[path] : 0.0;
    }

  private:
    double m_ai{1.0};
    double m_ecnBeta{1.0};
    double m_ecnGain{1.0 / 16};
    uint32_t m_lossThreshold{3};
    double m_lossBeta{0.5};
    bool m_useHints{true};
    bool m_slowStart{true};
    bool m_validate{true};
    std::vector<double> m_ecnFrac;
};

} // namespace metaroce
} // namespace ns3

#endif
