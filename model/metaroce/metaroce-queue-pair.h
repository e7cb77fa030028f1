/*
 * A MetaRoCE connection: one QP carrying many ordered streams over many paths.
 *
 *  - A path is (plane, entropy) with its own PSN space, window (PWND), RTT estimate,
 *    in-flight bytes, ECN state and health; QWND = sum of PWND.
 *  - Each MTU chunk goes to an eligible path of the plane whose port is free (the NIC pulls
 *    per port, so traffic spreads over planes with their capacity) chosen by SprayPolicy.
 *  - The receiver places every packet by its offset (no reorder buffer), completes messages
 *    in order per stream, and acknowledges per path: cumulative PSN + 256-bit SACK bitmap,
 *    echoed timestamp and ECN, and its fair-share rate hint (RCN).
 *  - A gap inside one path's sequence is a loss (a path is one ECMP route, so FIFO): exactly
 *    the missing packet is retransmitted at once, on whichever path is free. Reordering
 *    across paths never triggers a retransmission.
 *  - Per-path RTO; PathFailTimeouts consecutive timeouts retire a path and its data moves to
 *    other paths; a replacement gets new entropy (a new epoch: fresh PSN space). When
 *    PlaneFailPaths paths of one plane are retired in a row the plane is avoided and probed
 *    until it answers; a NIC port whose link is down is avoided at once.
 *  - The path count grows while every path's window sits at PathWindowCap, the sender is
 *    window-limited and no ECN was seen for an RTT (long RTTs), and idle paths above MinPaths
 *    close.
 * No MetaRoCE specification is public: every constant here is an assumption (attributes).
 */
#ifndef METAROCE_METAROCE_QUEUE_PAIR_H
#define METAROCE_METAROCE_QUEUE_PAIR_H

#include "model/fabric/fabric-random.h"
#include "model/fabric/ring.h"
#include "model/transport/queue-pair.h"
#include "model/transport/rdma-congestion-ops.h"

#include "ns3/event-id.h"
#include "ns3/type-id.h"

#include <array>
#include <boost/container/small_vector.hpp>
#include <deque>
#include <memory>
#include <vector>

namespace ns3
{
namespace metaroce
{

class MetaRoceRateHint;

class MetaRoceQueuePair : public QueuePair
{
  public:
    static TypeId GetTypeId();
    MetaRoceQueuePair();
    ~MetaRoceQueuePair() override;

    enum SprayPolicy
    {
        ROUND_ROBIN,
        LEAST_LOADED,
        LOWEST_RTT
    };

    enum PathState : uint8_t
    {
        PATH_ACTIVE,
        PATH_DRAINING, //!< takes no new data; retired once empty (rebalancing)
        PATH_PROBING,  //!< one probe at a time on an avoided plane
        PATH_RETIRED
    };

    Ptr<QueuePair> Clone() const override;
    PullResult PullFrame(uint32_t port, FabricFrame& out) override;
    void Receive(uint32_t port, FabricFrame& frame, const RdmaHeaderData& h) override;
    void PrepareReceive(const RdmaFields& h, uint32_t stage) const override;
    void PreparePull(uint32_t port, uint32_t stage) const override;
    void NotifyPortState(uint32_t port, bool up) override;
    bool ReleaseState() override;

    bool HasReleasableState() const override
    {
        return m_tx != nullptr || !m_rx.empty() || !m_rxSlot.empty();
    }

    /// What tests and reports may read of a path.
    struct PathView
    {
        uint32_t plane;
        uint16_t entropy;
        uint8_t epoch;
        PathState state;
        double cwndBytes;
        uint64_t inflightBytes;
        int64_t srttPs;
    };

    uint32_t GetNPathSlots() const { return m_tx ? static_cast<uint32_t>(m_tx->heads.size()) : 0; }
    PathView GetPath(uint32_t i) const;
    /// Paths with state of their own; the others have sent nothing since the connection
    /// opened them and share its initial state.
    uint32_t GetPathsTouched() const
    {
        return m_tx ? static_cast<uint32_t>(m_tx->bodies.size()) : 0;
    }
    uint32_t GetActivePaths() const;
    uint32_t GetActivePathsOnPlane(uint32_t plane) const;
    /// QWND: the sum of the windows of the paths that take data.
    double GetQpWindowBytes() const;
    double GetRateBps() const { return m_tx ? m_tx->cc.rateBps : 0; }
    bool IsPlaneAvoided(uint32_t plane) const;
    Ptr<RdmaCongestionOps> GetCongestionControl() const { return m_tx ? m_tx->ccOps : nullptr; }

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
        uint64_t lossesDetected{0};
        int64_t firstPlaneAvoidedPs{-1}; //!< first time a plane was avoided
        int64_t lastPlaneAvoidedPs{-1};
        int64_t lastPlaneRecoveredPs{-1};
    };

