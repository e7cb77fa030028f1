/*
 * The paths of one MetaRoCE sender: their table, states, RTT estimates and windows, and the
 * planes they run on.
 *
 *  - A path is (plane, entropy) with its own PSN space, window (PWND), RTT estimate and
 *    in-flight records; the windows live in the congestion state (CcState) this class owns,
 *    indexed like the path bodies.
 *  - Per-path RTO; PathFailTimeouts consecutive timeouts retire a path and its data goes back
 *    to the sender; a replacement gets new entropy (a new epoch: fresh PSN space). When
 *    PlaneFailPaths paths of one plane are retired in a row the plane is avoided and probed
 *    until it answers; a NIC port whose link is down is avoided at once.
 *  - The path count grows while every path's window sits at PathWindowCap, the sender is
 *    window-limited and no ECN was seen for an RTT (long RTTs), and idle paths above MinPaths
 *    close.
 * The sender (MetaRoceQueuePair) sprays over these paths; what a path change needs of it
 * (wake a plane, resend data, arm its timer) goes through Owner. The constants are the QP's
 * attributes.
 */
#ifndef METAROCE_METAROCE_PATH_MANAGER_H
#define METAROCE_METAROCE_PATH_MANAGER_H

#include "model/core/fabric-random.h"
#include "model/core/ring.h"
#include "model/transport/queue-pair.h"
#include "model/transport/rdma-congestion-ops.h"
#include "model/transport/rdma-header.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

namespace ns3
{
namespace metaroce
{

class MetaRocePathManager
{
  public:
    enum PathState : uint8_t
    {
        PATH_ACTIVE,
        PATH_DRAINING, //!< takes no new data; retired once empty (rebalancing)
        PATH_PROBING,  //!< one probe at a time on an avoided plane
        PATH_RETIRED
    };

    enum RecState : uint8_t
    {
        REC_INFLIGHT,
        REC_ACKED,
        REC_LOST
    };

    static constexpr uint64_t kProbe = ~0ULL; //!< TxRecord::msg of a probe
    static constexpr uint32_t kSackBits = 256;

    struct TxRecord
    {
        uint64_t msg;
        int64_t sentPs;
        uint32_t pkt;
        uint32_t payload;
        uint8_t state;
    };

    //! A path's sequence and timing state. Materialized at the path's first use: the
    //! connection's first paths open together with identical initial state, and a
    //! connection that sends one packet touches one of its twelve (millions of them in a
    //! 100k-rank all-to-all), so an untouched path is read from the shared virgin body.
    struct SPath
    {
        Ring<TxRecord> recs; //!< recs.At(i) is path PSN cumAck + i
        uint32_t psnNext{0};
        uint32_t cumAck{0}; //!< lowest PSN still in flight (all below are acked or given up)
        int64_t lastProgressPs{0};
        int64_t lastSendPs{0};
        int64_t rttvarPs{0};
        int64_t nextProbePs{0};
        uint16_t consecutiveTimeouts{0}; //!< up to PathFailTimeouts
    };

    //! What every path has from its opening: 8 bytes.
    struct PathHead
    {
        uint16_t entropy{0};
        uint16_t body{0}; //!< 1 + index in bodies and cc.paths; 0: untouched (virgin)
        uint8_t epoch{0};
        uint8_t plane{0};
        uint8_t state{PATH_RETIRED};
    };

    //! The slots of one plane's paths, in the order they opened: up to four inline (a
    //! connection's twelve paths over eight planes put one or two on each), more on the
    //! heap. 16 bytes where a small_vector takes 32: every sender has one per plane.
    class SlotList
    {
      public:
        SlotList() = default;

        SlotList(const SlotList& o) { Assign(o); }

        SlotList& operator=(const SlotList& o)
        {
            if (this != &o)
            {
                Free();
                Assign(o);
            }
            return *this;
        }

        ~SlotList() { Free(); }

        uint16_t* begin() { return m_cap > kInline ? m_u.heap : m_u.in; }

        uint16_t* end() { return begin() + m_n; }

        const uint16_t* begin() const { return m_cap > kInline ? m_u.heap : m_u.in; }

        const uint16_t* end() const { return begin() + m_n; }

        std::size_t size() const { return m_n; }

        bool empty() const { return m_n == 0; }

