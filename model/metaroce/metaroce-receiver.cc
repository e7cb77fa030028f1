#include "metaroce-receiver.h"

#include "ns3/log.h"

#include <algorithm>

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("MetaRoceReceiver");

MetaRoceReceiver::Arrival
MetaRoceReceiver::OnData(uint32_t port, uint16_t entropy, bool ce, const RdmaHeaderData& h,
                         uint32_t ackInterval)
{
    if (h.path >= m_rxSlot.size())
    {
        m_rxSlot.resize(h.path + 1u, 0);
    }
    if (m_rxSlot[h.path] == 0)
    {
        // Exact growth: most connections see a few paths, and there are millions of them.
        m_rx.reserve(m_rx.size() + 1);
        m_rx.emplace_back();
        m_rxSlot[h.path] = static_cast<uint16_t>(m_rx.size());
    }
    RPath& r = m_rx[m_rxSlot[h.path] - 1];
    if (!r.init || static_cast<int8_t>(h.epoch - r.epoch) > 0)
    {
        r = RPath();
        r.init = true;
        r.epoch = h.epoch;
    }
    Arrival a{r.epoch == h.epoch, false, false};
    if (!a.current)
    {
        return a; // an older epoch's packet: placed if new, its path state is gone
    }
    bool gap = false;
    r.port = static_cast<uint8_t>(port);
    r.entropy = entropy;
    r.lastTsPs = h.timestampPs;
    if (ce)
    {
        r.ecn = true;
        a.ecnMarked = true;
    }
    if (h.ackBase > r.cum)
    {
        // The sender gave up on PSNs below ackBase (lost, resent elsewhere): slide past.
        uint32_t d = h.ackBase - r.cum;
        bool baseReceived = d - 1 < kSackBits && r.above.Test(d - 1);
        r.above.ShiftRight(d);
        r.cum = h.ackBase;
        if (baseReceived)
        {
            bool next;
            do
            {
                next = r.above.Test(0);
                r.above.ShiftRight1();
                ++r.cum;
            } while (next);
        }
    }
    uint32_t x = h.psn;
    if (x == r.cum)
    {
        bool next;
        do
        {
            next = r.above.Test(0);
            r.above.ShiftRight1();
            ++r.cum;
        } while (next);
    }
    else if (x > r.cum && x - r.cum - 1 < kSackBits)
    {
        r.above.Set(x - r.cum - 1);
        gap = true; // a hole below x: the sender must hear of it now
    }
    ++r.unacked;
    r.probe = (h.flags & RdmaHeader::kFlagProbe) != 0;
    a.ackNow = r.unacked >= ackInterval || gap || r.probe;
    return a;
}

void
MetaRoceReceiver::MakeAck(uint32_t id, uint32_t destQpn, double hintBps, RdmaHeaderData& a,
                          uint8_t& port, uint16_t& entropy)
{
    RPath& r = m_rx[m_rxSlot[id] - 1];
    a.opcode = RdmaOpcode::PathAck;
    a.destQpn = destQpn;
    a.psn = r.cum;
    a.path = static_cast<uint16_t>(id);
    a.epoch = r.epoch;
    a.sack = r.above.w;
    a.timestampPs = r.lastTsPs;
    a.flags = (r.ecn ? RdmaHeader::kFlagEcnEcho : 0) | (r.probe ? RdmaHeader::kFlagProbe : 0);
    a.rateHintMbps = static_cast<uint32_t>(std::min(hintBps / 1e6, 4.0e9));
    r.ecn = false;
    r.unacked = 0;
    port = r.port;
    entropy = r.entropy;
}

} // namespace metaroce
} // namespace ns3
