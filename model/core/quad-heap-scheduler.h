/*
 * An ns-3 event scheduler: a 4-ary min-heap on (timestamp, uid). It orders events exactly as
 * every ns-3 scheduler must (by time, then by scheduling order), so swapping it in changes
 * no result, only speed: a 4-ary heap is half as deep as the binary heap behind ns-3's
 * PriorityQueueScheduler, and its four children share two cache lines, which matters with
 * the tens of thousands of pending events of a large fabric.
 */
#ifndef METAROCE_QUAD_HEAP_SCHEDULER_H
#define METAROCE_QUAD_HEAP_SCHEDULER_H

#include "bucket-queue.h"

#include "ns3/event-impl.h"
#include "ns3/scheduler.h"

namespace ns3
{
namespace metaroce
{

/// ns-3's order on Scheduler::Event, for the queues of bucket-queue.h.
struct ScheduledOrder
{
    /// An event scheduled later never runs before an earlier-scheduled one of its time.
    static constexpr bool kNewestLast = true;

    /// The order every ns-3 scheduler keeps: by time, then by scheduling order (uid).
    static bool Before(const Scheduler::Event& a, const Scheduler::Event& b)
    {
        return a.key.m_ts < b.key.m_ts || (a.key.m_ts == b.key.m_ts && a.key.m_uid < b.key.m_uid);
    }

    static bool SecondBefore(const Scheduler::Event& a, const Scheduler::Event& b)
    {
        return a.key.m_uid < b.key.m_uid;
    }

    /// Copies an event one field at a time. The simulator has just written `src` on its
    /// stack field by field; a wider load across two of those stores (what a struct copy
    /// compiles to) cannot be forwarded from the store buffer and waits until every older
    /// store, cold ones included, has reached the cache. On an 8k-NIC fabric profiles put 8%
    /// of the run on that load; copied this way the wait moves to the next load that needs
    /// the stores (the wall time gained is within this machine's noise), and the profile
    /// shows where the cold stores are. The empty asm keeps the compiler from merging the
    /// loads again.
    static void Copy(Scheduler::Event& dst, const Scheduler::Event& src)
    {
        EventImpl* impl = src.impl;
        uint64_t ts = src.key.m_ts;
        uint32_t context = src.key.m_context;
        uint32_t uid = src.key.m_uid;
        asm("" : "+r"(impl), "+r"(ts), "+r"(context), "+r"(uid));
        dst.impl = impl;
        dst.key.m_ts = ts;
        dst.key.m_context = context;
        dst.key.m_uid = uid;
    }
};

class QuadHeapScheduler : public Scheduler
{
  public:
    static TypeId GetTypeId();
    QuadHeapScheduler();
    ~QuadHeapScheduler() override;

    void Insert(const Event& ev) override;
    bool IsEmpty() const override;
    Event PeekNext() const override;
    Event RemoveNext() override;
    void Remove(const Event& ev) override;

    /// See PrefetchEventOwner.
    static void PrefetchOwner(const EventImpl* impl) { PrefetchEventOwner(impl); }

    static bool Before(const Event& a, const Event& b) { return ScheduledOrder::Before(a, b); }

  private:
    QuadHeap<Event, ScheduledOrder> m_heap;
};

} // namespace metaroce
} // namespace ns3

#endif