        uint16_t operator[](std::size_t i) const { return begin()[i]; }

        void push_back(uint16_t v)
        {
            if (m_n == m_cap)
            {
                const uint16_t cap = static_cast<uint16_t>(2 * m_cap);
                uint16_t* grown = new uint16_t[cap];
                std::copy(begin(), end(), grown);
                const uint16_t n = m_n;
                Free();
                m_n = n;
                m_u.heap = grown;
                m_cap = cap;
            }
            begin()[m_n++] = v;
        }

        /// Removes [first, end()) (the tail std::remove leaves).
        void erase(uint16_t* first, uint16_t* last)
        {
            m_n = static_cast<uint16_t>(m_n - (last - first));
        }

      private:
        static constexpr uint16_t kInline = 4;

        void Free()
        {
            if (m_cap > kInline)
            {
                delete[] m_u.heap;
            }
            m_cap = kInline;
            m_n = 0;
        }

        void Assign(const SlotList& o)
        {
            for (uint16_t v : o)
            {
                push_back(v);
            }
        }

        union
        {
            uint16_t in[kInline];
            uint16_t* heap;
        } m_u{};

        uint16_t m_n{0};
        uint16_t m_cap{kInline};
    };

    //! 24 bytes (the counters below fit in 16 bits: a plane has at most MaxPaths, 4096,
    //! paths).
    struct Plane
    {
        //! slots of the paths on this plane (any state but retired)
        SlotList paths;
        uint16_t retiredInRow{0}; //!< saturates (compared with PlaneFailPaths, at most 100)
        uint16_t owed{0}; //!< paths of this plane's share not opened yet (OpenPathsOnFirstUse)
        uint16_t rr{0};   //!< round-robin cursor (at most the plane's path count)
        bool linkUp{true};
        bool avoided{false};
    };

    struct PathCounters
    {
        uint64_t pathsOpened{0};
        uint64_t pathsRetired{0};
        uint64_t pathsGrown{0};
        uint64_t pathsClosedIdle{0};
        uint64_t planeFailovers{0};
        uint64_t planeRecoveries{0};
        uint64_t probesSent{0};
        uint64_t staleAcks{0};
        uint64_t lossesDetected{0};      //!< data packets found lost by a SACK gap
        uint64_t lossesTail{0};          //!< ... by the tail-loss rule (TailLossRtts)
        uint64_t lossesTimeout{0};       //!< ... by a path's retransmission timeout
        int64_t firstPlaneAvoidedPs{-1}; //!< first time a plane was avoided
        int64_t lastPlaneAvoidedPs{-1};
        int64_t lastPlaneRecoveredPs{-1};
    };

    //! The QP's attributes that govern paths (see MetaRoceQueuePair::GetTypeId).
    struct Config
    {
        int64_t rtoMinPs{0};
        int64_t initialRtoPs{0};
        int64_t probeIntervalPs{0};
        int64_t idleTimeoutPs{0};
        double tailLossRtts{0};   //!< 0: no tail-loss rule
        bool nicRttForRto{false}; //!< a path without any sample times out from the NIC's RTT
        uint32_t minPaths{0};
        uint32_t maxPaths{0};
        uint32_t initialWindow{0};
        uint32_t pathWindowCap{0};
        uint32_t pathFailTimeouts{0};
        uint32_t planeFailPaths{0};
        uint32_t mtu{0};
        bool growPaths{false};
        bool openOnFirstUse{false};

        bool operator==(const Config& o) const
        {
            return std::tie(rtoMinPs, initialRtoPs, probeIntervalPs, idleTimeoutPs, tailLossRtts,
                            nicRttForRto, minPaths, maxPaths, initialWindow, pathWindowCap,
                            pathFailTimeouts, planeFailPaths, mtu, growPaths, openOnFirstUse) ==
                   std::tie(o.rtoMinPs, o.initialRtoPs, o.probeIntervalPs, o.idleTimeoutPs,
                            o.tailLossRtts, o.nicRttForRto, o.minPaths, o.maxPaths, o.initialWindow,
                            o.pathWindowCap, o.pathFailTimeouts, o.planeFailPaths, o.mtu,
                            o.growPaths, o.openOnFirstUse);
        }
    };

