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

BucketScheduler::BucketScheduler() = default;

BucketScheduler::~BucketScheduler() = default;

void
BucketScheduler::NotifyConstructionCompleted()
{
    // ns-3 calls this once the attributes are set (CreateObject and ObjectFactory alike).
    Scheduler::NotifyConstructionCompleted();
    m_queue.Configure(m_shift, m_buckets, m_prepareAbove);
    m_buckets = m_queue.Buckets(); // rounded up to a power of two
}

void
BucketScheduler::Insert(const Event& ev)
{
    m_queue.Insert(ev);
}

bool
BucketScheduler::IsEmpty() const
{
    return m_queue.IsEmpty();
}

Scheduler::Event
BucketScheduler::PeekNext() const
{
    return m_queue.PeekNext();
}

Scheduler::Event
BucketScheduler::RemoveNext()
{
    return m_queue.RemoveNext();
}

void
BucketScheduler::Remove(const Event& ev)
{
    const bool found = m_queue.Remove(ev.key.m_ts, ev.key.m_uid);
    NS_ASSERT_MSG(found, "BucketScheduler: removing an event that is not scheduled");
    (void) found;
}

} // namespace metaroce
} // namespace ns3