    const PathCounters& GetPathCounters() const;

    typedef void (*PlaneStateTracedCallback)(uint32_t plane, bool usable);

  protected:
    void DoDispose() override;
    void OnPosted() override;

  private:
    static constexpr uint64_t kProbe = ~0ULL;
    static constexpr uint32_t kSackBits = 256;

    enum RecState : uint8_t
    {
        REC_INFLIGHT,
        REC_ACKED,
        REC_LOST
    };

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
    //! 100k-rank all-to-all), so an untouched path is read from Sender::virginBody.
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

    struct Bits256
    {
        std::array<uint64_t, 4> w{};

        bool Test(uint32_t i) const { return (w[i >> 6] >> (i & 63)) & 1; }

        void Set(uint32_t i) { w[i >> 6] |= 1ULL << (i & 63); }

        void ShiftRight1()
        {
            for (int k = 0; k < 3; ++k)
            {
                w[k] = (w[k] >> 1) | (w[k + 1] << 63);
            }
            w[3] >>= 1;
        }

        void ShiftRight(uint32_t n)
        {
            if (n >= 256)
            {
                w = {};
                return;
            }
            uint32_t words = n >> 6;
            uint32_t bits = n & 63;
            for (uint32_t k = 0; k < 4; ++k)
            {
                uint64_t lo = k + words < 4 ? w[k + words] : 0;
                uint64_t hi = k + words + 1 < 4 ? w[k + words + 1] : 0;
                w[k] = bits == 0 ? lo : (lo >> bits) | (hi << (64 - bits));
            }
        }
    };

    struct RPath
    {
        Bits256 above;
        uint32_t cum{0};
        uint32_t unacked{0};
        int64_t lastTsPs{0};
        uint16_t entropy{0};
        uint8_t epoch{0};
        uint8_t port{0};
        bool init{false};
        bool ecn{false};
        bool probe{false}; //!< the last packet was a probe
    };

    struct Plane
    {
        bool linkUp{true};
        bool avoided{false};
        uint32_t retiredInRow{0};
        uint16_t owed{0}; //!< paths of this plane's share not opened yet (OpenPathsOnFirstUse)
        uint32_t rr{0};   //!< round-robin cursor
        //! slots of the paths on this plane (any state but retired); a few fit inline, so
        //! millions of QPs need no allocation per plane
        boost::container::small_vector<uint16_t, 4> paths;
    };

    void EnsureInit();
    /// wake: tell the NIC the plane has work (not from inside PullFrame, which would re-enter).
    uint32_t OpenPath(uint32_t plane, PathState state = PATH_ACTIVE, bool wake = true,
                      bool virgin = false);
    //! A path's state for reading: an untouched path reads the shared initial state.
    const SPath& Body(uint32_t i) const
    {
        uint16_t b = m_tx->heads[i].body;
        return b != 0 ? m_tx->bodies[b - 1] : m_tx->virginBody;
    }

    const CcPath& Cc(uint32_t i) const
    {
        uint16_t b = m_tx->heads[i].body;
        return b != 0 ? m_tx->cc.paths[b - 1] : m_tx->virginCc;
    }

    //! The index of path i's own state in bodies and cc.paths, made at its first write.
    //! It may move the other paths' state: take references after it.
    uint32_t Dense(uint32_t i);
    /// A newly opened path's state (also the connection's shared initial state).
    void FreshPath(SPath& p, CcPath& c, PathState state) const;
    /// Opens the paths still owed to `plane` (OpenPathsOnFirstUse); wake as for OpenPath.
    void OpenOwed(uint32_t plane, bool wake);
    /// Opens every path still owed (before the path set is restructured).
    void OpenOwedPaths();
    /// A plane stops taking data (its link failed, or it is avoided): counts the failover,
    /// retires its paths and gives up those owed to it; returns how many to open elsewhere.
    uint32_t LeavePlane(uint32_t plane, int64_t now);
    void RetirePath(uint32_t i);
    void MoveInflightToRetx(uint32_t i);
    /// Drops the records at the front that need nothing more (acked, or lost and resent).
    void AdvanceBase(uint32_t i);
    int32_t SelectPath(uint32_t plane, int64_t now) const;
    bool Eligible(uint32_t i) const;
    bool NextChunk(uint64_t& msg, uint32_t& pkt, bool& retx);
    bool HasData();
    /// Whether the QP's bytes in flight leave room for one more packet (QWND caps).
    bool QpWindowOpen() const;
    void WakeAll();
    void Wake(uint32_t plane);
    void PacingWake();
    int64_t RtoPs(uint32_t i) const;
    void ArmTimer(int64_t atPs);
    /// Arms the timer for the earliest timeout of a path with data outstanding.
    void ArmTimerForDeadlines();
    void Housekeeping();
    /// Nothing to send, to resend or in flight.
    bool SenderIdle() const;
    void PathTimeout(uint32_t i, int64_t now);
    void AvoidPlane(uint32_t plane, int64_t now);
    void PlaneUsable(uint32_t plane, int64_t now);
    void Rebalance();
    uint32_t LeastPopulatedPlane() const;
    bool PlaneUsable(uint32_t plane) const;
    void MaybeGrow(int64_t now);
    uint64_t AckChunk(const TxRecord& r);
    void ReceiveData(uint32_t port, FabricFrame& frame, const RdmaHeaderData& h);
    void ReceiveAck(uint32_t port, const RdmaHeaderData& h);
    void SendPathAck(uint32_t pathId);
    void FlushAcks();
    /// Frees the storage of empty send queues and in-flight records (nothing to send).
    void ReleaseIdle();
    SendMessage& Msg(uint64_t abs) { return m_sendQueue.At(abs - m_sendQueueBase); }

