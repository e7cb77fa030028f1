#include "fast-simulator-impl.h"

#include "prepared-event.h"

#include "ns3/abort.h"
#include "ns3/assert.h"
#include "ns3/log.h"
#include "ns3/pointer.h"

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("FastSimulatorImpl");
NS_OBJECT_ENSURE_REGISTERED(FastSimulatorImpl);

namespace
{
// EventId's reserved uids, as in ns-3: 0 invalid, 1 now, 2 destroy, 3 reserved; events
// are numbered from 4.
constexpr uint32_t kUidDestroy = 2;
constexpr uint32_t kFirstUid = 4;
} // namespace

TypeId
FastSimulatorImpl::GetTypeId()
{
    static TypeId tid = TypeId("ns3::metaroce::FastSimulatorImpl")
                            .SetParent<SimulatorImpl>()
                            .SetGroupName("MetaRoce")
                            .AddConstructor<FastSimulatorImpl>();
    return tid;
}

FastSimulatorImpl::FastSimulatorImpl()
    : m_uid(kFirstUid)
    , m_currentContext(Simulator::NO_CONTEXT)
    , m_mainThreadId(std::this_thread::get_id())
{
}

FastSimulatorImpl::~FastSimulatorImpl()
{
    if (s_running == this)
    {
        s_running = nullptr;
    }
}

void
FastSimulatorImpl::DoDispose()
{
    if (s_running == this)
    {
        s_running = nullptr;
    }
    while (m_events && !m_events->IsEmpty())
    {
        Scheduler::Event next = m_events->RemoveNext();
        next.impl->Unref();
    }
    m_events = nullptr;
    SimulatorImpl::DoDispose();
}

void
FastSimulatorImpl::Destroy()
{
    while (!m_destroyEvents.empty())
    {
        Ptr<EventImpl> ev = m_destroyEvents.front().PeekEventImpl();
        m_destroyEvents.pop_front();
        if (!ev->IsCancelled())
        {
            ev->Invoke();
        }
    }
}

void
FastSimulatorImpl::SetScheduler(ObjectFactory schedulerFactory)
{
    Ptr<Scheduler> scheduler = schedulerFactory.Create<Scheduler>();
    if (m_events)
    {
        while (!m_events->IsEmpty())
        {
            scheduler->Insert(m_events->RemoveNext());
        }
    }
    m_events = scheduler;
}

uint32_t
FastSimulatorImpl::GetSystemId() const
{
    return 0;
}

bool
FastSimulatorImpl::IsFinished() const
{
    return m_events->IsEmpty() || m_stop;
}

void
FastSimulatorImpl::Run()
{
    m_mainThreadId = std::this_thread::get_id();
    m_stop = false;
    // The fast helpers count picoseconds; at any other resolution they take ns-3's API.
    FastSimulatorImpl* previous = s_running;
    s_running = Time::GetResolution() == Time::PS ? this : nullptr;
    Scheduler* events = PeekPointer(m_events);
    while (!m_stop && !events->IsEmpty())
    {
        Scheduler::Event next = events->RemoveNext();
        NS_ASSERT(next.key.m_ts >= m_currentTs);
        --m_unscheduledEvents;
        ++m_eventCount;
        m_currentTs = next.key.m_ts;
        m_currentContext = next.key.m_context;
        m_currentUid = next.key.m_uid;
        if (PreparedEvent::Is(next.impl))
        {
            static_cast<PreparedEvent*>(next.impl)->Fire(); // the module's hot events
        }
        else
        {
            next.impl->Invoke(); // runs it unless cancelled
        }
        next.impl->Unref();
    }
    s_running = previous;
    NS_ASSERT(!events->IsEmpty() || m_unscheduledEvents == 0);
}

void
FastSimulatorImpl::Stop()
{
    m_stop = true;
}

void
FastSimulatorImpl::Stop(const Time& delay)
{
    Simulator::Schedule(delay, &Simulator::Stop);
}

EventId
FastSimulatorImpl::Schedule(const Time& delay, EventImpl* event)
{
    NS_ASSERT_MSG(delay.IsPositive(), "FastSimulatorImpl::Schedule: negative delay");
    auto steps = static_cast<uint64_t>(delay.GetTimeStep());
    uint32_t uid = m_uid;
    Insert(event, steps, m_currentContext);
    return EventId(event, m_currentTs + steps, m_currentContext, uid);
}

void
FastSimulatorImpl::ScheduleWithContext(uint32_t context, const Time& delay, EventImpl* event)
{
    NS_ABORT_MSG_UNLESS(std::this_thread::get_id() == m_mainThreadId,
                        "FastSimulatorImpl is single-threaded: schedule from the simulation "
                        "thread, or select ns3::DefaultSimulatorImpl");
    Insert(event, static_cast<uint64_t>(delay.GetTimeStep()), context);
}

EventId
FastSimulatorImpl::ScheduleNow(EventImpl* event)
{
    return Schedule(TimeStep(0), event);
}

EventId
FastSimulatorImpl::ScheduleDestroy(EventImpl* event)
{
    EventId id(Ptr<EventImpl>(event, false), m_currentTs, 0xffffffff, kUidDestroy);
    m_destroyEvents.push_back(id);
    ++m_uid;
    return id;
}

Time
FastSimulatorImpl::Now() const
{
    return TimeStep(m_currentTs);
}

Time
FastSimulatorImpl::GetDelayLeft(const EventId& id) const
{
    if (IsExpired(id))
    {
        return TimeStep(0);
    }
    return TimeStep(id.GetTs() - m_currentTs);
}

void
FastSimulatorImpl::Remove(const EventId& id)
{
    if (id.GetUid() == kUidDestroy)
    {
        for (auto i = m_destroyEvents.begin(); i != m_destroyEvents.end(); ++i)
        {
            if (*i == id)
            {
                m_destroyEvents.erase(i);
                break;
            }
        }
        return;
    }
    if (IsExpired(id))
    {
        return;
    }
    Scheduler::Event event;
    event.impl = id.PeekEventImpl();
    event.key.m_ts = id.GetTs();
    event.key.m_context = id.GetContext();
    event.key.m_uid = id.GetUid();
    m_events->Remove(event);
    event.impl->Cancel();
    event.impl->Unref(); // the scheduler's reference
    --m_unscheduledEvents;
}

void
FastSimulatorImpl::Cancel(const EventId& id)
{
    if (!IsExpired(id))
    {
        id.PeekEventImpl()->Cancel();
    }
}

bool
FastSimulatorImpl::IsExpired(const EventId& id) const
{
    EventImpl* impl = id.PeekEventImpl();
    if (impl == nullptr)
    {
        return true;
    }
    uint32_t uid = id.GetUid();
    if (uid == kUidDestroy)
    {
        if (impl->IsCancelled())
        {
            return true;
        }
        for (const EventId& d : m_destroyEvents)
        {
            if (d == id)
            {
                return false;
            }
        }
        return true;
    }
    uint64_t ts = id.GetTs();
    return ts < m_currentTs || (ts == m_currentTs && uid <= m_currentUid) || impl->IsCancelled();
}

Time
FastSimulatorImpl::GetMaximumSimulationTime() const
{
    return TimeStep(0x7fffffffffffffffLL);
}

uint32_t
FastSimulatorImpl::GetContext() const
{
    return m_currentContext;
}

uint64_t
FastSimulatorImpl::GetEventCount() const
{
    return m_eventCount;
}

} // namespace metaroce
} // namespace ns3
