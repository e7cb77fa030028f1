/*
 * A growable circular FIFO that allocates nothing until first used: a fabric has millions
 * of queues (ports, links, per-path send records) and most are empty, so std::deque's eager
 * block per queue would dominate memory. Indexable from the front for sliding windows.
 */
#ifndef METAROCE_RING_H
#define METAROCE_RING_H

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>

namespace ns3
{
namespace metaroce
{

template <typename T> class Ring
{
  public:
    Ring() = default;

    /// A copy holds copies of the elements (queue-pair prototypes are copied, see Clone).
    Ring(const Ring& o)
    {
        for (uint32_t i = 0; i < o.m_size; ++i)
        {
            T v(o.At(i));
            PushBack(std::move(v));
        }
    }

    Ring& operator=(const Ring& o)
    {
        if (this != &o)
        {
            Ring copy(o);
            *this = std::move(copy);
        }
        return *this;
    }

    Ring(Ring&& o) noexcept
        : m_buf(o.m_buf)
        , m_head(o.m_head)
        , m_size(o.m_size)
        , m_cap(o.m_cap)
    {
        o.m_buf = nullptr;
        o.m_head = o.m_size = o.m_cap = 0;
    }

    Ring& operator=(Ring&& o) noexcept
    {
        if (this != &o)
        {
            Release();
            m_buf = o.m_buf;
            m_head = o.m_head;
            m_size = o.m_size;
            m_cap = o.m_cap;
            o.m_buf = nullptr;
            o.m_head = o.m_size = o.m_cap = 0;
        }
        return *this;
    }

    ~Ring()
    {
        Clear();
        std::free(m_buf);
    }

    bool Empty() const { return m_size == 0; }

    uint32_t Size() const { return m_size; }

    T& Front() { return m_buf[m_head]; }

    const T& Front() const { return m_buf[m_head]; }

    T& Back() { return At(m_size - 1); }

    /// i-th element from the front.
    T& At(uint32_t i) { return m_buf[(m_head + i) & (m_cap - 1)]; }

    const T& At(uint32_t i) const { return m_buf[(m_head + i) & (m_cap - 1)]; }

    /// Where the next PushBack will construct its element (null if it must grow first): a
    /// prefetch hint.
    const T* NextSlot() const
    {
        return m_size < m_cap ? &m_buf[(m_head + m_size) & (m_cap - 1)] : nullptr;
    }

    void PushBack(T&& v)
    {
        if (m_size == m_cap)
        {
            Grow();
        }
        new (&m_buf[(m_head + m_size) & (m_cap - 1)]) T(std::move(v));
        ++m_size;
    }

    T PopFront()
    {
        T v(std::move(m_buf[m_head]));
        m_buf[m_head].~T();
        m_head = (m_head + 1) & (m_cap - 1);
        --m_size;
        return v;
    }

    void Clear()
    {
        while (m_size > 0)
        {
            PopFront();
        }
    }

    /// Frees the storage of an empty ring.
    void Release()
    {
        Clear();
        std::free(m_buf);
        m_buf = nullptr;
        m_head = m_cap = 0;
    }

  private:
    void Grow()
    {
        // Large elements (a QP's message records) start with one slot: most such rings
        // never hold more, and there is one per QP.
        uint32_t cap = m_cap == 0 ? (sizeof(T) >= 64 ? 1 : 4) : m_cap * 2;
        auto* nb = static_cast<T*>(std::malloc(sizeof(T) * cap));
        if (nb == nullptr)
        {
            throw std::bad_alloc();
        }
        for (uint32_t i = 0; i < m_size; ++i)
        {
            T& old = m_buf[(m_head + i) & (m_cap - 1)];
            new (&nb[i]) T(std::move(old));
            old.~T();
        }
        std::free(m_buf);
        m_buf = nb;
        m_cap = cap;
        m_head = 0;
    }

    T* m_buf{nullptr};
    uint32_t m_head{0};
    uint32_t m_size{0};
    uint32_t m_cap{0};
};

} // namespace metaroce
} // namespace ns3

#endif
