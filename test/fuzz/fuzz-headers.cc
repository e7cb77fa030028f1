// libFuzzer target: the first byte picks a header (modulo 3: RdmaHeader, FabricHeader,
// RawHeader), the rest are the bytes of a packet to deserialize it from. A header that deserializes
// must serialize to the same fields again; reading past the bytes or any sanitizer report is a
// fault.
#include "model/fabric/fabric-header.h"
#include "model/fabric/raw-traffic.h"
#include "model/transport/rdma-header.h"

#include "ns3/buffer.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>

using namespace ns3;
using namespace ns3::metaroce;

namespace
{
Buffer
BufferOf(const uint8_t* data, std::size_t size)
{
    Buffer b;
    b.AddAtStart(static_cast<uint32_t>(size));
    b.Begin().Write(data, static_cast<uint32_t>(size));
    return b;
}

/// Deserializes h from the bytes; if it takes any, serializes and deserializes it again and
/// checks that `same` holds between the two.
template <typename H, typename Same>
void
RoundTrip(const uint8_t* data, std::size_t size, Same same)
{
    Buffer b = BufferOf(data, size);
    H h;
    uint32_t used = h.Deserialize(b.Begin());
    if (used == 0)
    {
        return;
    }
    if (used > size || used != h.GetSerializedSize())
    {
        std::abort();
    }
    std::ostringstream os;
    h.Print(os);
    Buffer out;
    out.AddAtStart(h.GetSerializedSize());
    h.Serialize(out.Begin());
    H g;
    if (g.Deserialize(out.Begin()) != used || !same(h, g))
    {
        std::abort();
    }
}
} // namespace

extern "C" int
LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size)
{
    if (size == 0 || size > 4096)
    {
        return 0;
    }
    const uint8_t* bytes = data + 1;
    std::size_t n = size - 1;
    if (data[0] % 3 == 0)
    {
        RoundTrip<RdmaHeader>(bytes, n,
                              [](const RdmaHeader& a, const RdmaHeader& b)
                              {
                                  return a.opcode == b.opcode && a.flags == b.flags &&
                                         a.stream == b.stream && a.destQpn == b.destQpn &&
                                         a.psn == b.psn && a.msgId == b.msgId &&
                                         a.offset == b.offset && a.msgBytes == b.msgBytes &&
                                         a.path == b.path && a.epoch == b.epoch &&
                                         a.ackBase == b.ackBase && a.timestampPs == b.timestampPs &&
                                         a.rateHintMbps == b.rateHintMbps && a.sack == b.sack;
                              });
    }
    else if (data[0] % 3 == 1)
    {
        RoundTrip<FabricHeader>(bytes, n,
                                [](const FabricHeader& a, const FabricHeader& b)
                                {
                                    return a.src == b.src && a.dst == b.dst &&
                                           a.entropy == b.entropy &&
                                           a.ipPayloadBytes == b.ipPayloadBytes && a.ecn == b.ecn &&
                                           a.tc == b.tc;
                                });
    }
    else
    {
        RoundTrip<RawHeader>(bytes, n,
                             [](const RawHeader& a, const RawHeader& b) {
                                 return a.flow == b.flow && a.seq == b.seq && a.sentPs == b.sentPs;
                             });
    }
    return 0;
}
