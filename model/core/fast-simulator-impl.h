/*
 * ns-3's sequential simulator without its per-event overhead. It runs events in exactly the
 * order DefaultSimulatorImpl does (by time, then by the order they were scheduled, with the
 * same numbering), counts them the same way, and has the same Stop, Destroy and context
 * semantics, so swapping it in changes no result, only speed.
 *
 * Why: in ns-3 3.37 as Debian builds it, the simulator spends about 550 instructions on each
 * event outside the model (a log-level check in every Schedule, an EventId built and dropped
 * for a pre-event hook, reference counting on every returned EventId, two calls for each
 * Simulator::Now), which on a small fabric was a third of all instructions. Here the loop is
 * lean, and this module's own hot events and clock reads reach it without the virtual
 * SimulatorImpl interface (NowPs, ScheduleInPs below), falling back to ns-3's API whenever
 * another simulator implementation runs (realtime, distributed).
 *
 * Single-threaded: scheduling from another thread (which DefaultSimulatorImpl queues under a
 * lock) is a fatal error here.
 *
 * TieOrder "node" (an ordering of its own, for runs split over processes): events at the same
 * time run in an order that each node's own history fixes, whichever process runs the node,
 * so a run on several processes gives the same bytes as on one. ns-3's order (by scheduling
 * count, one counter for the whole simulation) cannot survive a split: another process's
 * frames are scheduled when they are received, not when they were sent. Here an event's tie
 * is who scheduled it and that one's own count: (node, the node's count) for an event a
 * node's code scheduled; (no context, a count) for events of no node's (the program's,
 * faults), which every process schedules alike and which run after the nodes' events of the
 * same time; and a frame's arrival is ordered by its link and direction (one frame per link
 * direction per instant), before the nodes' own events, whether the frame came from this
 * process or another. A Synchronizer (helper/mpi-fabric.h) runs it on several processes:
 * before each window it exchanges what crossed and agrees on how far every process may run
 * (granted time windows: the earliest pending event anywhere plus the lookahead).
 */
#ifndef METAROCE_FAST_SIMULATOR_IMPL_H
#define METAROCE_FAST_SIMULATOR_IMPL_H

#include "bucket-queue.h"

#include "ns3/event-impl.h"
#include "ns3/nstime.h"
#include "ns3/scheduler.h"
#include "ns3/simulator-impl.h"
#include "ns3/simulator.h"

#include <cstdint>
#include <list>
#include <thread>
#include <vector>

namespace ns3
{
namespace metaroce
{

class FastSimulatorImpl final : public SimulatorImpl
{
  public:
    /// How events at the same time are ordered (see the file's comment).
    enum class TieOrder
    {
        Scheduled, //!< ns-3's: by when they were scheduled
        Node,      //!< by who scheduled them and that one's own count
    };

    /// What keeps a TieOrder::Node run in step with other processes' (an MPI run).
    class Synchronizer
    {
      public:
        virtual ~Synchronizer() = default;
        /// Hands over what this process sent other processes in the window just run and
        /// schedules what they sent it (InsertWithTie). Every process calls it alike.
        virtual void Exchange() = 0;
        /// Given this process's earliest pending event (UINT64_MAX: none) and whether it has
        /// stopped: how far every process may run (events strictly before it), or 0 when
        /// the simulation has ended everywhere (no event left, or a process stopped).
        virtual uint64_t Grant(uint64_t nextTs, bool stopped) = 0;
        /// This process's rank (Simulator::GetSystemId).
        virtual uint32_t SystemId() const = 0;
    };

    /// A frame arrival's tie in TieOrder::Node: its link (a channel id) and direction.
    static uint64_t FrameTie(uint32_t channelId, uint32_t dir)
    {
        return (static_cast<uint64_t>(channelId) << 1) | dir;
    }

    static TypeId GetTypeId();
    FastSimulatorImpl();
    ~FastSimulatorImpl() override;

    void Destroy() override;
    bool IsFinished() const override;
    void Stop() override;
    void Stop(const Time& delay) override;
    EventId Schedule(const Time& delay, EventImpl* event) override;
    void ScheduleWithContext(uint32_t context, const Time& delay, EventImpl* event) override;
    EventId ScheduleNow(EventImpl* event) override;
    EventId ScheduleDestroy(EventImpl* event) override;
    void Remove(const EventId& id) override;
    void Cancel(const EventId& id) override;
    bool IsExpired(const EventId& id) const override;
    void Run() override;
    Time Now() const override;
    Time GetDelayLeft(const EventId& id) const override;
    Time GetMaximumSimulationTime() const override;
    void SetScheduler(ObjectFactory schedulerFactory) override;
    uint32_t GetSystemId() const override;
    uint32_t GetContext() const override;
    uint64_t GetEventCount() const override;

    /// The instance inside Run() when time steps are picoseconds (the module's resolution),
    /// else null: then the helpers below take ns-3's API.
    static FastSimulatorImpl* Running() { return s_running; }

