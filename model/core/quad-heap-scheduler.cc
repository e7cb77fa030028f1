#include "quad-heap-scheduler.h"

#include "ns3/assert.h"
#include "ns3/log.h"

#include <cstdint>

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("QuadHeapScheduler");
NS_OBJECT_ENSURE_REGISTERED(QuadHeapScheduler);

TypeId
QuadHeapScheduler::GetTypeId()
{
    static TypeId tid = TypeId("ns3::metaroce::QuadHeapScheduler")
                            .SetParent<Scheduler>()
                            .SetGroupName("MetaRoce")
                            .AddConstructor<QuadHeapScheduler>();
    return tid;
}

QuadHeapScheduler::QuadHeapScheduler() = default;

QuadHeapScheduler::~QuadHeapScheduler() = default;

void
QuadHeapScheduler::Insert(const Event& ev)
{
    m_heap.emplace_back();
    CopyFields(m_heap.back(), ev);
    SiftUp(m_heap.size() - 1);
}

bool
QuadHeapScheduler::IsEmpty() const
{
    return m_heap.empty();
}

Scheduler::Event
QuadHeapScheduler::PeekNext() const
{
    NS_ASSERT(!m_heap.empty());
    return m_heap.front();
}

Scheduler::Event
QuadHeapScheduler::RemoveNext()
{
    NS_ASSERT(!m_heap.empty());
    Event top = m_heap.front();
    m_heap.front() = m_heap.back();
    m_heap.pop_back();
    if (!m_heap.empty())
    {
        SiftDown(0);
        // The next event object is usually cold (a port or link touched long ago): start
        // fetching it while this event runs.
        __builtin_prefetch(m_heap.front().impl);
        PrefetchOwner(m_heap.front().impl);
        std::size_t n = m_heap.size() < 5 ? m_heap.size() : 5;
        for (std::size_t c = 1; c < n; ++c)
        {
            __builtin_prefetch(m_heap[c].impl); // one of these runs after the next
        }
    }
    return top;
}

void
QuadHeapScheduler::PrefetchOwner(const EventImpl* impl)
{
    // Every event object of this module's hot path (ReusableEvent) keeps the address of a
    // hot cache line right after EventImpl's own fields, then three hints; ns-3's
    // member-function events keep their object there. Warming what they point to (and the
    // line after the first) hides the owner's cache misses. For any other layout this
    // prefetches harmless addresses.
#if defined(__SANITIZE_ADDRESS__)
    (void) impl; // reading past EventImpl's fields is what a sanitizer rightly flags
#else
    auto after = reinterpret_cast<const void* const*>(reinterpret_cast<const char*>(impl) +
                                                      sizeof(EventImpl));
    __builtin_prefetch(after[0]);
    __builtin_prefetch(static_cast<const char*>(after[0]) + 64);
    __builtin_prefetch(after[1]); // ReusableEvent's hints (for other events, harmless)
    // The smallest event objects end before after[2]: read past it only within the page that
    // holds after[1], which is mapped, so a foreign layout can never fault.
    if ((reinterpret_cast<std::uintptr_t>(&after[2]) & 4095) != 0)
    {
        __builtin_prefetch(after[2]);
        if ((reinterpret_cast<std::uintptr_t>(&after[3]) & 4095) != 0)
        {
            __builtin_prefetch(after[3]);
        }
    }
#endif
}

void
QuadHeapScheduler::Remove(const Event& ev)
{
    // Rare (Simulator::Remove): find the entry by its unique id, then restore the heap.
    for (std::size_t i = 0; i < m_heap.size(); ++i)
    {
        if (m_heap[i].key.m_uid == ev.key.m_uid)
        {
            m_heap[i] = m_heap.back();
            m_heap.pop_back();
            if (i < m_heap.size())
            {
                SiftUp(i);
                SiftDown(i);
            }
            return;
        }
    }
    NS_ASSERT_MSG(false, "QuadHeapScheduler: removing an event that is not scheduled");
}

void
QuadHeapScheduler::SiftUp(std::size_t i)
{
    Event e = m_heap[i];
    while (i > 0)
    {
        std::size_t parent = (i - 1) / 4;
        if (!Before(e, m_heap[parent]))
        {
            break;
        }
        m_heap[i] = m_heap[parent];
        i = parent;
    }
    m_heap[i] = e;
}

void
QuadHeapScheduler::SiftDown(std::size_t i)
{
    Event e = m_heap[i];
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
            if (Before(m_heap[c], m_heap[best]))
            {
                best = c;
            }
        }
        if (!Before(m_heap[best], e))
        {
            break;
        }
        m_heap[i] = m_heap[best];
        i = best;
    }
    m_heap[i] = e;
}

} // namespace metaroce
} // namespace ns3
