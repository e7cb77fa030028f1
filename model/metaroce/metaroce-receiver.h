/*
 * The receiving side of a MetaRoCE connection: per path, the cumulative PSN and a 256-bit
 * SACK bitmap of what arrived above it, and the ACKs that report them.
 *
 *  - A path is FIFO (one ECMP route): a PSN above the next expected one leaves a hole, which
 *    the sender hears of at once (an ACK per gap); otherwise ACKs are coalesced per path.
 *  - A packet of a newer epoch (the sender renumbered the path) starts the path afresh; an
 *    older epoch's packet is placed but leaves no state.
 *  - The sender's ackBase says which PSNs it gave up on (resent elsewhere): the bitmap
 *    slides past them.
 * Placement (by offset, no reorder buffer) and the rate hint are the QP's; this class only
 * keeps the sequence state and builds ACK headers, stamped with the hint it is given.
 */
#ifndef METAROCE_METAROCE_RECEIVER_H
#define METAROCE_METAROCE_RECEIVER_H

#include "model/transport/rdma-header.h"

#include <array>
#include <cstdint>
#include <vector>

namespace ns3
{
namespace metaroce
{

class MetaRoceReceiver
{
  public:
    static constexpr uint32_t kSackBits = 256;

    struct Bits256
    {
        std::array<uint64_t, 4> w{};

        bool Test(uint32_t i) const { return (w[i >> 6] >> (i & 63)) & 1; }

        void Set(uint32_t i) { w[i >> 6] |= 1ULL << (i & 63); }

        void ShiftRight1()
        {
            for (int k = 0; k < 3; ++k)
            {
                w[k] = (w[k] >> 1) | (w[k + 1] << 63);
            }
            w[3] >>= 1;
        }

        void ShiftRight(uint32_t n)
        {
            if (n >= 256)
            {
                w = {};
                return;
            }
            uint32_t words = n >> 6;
            uint32_t bits = n & 63;
            for (uint32_t k = 0; k < 4; ++k)
            {
                uint64_t lo = k + words < 4 ? w[k + words] : 0;
                uint64_t hi = k + words + 1 < 4 ? w[k + words + 1] : 0;
                w[k] = bits == 0 ? lo : (lo >> bits) | (hi << (64 - bits));
            }
        }
    };

    struct RPath
    {
        Bits256 above;
        uint32_t cum{0};
        uint32_t unacked{0};
        int64_t lastTsPs{0};
        uint16_t entropy{0};
        uint8_t epoch{0};
        uint8_t port{0};
        bool init{false};
        bool ecn{false};
        bool probe{false}; //!< the last packet was a probe
    };

    /// What a data packet did to its path's state.
    struct Arrival
    {
        bool current;   //!< of the path's current epoch (else: place it, nothing more)
        bool ackNow;    //!< acknowledge at once (a gap, a probe, or AckInterval reached)
        bool ecnMarked; //!< it arrived with CE
    };

    /// Records data packet `h` that came on NIC port `port` with `entropy` and ECN `ce`.
    Arrival OnData(uint32_t port, uint16_t entropy, bool ce, const RdmaHeaderData& h,
                   uint32_t ackInterval);

    /// Fills `a` with path `id`'s ACK (stamped with hintBps) and where it goes; the path
    /// has nothing unacknowledged after it.
    void MakeAck(uint32_t id, uint32_t destQpn, double hintBps, RdmaHeaderData& a, uint8_t& port,
                 uint16_t& entropy);

    /// Calls f(path id) for every path with packets not yet acknowledged.
    template <class F> void ForEachUnacked(F&& f) const
    {
        for (uint32_t i = 0; i < m_rxSlot.size(); ++i)
        {
            const RPath* r = Path(i);
            if (r != nullptr && r->init && r->unacked > 0)
            {
                f(i);
            }
        }
    }

    bool HasState() const { return !m_rx.empty() || !m_rxSlot.empty(); }

    /// The receive state of path `id`, or null if nothing came on it yet.
    const RPath* Path(uint32_t id) const
    {
        return id < m_rxSlot.size() && m_rxSlot[id] != 0 ? &m_rx[m_rxSlot[id] - 1] : nullptr;
    }

    /// Prefetches what OnData reads for path `id`: stage 1 the slot table, stage 2 the path.
    void Prefetch(uint32_t id, uint32_t stage) const
    {
        if (stage == 1)
        {
            if (id < m_rxSlot.size())
            {
                __builtin_prefetch(&m_rxSlot[id]);
            }
            __builtin_prefetch(m_rx.data());
        }
        else if (const RPath* r = Path(id))
        {
            const char* c = reinterpret_cast<const char*>(r);
            for (std::size_t o = 0; o < sizeof(RPath); o += 64)
            {
                __builtin_prefetch(c + o);
            }
        }
    }

  private:
    std::vector<RPath> m_rx;        //!< the paths heard from, in order of first packet
    std::vector<uint16_t> m_rxSlot; //!< [path id] 1 + index in m_rx; 0: not heard from
};

} // namespace metaroce
} // namespace ns3

#endif
