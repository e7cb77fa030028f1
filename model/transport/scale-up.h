/*
 * A host's scale-up domain (NVLink/NVSwitch-, xGMI-class): the accelerators of one host reach
 * each other through it without touching their NICs. Each accelerator has one egress and one
 * ingress of DataRate; a message crosses in chunks of ChunkBytes, each serialized at the
 * sender's egress (round robin over the accelerator's queue pairs with data, as a NIC's
 * arbiter), then Latency later delivered once the receiver's ingress has room for it at
 * DataRate (several senders into one accelerator share its ingress).
 *
 * What it leaves out: link-level credits (a congested receiver does not hold back its
 * senders' egress, so a sender may move on to other peers while its chunks wait at the
 * receiver), the switch's internal structure (a non-blocking crossbar is assumed), copy
 * engines and SM use, and in-switch reduction (NVLS).
 *
 * ScaleUpQueuePair carries a connection between two accelerators of one host through the
 * domain with the QueuePair API, so collectives use it exactly as a network QP: posted
 * messages, receive completions in order per stream, sender completions when every byte has
 * arrived. Its streams are independent channels, as NCCL's P2P transport gives each channel a
 * connection of its own: each stream sends its messages in order and takes its own turn in
 * the egress's round robin, and a message completes when its last byte lands, whatever
 * another stream still has in flight.
 */
#ifndef METAROCE_SCALE_UP_H
#define METAROCE_SCALE_UP_H

#include "model/core/reusable-event.h"
#include "model/core/ring.h"
#include "queue-pair.h"

#include "ns3/data-rate.h"
#include "ns3/nstime.h"
#include "ns3/object.h"

#include <vector>

namespace ns3
{
namespace metaroce
{

class ScaleUpQueuePair;

class ScaleUpDomain : public Object
{
  public:
    static TypeId GetTypeId();
    ScaleUpDomain();
    ~ScaleUpDomain() override;

    /// Sizes the domain: accelerators 0 .. n-1 (local indices within the host).
    void SetAccelerators(uint32_t n);
    uint32_t GetAccelerators() const { return static_cast<uint32_t>(m_ports.size()); }

    /// A connected pair of queue pairs from local accelerator `a` to `b` (a != b); the caller
    /// attaches each to its accelerator's NIC for bookkeeping (QPNs, counters).
    std::pair<Ptr<ScaleUpQueuePair>, Ptr<ScaleUpQueuePair>> Connect(uint32_t a, uint32_t b);

    /// Stream `stream` of a queue pair of accelerator `acc` has chunks to send.
    void NotifyReady(uint32_t acc, ScaleUpQueuePair* qp, uint16_t stream);

    /// Payload bytes accelerator `acc` sent and received over the domain.
    uint64_t GetTxBytes(uint32_t acc) const { return m_ports[acc].txBytes; }
    uint64_t GetRxBytes(uint32_t acc) const { return m_ports[acc].rxBytes; }

  protected:
    void DoDispose() override;

  public:
    /// For ReusableEvent: nothing to prefetch (a domain's state is small and hot).
    void PrepareEvent(uint32_t, uint32_t) const {}

  private:
    /// A chunk on its way into an accelerator.
    struct Delivery
    {
        ScaleUpQueuePair* from;
        RdmaHeaderData h;
        uint32_t payload;
        uint64_t index;
        int64_t atPs;
    };

    /// The chunk on the egress of `acc` is out.
    void TransmitDone(uint32_t acc);
    /// The first chunk waiting at the ingress of `acc` is in.
    void Deliver(uint32_t acc);

    // One reusable event per port and direction: an accelerator's egress has one chunk on
    // it at a time, and its ingress delivers in order (each chunk after the one before).
    using DoneEvent = ReusableEvent<ScaleUpDomain, &ScaleUpDomain::TransmitDone>;
    using DeliverEvent = ReusableEvent<ScaleUpDomain, &ScaleUpDomain::Deliver>;

    /// A stream of a queue pair with chunks to send.
    struct Ready
    {
        ScaleUpQueuePair* qp;
        uint16_t stream;
    };

    struct Port
    {
        Ring<Ready> ready;        //!< streams with chunks, round robin
        bool busy{false};         //!< a chunk is being serialized at the egress
        int64_t ingressFreePs{0}; //!< when the ingress has delivered all it accepted
        uint64_t txBytes{0};
        uint64_t rxBytes{0};
        Ring<Delivery> arriving; //!< chunks on their way in, by delivery time
        Ptr<DoneEvent> done;
        Ptr<DeliverEvent> deliver;
    };

    /// The egress of `acc` is free: start its next chunk, if any.
    void Transmit(uint32_t acc);
    int64_t TxPs(uint32_t bytes) const;

    std::vector<Port> m_ports;
    DataRate m_rate;
    Time m_latency;
    uint32_t m_chunkBytes{65536};
};

class ScaleUpQueuePair : public QueuePair
{
  public:
    static TypeId GetTypeId();
    ScaleUpQueuePair();

    Ptr<QueuePair> Clone() const override;
    PullResult PullFrame(uint32_t port, FabricFrame& out) override { return PullResult::Nothing; }
    void Receive(uint32_t port, FabricFrame& frame, const RdmaHeaderData& h) override {}

  private:
    friend class ScaleUpDomain;

    /// The next chunk of `stream`'s message being sent, at most `chunkBytes`: its header
    /// (stream, message, offset) and payload; false if the stream has nothing left to send
    /// (it is then no longer ready). `index` identifies the message for Acknowledge.
    bool NextChunk(uint16_t stream, uint32_t chunkBytes, RdmaHeaderData& h, uint32_t& payload,
                   uint64_t& index);
    /// Receiver: a chunk arrived.
    void Arrive(const RdmaHeaderData& h, uint32_t payload);
    /// Sender: a chunk of message `index` (as NextChunk gave it) arrived at the peer.
    void Acknowledge(uint64_t index, uint32_t payload);

    void OnPosted() override;

    ScaleUpDomain* m_domain{nullptr};
    ScaleUpQueuePair* m_peer{nullptr};
    uint32_t m_local{0};
    uint32_t m_peerLocal{0};
    /// A stream's progress: the message it sends (index among all the QP's messages; the
    /// messages between belong to other streams) and how much of it has gone.
    struct Cursor
    {
        uint64_t next{0};
        uint32_t offset{0};
        bool ready{false}; //!< in the domain's round robin
    };

    std::vector<Cursor> m_streams; //!< by stream
};

/// The scale-up domains of a cluster of hosts with `acceleratorsPerHost` accelerators each,
/// numbered host by host: accelerator a is accelerator a % acceleratorsPerHost of host
/// a / acceleratorsPerHost (which NIC serves it is the topology's business).
struct ScaleUpFabric
{
    uint32_t acceleratorsPerHost{1};
    std::vector<Ptr<ScaleUpDomain>> hosts;

    uint32_t HostOf(uint32_t accelerator) const { return accelerator / acceleratorsPerHost; }
    uint32_t LocalOf(uint32_t accelerator) const { return accelerator % acceleratorsPerHost; }
    bool SameHost(uint32_t a, uint32_t b) const
    {
        return acceleratorsPerHost > 1 && HostOf(a) == HostOf(b);
    }
};

} // namespace metaroce
} // namespace ns3

#endif
