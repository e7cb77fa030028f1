/*
 * Trace sources made when the first sink connects. An object with many trace sources and
 * millions of instances (a queue pair, a port) keeps them in one block behind a pointer
 * that stays null while nobody listens: each instance pays 8 bytes instead of ~24 per
 * source, and the per-packet code that would update a TracedValue tests one pointer.
 *
 * The owner T provides `Block& GetTraceBlock()`, which makes the block on first use (and
 * gives its TracedValues their current values); the accessor connects a sink to one member
 * of that block, so Config::Connect and TraceConnectWithoutContext work as for a source held
 * directly in the object.
 */
#ifndef METAROCE_LAZY_TRACE_SOURCE_H
#define METAROCE_LAZY_TRACE_SOURCE_H

#include "ns3/trace-source-accessor.h"

#include <memory>
#include <string>

namespace ns3
{
namespace metaroce
{

template <class T, class Block, class Source>
class LazyTraceSourceAccessor : public TraceSourceAccessor
{
  public:
    explicit LazyTraceSourceAccessor(Source Block::*member)
        : m_member(member)
    {
    }

    bool ConnectWithoutContext(ObjectBase* obj, const CallbackBase& cb) const override
    {
        Source* s = Find(obj);
        if (s == nullptr)
        {
            return false;
        }
        s->ConnectWithoutContext(cb);
        return true;
    }

    bool Connect(ObjectBase* obj, std::string context, const CallbackBase& cb) const override
    {
        Source* s = Find(obj);
        if (s == nullptr)
        {
            return false;
        }
        s->Connect(cb, context);
        return true;
    }

    bool DisconnectWithoutContext(ObjectBase* obj, const CallbackBase& cb) const override
    {
        Source* s = Find(obj);
        if (s == nullptr)
        {
            return false;
        }
        s->DisconnectWithoutContext(cb);
        return true;
    }

    bool Disconnect(ObjectBase* obj, std::string context, const CallbackBase& cb) const override
    {
        Source* s = Find(obj);
        if (s == nullptr)
        {
            return false;
        }
        s->Disconnect(cb, context);
        return true;
    }

  private:
    Source* Find(ObjectBase* obj) const
    {
        T* t = dynamic_cast<T*>(obj);
        return t == nullptr ? nullptr : &(t->GetTraceBlock().*m_member);
    }

    Source Block::*m_member;
};

/// Owns a trace block; copying (a prototype's clone) yields none: sinks belong to one object.
template <class Block> class LazyTraceBlock : public std::unique_ptr<Block>
{
  public:
    LazyTraceBlock() = default;

    LazyTraceBlock(const LazyTraceBlock&)
        : std::unique_ptr<Block>()
    {
    }

    LazyTraceBlock& operator=(const LazyTraceBlock&)
    {
        this->reset();
        return *this;
    }
};

/// The accessor of trace source `member` of T's lazily made trace block.
template <class T, class Block, class Source>
Ptr<const TraceSourceAccessor>
MakeLazyTraceSourceAccessor(Source Block::*member)
{
    return Ptr<const TraceSourceAccessor>(new LazyTraceSourceAccessor<T, Block, Source>(member),
                                          false);
}

} // namespace metaroce
} // namespace ns3

#endif