    //! What path changes need of the sender. Called only when paths open, retire or time
    //! out, never per packet.
    class Owner
    {
      public:
        virtual void WakePlane(uint32_t plane) = 0;
        virtual void WakeAllPlanes() = 0;
        /// A chunk left a path without an answer: send it again.
        virtual void Resend(uint64_t msg, uint32_t pkt) = 0;
        virtual void ArmTimerAt(int64_t atPs) = 0;
        /// Path `dense` (index in cc.paths) timed out; probing: it was a probe path.
        virtual void PathTimedOut(uint32_t dense, bool probing) = 0;
        virtual void PlaneStateChanged(uint32_t plane, bool usable) = 0;
        /// Path `path` (slot) of `plane` opened, retired, closed or timed out.
        virtual void PathChanged(uint32_t path, uint32_t plane, PathEvent what) = 0;

      protected:
        ~Owner() = default;
    };

    /// Sets the configuration, the planes (their links' state now) and the seed of the
    /// entropies; the congestion state's line rate is the caller's to set.
    /// nicRtt: where the NIC's QPs share the lowest RTT measured (0: none yet).
    void Start(const Config& cfg, Owner* owner, uint64_t seed, const std::vector<bool>& linkUp,
               int64_t* nicRtt);
    /// Opens the connection's first MinPaths paths (or owes them to their planes).
    void OpenInitialPaths();

    // ---- the path table (the sender's hot path reads these inline)
    uint32_t NSlots() const { return static_cast<uint32_t>(m_heads.size()); }

    PathHead& Head(uint32_t i) { return m_heads[i]; }

    const PathHead& Head(uint32_t i) const { return m_heads[i]; }

    //! A path's state for reading: an untouched path reads the shared initial state.
    const SPath& Body(uint32_t i) const
    {
        uint16_t b = m_heads[i].body;
        return b != 0 ? m_bodies[b - 1] : m_virginBody;
    }

    const CcPath& Cc(uint32_t i) const
    {
        uint16_t b = m_heads[i].body;
        return b != 0 ? m_cc.paths[b - 1] : m_shared->virginCc;
    }

    SPath& BodyAt(uint32_t d) { return m_bodies[d]; }

    CcPath& CcAt(uint32_t d) { return m_cc.paths[d]; }

    const std::vector<SPath>& Bodies() const { return m_bodies; }

    std::vector<SPath>& Bodies() { return m_bodies; }

    //! The index of path i's own state in the bodies and cc.paths, made at its first write.
    //! It may move the other paths' state: take references after it.
    uint32_t Dense(uint32_t i)
    {
        PathHead& hd = m_heads[i];
        if (hd.body == 0)
        {
            Materialize(hd);
        }
        return hd.body - 1u;
    }

    /// Drops the records at the front that need nothing more (acked, or lost and resent).
    void AdvanceBase(uint32_t i)
    {
        if (m_heads[i].body == 0)
        {
            return;
        }
        SPath& p = m_bodies[m_heads[i].body - 1];
        while (!p.recs.Empty() && p.recs.Front().state != REC_INFLIGHT)
        {
            p.recs.PopFront();
            ++p.cumAck;
        }
    }

    bool Eligible(uint32_t i) const
    {
        const PathHead& hd = m_heads[i];
        if (hd.state != PATH_ACTIVE)
        {
            return false;
        }
        if (hd.body == 0)
        {
            return true; // nothing sent yet on this path
        }
        const SPath& p = m_bodies[hd.body - 1];
        const CcPath& c = m_cc.paths[hd.body - 1];
        if (p.psnNext - p.cumAck >= kSackBits)
        {
            return false; // the receiver's bitmap could not describe more
        }
        return c.inflightBytes == 0 || c.inflightBytes + Cfg().mtu <= c.cwndBytes;
    }

