/*
 * A MetaRoCE connection: one QP carrying many ordered streams over many paths. The QP is the
 * sender; it owns a MetaRocePathManager (the paths, their windows and health) and a
 * MetaRoceReceiver (per-path SACK state and ACKs).
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
 *  - Timeouts, path retirement, plane avoidance and probing, and path growth: see
 *    metaroce-path-manager.h.
 * No MetaRoCE specification is public: every constant here is an assumption (attributes).
 */
#ifndef METAROCE_METAROCE_QUEUE_PAIR_H
#define METAROCE_METAROCE_QUEUE_PAIR_H

#include "metaroce-nic-rtt.h"
#include "metaroce-path-manager.h"
#include "metaroce-receiver.h"
#include "model/core/fast-simulator-impl.h"
#include "model/core/ring.h"
#include "model/transport/queue-pair.h"
#include "model/transport/rdma-congestion-ops.h"

#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/simple-ref-count.h"
#include "ns3/type-id.h"

#include <memory>

namespace ns3
{
namespace metaroce
{

class MetaRoceRateHint;

class MetaRoceQueuePair : public QueuePair, private MetaRocePathManager::Owner
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

    using PathState = MetaRocePathManager::PathState;
    static constexpr PathState PATH_ACTIVE = MetaRocePathManager::PATH_ACTIVE;
    static constexpr PathState PATH_DRAINING = MetaRocePathManager::PATH_DRAINING;
    static constexpr PathState PATH_PROBING = MetaRocePathManager::PATH_PROBING;
    static constexpr PathState PATH_RETIRED = MetaRocePathManager::PATH_RETIRED;

    Ptr<QueuePair> Clone() const override;
    PullResult PullFrame(uint32_t port, FabricFrame& out) override;
    void Receive(uint32_t port, FabricFrame& frame, const RdmaHeaderData& h) override;
    void PrepareReceive(const RdmaFields& h, uint32_t stage) const override;
    void PreparePull(uint32_t port, uint32_t stage) const override;
    void NotifyPortState(uint32_t port, bool up) override;
    bool ReleaseState() override;