    /// Inserts `event` (whose reference the scheduler now holds) `delay` steps from now.
    void Insert(EventImpl* event, uint64_t delay, uint32_t context)
    {
        if (m_nodeOrder)
        {
            InsertWithTie(event, m_currentTs + delay, context, NextTie());
            return;
        }
        Scheduler::Event ev;
        ev.impl = event;
        ev.key.m_ts = m_currentTs + delay;
        ev.key.m_context = context;
        ev.key.m_uid = m_uid++;
        ++m_unscheduledEvents;
        m_events->Insert(ev);
    }

    uint64_t CurrentTs() const { return m_currentTs; }
    uint32_t CurrentContext() const { return m_currentContext; }

    bool NodeOrder() const { return m_nodeOrder; }
    TieOrder GetTieOrder() const { return m_nodeOrder ? TieOrder::Node : TieOrder::Scheduled; }
    void SetTieOrder(TieOrder order);
    /// TieOrder::Node: the tie an event scheduled now would get (the current context's next
    /// count, which this takes). For what another process will schedule on this one's behalf.
    uint64_t NextTie();
    /// TieOrder::Node: inserts `event` (the scheduler takes over a reference) at time `ts`
    /// in `context` with tie `tie`.
    void InsertWithTie(EventImpl* event, uint64_t ts, uint32_t context, uint64_t tie);
    /// TieOrder::Node only; null: one process.
    void SetSynchronizer(Synchronizer* sync) { m_sync = sync; }

  protected:
    void DoDispose() override;

  private:
    inline static FastSimulatorImpl* s_running{nullptr};

    /// TieOrder::Node's pending event (as bucket-queue.h wants it: impl and key).
    struct NodeKey
    {
        uint64_t m_ts;
        uint64_t m_tie;
        uint32_t m_context;
        uint32_t m_uid; //!< for EventId only (this process's count)
    };
    struct NodeEvent
    {
        EventImpl* impl;
        NodeKey key;
    };
    struct NodeTieOrder
    {
        static constexpr bool kNewestLast = false; // a tie is by node, not scheduling order

        static bool Before(const NodeEvent& a, const NodeEvent& b)
        {
            return a.key.m_ts < b.key.m_ts ||
                   (a.key.m_ts == b.key.m_ts && a.key.m_tie < b.key.m_tie);
        }
        static bool SecondBefore(const NodeEvent& a, const NodeEvent& b)
        {
            return a.key.m_tie < b.key.m_tie;
        }
        static void Copy(NodeEvent& dst, const NodeEvent& src) { dst = src; }
    };
    void RunNodeOrder();
    void SetTieOrderValue(int order) { SetTieOrder(static_cast<TieOrder>(order)); }
    int GetTieOrderValue() const { return static_cast<int>(GetTieOrder()); }

    bool m_nodeOrder{false};
    BucketQueue<NodeEvent, NodeTieOrder> m_nodeQueue;
    std::vector<uint64_t> m_nodeCount; //!< per context: events it scheduled
    uint64_t m_programCount{0};        //!< events scheduled with no context
    std::vector<uint32_t> m_ranNow;    //!< uids run at m_currentTs (IsExpired)
    Synchronizer* m_sync{nullptr};

    std::list<EventId> m_destroyEvents;
    bool m_stop{false};
    Ptr<Scheduler> m_events;
    uint32_t m_uid;
    uint32_t m_currentUid{0};
    uint64_t m_currentTs{0};
    uint32_t m_currentContext;
    uint64_t m_eventCount{0};
    int64_t m_unscheduledEvents{0};
    std::thread::id m_mainThreadId;
};

/// EventId::IsRunning without ns-3's detour (a logged static call, then a virtual one) while
/// FastSimulatorImpl runs: the transports ask it for a timer on every packet.
inline bool
IsPending(const EventId& id)
{
    if (FastSimulatorImpl* s = FastSimulatorImpl::Running())
    {
        return !s->IsExpired(id); // a final class: a direct call
    }
    return id.IsRunning();
}

/// The current time in picoseconds.
inline int64_t
NowPs()
{
    if (FastSimulatorImpl* s = FastSimulatorImpl::Running())
    {
        return static_cast<int64_t>(s->CurrentTs());
    }
    return Simulator::Now().GetPicoSeconds();
}

/// Schedules `event` `delayPs` from now in the current context; the scheduler takes a
/// reference of its own, as Simulator::Schedule(Time, Ptr<EventImpl>) does.
inline void
ScheduleInPs(EventImpl* event, int64_t delayPs)
{
    if (FastSimulatorImpl* s = FastSimulatorImpl::Running())
    {
        event->Ref();
        s->Insert(event, static_cast<uint64_t>(delayPs), s->CurrentContext());
        return;
    }
    Simulator::Schedule(PicoSeconds(delayPs), Ptr<EventImpl>(event));
}

/// The same in another context (a node's id), as Simulator::ScheduleWithContext.
inline void
ScheduleInPsWithContext(EventImpl* event, uint32_t context, int64_t delayPs)
{
    event->Ref();
    if (FastSimulatorImpl* s = FastSimulatorImpl::Running())
    {
        s->Insert(event, static_cast<uint64_t>(delayPs), context);
        return;
    }
    // ScheduleWithContext takes the raw pointer without adding a reference and releases one
    // after the event has run: the Ref above is that one.
    Simulator::ScheduleWithContext(context, PicoSeconds(delayPs), event);
}

} // namespace metaroce
} // namespace ns3

#endif