    int64_t RtoPs(uint32_t i) const
    {
        const CcPath& c = Cc(i);
        if (m_heads[i].state == PATH_PROBING)
        {
            return Cfg().probeIntervalPs;
        }
        int64_t srtt = c.srttPs > 0 ? c.srttPs : m_qpSrttPs;
        if (srtt <= 0)
        {
            // No sample on this connection yet: the RTT its NIC's other connections measured,
            // a guess (the destination may be 100x further), so each timeout on it doubles
            // the next, up to InitialRto.
            srtt = Cfg().nicRttForRto ? *m_nicRtt : 0;
            if (srtt <= 0)
            {
                return Cfg().initialRtoPs;
            }
            const int64_t guess = srtt + std::max(Cfg().rtoMinPs, 2 * srtt);
            const uint32_t k = std::min<uint32_t>(Body(i).consecutiveTimeouts, 40);
            return guess >= (Cfg().initialRtoPs >> k) ? Cfg().initialRtoPs : guess << k;
        }
        int64_t var = c.srttPs > 0 ? Body(i).rttvarPs : srtt / 2;
        // The floor applies to the margin above the RTT, not to the RTO itself (as Linux
        // floors TCP's): on a steady long path rttvar decays to ~0, and an RTO of srtt alone
        // fires on any ACK a few nanoseconds later than the average.
        return srtt + std::max(Cfg().rtoMinPs, 4 * var);
    }

    /// Whether path i's timeout is a guess from its NIC's RTT below InitialRto (the QP has no
    /// RTT sample of its own): such a timeout resends, but it is no sign the path failed.
    bool RtoGuessed(uint32_t i) const
    {
        return Cfg().nicRttForRto && Cc(i).srttPs == 0 && m_qpSrttPs == 0 && *m_nicRtt > 0 &&
               RtoPs(i) < Cfg().initialRtoPs;
    }

    /// When to look at path i's timeout again after a send: its RTO, or RtoMin while the
    /// RTO is InitialRto only for want of any RTT sample on the NIC (one may come meanwhile).
    int64_t TimerPs(uint32_t i) const
    {
        const int64_t rto = RtoPs(i);
        if (Cfg().nicRttForRto && rto == Cfg().initialRtoPs && *m_nicRtt == 0)
        {
            return std::min(rto, Cfg().rtoMinPs);
        }
        return rto;
    }

    Plane& PlaneAt(uint32_t p) { return m_planes[p]; }

    const Plane& PlaneAt(uint32_t p) const { return m_planes[p]; }

    uint32_t NPlanes() const { return static_cast<uint32_t>(m_planes.size()); }

    CcState& Window() { return m_cc; }

    const CcState& Window() const { return m_cc; }

    /// The counters of rare events (every one but pathsOpened), made at the first.
    PathCounters& Count()
    {
        if (!m_pc)
        {
            m_pc.reset(new PathCounters);
        }
        return *m_pc;
    }

    PathCounters Counters() const
    {
        PathCounters c = m_pc ? *m_pc : PathCounters();
        c.pathsOpened = m_pathsOpened;
        return c;
    }

    const Config& GetConfig() const { return m_shared->cfg; }

    int64_t QpSrttPs() const { return m_qpSrttPs; }

    int64_t QpMinRttPs() const { return m_qpMinRttPs; }

    /// Takes an RTT sample of path `d` (dense index); true if it is the connection's first.
    bool OnRttSample(uint32_t d, int64_t rtt)
    {
        CcPath& c = m_cc.paths[d];
        SPath& p = m_bodies[d];
        // RFC 6298 smoothing.
        if (c.srttPs == 0)
        {
            c.srttPs = rtt;
            p.rttvarPs = rtt / 2;
        }
        else
        {
            p.rttvarPs = (3 * p.rttvarPs + std::abs(c.srttPs - rtt)) / 4;
            c.srttPs = (7 * c.srttPs + rtt) / 8;
        }
        c.minRttPs = c.minRttPs == 0 ? rtt : std::min(c.minRttPs, rtt);
        const bool firstSample = m_qpSrttPs == 0;
        m_qpSrttPs = firstSample ? rtt : (7 * m_qpSrttPs + rtt) / 8;
        m_qpMinRttPs = m_qpMinRttPs == 0 ? rtt : std::min(m_qpMinRttPs, rtt);
        *m_nicRtt = *m_nicRtt == 0 ? rtt : std::min(*m_nicRtt, rtt);
        return firstSample;
    }