    // attributes
    uint32_t m_minPaths{12};
    uint32_t m_maxPaths{64};
    uint32_t m_initialWindow{16};
    uint32_t m_pathWindowCap{128};
    uint32_t m_qpWindowCap{0};
    double m_hintWindowGain{2.0};
    uint32_t m_pacingBurst{2};
    uint32_t m_ackInterval{1};
    Time m_ackDelay;
    Time m_rtoMin;
    Time m_initialRto;
    uint32_t m_pathFailTimeouts{3};
    uint32_t m_planeFailPaths{2};
    Time m_probeInterval;
    Time m_idleTimeout;
    bool m_growPaths{true};
    bool m_openOnFirstUse{false};
    //! it retransmitted or probed: copies may still be in flight, which the peer would
    //! acknowledge again, so it may not close (ReleaseState)
    bool m_sentCopies{false};
    //! ReleaseState found data in flight (resent copies): the timer releases the sender
    //! state once everything is answered
    bool m_releaseWanted{false};
    SprayPolicy m_policy{ROUND_ROBIN};
    TypeId m_ccType;

    // sender: allocated by EnsureInit, so a QP that only receives (one direction of a
    // collective's connection, half of all QPs) carries none of it
    struct Sender
    {
        CcState cc;
        Ptr<RdmaCongestionOps> ccOps;
        std::vector<PathHead> heads; //!< [path id]
        std::vector<SPath> bodies;   //!< [PathHead::body - 1], parallel to cc.paths
        std::vector<Plane> planes;
        SPath virginBody; //!< the state of a path opened with the connection, until first use
        CcPath virginCc;
        Ring<std::pair<uint64_t, uint32_t>> retx; //!< (message, packet) to send again
        uint64_t txMsg{0};
        int64_t paceVirtPs{0};
        int64_t qpSrttPs{0};
        int64_t qpMinRttPs{0}; //!< lowest RTT seen on any path: the base RTT
        int64_t lastEcnPs{-1};
        int64_t lastGrowPs{0};
        int64_t timerAtPs{-1};
        bool windowLimited{false};
        EventId timer;
        EventId paceEvent;
        FastRng rng;
        PathCounters pc;
    };

    /// Owns the sender state; copying (a prototype's Clone) yields none.
    struct SenderPtr : std::unique_ptr<Sender>
    {
        SenderPtr() = default;
        SenderPtr(const SenderPtr&)
            : std::unique_ptr<Sender>()
        {
        }
    };

    SenderPtr m_tx; //!< null until the first send

    // receiver
    std::vector<RPath> m_rx;        //!< the paths heard from, in order of first packet
    std::vector<uint16_t> m_rxSlot; //!< [path id] 1 + index in m_rx; 0: not heard from

    /// The receive state of path `id`, or null if nothing came on it yet.
    RPath* RxPath(uint32_t id)
    {
        return id < m_rxSlot.size() && m_rxSlot[id] != 0 ? &m_rx[m_rxSlot[id] - 1] : nullptr;
    }

    const RPath* RxPath(uint32_t id) const
    {
        return id < m_rxSlot.size() && m_rxSlot[id] != 0 ? &m_rx[m_rxSlot[id] - 1] : nullptr;
    }
    Ptr<MetaRoceRateHint> m_hint;
    EventId m_ackFlush;

    TracedCallback<uint32_t, bool> m_planeTrace;
};

} // namespace metaroce
} // namespace ns3

#endif
