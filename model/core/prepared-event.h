/*
 * An event that can get ready for its firing while the event before it runs.
 *
 * In a large fabric each hop's event chases pointers through objects no cache holds (the
 * link, the next switch, the port the frame leaves by), and each miss waits for the one
 * before it. The scheduler knows which events come next, so it walks them through stages
 * while earlier events run, one stage per event: fetch the event object; fetch what it
 * names as hints (see QuadHeapScheduler::PrefetchOwner); then Prepare(0), (1), ..., each
 * reading only lines the stage before fetched and fetching the next level (for a frame
 * arriving at a switch: the switch's entry for the egress port ECMP will pick, then that
 * port and its link, then the slot the frame will be written to; at a NIC: the transport
 * header, the QP's entry, the QP, its sender or receiver state, the path). Prepare only reads and
 * prefetches, so it changes no result, only speed.
 */
#ifndef METAROCE_PREPARED_EVENT_H
#define METAROCE_PREPARED_EVENT_H

#include "ns3/event-impl.h"

#include <cstdint>

namespace ns3
{
namespace metaroce
{

class PreparedEvent : public EventImpl
{
  public:
    static constexpr uint32_t kStages = 6;
    /// Stage `stage` (0 to kStages - 1, one event apart): reads what the stage before fetched and
    /// prefetches what the firing needs next. Must change nothing, and do nothing once the
    /// event is cancelled (its owner may be gone): the scheduler does not ask, as
    /// EventImpl::IsCancelled is a call into ns-3 for every stage of every event.
    virtual void Prepare(uint32_t stage) const = 0;

    /// What EventImpl::Invoke does (run unless cancelled), inline: ns-3's Invoke is a call into
    /// its library with a log-level check and another call to ask IsCancelled.
    virtual void Fire() = 0;

    /// Whether impl is a PreparedEvent. Compares its vtable with the few registered ones:
    /// a dynamic_cast on every event would cost more than the misses it hides.
    static bool Is(const EventImpl* impl)
    {
        const void* vt = *reinterpret_cast<const void* const*>(impl);
        for (uint32_t i = 0; i < s_n; ++i)
        {
            if (s_vtables[i] == vt)
            {
                return true;
            }
        }
        return false;
    }

  protected:
    /// A final subclass registers its vtable once, from its constructor (where the vtable
    /// pointer is already the subclass's). Beyond kMax classes, Is() says false: no hints.
    static void Register(const PreparedEvent* self)
    {
        const void* vt = *reinterpret_cast<const void* const*>(self);
        if (s_n < kMax)
        {
            s_vtables[s_n++] = vt;
        }
    }

  private:
    static constexpr uint32_t kMax = 8;
    inline static const void* s_vtables[kMax]{};
    inline static uint32_t s_n{0};
};

} // namespace metaroce
} // namespace ns3

#endif