    /// Puts `rec` in flight on path `i` and stamps `h` with the path's id, epoch, PSN and
    /// acknowledgement base.
    void RecordSend(uint32_t i, TxRecord rec, int64_t now, RdmaHeaderData& h)
    {
        const uint32_t d = Dense(i);
        SPath& p = m_bodies[d];
        CcPath& c = m_cc.paths[d];
        AdvanceBase(i);
        h.path = static_cast<uint16_t>(i);
        h.epoch = m_heads[i].epoch;
        h.psn = p.psnNext++;
        // The receiver may forget PSNs below this: their data was acknowledged or resent.
        h.ackBase = p.cumAck;
        if (c.inflightBytes == 0 && p.recs.Empty())
        {
            p.lastProgressPs = now; // the timer counts from the first packet outstanding
        }
        p.recs.PushBack(std::move(rec));
        c.inflightBytes += rec.payload;
        p.lastSendPs = now;
    }

    /// What an ACK of one path acknowledged and found lost.
    struct AckScan
    {
        uint64_t ackedBytes{0}; //!< as onAcked counted them
        uint32_t lost{0};       //!< holes below the highest SACKed PSN, newly found
        bool probeAcked{false};
    };

    /// Applies an ACK of path `i` (cumulative PSN `cum`, SACK bitmap `sack` above it) to its
    /// records: onAcked(record) for each newly acknowledged one (returns the bytes it
    /// newly acknowledged), onLost(msg, pkt) for each data packet now known lost. A path is
    /// FIFO, so a hole below a SACKed PSN is a loss. The callbacks may post and send, which
    /// may move any path's state: it is looked up afresh after each.
    template <class OnAcked, class OnLost>
    AckScan ScanAck(uint32_t i, uint32_t cum, const std::array<uint64_t, 4>& sack,
                    OnAcked&& onAcked, OnLost&& onLost)
    {
        const uint32_t d = Dense(i);
        AckScan out;
        // A record is marked by its PSN after onAcked, not through a reference: sending may
        // grow this path's record ring or pop its front.
        auto take = [&](TxRecord r, uint32_t psn, bool inRing)
        {
            if (r.state == REC_INFLIGHT)
            {
                m_cc.paths[d].inflightBytes -= r.payload;
            }
            if (r.state != REC_ACKED)
            {
                out.probeAcked = out.probeAcked || r.msg == kProbe;
                if (r.msg != kProbe)
                {
                    m_lastAckedSentPs = std::max(m_lastAckedSentPs, r.sentPs);
                }
                out.ackedBytes += onAcked(r);
                SPath& p = m_bodies[d];
                if (inRing && psn >= p.cumAck)
                {
                    p.recs.At(psn - p.cumAck).state = REC_ACKED;
                }
            }
        };
        // Everything below the cumulative PSN arrived.
        while (m_bodies[d].cumAck < cum)
        {
            TxRecord r = m_bodies[d].recs.PopFront();
            ++m_bodies[d].cumAck;
            take(r, 0, false);
        }
        AdvanceBase(i);
        // SACKed packets above it; any hole below the highest one is a loss.
        int64_t highest = -1;
        for (uint32_t word = 0; word < 4; ++word)
        {
            // Only the set bits: most ACKs carry none (in-order arrival).
            for (uint64_t bits = sack[word]; bits != 0; bits &= bits - 1)
            {
                uint32_t psn = cum + 1 + word * 64 + static_cast<uint32_t>(__builtin_ctzll(bits));
                if (psn >= m_bodies[d].psnNext)
                {
                    break;
                }
                if (psn >= m_bodies[d].cumAck)
                {
                    take(m_bodies[d].recs.At(psn - m_bodies[d].cumAck), psn, true);
                }
                highest = psn;
            }
        }
        SPath& p = m_bodies[d];
        for (int64_t psn = std::max(cum, p.cumAck); psn < highest; ++psn)
        {
            TxRecord& r = p.recs.At(static_cast<uint32_t>(psn - p.cumAck));
            if (r.state == REC_INFLIGHT)
            {
                r.state = REC_LOST;
                m_cc.paths[d].inflightBytes -= r.payload;
                if (r.msg != kProbe)
                {
                    onLost(r.msg, r.pkt);
                }
                ++out.lost;
            }
        }
        AdvanceBase(i);
        return out;
    }

