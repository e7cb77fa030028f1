/*
 * An event object that an element schedules again and again (a port's transmitter, one
 * direction of a link): Simulator::Schedule with a lambda or member pointer allocates and
 * frees an EventImpl per event, which at one or two events per packet-hop is a measurable
 * share of the run. An owner that must void a pending firing (a link failure, disposal)
 * cancels the object (EventImpl::Cancel is final) and takes a fresh one for what follows.
 */
#ifndef METAROCE_REUSABLE_EVENT_H
#define METAROCE_REUSABLE_EVENT_H

#include "model/core/fast-simulator-impl.h"
#include "model/core/prepared-event.h"

#include "ns3/nstime.h"
#include "ns3/ptr.h"
#include "ns3/simulator.h"

#include <cstdint>

namespace ns3
{
namespace metaroce
{

/// Calls (owner->*Fn)(arg) when it fires, and owner->PrepareEvent(arg, stage) (const,
/// changing nothing) shortly before. At most one pending firing at a time is the owner's rule; the
/// object itself does not check it.
template <typename T, void (T::*Fn)(uint32_t)> class ReusableEvent final : public PreparedEvent
{
  public:
    ReusableEvent(T* owner, uint32_t arg)
        : m_hot(owner)
        , m_owner(owner)
        , m_arg(arg)
    {
        static const bool registered = (Register(this), true);
        (void) registered;
    }

    /// What the firing will touch first: a hot cache line (`hot`, with the line after it)
    /// and three more addresses (a queued frame, the next element). The scheduler prefetches
    /// them a few events ahead (see PreparedEvent). Only hints: a stale address costs nothing but
    /// the fetch.
    void SetHints(const void* hot, const void* a, const void* b, const void* c)
    {
        m_hot = hot;
        m_hint[0] = a;
        m_hint[1] = b;
        m_hint[2] = c;
    }

    void Prepare(uint32_t stage) const override
    {
        if (!m_cancelled)
        {
            m_owner->PrepareEvent(m_arg, stage);
        }
    }

    void Fire() override
    {
        if (!m_cancelled)
        {
            Notify();
        }
    }

    /// Voids the pending firing (the owner takes a fresh object for what follows). The only
    /// way to cancel: Prepare must know, without a call into ns-3.
    void CancelFiring()
    {
        m_cancelled = true;
        Cancel();
    }

    /// Schedules this object `delayPs` from now in the current context.
    static void ScheduleIn(const Ptr<ReusableEvent>& ev, int64_t delayPs)
    {
        ScheduleInPs(PeekPointer(ev), delayPs);
    }

    /// The same in another node's context (arrivals, for logging and MPI).
    static void ScheduleInWithContext(const Ptr<ReusableEvent>& ev, uint32_t context,
                                      int64_t delayPs)
    {
        ScheduleInPsWithContext(PeekPointer(ev), context, delayPs);
    }

  protected:
    void Notify() override { (m_owner->*Fn)(m_arg); }

  private:
    using EventImpl::Cancel; // see CancelFiring

    // m_hot first after EventImpl's fields, then m_hint: see QuadHeapScheduler::PrefetchOwner
    const void* m_hot;
    const void* m_hint[3]{nullptr, nullptr, nullptr};
    T* m_owner;
    uint32_t m_arg;
    bool m_cancelled{false};
};

} // namespace metaroce
} // namespace ns3

#endif
