/*
 * An ns-3 event scheduler: a 4-ary min-heap on (timestamp, uid). It orders events exactly as
 * every ns-3 scheduler must (by time, then by scheduling order), so swapping it in changes
 * no result, only speed: a 4-ary heap is half as deep as the binary heap behind ns-3's
 * PriorityQueueScheduler, and its four children share two cache lines, which matters with
 * the tens of thousands of pending events of a large fabric.
 */
#ifndef METAROCE_QUAD_HEAP_SCHEDULER_H
#define METAROCE_QUAD_HEAP_SCHEDULER_H

#include "ns3/event-impl.h"
#include "ns3/scheduler.h"

#include <vector>

namespace ns3
{
namespace metaroce
{

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

    /// The earliest event, or null if none: what PeekNext returns, without a virtual call or
    /// a copy (BucketScheduler compares its ring with it on every event).
    const Event* Front() const { return m_heap.empty() ? nullptr : &m_heap.front(); }

    /// Starts fetching what an event will touch first: the object it runs on (its owner) and,
    /// for this module's reusable events, the data it names as a hint. Reads the event object,
    /// so that should be in cache (prefetched one event earlier) or this stalls.
    static void PrefetchOwner(const EventImpl* impl);

    /// The order every ns-3 scheduler keeps: by time, then by scheduling order (uid).
    static bool Before(const Event& a, const Event& b)
    {
        return a.key.m_ts < b.key.m_ts || (a.key.m_ts == b.key.m_ts && a.key.m_uid < b.key.m_uid);
    }

    /// Copies an event one field at a time. The simulator has just written `src` on its
    /// stack field by field; a wider load across two of those stores (what a struct copy
    /// compiles to) cannot be forwarded from the store buffer and waits until every older
    /// store, cold ones included, has reached the cache. On an 8k-NIC fabric profiles put 8%
    /// of the run on that load; copied this way the wait moves to the next load that needs
    /// the stores (the wall time gained is within this machine's noise), and the profile
    /// shows where the cold stores are. The empty asm keeps the compiler from merging the
    /// loads again.
    static void CopyFields(Event& dst, const Event& src)
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

  private:
    void SiftUp(std::size_t i);
    void SiftDown(std::size_t i);

    std::vector<Event> m_heap;
};

} // namespace metaroce
} // namespace ns3

#endif
