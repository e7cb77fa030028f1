// The sender side of a MetaRoCE QP: choosing a path and a chunk, the QP window and pacing,
// and what an ACK does to the paths (the rest of the QP is in metaroce-queue-pair.cc).
#include "metaroce-aimd.h"
#include "metaroce-nic-rtt.h"
#include "metaroce-queue-pair.h"
#include "metaroce-rate-hint.h"
#include "model/core/fast-simulator-impl.h"
#include "model/transport/rdma-nic.h"

#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/enum.h"
#include "ns3/log.h"
#include "ns3/object-factory.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ns3
{
namespace metaroce
{
// ---------------------------------------------------------------- sending

int32_t
MetaRoceQueuePair::SelectPath(uint32_t plane, int64_t now) const
{
    const Plane& pl = m_tx->paths.PlaneAt(plane);
    const std::size_t n = pl.paths.size();
    int32_t best = -1;
    double bestScore = 0;
    for (std::size_t k = 0; k < n; ++k)
    {
        // Round robin starts after the last path used; the others scan all.
        uint16_t i = pl.paths[(pl.rr + k) % n];
        if (!m_tx->paths.Eligible(i))
        {
            continue;
        }
        if (m_attrs->policy == ROUND_ROBIN)
        {
            return i;
        }
        const CcPath& c = m_tx->paths.Cc(i);
        double score = m_attrs->policy == LEAST_LOADED
                           ? static_cast<double>(c.inflightBytes) / c.cwndBytes
                           : static_cast<double>(c.srttPs);
        if (best < 0 || score < bestScore)
        {
            best = i;
            bestScore = score;
        }
    }
    return best;
}

bool
MetaRoceQueuePair::NextChunk(uint64_t& msg, uint32_t& pkt, bool& retx)
{
    while (!m_tx->retx.Empty())
    {
        auto [m, k] = m_tx->retx.Front();
        m_tx->retx.PopFront();
        if (m < m_sendQueueBase || Msg(m).ackedPkts.test(k))
        {
            continue; // acknowledged meanwhile
        }
        msg = m;
        pkt = k;
        retx = true;
        return true;
    }
    while (m_tx->txMsg - m_sendQueueBase < m_sendQueue.Size())
    {
        SendMessage& m = Msg(m_tx->txMsg);
        if (m.nextPkt < m.packets)
        {
            if (m.ackedPkts.empty())
            {
                m.ackedPkts.resize(m.packets);
            }
            msg = m_tx->txMsg;
            pkt = m.nextPkt++;
            retx = false;
            return true;
        }
        ++m_tx->txMsg;
    }
    return false;
}

bool
MetaRoceQueuePair::QpWindowOpen() const
{
    bool hinted = m_tx->paths.Window().rateBps < m_tx->paths.Window().lineRateBps &&
                  m_tx->paths.QpMinRttPs() > 0;
    // Before its first ACK a QP knows neither its path's RTT nor its receiver's hint.
    bool first = m_attrs->firstRttWindow != 0 && !m_tx->acked;
    if (m_attrs->qpWindowCap == 0 && !hinted && !first)
    {
        return true;
    }
    uint64_t inflight = 0;
    for (const auto& c : m_tx->paths.Window().paths)
    {
        inflight += c.inflightBytes;
    }
    if (inflight == 0)
    {
        return true;
    }
    double cap =
        m_attrs->qpWindowCap != 0 ? static_cast<double>(m_attrs->qpWindowCap) * m_mtu : 1e300;
    if (first)
    {
        cap = std::min(cap, static_cast<double>(m_attrs->firstRttWindow) * m_mtu);
    }
    if (hinted)
    {
        cap = std::min(cap, m_attrs->hintWindowGain * m_tx->paths.Window().rateBps / 8e12 *
                                static_cast<double>(m_tx->paths.QpMinRttPs()));
    }
    if (!hinted)
    {
        return static_cast<double>(inflight + m_mtu) <= cap;
    }
    return static_cast<double>(inflight) < cap; // a partial packet of the hinted cap rounds up
}

bool
MetaRoceQueuePair::HasData()
{
    while (!m_tx->retx.Empty())
    {
        auto [m, k] = m_tx->retx.Front();
        if (m >= m_sendQueueBase && !Msg(m).ackedPkts.test(k))
        {
            return true;
        }
        m_tx->retx.PopFront();
    }
    if (m_tx->txMsg < m_sendQueueBase)
    {
        m_tx->txMsg = m_sendQueueBase;
    }
    while (m_tx->txMsg - m_sendQueueBase < m_sendQueue.Size())
    {
        const SendMessage& m = Msg(m_tx->txMsg);
        if (m.nextPkt < m.packets)
        {
            return true;
        }
        ++m_tx->txMsg;
    }
    return false;
}

PullResult
MetaRoceQueuePair::PullFrame(uint32_t port, FabricFrame& out)
{
    if (m_tx == nullptr && m_sendQueue.Empty())
    {
        return PullResult::Nothing; // released after its last use
    }
    EnsureInit();
    Plane& pl = m_tx->paths.PlaneAt(port);
    if (!pl.linkUp)
    {
        return PullResult::Nothing;
    }
    int64_t now = NowPs();
    RdmaHeaderData h;
    h.opcode = RdmaOpcode::PathData;
    h.destQpn = m_remoteQpn;
    h.timestampPs = now;
    uint32_t payload = 0;
    uint32_t slot = 0;
    TxRecord rec{};
    if (pl.avoided)
    {
        // Probe the plane with an empty packet, one at a time, while there is work.
        int32_t probe = m_tx->paths.ProbeDue(port, now);
        if (probe < 0 || !HasData())
        {
            return PullResult::Nothing;
        }
        slot = static_cast<uint32_t>(probe);
        m_tx->paths.BodyAt(m_tx->paths.Dense(slot)).nextProbePs =
            now + m_attrs->probeInterval.GetPicoSeconds();
        rec = {PM::kProbe, now, 0, 0, PM::REC_INFLIGHT};
        h.msgBytes = 0;
        h.flags |= RdmaHeader::kFlagProbe;
        ++m_tx->paths.Count().probesSent;
        PathChanged(slot, port, PathEvent::Probed);
    }
    else
    {
        if (!HasData())
        {
            return PullResult::Nothing;
        }
        if (m_tx->paths.Window().rateBps < m_tx->paths.Window().lineRateBps &&
            now < m_tx->paceVirtPs)
        {
            if (!IsPending(m_tx->paceEvent))
            {
                m_tx->paceEvent = Simulator::Schedule(PicoSeconds(m_tx->paceVirtPs - now),
                                                      &MetaRoceQueuePair::PacingWake, this);
            }
            return PullResult::Nothing;
        }
        if (!QpWindowOpen())
        {
            // An ACK will reopen it. The first ACK wakes every plane the first-RTT cap turned
            // away (it may come on another plane).
            m_tx->qpWindowShut =
                m_tx->qpWindowShut || (m_attrs->firstRttWindow != 0 && !m_tx->acked);
            return PullResult::Nothing;
        }
        m_tx->paths.OpenOwed(port, false); // this plane's first data opens its share of the paths
        int32_t s = SelectPath(port, now);
        if (s < 0)
        {
            m_tx->paths.NoteWindowLimited();
            return PullResult::Nothing;
        }
        slot = static_cast<uint32_t>(s);
        uint64_t msg = 0;
        uint32_t pkt = 0;
        bool retx = false;
        NextChunk(msg, pkt, retx);
        const SendMessage& m = Msg(msg);
        uint64_t offset = static_cast<uint64_t>(pkt) * m_mtu;
        payload = static_cast<uint32_t>(std::min<uint64_t>(m_mtu, m.bytes - offset));
        h.stream = m.stream;
        h.msgId = m.seq;
        h.offset = offset;
        h.msgBytes = static_cast<uint32_t>(m.bytes);
        if (retx)
        {
            h.flags |= RdmaHeader::kFlagRetransmit;
            ++SendSide().retransmittedPackets;
            if (m_traces)
            {
                m_traces->retransmit(m_tx->paths.Body(slot).psnNext, slot);
            }
        }
        rec = {msg, now, pkt, payload, PM::REC_INFLIGHT};
        pl.rr = static_cast<uint16_t>(
            (std::find(pl.paths.begin(), pl.paths.end(), static_cast<uint16_t>(slot)) -
             pl.paths.begin()) +
            1);
        ++SendSide().dataPacketsSent;
    }
    m_tx->paths.RecordSend(slot, rec, now, h);
    out = MakeFrame(h, payload, m_tx->paths.Head(slot).entropy, true);
    if (m_tx->paths.Window().rateBps < m_tx->paths.Window().lineRateBps)
    {
        // Token bucket: a sender that paused (window closed) may catch up by PacingBurst
        // packets, so a fair share is not lost to momentary stalls.
        int64_t gap = static_cast<int64_t>(out.wireBytes * 8e12 / m_tx->paths.Window().rateBps);
        m_tx->paceVirtPs =
            std::max(m_tx->paceVirtPs, now - static_cast<int64_t>(m_attrs->pacingBurst) * gap) +
            gap;
    }
    ArmTimer(now + m_tx->paths.TimerPs(slot));
    if (pl.avoided)
    {
        return PullResult::Sent;
    }
    if (m_attrs->tailLossRtts > 0 && !HasData())
    {
        // The QP's last packet for now: no later one will vouch for it (tail-loss rule).
        const int64_t tail = m_tx->paths.TailLossPs(slot);
        if (tail > 0)
        {
            ArmTimer(now + tail);
        }
    }
    bool data = HasData();
    bool path = data && SelectPath(port, now) >= 0;
    if (data && !path)
    {
        // The NIC will not pull again before an ACK: this is where the sender finds itself
        // window-limited (the next pull that would have found it is never made).
        m_tx->paths.NoteWindowLimited();
    }
    bool more = path && QpWindowOpen() &&
                (m_tx->paths.Window().rateBps >= m_tx->paths.Window().lineRateBps ||
                 m_tx->paceVirtPs <= now);
    return more ? PullResult::More : PullResult::Sent;
}

// ---------------------------------------------------------------- acknowledgements

uint64_t
MetaRoceQueuePair::AckChunk(const TxRecord& r)
{
    if (r.msg == PM::kProbe)
    {
        return 0;
    }
    if (r.msg < m_sendQueueBase || Msg(r.msg).ackedPkts.test(r.pkt))
    {
        ++SendSide().spuriousRetransmissions; // two copies of this chunk arrived
        return 0;
    }
    SendMessage& m = Msg(r.msg);
    m.ackedPkts.set(r.pkt);
    ++m.ackedCount;
    m.ackedBytes += r.payload;
    if (m.ackedCount == m.packets)
    {
        MarkSent(m);
    }
    return r.payload;
}

void
MetaRoceQueuePair::ReceiveAck(uint32_t port, const RdmaHeaderData& h)
{
    if (h.path >= m_tx->paths.NSlots())
    {
        ++m_tx->paths.Count().staleAcks;
        return;
    }
    const PathHead& hd = m_tx->paths.Head(h.path);
    if (hd.state == PATH_RETIRED || hd.epoch != h.epoch || h.psn > m_tx->paths.Body(h.path).psnNext)
    {
        ++m_tx->paths.Count().staleAcks; // an ACK of a path that was retired or renumbered since
        return;
    }
    const uint32_t plane = hd.plane;
    int64_t now = NowPs();
    m_tx->acked = true;
    // The path's state by index, afresh at each use: acknowledging a message may post the
    // next one, and the NIC may pull it at once and give another path its own state (which
    // can move this one). A TxRecord& stays valid: the ring's storage does not move.
    const uint32_t d = m_tx->paths.Dense(h.path);
    auto P = [this, d]() -> SPath& { return m_tx->paths.BodyAt(d); };
    const MetaRocePathManager::AckScan scan = m_tx->paths.ScanAck(
        h.path, h.psn, h.sack, [this](const TxRecord& r) { return AckChunk(r); },
        [this](uint64_t msg, uint32_t pkt) {
            m_tx->retx.PushBack({msg, pkt});
        });
    const uint64_t acked = scan.ackedBytes;
    const uint32_t lost = scan.lost;
    const bool probeAcked = scan.probeAcked;
    // RTT from the echoed timestamp.
    // (not from a probe: an empty packet's RTT is shorter than a data packet's)
    int64_t rtt =
        h.timestampPs > 0 && (h.flags & RdmaHeader::kFlagProbe) == 0 ? now - h.timestampPs : -1;
    if (rtt > 0)
    {
        const int64_t oldSrtt = m_tx->paths.CcAt(d).srttPs;
        const bool firstSample = m_tx->paths.OnRttSample(d, rtt);
        CcState& cc = m_tx->paths.Window();
        cc.bdpBytes = cc.lineRateBps / 8e12 * static_cast<double>(m_tx->paths.QpMinRttPs());
        cc.qwndCapBytes = m_attrs->qpWindowBdps * cc.bdpBytes;
        if (m_traces)
        {
            m_traces->pathRtt(h.path, PicoSeconds(oldSrtt),
                              PicoSeconds(m_tx->paths.CcAt(d).srttPs));
        }
        if (firstSample)
        {
            // Everything sent so far armed the timer with InitialRto: a first window lost
            // after this (a tail, or a whole path) would wait for it, not for the RTO now known.
            ArmTimerForDeadlines();
        }
    }
    P().consecutiveTimeouts = 0;
    P().lastProgressPs = now;
    Plane& pl = m_tx->paths.PlaneAt(plane);
    pl.retiredInRow = 0;
    bool ecn = (h.flags & RdmaHeader::kFlagEcnEcho) != 0;
    if (ecn)
    {
        m_tx->paths.NoteEcn(now);
    }
    if (probeAcked && pl.avoided)
    {
        m_tx->paths.PlaneUsable(plane, now);
    }
    // The congestion control indexes cc.paths: it gets the path's dense index.
    if (m_tx->paths.Head(h.path).state == PATH_ACTIVE)
    {
        m_tx->ccOps->OnAck(m_tx->paths.Window(), d, acked, rtt, ecn);
        if (lost > 0)
        {
            m_tx->paths.Count().lossesDetected += lost;
            m_tx->ccOps->OnLoss(m_tx->paths.Window(), d, lost);
        }
    }
    if (h.rateHintMbps != 0)
    {
        m_tx->ccOps->OnRateHint(m_tx->paths.Window(), h.rateHintMbps * 1e6);
    }
    if (m_tx->paths.Head(h.path).state == PATH_DRAINING && m_tx->paths.CcAt(d).inflightBytes == 0)
    {
        m_tx->paths.RetirePath(h.path);
    }
    m_tx->paths.MaybeGrow(now);
    if (m_attrs->tailLossRtts > 0)
    {
        // Data still in flight: look for a tail loss once it would be overdue.
        const int64_t at = m_tx->paths.TailCheckAt(now);
        if (at != std::numeric_limits<int64_t>::max() &&
            !(IsPending(m_tx->timer) && m_tx->timerAtPs <= at) && !SenderIdle())
        {
            ArmTimer(at);
        }
    }
    if (m_traces)
    {
        TraceWindows();
    }
    if (m_sendQueue.Empty())
    {
        ReleaseIdle();
    }
    if (lost > 0 || m_tx->qpWindowShut)
    {
        // (a plane turned away by the first-RTT cap waits for this wake, on whatever plane
        // the ACK came)
        m_tx->qpWindowShut = false;
        WakeAll();
    }
    else
    {
        Wake(plane);
    }
}

} // namespace metaroce
} // namespace ns3
