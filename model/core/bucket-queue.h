/*
 * The event queues behind this module's schedulers, for any event record E with an `impl`
 * (the EventImpl) and a `key` holding at least `m_ts` (the time) and `m_uid` (a number unique
 * among pending events), ordered by Order::Before. BucketScheduler and QuadHeapScheduler
 * (ns-3 Schedulers on Scheduler::Event, ordered by time then uid) and FastSimulatorImpl's
 * TieOrder node (its own record, ordered by time then tie) share them.
 *
 * QuadHeap: a 4-ary min-heap; its four children share two cache lines.
 * BucketQueue: the near future is a ring of time buckets, the far future a QuadHeap. A
 * fabric of thousands of NICs keeps hundreds of thousands of events pending, almost all due
 * within a microsecond or two; a heap that size outgrows the cache, and every removal sifts
 * through its cold bottom levels. Here an event due soon is appended to its bucket (the few
 * buckets being filled stay in cache), and a bucket is sorted once, when it becomes the
 * earliest. Timers and other far events go to the heap; the earlier of the two fronts runs
 * next. Buckets are lists of fixed-size chunks from one free list, so memory follows the
 * events pending, not the largest each bucket ever held.
 */
#ifndef METAROCE_BUCKET_QUEUE_H
#define METAROCE_BUCKET_QUEUE_H

#include "prepared-event.h"