    /// The tail-loss rule: a data packet still in flight on a path is lost once TailLossRtts
    /// x the path's smoothed RTT have passed since it was sent and either a packet the QP
    /// sent after it (on any path) was acknowledged, or the QP has nothing more to send
    /// (drained: its last packets have no later ones to vouch for the network). Calls
    /// onLost(msg, pkt) for each and onPathLoss(dense, n) for each path that lost n; returns
    /// the next time the rule may declare a loss (INT64_MAX: none pending).
    template <class OnLost, class OnPathLoss>
    int64_t DetectTailLosses(int64_t now, bool drained, OnLost&& onLost, OnPathLoss&& onPathLoss)
    {
        int64_t next = std::numeric_limits<int64_t>::max();
        if (Cfg().tailLossRtts <= 0 || (m_lastAckedSentPs == 0 && !drained))
        {
            return next;
        }
        for (uint32_t i = 0; i < m_heads.size(); ++i)
        {
            const PathHead& hd = m_heads[i];
            if (hd.body == 0 || hd.state == PATH_RETIRED || hd.state == PATH_PROBING ||
                m_cc.paths[hd.body - 1].inflightBytes == 0)
            {
                continue;
            }
            const uint32_t d = hd.body - 1u;
            const int64_t thr = TailLossPs(i);
            if (thr <= 0)
            {
                continue;
            }
            SPath& p = m_bodies[d];
            uint32_t lost = 0;
            int64_t firstLostSentPs = 0;
            // A path is FIFO: its records are in sending order, so the first one not yet due
            // ends the scan.
            for (uint32_t k = 0; k < p.recs.Size(); ++k)
            {
                TxRecord& r = p.recs.At(k);
                if (r.state != REC_INFLIGHT)
                {
                    continue;
                }
                if (r.sentPs >= m_lastAckedSentPs && !drained)
                {
                    break; // nothing sent after it was acknowledged yet
                }
                if (now < r.sentPs + thr)
                {
                    next = std::min(next, r.sentPs + thr);
                    break;
                }
                if (lost == 0)
                {
                    firstLostSentPs = r.sentPs;
                }
                r.state = REC_LOST;
                m_cc.paths[d].inflightBytes -= r.payload;
                if (r.msg != kProbe)
                {
                    onLost(r.msg, r.pkt);
                }
                ++lost;
            }
            if (lost > 0)
            {
                Count().lossesTail += lost;
                AdvanceBase(i);
                onPathLoss(d, lost);
                if (p.lastProgressPs <= firstLostSentPs)
                {
                    // Nothing came back on this path since: as silent as a timeout (a path
                    // into a failed plane must still be retired).
                    p.lastProgressPs = now;
                    PathSilent(i, now);
                }
            }
        }
        return next;
    }

    /// How long a packet of path i may be outstanding, once later packets of the QP were
    /// acknowledged, before the tail-loss rule declares it lost (0: the rule is off).
    int64_t TailLossPs(uint32_t i) const
    {
        // With the RTT's variation: a path whose queue grows must not look lossy (one
        // variation, not the RTO's four: the rule must act before the RTO would).
        int64_t srtt = Cc(i).srttPs;
        int64_t var = Body(i).rttvarPs;
        if (srtt == 0)
        {
            // Not answered yet: a path may be slow rather than lossy, and the QP's other
            // planes say little of it; the slowest answered path of its plane (same NIC port,
            // same first and last hops) does. None: the RTO decides.
            for (uint16_t k : m_planes[m_heads[i].plane].paths)
            {
                if (Cc(k).srttPs > srtt)
                {
                    srtt = Cc(k).srttPs;
                    var = Body(k).rttvarPs;
                }
            }
            if (srtt == 0)
            {
                return 0;
            }
        }
        return static_cast<int64_t>(Cfg().tailLossRtts * static_cast<double>(srtt)) + var;
    }

    /// When to look for tail losses after an ACK at `now` (INT64_MAX: the rule is off).
    int64_t TailCheckAt(int64_t now) const
    {
        if (Cfg().tailLossRtts <= 0 || m_qpSrttPs == 0)
        {
            return std::numeric_limits<int64_t>::max();
        }
        return now + static_cast<int64_t>(Cfg().tailLossRtts * static_cast<double>(m_qpSrttPs));
    }

    void NoteEcn(int64_t now) { m_lastEcnPs = now; }

    void NoteWindowLimited() { m_windowLimited = true; }

