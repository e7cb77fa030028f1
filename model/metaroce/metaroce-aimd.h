/*
 * MetaRoCE's baseline congestion control: AIMD on every path's window (PWND) separately.
 *  - slow start on a path until it sees its first congestion signal, then additive
 *    increase: AdditiveIncrease packets per RTT on ACKs without ECN echo, for the whole
 *    connection (IncreaseCoupling "connection": each ACK adds in proportion to its share of
 *    the connection's window, so 40 paths grow no faster than one), and at least
 *    IncreaseBdpFraction (0.2) of the connection's bandwidth-delay product per RTT (a step in
 *    proportion to the connection's rate, as UEC's NSCC scales its fair increase, so an
 *    800G QP of a ~170-packet BDP recovers a cut in tens of RTTs, not hundreds); or for each
 *    path ("path": a connection of n paths grows n packets per RTT);
 *  - decrease on ECN, on the marked path only: by EcnBeta x half of what each marked ACK
 *    acknowledges (EcnResponse "mark": per RTT a window loses EcnBeta x marked fraction / 2,
 *    however the connection's packets spread over paths), or at most once per path RTT by
 *    EcnBeta x the path's marked fraction / 2 (EcnResponse "rtt", DCTCP's rule with an EWMA
 *    of gain EcnGain: a path carrying a few packets per RTT sees a mark in few RTTs, so a
 *    connection of many paths is cut less than a 1-path one at the same marking);
 *  - on losses only after LossThreshold of them within one RTT: pwnd *= (1 - LossBeta);
 *  - a timeout leaves the path one packet;
 *  - the receiver's rate hint becomes the QP's pacing rate, and while the connection is
 *    still in slow start a floor on its window (HintStart: hint x smallest RTT);
 *    a QP that had nothing
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
    enum Coupling
    {
        COUPLE_PATH,      //!< each path grows AdditiveIncrease per RTT
        COUPLE_CONNECTION //!< the connection grows AdditiveIncrease per RTT
    };

    enum EcnResponse
    {
        ECN_PER_RTT, //!< once per path RTT, by the path's marked fraction (DCTCP)
        ECN_PER_MARK //!< every marked ACK, by half what it acknowledges
    };

    static TypeId GetTypeId();
    std::string GetName() const override { return "metaroce-aimd"; }
    Ptr<RdmaCongestionOps> Fork() const override;
    void OnAck(CcState& s, uint32_t path, uint64_t ackedBytes, int64_t rttPs, bool ecn) override;
    void OnLoss(CcState& s, uint32_t path, uint32_t lost) override;
    void OnTimeout(CcState& s, uint32_t path) override;
    void OnRateHint(CcState& s, double bps) override;
    void OnRestart(CcState& s) override;

  private:
    /// HintStart: raise a connection still in slow start to hint x its smallest RTT.
    void HintFloor(CcState& s, double hintBps) const;

    double m_ai{1.0};
    double m_aiBdp{0.2};
    double m_ecnBeta{1.0};
    double m_ecnGain{1.0 / 16};
    uint32_t m_lossThreshold{3};
    double m_lossBeta{0.5};
    bool m_useHints{true};
    bool m_hintStart{true};
    bool m_slowStart{true};
    bool m_validate{true};
    Coupling m_coupling{COUPLE_CONNECTION};
    EcnResponse m_ecnResponse{ECN_PER_MARK};
};

} // namespace metaroce
} // namespace ns3

#endif
