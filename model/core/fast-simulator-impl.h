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
 */
#ifndef METAROCE_FAST_SIMULATOR_IMPL_H
#define METAROCE_FAST_SIMULATOR_IMPL_H

#include "ns3/event-impl.h"
#include "ns3/nstime.h"
#include "ns3/scheduler.h"
#include "ns3/simulator-impl.h"
#include "ns3/simulator.h"

#include <cstdint>
#include <list>
#include <thread>

namespace ns3
{
namespace metaroce
{

class FastSimulatorImpl final : public SimulatorImpl
{
  public:
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

  protected:
    void DoDispose() override;

  private:
    inline static FastSimulatorImpl* s_running{nullptr};

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