    // ---- path and plane changes
    /// wake: tell the owner the plane has work (not from inside a pull, which would re-enter).
    uint32_t OpenPath(uint32_t plane, PathState state = PATH_ACTIVE, bool wake = true,
                      bool virgin = false, PathEvent why = PathEvent::Opened);
    /// Opens the paths still owed to `plane` (OpenPathsOnFirstUse); wake as for OpenPath.
    void OpenOwed(uint32_t plane, bool wake);
    void RetirePath(uint32_t i, PathEvent why = PathEvent::Retired);
    /// The probing path of avoided `plane` that may send a probe now, or -1.
    int32_t ProbeDue(uint32_t plane, int64_t now);
    bool PlaneUsable(uint32_t plane) const;
    /// The plane answered a probe or its link came back.
    void PlaneUsable(uint32_t plane, int64_t now);
    /// The NIC port of `plane` went down or up.
    void PortState(uint32_t plane, bool up, int64_t now);
    /// Opens paths when every window is at its cap and the sender is window-limited.
    void MaybeGrow(int64_t now);
    /// The timer's work: timeouts, idle paths, probes. Returns the next deadline (or
    /// INT64_MAX); work: the sender has data to send.
    int64_t Housekeeping(int64_t now, bool work);
    /// The earliest timeout of a path with data outstanding (or INT64_MAX).
    int64_t NextDeadline() const;

    uint32_t GetActivePaths() const;
    uint32_t GetActivePathsOnPlane(uint32_t plane) const;

  private:
    //! A configuration and what follows from it alone, shared by every sender configured
    //! alike: a run holds one per distinct configuration, not one per connection.
    struct Shared
    {
        Config cfg;
        CcPath virginCc; //!< the congestion state of a path opened with the connection
    };

    /// The shared copy of `cfg` (made at its first use; never freed: a run has a few).
    static const Shared* Intern(const Config& cfg);
    /// A newly opened path's congestion state under `cfg`.
    static CcPath InitialCc(const Config& cfg, PathState state);
    const Config& Cfg() const { return m_shared->cfg; }

    void Materialize(PathHead& hd);
    /// A newly opened path's sequence and timing state (also the connection's shared
    /// initial state).
    void FreshBody(SPath& p) const;
    /// A newly opened path's state.
    void FreshPath(SPath& p, CcPath& c, PathState state) const
    {
        FreshBody(p);
        c = InitialCc(Cfg(), state);
    }
    /// Opens every path still owed (before the path set is restructured).
    void OpenOwedPaths();
    /// A plane stops taking data (its link failed, or it is avoided): counts the failover,
    /// retires its paths and gives up those owed to it; returns how many to open elsewhere.
    uint32_t LeavePlane(uint32_t plane, int64_t now);
    /// Returns how many data packets it gave back to the sender.
    uint32_t MoveInflightToRetx(uint32_t i);
    void PathTimeout(uint32_t i, int64_t now);
    /// Path i went a timeout's worth without an answer: counts it, and retires the path
    /// (and avoids its plane) after PathFailTimeouts in a row.
    void PathSilent(uint32_t i, int64_t now);
    void AvoidPlane(uint32_t plane, int64_t now);
    void Rebalance();
    uint32_t LeastPopulatedPlane() const;

    const Shared* m_shared{nullptr}; //!< the configuration
    Owner* m_owner{nullptr};
    int64_t* m_nicRtt{nullptr};
    CcState m_cc;
    std::vector<PathHead> m_heads; //!< [path id]
    std::vector<SPath> m_bodies;   //!< [PathHead::body - 1], parallel to m_cc.paths
    std::vector<Plane> m_planes;
    SPath m_virginBody; //!< the state of a path opened with the connection, until first use
    int64_t m_qpSrttPs{0};
    int64_t m_qpMinRttPs{0}; //!< lowest RTT seen on any path: the base RTT
    int64_t m_lastEcnPs{-1};
    int64_t m_lastGrowPs{0};
    int64_t m_lastAckedSentPs{0}; //!< latest send time of a data packet acknowledged
    bool m_windowLimited{false};
    FastRng m_rng;
    uint64_t m_pathsOpened{0};
    //! null until a rare event (a retirement, a loss, a probe): most connections have none
    std::unique_ptr<PathCounters> m_pc;
};

} // namespace metaroce
} // namespace ns3

#endif
