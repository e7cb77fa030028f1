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
    m_heap.Insert(ev);
}

bool
QuadHeapScheduler::IsEmpty() const
{
    return m_heap.IsEmpty();
}

Scheduler::Event
QuadHeapScheduler::PeekNext() const
{
    NS_ASSERT(!m_heap.IsEmpty());
    return *m_heap.Front();
}

Scheduler::Event
QuadHeapScheduler::RemoveNext()
{
    return m_heap.RemoveNext();
}

void
PrefetchEventOwner(const EventImpl* impl)
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
    const bool found = m_heap.Remove(ev.key.m_uid);
    NS_ASSERT_MSG(found, "QuadHeapScheduler: removing an event that is not scheduled");
    (void) found;
}

} // namespace metaroce
} // namespace ns3
