/*
 * An ns-3 event scheduler for large fabrics: the near future is a ring of time buckets, the
 * far future a 4-ary heap. It orders events exactly as every ns-3 scheduler must (by time,
 * then by scheduling order), so swapping it in changes no result, only speed.
 *
 * Why: a fabric of thousands of NICs keeps hundreds of thousands of events pending (one per
 * busy link and port), almost all due within a microsecond or two. A heap that size outgrows
 * the cache, and every removal sifts through its cold bottom levels. Here an event due soon is
 * appended to its bucket (the few buckets being filled stay in cache), and a bucket is sorted
 * once, when it becomes the earliest: the work per event is a short sort of a cache-resident
 * array. Timers and other far events go to the heap; the earlier of the two fronts runs next.
 * Buckets are lists of fixed-size chunks from one free list, so memory follows the events
 * pending, not the largest each bucket ever held.
 */
#ifndef METAROCE_BUCKET_SCHEDULER_H
#define METAROCE_BUCKET_SCHEDULER_H

#include "quad-heap-scheduler.h"

#include "ns3/scheduler.h"

namespace ns3
{
namespace metaroce
{

class BucketScheduler : public Scheduler
{
  public:
    static TypeId GetTypeId();
    BucketScheduler();
    ~BucketScheduler() override;

    void Insert(const Event& ev) override;
    bool IsEmpty() const override;
    Event PeekNext() const override;
    Event RemoveNext() override;
    void Remove(const Event& ev) override;

    uint32_t GetWidthShift() const { return m_shift; }
    uint32_t GetBuckets() const { return m_buckets; }
    uint64_t GetPrepareAbove() const { return m_prepareAbove; }

  protected:
    void NotifyConstructionCompleted() override;

  private:
    uint32_t m_shift{10};
    uint32_t m_buckets{4096};
    uint64_t m_prepareAbove{16384};
    BucketQueue<Event, ScheduledOrder> m_queue;
};

} // namespace metaroce
} // namespace ns3

#endif
