#include "fast-simulator-impl.h"

#include "bucket-scheduler.h"
#include "prepared-event.h"

#include "ns3/abort.h"
#include "ns3/assert.h"
#include "ns3/enum.h"
#include "ns3/log.h"
#include "ns3/pointer.h"

#include <algorithm>

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
// TieOrder::Node: a tie's top 24 bits say who scheduled the event (0: a frame's arrival,
// node c: c + 1, no context: all ones), its low 40 bits that one's count.
constexpr uint32_t kCountBits = 40;
constexpr uint64_t kProgram = 0xffffff;
} // namespace

TypeId
FastSimulatorImpl::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::metaroce::FastSimulatorImpl")
            .SetParent<SimulatorImpl>()
            .SetGroupName("MetaRoce")
            .AddConstructor<FastSimulatorImpl>()
            .AddAttribute("TieOrder",
                          "How events at the same time are ordered: 'scheduled', ns-3's "
                          "order (by when they were scheduled); 'node', by who scheduled "
                          "them and that one's own count, so that a run split over "
                          "processes gives the same results as on one (the order "
                          "metaroce-sim-mpi uses). Either is a valid order of "
                          "simultaneous events; results differ between them as between "
                          "two orders of equal-time events.",
                          EnumValue(static_cast<int>(TieOrder::Scheduled)),
                          MakeEnumAccessor(&FastSimulatorImpl::SetTieOrderValue,
                                           &FastSimulatorImpl::GetTieOrderValue),
                          MakeEnumChecker(static_cast<int>(TieOrder::Scheduled), "scheduled",
                                          static_cast<int>(TieOrder::Node), "node"));
    return tid;
}

FastSimulatorImpl::FastSimulatorImpl()
    : m_uid(kFirstUid)
    , m_currentContext(Simulator::NO_CONTEXT)
    , m_mainThreadId(std::this_thread::get_id())
{
    m_nodeQueue.Configure(10, 4096, 16384); // BucketScheduler's defaults
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
    while (!m_nodeQueue.IsEmpty())
    {
        m_nodeQueue.RemoveNext().impl->Unref();
    }
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
    // TieOrder node's queue takes the bucket scheduler's settings when that is the one chosen.
    if (auto b = DynamicCast<BucketScheduler>(scheduler))
    {
        m_nodeQueue.Configure(b->GetWidthShift(), b->GetBuckets(), b->GetPrepareAbove());
    }
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
    return m_sync ? m_sync->SystemId() : 0;
}

bool
FastSimulatorImpl::IsFinished() const
{
    return (m_nodeOrder ? m_nodeQueue.IsEmpty() : m_events->IsEmpty()) || m_stop;
}

void
FastSimulatorImpl::SetTieOrder(TieOrder order)
{
    const bool node = order == TieOrder::Node;
    if (node == m_nodeOrder)
    {
        return;
    }
    NS_ABORT_MSG_UNLESS(m_nodeQueue.IsEmpty() && (!m_events || m_events->IsEmpty()),
                        "FastSimulatorImpl: TieOrder changes only while no event is pending");
    m_nodeOrder = node;
}

uint64_t
FastSimulatorImpl::NextTie()
{
    const uint32_t c = m_currentContext;
    if (c == Simulator::NO_CONTEXT)
    {
        return (kProgram << kCountBits) | ++m_programCount;
    }
    NS_ABORT_MSG_UNLESS(c + 1 < kProgram, "FastSimulatorImpl: a context beyond 2^24 - 2");
    if (c >= m_nodeCount.size())
    {
        m_nodeCount.resize(std::max<std::size_t>(c + 1, m_nodeCount.size() * 2), 0);
    }
    // Counts wrap at 2^40 (a node scheduling a trillion events): the order stays a function
    // of the node's history, which is what it must be.
    const uint64_t n = ++m_nodeCount[c] & ((uint64_t(1) << kCountBits) - 1);
    return ((uint64_t(c) + 1) << kCountBits) | n;
}

void
FastSimulatorImpl::InsertWithTie(EventImpl* event, uint64_t ts, uint32_t context, uint64_t tie)
{
    NS_ASSERT(m_nodeOrder && ts >= m_currentTs);
    m_nodeQueue.Insert(NodeEvent{event, NodeKey{ts, tie, context, m_uid++}});
    ++m_unscheduledEvents;
}

void
FastSimulatorImpl::RunNodeOrder()
{
    while (true)
    {
        uint64_t limit = UINT64_MAX;
        if (m_sync)
        {
            m_sync->Exchange();
            limit = m_sync->Grant(
                m_nodeQueue.IsEmpty() ? UINT64_MAX : m_nodeQueue.PeekNext().key.m_ts, m_stop);
            if (limit == 0)
            {
                break;
            }
        }
        while (!m_stop && !m_nodeQueue.IsEmpty() &&
               (limit == UINT64_MAX || m_nodeQueue.PeekNext().key.m_ts < limit))
        {
            NodeEvent next = m_nodeQueue.RemoveNext();
            NS_ASSERT(next.key.m_ts >= m_currentTs);
            --m_unscheduledEvents;
            ++m_eventCount;
            if (next.key.m_ts != m_currentTs)
            {
                m_ranNow.clear();
                m_currentTs = next.key.m_ts;
            }
            m_currentContext = next.key.m_context;
            m_currentUid = next.key.m_uid;
            m_ranNow.push_back(next.key.m_uid);
            if (PreparedEvent::Is(next.impl))
            {
                static_cast<PreparedEvent*>(next.impl)->Fire();
            }
            else
            {
                next.impl->Invoke();
            }
            next.impl->Unref();
        }
        if (!m_sync)
        {
            break;
        }
    }
}

void
FastSimulatorImpl::Run()
{
    m_mainThreadId = std::this_thread::get_id();
    m_stop = false;
    // The fast helpers count picoseconds; at any other resolution they take ns-3's API.
    FastSimulatorImpl* previous = s_running;
    s_running = Time::GetResolution() == Time::PS ? this : nullptr;
    if (m_nodeOrder)
    {
        RunNodeOrder();
        s_running = previous;
        return;
    }
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
    if (m_nodeOrder)
    {
        if (m_nodeQueue.Remove(id.GetTs(), id.GetUid()))
        {
            id.PeekEventImpl()->Cancel();
            id.PeekEventImpl()->Unref(); // the scheduler's reference
            --m_unscheduledEvents;
            return;
        }
        NS_ASSERT_MSG(false, "FastSimulatorImpl: removing an event that is not scheduled");
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
    if (m_nodeOrder && ts == m_currentTs)
    {
        // Run already at this time? Uids do not give the order here: look it up.
        return impl->IsCancelled() ||
               std::find(m_ranNow.begin(), m_ranNow.end(), uid) != m_ranNow.end();
    }
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
