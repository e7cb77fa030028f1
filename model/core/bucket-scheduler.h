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

#include <memory>
#include <vector>

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

  protected:
    void NotifyConstructionCompleted() override;

  private:
    static bool Before(const Event& a, const Event& b) { return QuadHeapScheduler::Before(a, b); }

    static constexpr uint32_t kChunk = 42; //!< events per chunk (a chunk is 1 KiB)

    struct Chunk
    {
        Chunk* next{nullptr};
        Event ev[kChunk];
    };

    /// All chunks but the tail are full; the tail's count lives here, so appending touches
    /// this (cache-resident) table and the event's own slot only.
    struct Bucket
    {
        Chunk* head{nullptr};
        Chunk* tail{nullptr};
        uint32_t tailN{0};
    };

    uint64_t BucketOf(uint64_t ts) const { return ts >> m_shift; }
    /// Appends to a ring bucket (unsorted).
    void Append(uint64_t bucket, const Event& ev) const;
    /// Moves the earliest ring bucket into m_near, sorted latest-first. False if none.
    bool Settle() const;
    /// Puts m_near back into its ring bucket (an earlier bucket got an event).
    void Unsettle() const;
    Chunk* NewChunk() const;
    /// Sorts m_near latest first, by (time, uid).
    void SortNear() const;

    uint32_t m_shift{10};     //!< bucket width = 2^m_shift time steps (1.024 ns at ps)
    uint32_t m_buckets{4096}; //!< ring size (power of two): the near-future horizon
    uint64_t m_mask{0};
    uint64_t m_base{0}; //!< bucket of the last event removed: nothing is earlier
    mutable std::vector<Bucket> m_ring;
    mutable std::vector<uint64_t> m_used;  //!< bit per ring slot: has chunks
    mutable std::vector<Event> m_near;     //!< the earliest bucket's events, latest first
    mutable std::vector<Event> m_sorted;   //!< SortNear's output, swapped with m_near
    mutable std::vector<uint32_t> m_count; //!< SortNear's counters, one per time step
    mutable uint64_t m_nearBucket{0};      //!< which bucket m_near holds, if not empty
    mutable Chunk* m_free{nullptr};
    mutable std::vector<std::unique_ptr<Chunk[]>> m_slabs;
    std::size_t m_inRing{0}; //!< events in the ring and m_near
    uint64_t m_prepareAbove{16384};
    Ptr<QuadHeapScheduler> m_far; //!< events beyond the ring's horizon
};

} // namespace metaroce
} // namespace ns3

#endif