    bool HasReleasableState() const override
    {
        return m_tx != nullptr || (m_rx != nullptr && m_rx->paths.HasState());
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

    uint32_t GetNPathSlots() const { return m_tx ? m_tx->paths.NSlots() : 0; }
    PathView GetPath(uint32_t i) const;
    /// Paths with state of their own; the others have sent nothing since the connection
    /// opened them and share its initial state.
    uint32_t GetPathsTouched() const
    {
        return m_tx ? static_cast<uint32_t>(m_tx->paths.Bodies().size()) : 0;
    }
    uint32_t GetActivePaths() const;
    uint32_t GetActivePathsOnPlane(uint32_t plane) const;
    /// QWND: the sum of the windows of the paths that take data.
    double GetQpWindowBytes() const;
    double GetRateBps() const { return m_tx ? m_tx->paths.Window().rateBps : 0; }
    bool IsPlaneAvoided(uint32_t plane) const;
    Ptr<RdmaCongestionOps> GetCongestionControl() const { return m_tx ? m_tx->ccOps : nullptr; }

    using PathCounters = MetaRocePathManager::PathCounters;

    PathCounters GetPathCounters() const;

    typedef void (*PlaneStateTracedCallback)(uint32_t plane, bool usable);

    /// Reports window changes to the trace block's sinks (PathWindow, QpWindow); called after
    /// anything that may move a window, only when the QP is traced.
    void TraceWindows();

    /// The attributes. A factory's prototype and its copies share one block (a QP would
    /// otherwise carry some 110 bytes of them, and a run holds millions of QPs); setting an
    /// attribute of one QP gives it a copy of its own first.
    struct Attributes : SimpleRefCount<Attributes>
    {
        uint32_t minPaths{0}; //!< 0: minPathsPerPlane x planes
        uint32_t maxPaths{0}; //!< 0: maxPathsPerPlane x planes
        uint32_t minPathsPerPlane{12};
        uint32_t maxPathsPerPlane{64};
        uint32_t initialWindow{2};
        uint32_t pathWindowCap{128};
        uint32_t qpWindowCap{0};
        uint32_t firstRttWindow{0};
        uint32_t pacingBurst{2};
        uint32_t ackInterval{1};
        uint32_t pathFailTimeouts{3};
        uint32_t planeFailPaths{2};
        double tailLossRtts{2.5};
        double hintWindowGain{2.0};
        double qpWindowBdps{2.0};
        Time ackDelay{MicroSeconds(1)};
        Time rtoMin{MicroSeconds(100)};
        Time initialRto{MilliSeconds(5)};
        Time probeInterval{MicroSeconds(500)};
        Time idleTimeout{MilliSeconds(1)};
        SprayPolicy policy{LEAST_LOADED};
        TypeId ccType;
        bool nicRttForRto{true};
        bool growPaths{true};
        bool openOnFirstUse{true};
    };

    const Attributes& Attrs() const { return *m_attrs; }

    /// The attributes to change (the attribute system's accessors): this QP's own copy.
    Attributes& MutableAttrs();

  protected:
    void DoDispose() override;
    void OnPosted() override;
    void InitTraces(QueuePairTraces& t) override;

  private:
    using PM = MetaRocePathManager;
    using TxRecord = PM::TxRecord;
    using SPath = PM::SPath;
    using PathHead = PM::PathHead;
    using Plane = PM::Plane;

    void EnsureInit();
    bool NextChunk(uint64_t& msg, uint32_t& pkt, bool& retx);
    bool HasData();
    int32_t SelectPath(uint32_t plane, int64_t now) const;
    /// Whether the QP's bytes in flight leave room for one more packet (QWND caps).
    bool QpWindowOpen() const;
    void WakeAll();
    void Wake(uint32_t plane);
    void PacingWake();
    void ArmTimer(int64_t atPs);
    /// Arms the timer for the earliest timeout of a path with data outstanding.
    void ArmTimerForDeadlines();
    void Housekeeping();
    /// Nothing to send, to resend or in flight.
    bool SenderIdle() const;
    uint64_t AckChunk(const TxRecord& r);
    void ReceiveData(uint32_t port, FabricFrame& frame, const RdmaHeaderData& h);
    void ReceiveAck(uint32_t port, const RdmaHeaderData& h);
    void SendPathAck(uint32_t pathId);
    void FlushAcks();
    /// Frees the storage of empty send queues and in-flight records (nothing to send).
    void ReleaseIdle();
    SendMessage& Msg(uint64_t abs) { return m_sendQueue.At(abs - m_sendQueueBase); }

    // MetaRocePathManager::Owner
    void WakePlane(uint32_t plane) override { Wake(plane); }
    void WakeAllPlanes() override { WakeAll(); }
    void Resend(uint64_t msg, uint32_t pkt) override { m_tx->retx.PushBack({msg, pkt}); }
    void ArmTimerAt(int64_t atPs) override { ArmTimer(atPs); }
    void PathTimedOut(uint32_t dense, bool probing) override;
    void PlaneStateChanged(uint32_t plane, bool usable) override;
    void PathChanged(uint32_t path, uint32_t plane, PathEvent what) override;

    //! it retransmitted or probed: copies may still be in flight, which the peer would
    //! acknowledge again, so it may not close (ReleaseState)
    bool m_sentCopies{false};
    //! ReleaseState found data in flight (resent copies): the timer releases the sender
    //! state once everything is answered
    bool m_releaseWanted{false};
    Ptr<Attributes> m_attrs; //!< shared with the QPs configured alike

    // sender: allocated by EnsureInit, so a QP that only receives (one direction of a
    // collective's connection, half of all QPs) carries none of it
    struct Sender
    {
        MetaRocePathManager paths; //!< the paths, their windows (CcState) and health
        Ptr<RdmaCongestionOps> ccOps;
        Ptr<MetaRoceNicRtt> nicRtt;
        Ring<std::pair<uint64_t, uint32_t>> retx; //!< (message, packet) to send again
        uint64_t txMsg{0};
        int64_t paceVirtPs{0};
        int64_t timerAtPs{-1};
        bool acked{false};        //!< an ACK came (FirstRttWindow no longer applies)
        bool qpWindowShut{false}; //!< a plane found the first-RTT cap shut since the last wake
        EventId timer;
        EventId paceEvent;
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

    // receiver: made at the first data frame, so the sending end of a connection (it only
    // hears ACKs) carries none of it, and freed by ReleaseState
    struct Receiver
    {
        MetaRoceReceiver paths; //!< per-path sequence and SACK state
        EventId ackFlush;       //!< coalesced ACKs (AckInterval > 1)
    };

    /// Owns the receiver state; copying (a prototype's Clone) yields none.
    struct ReceiverPtr : std::unique_ptr<Receiver>
    {
        ReceiverPtr() = default;
        ReceiverPtr(const ReceiverPtr&)
            : std::unique_ptr<Receiver>()
        {
        }
    };

    Receiver& ReceiverState()
    {
        if (m_rx == nullptr)
        {
            m_rx.reset(new Receiver);
        }
        return *m_rx;
    }

    /// Whether coalesced ACKs wait for their timer.
    bool AckFlushPending() const { return m_rx != nullptr && IsPending(m_rx->ackFlush); }

    ReceiverPtr m_rx; //!< null until the first data frame, and again after ReleaseState
    Ptr<MetaRoceRateHint> m_hint;
};

} // namespace metaroce
} // namespace ns3

#endif