#include "ns3/abort.h"
#include "ns3/assert.h"
#include "ns3/event-impl.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace ns3
{
namespace metaroce
{

/// Starts fetching what an event will touch first: the object it runs on (its owner) and,
/// for this module's reusable events, the data it names as a hint. Reads the event object,
/// so that should be in cache (prefetched one event earlier) or this stalls.
void PrefetchEventOwner(const EventImpl* impl);

template <typename E, typename Order> class QuadHeap
{
  public:
    bool IsEmpty() const { return m_heap.empty(); }
    std::size_t Size() const { return m_heap.size(); }

    /// The earliest event, or null if none.
    const E* Front() const { return m_heap.empty() ? nullptr : &m_heap.front(); }

    void Insert(const E& ev)
    {
        m_heap.emplace_back();
        Order::Copy(m_heap.back(), ev);
        SiftUp(m_heap.size() - 1);
    }

    E RemoveNext()
    {
        NS_ASSERT(!m_heap.empty());
        E top = m_heap.front();
        m_heap.front() = m_heap.back();
        m_heap.pop_back();
        if (!m_heap.empty())
        {
            SiftDown(0);
            // The next event object is usually cold (a port or link touched long ago): start
            // fetching it while this event runs.
            __builtin_prefetch(m_heap.front().impl);
            PrefetchEventOwner(m_heap.front().impl);
            std::size_t n = m_heap.size() < 5 ? m_heap.size() : 5;
            for (std::size_t c = 1; c < n; ++c)
            {
                __builtin_prefetch(m_heap[c].impl); // one of these runs after the next
            }
        }
        return top;
    }

    /// Appends every event to `out`, unordered, and empties the heap.
    void DrainInto(std::vector<E>& out)
    {
        out.insert(out.end(), m_heap.begin(), m_heap.end());
        m_heap.clear();
    }

    /// Rare (Simulator::Remove): finds the entry by its uid, then restores the heap.
    bool Remove(uint32_t uid)
    {
        for (std::size_t i = 0; i < m_heap.size(); ++i)
        {
            if (m_heap[i].key.m_uid == uid)
            {
                m_heap[i] = m_heap.back();
                m_heap.pop_back();
                if (i < m_heap.size())
                {
                    SiftUp(i);
                    SiftDown(i);
                }
                return true;
            }
        }
        return false;
    }

  private:
    void SiftUp(std::size_t i)
    {
        E e = m_heap[i];
        while (i > 0)
        {
            std::size_t parent = (i - 1) / 4;
            if (!Order::Before(e, m_heap[parent]))
            {
                break;
            }
            m_heap[i] = m_heap[parent];
            i = parent;
        }
        m_heap[i] = e;
    }

    void SiftDown(std::size_t i)
    {
        E e = m_heap[i];
        std::size_t n = m_heap.size();
        while (true)
        {
            std::size_t first = 4 * i + 1;
            if (first >= n)
            {
                break;
            }
            std::size_t best = first;
            std::size_t last = first + 4 < n ? first + 4 : n;
            for (std::size_t c = first + 1; c < last; ++c)
            {
                if (Order::Before(m_heap[c], m_heap[best]))
                {
                    best = c;
                }
            }
            if (!Order::Before(m_heap[best], e))
            {
                break;
            }
            m_heap[i] = m_heap[best];
            i = best;
        }
        m_heap[i] = e;
    }

    std::vector<E> m_heap;
};

template <typename E, typename Order> class BucketQueue
{
  public:
    /// Bucket width 2^shift time steps, `buckets` buckets (rounded up to a power of two),
    /// PreparedEvent's stages while more than prepareAbove events are pending near.
    void Configure(uint32_t shift, uint32_t buckets, uint64_t prepareAbove)
    {
        m_shift = shift;
        // A ring slot is a mask away; the rounding changes only the speed, never the order.
        uint32_t n = 64;
        while (n < buckets)
        {
            n *= 2;
        }
        m_buckets = n;
        m_mask = m_buckets - 1;
        m_prepareAbove = prepareAbove;
        m_ring.assign(m_buckets, Bucket{});
        m_used.assign((m_buckets + 63) / 64, 0);
    }

    void Insert(const E& ev)
    {
        uint64_t b = BucketOf(ev.key.m_ts);
        NS_ASSERT(b >= m_base);
        if (b - m_base >= m_buckets)
        {
            m_far.Insert(ev);
            return;
        }
        ++m_inRing;
        if (!m_near.empty())
        {
            if (b == m_nearBucket)
            {
                if (Order::kNewestLast &&
                    (m_tailHead < m_tail.size() ? ev.key.m_ts == m_tail.back().key.m_ts
                                                : ev.key.m_ts == m_near.back().key.m_ts))
                {
                    // At the earliest pending time, and (the order being one of scheduling)
                    // after every event pending there: a burst of simultaneous events
                    // would make each such insert shift the rest of the burst.
                    m_tail.push_back(ev);
                    return;
                }
                // Node order (ties by node, not by scheduling): a burst of simultaneous
                // events at 100k NICs made each insert into the middle of a large bucket
                // shift half of it; beyond a few dozen events they wait in a heap beside it.
                if (!Order::kNewestLast && m_near.size() > kSortedInsertMax)
                {
                    m_side.Insert(ev);
                    return;
                }
                // The earliest bucket is being consumed from its end: keep it sorted.
                m_near.insert(std::upper_bound(m_near.begin(), m_near.end(), ev, Later{}), ev);
                return;
            }
            if (b < m_nearBucket)
            {
                Unsettle();
            }
        }
        Append(b, ev);
    }

    bool IsEmpty() const { return m_inRing == 0 && m_far.Front() == nullptr; }

    /// The ring's size, rounded up by Configure.
    uint32_t Buckets() const { return m_buckets; }

    std::size_t Size() const { return m_inRing + m_far.Size(); }

    /// The earliest event (the queue is not empty).
    const E& PeekNext() const
    {
        NS_ASSERT(!IsEmpty());
        const E* far = m_far.Front();
        if (!Settle())
        {
            return *far;
        }
        const E& near = NearFront();
        return far != nullptr && Order::Before(*far, near) ? *far : near;
    }

    E RemoveNext()
    {
        NS_ASSERT(!IsEmpty());
        E top;
        const E* far = m_far.Front();
        if (Settle() && (far == nullptr || Order::Before(NearFront(), *far)))
        {
            if (m_tailHead < m_tail.size() && Order::Before(m_tail[m_tailHead], m_near.back()))
            {
                top = m_tail[m_tailHead++];
                --m_inRing;
                if (m_tailHead == m_tail.size())
                {
                    ClearTail();
                }
                m_base = BucketOf(top.key.m_ts);
                return top;
            }
            if (!Order::kNewestLast && !m_side.IsEmpty() &&
                Order::Before(*m_side.Front(), m_near.back()))
            {
                top = m_side.RemoveNext();
                --m_inRing;
                m_base = BucketOf(top.key.m_ts);
                return top;
            }
            top = m_near.back();
            m_near.pop_back();
            --m_inRing;
            KeepTailBesideNear();
            std::size_t n = m_near.size();
            // Event objects and what they touch are usually cold: while this event runs, the
            // next ones go through the stages of PreparedEvent, each reading only lines the
            // stage before fetched (one event earlier).
            // With few events pending the state is in cache and only the first two stages run.
            std::size_t kS = m_inRing > m_prepareAbove ? PreparedEvent::kStages : 0;
            for (std::size_t k = 1; k <= kS && k <= n; ++k)
            {
                EventImpl* next = m_near[n - k].impl;
                if (PreparedEvent::Is(next))
                {
                    static_cast<const PreparedEvent*>(next)->Prepare(static_cast<uint32_t>(kS - k));
                }
            }
            if (n > kS)
            {
                PrefetchEventOwner(m_near[n - kS - 1].impl);
                if (n > kS + 1)
                {
                    __builtin_prefetch(m_near[n - kS - 2].impl);
                }
            }
        }
        else
        {
            top = m_far.RemoveNext();
        }
        m_base = BucketOf(top.key.m_ts);
        return top;
    }

    /// Removes the pending event with this time and uid; false if there is none.
    bool Remove(uint64_t ts, uint32_t uid)
    {
        uint64_t bucket = BucketOf(ts);
        auto same = [uid](const E& e) { return e.key.m_uid == uid; };
        if (!m_near.empty() && bucket == m_nearBucket)
        {
            auto it = std::find_if(m_near.begin(), m_near.end(), same);
            if (it != m_near.end())
            {
                m_near.erase(it); // keeps the order
                --m_inRing;
                KeepTailBesideNear();
                return true;
            }
            auto t = std::find_if(m_tail.begin() + m_tailHead, m_tail.end(), same);
            if (t != m_tail.end())
            {
                m_tail.erase(t);
                --m_inRing;
                return true;
            }
            if (!Order::kNewestLast && m_side.Remove(uid))
            {
                --m_inRing;
                return true;
            }
        }
        else if (bucket - m_base < m_buckets)
        {
            Bucket& b = m_ring[bucket & m_mask];
            for (Chunk* c = b.head; c; c = c->next)
            {
                E* end = c->ev + (c == b.tail ? b.tailN : kChunk);
                E* it = std::find_if(c->ev, end, same);
                if (it != end)
                {
                    // Buckets are unsorted: fill the hole with the bucket's last event.
                    *it = b.tail->ev[--b.tailN];
                    --m_inRing;
                    if (b.tailN == 0)
                    {
                        Chunk* prev = nullptr;
                        for (Chunk* p = b.head; p != b.tail; p = p->next)
                        {
                            prev = p;
                        }
                        b.tail->next = m_free;
                        m_free = b.tail;
                        b.tail = prev;
                        b.tailN = prev ? kChunk : 0;
                        (prev ? prev->next : b.head) = nullptr;
                        if (!b.head)
                        {
                            std::size_t slot = bucket & m_mask;
                            m_used[slot >> 6] &= ~(uint64_t(1) << (slot & 63));
                        }
                    }
                    return true;
                }
            }
        }
        return m_far.Remove(uid);
    }

  private:
    /// Latest first: a sorted bucket is consumed from its end. A function object, so that
    /// the sort and the searches inline it.
    struct Later
    {
        bool operator()(const E& x, const E& y) const { return Order::Before(y, x); }
    };

    static constexpr uint32_t kChunk = (1024 - sizeof(void*)) / sizeof(E); //!< a chunk ~1 KiB

    struct Chunk
    {
        Chunk* next{nullptr};
        E ev[kChunk];
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

    Chunk* NewChunk() const
    {
        if (!m_free)
        {
            constexpr std::size_t kSlab = 256;
            m_slabs.emplace_back(new Chunk[kSlab]);
            for (std::size_t i = 0; i < kSlab; ++i)
            {
                m_slabs.back()[i].next = m_free;
                m_free = &m_slabs.back()[i];
            }
        }
        Chunk* c = m_free;
        m_free = c->next;
        c->next = nullptr;
        return c;
    }

    /// Appends to a ring bucket (unsorted).
    void Append(uint64_t bucket, const E& ev) const
    {
        std::size_t slot = bucket & m_mask;
        Bucket& b = m_ring[slot];
        if (!b.tail || b.tailN == kChunk)
        {
            Chunk* c = NewChunk();
            (b.tail ? b.tail->next : b.head) = c;
            b.tail = c;
            b.tailN = 0;
            m_used[slot >> 6] |= uint64_t(1) << (slot & 63);
        }
        Order::Copy(b.tail->ev[b.tailN++], ev);
    }

    /// Puts m_near back into its ring bucket (an earlier bucket got an event).
    void Unsettle() const
    {
        for (const E& e : m_near)
        {
            Append(m_nearBucket, e);
        }
        for (std::size_t i = m_tailHead; i < m_tail.size(); ++i)
        {
            Append(m_nearBucket, m_tail[i]);
        }
        m_near.clear();
        m_side.DrainInto(m_near);
        for (const E& e : m_near)
        {
            Append(m_nearBucket, e);
        }
        m_near.clear();
        ClearTail();
    }

    /// The earliest of m_near (not empty), the tail and the side heap.
    const E& NearFront() const
    {
        const E* best = &m_near.back();
        if (m_tailHead < m_tail.size() && Order::Before(m_tail[m_tailHead], *best))
        {
            best = &m_tail[m_tailHead];
        }
        const E* side = Order::kNewestLast ? nullptr : m_side.Front();
        return side != nullptr && Order::Before(*side, *best) ? *side : *best;
    }

    void ClearTail() const
    {
        m_tail.clear();
        m_tailHead = 0;
    }

    /// The tail and the side heap live beside a non-empty m_near: once m_near empties, they
    /// become it (only one of them is ever in use: the tail for an order of scheduling).
    void KeepTailBesideNear() const
    {
        if (m_near.empty() && m_tailHead < m_tail.size())
        {
            m_near.assign(m_tail.rbegin(), m_tail.rend() - m_tailHead);
            ClearTail();
        }
        if (!Order::kNewestLast && m_near.empty() && !m_side.IsEmpty())
        {
            m_side.DrainInto(m_near);
            std::sort(m_near.begin(), m_near.end(), Later{});
        }
    }

    /// Moves the earliest ring bucket into m_near, sorted latest-first. False if none.
    bool Settle() const
    {
        if (!m_near.empty())
        {
            return true;
        }
        if (m_inRing == 0)
        {
            return false;
        }
        // The first bucket with chunks at or after m_base, wrapping once around the ring.
        uint64_t start = m_base & m_mask;
        std::size_t words = m_used.size();
        std::size_t w = start >> 6;
        uint64_t bits = m_used[w] & (~uint64_t(0) << (start & 63));
        while (bits == 0)
        {
            w = (w + 1 == words) ? 0 : w + 1;
            bits = m_used[w];
        }
        uint64_t slot = (uint64_t(w) << 6) | uint64_t(__builtin_ctzll(bits));
        m_nearBucket = m_base + ((slot - start) & m_mask);
        Bucket& b = m_ring[slot];
        for (Chunk* c = b.head; c;)
        {
            m_near.insert(m_near.end(), c->ev, c->ev + (c == b.tail ? b.tailN : kChunk));
            Chunk* next = c->next;
            c->next = m_free;
            m_free = c;
            c = next;
        }
        b = Bucket{};
        m_used[slot >> 6] &= ~(uint64_t(1) << (slot & 63));
        SortNear();
        return true;
    }

    /// Sorts m_near latest first.
    void SortNear() const
    {
        std::size_t n = m_near.size();
        if (n <= 24)
        {
            // A small fabric's buckets hold a few events, where std::sort's insertion sort
            // moves them with a memmove call per element: a plain insertion sort costs a
            // third of that.
            for (std::size_t i = 1; i < n; ++i)
            {
                E x = m_near[i];
                std::size_t j = i;
                while (j > 0 && Later{}(x, m_near[j - 1]))
                {
                    m_near[j] = m_near[j - 1];
                    --j;
                }
                m_near[j] = x;
            }
            return;
        }
        // A bucket is often filled in the order of the second key (ns-3's: uid order, which
        // is scheduling order); then a stable counting sort on the time within the bucket
        // yields (time, second key) order in two passes, where a large fabric's buckets (a
        // thousand events) took std::sort ten compares per event.
        uint64_t width = uint64_t(1) << m_shift;
        if (n < 64 || m_shift > 12)
        {
            std::sort(m_near.begin(), m_near.end(), Later{});
            return;
        }
        bool ordered = true;
        for (std::size_t i = 1; ordered && i < n; ++i)
        {
            ordered = Order::SecondBefore(m_near[i - 1], m_near[i]);
        }
        uint64_t start = m_nearBucket << m_shift;
        m_count.assign(width, 0);
        for (const E& e : m_near)
        {
            ++m_count[e.key.m_ts - start];
        }
        // Latest first: the latest time's events take the front positions.
        uint32_t pos = 0;
        for (uint64_t t = width; t-- > 0;)
        {
            uint32_t c = m_count[t];
            m_count[t] = pos;
            pos += c;
        }
        m_sorted.resize(n);
        // Within one time, the latest second key first: walk the input backwards.
        for (std::size_t i = n; i-- > 0;)
        {
            const E& e = m_near[i];
            m_sorted[m_count[e.key.m_ts - start]++] = e;
        }
        m_near.swap(m_sorted);
        if (ordered)
        {
            return;
        }
        // Filled in another order (TieOrder node's ties, a bucket put back, a hole filled):
        // the counting sort ordered the times; each time's few events are sorted here, where
        // sorting the whole bucket took most of a large fabric's run.
        for (std::size_t i = 0; i < n;)
        {
            std::size_t j = i + 1;
            while (j < n && m_near[j].key.m_ts == m_near[i].key.m_ts)
            {
                ++j;
            }
            if (j - i > 16)
            {
                std::sort(m_near.begin() + i, m_near.begin() + j, Later{});
            }
            else
            {
                for (std::size_t k = i + 1; k < j; ++k)
                {
                    E x = m_near[k];
                    std::size_t m = k;
                    while (m > i && Later{}(x, m_near[m - 1]))
                    {
                        m_near[m] = m_near[m - 1];
                        --m;
                    }
                    m_near[m] = x;
                }
            }
            i = j;
        }
    }

    uint32_t m_shift{10};     //!< bucket width = 2^m_shift time steps (1.024 ns at ps)
    uint32_t m_buckets{4096}; //!< ring size (power of two): the near-future horizon
    uint64_t m_mask{0};
    uint64_t m_base{0}; //!< bucket of the last event removed: nothing is earlier
    mutable std::vector<Bucket> m_ring;
    mutable std::vector<uint64_t> m_used; //!< bit per ring slot: has chunks
    mutable std::vector<E> m_near;        //!< the earliest bucket's events, latest first
    //! Events of m_near's earliest pending time scheduled while it was pending, in scheduling
    //! order (so after m_near's events of that time), from m_tailHead on; only beside a
    //! non-empty m_near, and only for an order of scheduling (Order::kNewestLast).
    mutable std::vector<E> m_tail;
    mutable std::size_t m_tailHead{0};
    //! Events of m_near's bucket inserted while it was being consumed, once it held more than
    //! kSortedInsertMax; only beside a non-empty m_near, and only for an order that is not
    //! one of scheduling (TieOrder node).
    mutable QuadHeap<E, Order> m_side;
    static constexpr std::size_t kSortedInsertMax = 64;
    mutable std::vector<E> m_sorted;       //!< SortNear's output, swapped with m_near
    mutable std::vector<uint32_t> m_count; //!< SortNear's counters, one per time step
    mutable uint64_t m_nearBucket{0};      //!< which bucket m_near holds, if not empty
    mutable Chunk* m_free{nullptr};
    mutable std::vector<std::unique_ptr<Chunk[]>> m_slabs;
    std::size_t m_inRing{0}; //!< events in the ring and m_near
    uint64_t m_prepareAbove{16384};
    QuadHeap<E, Order> m_far; //!< events beyond the ring's horizon
};

} // namespace metaroce
} // namespace ns3

#endif
