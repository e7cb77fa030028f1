/*
 * Pluggable congestion control, in the manner of ns-3 TCP's TcpCongestionOps: an Object
 * with hooks that the queue pair calls, chosen by a TypeId attribute of the QP and forked
 * per QP. The state it acts on (CcState) belongs to the QP: a pacing rate for rate-based
 * algorithms (DCQCN) and one window per path for window-based ones (MetaRoCE's per-path
 * AIMD). Users attach their own algorithm by subclassing and naming its TypeId.
 */
#ifndef METAROCE_RDMA_CONGESTION_OPS_H
#define METAROCE_RDMA_CONGESTION_OPS_H

#include "ns3/object.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace ns3
{
namespace metaroce
{

/// Congestion state of one path (RoCEv2 QPs have exactly one).
struct CcPath
{
    double cwndBytes{0};    //!< PWND
    double maxCwndBytes{0}; //!< cap (the SACK bitmap width for MetaRoCE)
    uint64_t inflightBytes{0};
    int64_t srttPs{0};
    int64_t minRttPs{0};
    int64_t lastDecreasePs{-1}; //!< multiplicative decreases at most once per RTT
    int64_t lossWindowStartPs{0};
    uint32_t lossesInRtt{0};
    bool slowStart{true}; //!< no congestion seen yet on this path (window-based algorithms)
    double ecnFrac{0};    //!< marked fraction of ACKs, moving average (DCTCP's alpha)
};

struct CcState
{
    double lineRateBps{0};
    double rateBps{0};      //!< pacing rate; lineRateBps when unpaced
    double qwndCapBytes{0}; //!< > 0: the paths' windows together grow no further
    double bdpBytes{0};     //!< line rate x the QP's smallest RTT seen (0 before a sample)
    uint32_t mtu{4096};
    std::vector<CcPath> paths;
    /// The QP reacts to a rate change (re-times its pacing).
    std::function<void()> onRateChange;
};

class RdmaCongestionOps : public Object
{
  public:
    static TypeId GetTypeId();
    virtual std::string GetName() const = 0;
    /// An instance with the same attributes for one QP: a fresh copy if the algorithm keeps
    /// state of its own per QP, else it may be this one (shared by the QPs configured alike,
    /// and not disposed by them).
    virtual Ptr<RdmaCongestionOps> Fork() const = 0;
    virtual void Init(CcState& s) {}
    /// ackedBytes newly acknowledged on `path`; rttPs < 0 if no sample; ecn: the ACK echoes CE.
    virtual void OnAck(CcState& s, uint32_t path, uint64_t ackedBytes, int64_t rttPs, bool ecn) {}
    /// A congestion notification packet arrived (RoCEv2 / DCQCN).
    virtual void OnCnp(CcState& s) {}
    /// `lost` packets of `path` were found lost (SACK gap or NAK).
    virtual void OnLoss(CcState& s, uint32_t path, uint32_t lost) {}
    virtual void OnTimeout(CcState& s, uint32_t path) {}
    /// The receiver's fair-share rate hint (MetaRoCE RCN).
    virtual void OnRateHint(CcState& s, double bps) {}
    /// New work after the QP had nothing outstanding (every message sent and acknowledged).
    virtual void OnRestart(CcState& s) {}
    /// Whether a timer of this instance is pending (its QP may not close before it fires).
    virtual bool HasPendingEvents() const { return false; }
};

/// No congestion control: line rate, fixed windows (RoCEv2 as Meta ran it, PFC only).
class RdmaNoCongestionControl : public RdmaCongestionOps
{
  public:
    static TypeId GetTypeId();
    std::string GetName() const override { return "none"; }
    Ptr<RdmaCongestionOps> Fork() const override;
};

} // namespace metaroce
} // namespace ns3

#endif
