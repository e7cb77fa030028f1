#include "bucket-scheduler.h"

#include "prepared-event.h"

#include "ns3/abort.h"
#include "ns3/assert.h"
#include "ns3/log.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("BucketScheduler");
NS_OBJECT_ENSURE_REGISTERED(BucketScheduler);

namespace
{
/// Latest first: a sorted bucket is consumed from its end. A function object, so that the
/// sort and the searches inline it.
struct Later
{
    bool operator()(const Scheduler::Event& x, const Scheduler::Event& y) const
    {
        return QuadHeapScheduler::Before(y, x);
    }
};

/// Sorts a handful of events latest first. A small fabric's buckets hold a few events, where
/// std::sort's insertion sort moves them with a memmove call per element: a plain insertion
/// sort costs a third of that.
void
InsertionSortLatestFirst(Scheduler::Event* a, std::size_t n)
{
    for (std::size_t i = 1; i < n; ++i)
    {
        Scheduler::Event x = a[i];
        std::size_t j = i;
        while (j > 0 && Later{}(x, a[j - 1]))
        {
            a[j] = a[j - 1];
            --j;
        }
        a[j] = x;
    }
}
} // namespace

TypeId
BucketScheduler::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::BucketScheduler")
            .SetParent<Scheduler>()
            .SetGroupName("MetaRoce")
            .AddConstructor<BucketScheduler>()
            .AddAttribute("WidthShift",
                          "A bucket spans 2^WidthShift time steps (the default, 10, is 1.024 ns "
                          "at picosecond resolution). Speed only: the order never changes.",
                          UintegerValue(10), MakeUintegerAccessor(&BucketScheduler::m_shift),
                          MakeUintegerChecker<uint32_t>(0, 40))
            .AddAttribute("Buckets",
                          "Buckets in the ring (rounded up to a power of two): events due "
                          "further ahead than Buckets x width wait in a heap. Speed only: the "
                          "order never changes.",
                          UintegerValue(4096), MakeUintegerAccessor(&BucketScheduler::m_buckets),
                          MakeUintegerChecker<uint32_t>(64, 1u << 24))
            .AddAttribute("PrepareAbove",
                          "Walk the next events through PreparedEvent's prefetch stages only "
                          "while more than this many events are pending in the near future: "
                          "a small fabric's state stays in cache, and there the stages cost "
                          "more than they hide. Speed only: the order never changes.",
                          UintegerValue(16384),
                          MakeUintegerAccessor(&BucketScheduler::m_prepareAbove),
                          MakeUintegerChecker<uint64_t>());
    return tid;
}

BucketScheduler::BucketScheduler()
    : m_far(CreateObject<QuadHeapScheduler>())
{
}

BucketScheduler::~BucketScheduler() = default;

void
BucketScheduler::NotifyConstructionCompleted()
{
    // ns-3 calls this once the attributes are set (CreateObject and ObjectFactory alike).
    Scheduler::NotifyConstructionCompleted();
    // A ring slot is a mask away; the rounding changes only the speed, never the order.
    uint32_t n = 64;
    while (n < m_buckets)
    {
        n *= 2;
    }
    m_buckets = n;
    m_mask = m_buckets - 1;
    m_ring.assign(m_buckets, Bucket{});
    m_used.assign((m_buckets + 63) / 64, 0);
}

BucketScheduler::Chunk*
BucketScheduler::NewChunk() const
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

void
BucketScheduler::Append(uint64_t bucket, const Event& ev) const
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
    QuadHeapScheduler::CopyFields(b.tail->ev[b.tailN++], ev);
}

void
BucketScheduler::Insert(const Event& ev)
{
    uint64_t b = BucketOf(ev.key.m_ts);
    NS_ASSERT(b >= m_base);
    if (b - m_base >= m_buckets)
    {
        m_far->QuadHeapScheduler::Insert(ev); // qualified: a direct call
        return;
    }
    ++m_inRing;
    if (!m_near.empty())
    {
        if (b == m_nearBucket)
        {
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

void
BucketScheduler::Unsettle() const
{
    for (const Event& e : m_near)
    {
        Append(m_nearBucket, e);
    }
    m_near.clear();
}

bool
BucketScheduler::Settle() const
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

void
BucketScheduler::SortNear() const
{
    std::size_t n = m_near.size();
    if (n <= 24)
    {
        InsertionSortLatestFirst(m_near.data(), n);
        return;
    }
    // A bucket is usually filled in scheduling order, which is uid order; then a stable
    // counting sort on the time within the bucket yields (time, uid) order in two passes, where
    // a large fabric's buckets (a thousand events) took std::sort ten compares per event.
    // Anything else (a bucket put back by Unsettle, a hole filled by Remove) is sorted.
    uint64_t width = uint64_t(1) << m_shift;
    bool uidOrdered = n >= 64 && m_shift <= 12;
    for (std::size_t i = 1; uidOrdered && i < n; ++i)
    {
        uidOrdered = m_near[i - 1].key.m_uid < m_near[i].key.m_uid;
    }
    if (!uidOrdered)
    {
        std::sort(m_near.begin(), m_near.end(), Later{});
        return;
    }
    uint64_t start = m_nearBucket << m_shift;
    m_count.assign(width, 0);
    for (const Event& e : m_near)
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
    // Within one time, the latest uid first: walk the input (uid ascending) backwards.
    for (std::size_t i = n; i-- > 0;)
    {
        const Event& e = m_near[i];
        m_sorted[m_count[e.key.m_ts - start]++] = e;
    }
    m_near.swap(m_sorted);
}

bool
BucketScheduler::IsEmpty() const
{
    return m_inRing == 0 && m_far->Front() == nullptr;
}

Scheduler::Event
BucketScheduler::PeekNext() const
{
    NS_ASSERT(!IsEmpty());
    const Event* far = m_far->Front();
    if (!Settle() || (far != nullptr && Before(*far, m_near.back())))
    {
        return *far;
    }
    return m_near.back();
}

Scheduler::Event
BucketScheduler::RemoveNext()
{
    NS_ASSERT(!IsEmpty());
    Event top;
    const Event* far = m_far->Front();
    if (Settle() && (far == nullptr || Before(m_near.back(), *far)))
    {
        top = m_near.back();
        m_near.pop_back();
        --m_inRing;
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
            QuadHeapScheduler::PrefetchOwner(m_near[n - kS - 1].impl);
            if (n > kS + 1)
            {
                __builtin_prefetch(m_near[n - kS - 2].impl);
            }
        }
    }
    else
    {
        top = m_far->QuadHeapScheduler::RemoveNext();
    }
    m_base = BucketOf(top.key.m_ts);
    return top;
}

void
BucketScheduler::Remove(const Event& ev)
{
    uint64_t bucket = BucketOf(ev.key.m_ts);
    auto same = [&ev](const Event& e) { return e.key.m_uid == ev.key.m_uid; };
    if (!m_near.empty() && bucket == m_nearBucket)
    {
        auto it = std::find_if(m_near.begin(), m_near.end(), same);
        if (it != m_near.end())
        {
            m_near.erase(it); // keeps the order
            --m_inRing;
            return;
        }
    }
    else if (bucket - m_base < m_buckets)
    {
        Bucket& b = m_ring[bucket & m_mask];
        for (Chunk* c = b.head; c; c = c->next)
        {
            Event* end = c->ev + (c == b.tail ? b.tailN : kChunk);
            Event* it = std::find_if(c->ev, end, same);
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
                return;
            }
        }
    }
    m_far->Remove(ev);
}

} // namespace metaroce
} // namespace ns3
