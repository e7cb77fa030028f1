/*
 * One port of a fabric element (switch or NIC): an egress queue in bytes with a
 * strict-priority control queue and a data queue, a transmitter at DataRate, and the receive
 * side of a point-to-point FabricChannel. At most one pending event per port.
 * The fields a frame's hop reads sit in three cache lines (receive; queues; transmitter),
 * the rest after them: a large fabric's ports do not fit in any cache, so each line a hop
 * touches is a miss.
 */
#ifndef METAROCE_FABRIC_NET_DEVICE_H
#define METAROCE_FABRIC_NET_DEVICE_H

#include "fabric-channel.h"
#include "fabric-frame.h"
#include "model/core/fabric-random.h"
#include "model/core/lazy-trace-source.h"
#include "model/core/reusable-event.h"

#include "ns3/data-rate.h"
#include "ns3/event-id.h"
#include "ns3/net-device.h"
#include "ns3/node.h"
#include "ns3/traced-callback.h"
#include "ns3/traced-value.h"

namespace ns3
{
namespace metaroce
{

class FabricNetDevice;

/// Why a port dropped a frame (the switch's own drops, e.g. buffer full, are counted there).
enum class FabricDropReason : uint8_t
{
    LinkDown = 0, //!< sent to or arriving at a port whose link is down
    Corrupt = 1,  //!< random loss on the link (LossRate)
    BufferFull = 2,
    NoRoute = 3,
};

/// What owns a port (a switch, a NIC, a traffic endpoint) implements this; a plain interface
/// rather than ns-3 Callbacks because it is called for every frame.
class FabricFrameReceiver
{
  public:
    virtual ~FabricFrameReceiver() = default;
    /// A frame arrived at port.
    virtual void ReceiveFrame(FabricNetDevice* port, FabricFrame&& frame) = 0;
    /// The frame will arrive soon: prefetch what ReceiveFrame will touch, in stages (see
    /// PreparedEvent), each an event apart. Reads only; changes nothing.
    virtual void PrepareFrame(const FabricFrame& frame, uint32_t stage) const {}
    /// The transmitter of `port` (its index) will soon finish with nothing queued, and the
    /// owner wants NotifyPortIdle: prefetch what feeding it will touch, in stages as above.
    virtual void PrepareIdle(uint32_t port, uint32_t stage) const {}
    /// A frame left port's queue to go on the wire (or was flushed by a link failure).
    virtual void NotifyDequeue(FabricNetDevice* port, const FabricFrame& frame) {}
    /// The transmitter finished and both queues are empty: an owner that feeds the port one
    /// frame at a time (a NIC's arbiter) sends the next one now.
    virtual void NotifyPortIdle(FabricNetDevice* port) {}
    /// Whether NotifyPortIdle is wanted: a port whose owner does not need it schedules no
    /// event at the end of a transmission that nothing waits behind.
    virtual bool WantsPortIdle() const { return false; }
    /// The port's link went down or came back.
    virtual void NotifyLinkChange(FabricNetDevice* port, bool up) {}
};

/// A port's trace sources, made when the first sink connects (see lazy-trace-source.h).
struct FabricPortTraces
{
    TracedCallback<Ptr<const Packet>> txBegin;
    TracedCallback<Ptr<const Packet>> sniffer;
    TracedValue<uint64_t> queueBytes;
};

class alignas(64) FabricNetDevice final : public NetDevice
{
  public:
    static TypeId GetTypeId();
    FabricNetDevice();
    ~FabricNetDevice() override;

    /// Queues a frame for transmission and starts the transmitter if idle. Returns false and
    /// counts a drop if the link is down.
    bool Enqueue(FabricFrame&& frame);
    /// Called by the channel when a frame's last bit arrives.
    void Receive(FabricFrame&& frame);

    void Attach(Ptr<FabricChannel> channel);
    void SetReceiver(FabricFrameReceiver* r);
    /// The port's receive-side cache line, for prefetch hints (what a frame's arrival reads).
    const void* RxHotLine() const { return &m_receiver; }
    /// The cache line of its link that a frame this port sends touches (or null: no link).
    const void* TxHotLine() const
    {
        return m_channelRaw ? m_channelRaw->HotLine(m_txDir) : nullptr;
    }
    /// See PreparedEvent: the transmitter's event is coming.
    void PrepareEvent(uint32_t, uint32_t stage) const;
    /// Prefetches the slots an Enqueue of frame will write (its queue's, its link's), once
    /// this port's hot lines and its link's are in cache.
    void PrepareEnqueue(const FabricFrame& frame) const;
    FabricFrameReceiver* GetReceiver() const { return m_receiver; }
    /// Called by the channel on link failure/recovery (both ends).
    void SetLinkUp(bool up);
    /// Pipeline latency of the element this port belongs to (a switch's lookup and admission):
    /// the link hands a frame over this long after its last bit arrived.
    void SetRxLatency(int64_t ps);
    int64_t GetRxLatencyPs() const { return m_rxLatencyPs; }
    /// Pipeline latency before the wire (a NIC's transmit processing): the link hands a frame
    /// over this much later too, without limiting the port's rate.
    void SetTxLatency(int64_t ps);
    int64_t GetTxLatencyPs() const { return m_txLatencyPs; }
    /// A port with no link (a partly filled leaf): down, silently, from the start.
    void MarkUnwired() { m_linkUp = false; }

    /// PFC: stop (or resume) sending frames of traffic class tc.
    void SetPaused(uint8_t tc, bool paused);
    bool IsPaused(uint8_t tc) const { return (m_pausedMask >> tc) & 1; }

    void SetDataRate(DataRate rate);
    DataRate GetDataRate() const { return m_rate; }
    /// Wire time of bytes at this port's rate, in picoseconds (exact integer arithmetic).
    int64_t TxTimePs(uint32_t wireBytes) const;
    void SetLossRate(double p);
    double GetLossRate() const { return m_lossRate; }
    /// Assigns the random stream used for link loss; returns the number of streams used.
    int64_t AssignStreams(int64_t stream);

    /// Bytes waiting in the data queue (control frames excluded) and in both queues.
    uint64_t GetDataQueueBytes() const { return m_queueBytes[1]; }
    uint64_t GetQueueBytes() const { return m_queueBytes[0] + m_queueBytes[1]; }
    uint32_t GetQueuePackets() const { return m_queue[0].Size() + m_queue[1].Size(); }
    /// Whether a frame is being serialized now.
    bool IsBusy() const;
    Ptr<FabricChannel> GetFabricChannel() const { return m_channel; }
    /// The device at the other end of the link.
    FabricNetDevice* GetPeer() const;
    /// The queue a traffic class maps to: 0 for control (strict priority), 1 for data.
    uint32_t QueueOf(uint8_t tc) const { return tc >= m_controlTc ? 0 : 1; }

    struct Counters
    {
        uint64_t txPackets{0};
        uint64_t txBytes{0}; //!< wire bytes, overhead included
        uint64_t rxPackets{0};
        uint64_t rxBytes{0};
        uint64_t dropLinkDown{0};   //!< on either side: sent on or arriving at a down link
        uint64_t dropLinkDownRx{0}; //!< of dropLinkDown: arrived at this port while down
        uint64_t dropCorrupt{0};
        uint64_t maxQueueBytes{0};
        uint64_t pausedPs{0}; //!< time with any traffic class paused
        uint64_t pauses{0};   //!< transitions into pause
    };

    Counters GetCounters() const;

    // NetDevice
    void SetIfIndex(const uint32_t index) override;
    uint32_t GetIfIndex() const override { return m_ifIndex; }
    Ptr<Channel> GetChannel() const override;
    void SetAddress(Address address) override;
    Address GetAddress() const override;
    bool SetMtu(const uint16_t mtu) override;
    uint16_t GetMtu() const override;
    bool IsLinkUp() const override { return m_linkUp; }
    void AddLinkChangeCallback(Callback<void> callback) override;
    bool IsBroadcast() const override;
    Address GetBroadcast() const override;
    bool IsMulticast() const override;
    Address GetMulticast(Ipv4Address multicastGroup) const override;
    Address GetMulticast(Ipv6Address addr) const override;
    bool IsBridge() const override;
    bool IsPointToPoint() const override;
    bool Send(Ptr<Packet> packet, const Address& dest, uint16_t protocolNumber) override;
    bool SendFrom(Ptr<Packet> packet, const Address& source, const Address& dest,
                  uint16_t protocolNumber) override;
    Ptr<Node> GetNode() const override;
    void SetNode(Ptr<Node> node) override;
    bool NeedsArp() const override;
    void SetReceiveCallback(NetDevice::ReceiveCallback cb) override;
    void SetPromiscReceiveCallback(PromiscReceiveCallback cb) override;
    bool SupportsSendFrom() const override;

    typedef void (*DropTracedCallback)(Ptr<const Packet> packet, uint8_t reason);

    /// The trace block, made now if no sink connected before (for the trace accessors).
    FabricPortTraces& GetTraceBlock();

  protected:
    void DoDispose() override;

  private:
    void TryTransmit(int64_t now);
    /// Puts a frame that has left the queue on the wire.
    void StartTransmission(FabricFrame&& f, int64_t now);
    void TransmitComplete(uint32_t unused = 0);
    /// Schedules the transmitter's event (end of a frame, or a deferred start).
    void ScheduleTx(int64_t delayPs);
    /// Voids a pending transmitter event (link failure, disposal).
    void CancelTx();
    /// Starts the transmitter now if it is free, or arranges one event for when it is.
    void Kick(int64_t now);
    void Drop(const FabricFrame& f, FabricDropReason reason);
    /// Fires the transmit trace sources for a frame going on the wire (only when traced).
    void TraceTransmit(const FabricFrame& f);
    /// Reports the queue's depth to the QueueBytes trace's sinks (only when traced).
    void TraceQueue()
    {
        if (m_traces)
        {
            m_traces->queueBytes = m_queueBytes[0] + m_queueBytes[1];
        }
    }

    // Line 0, after NetDevice's 32 bytes: what a frame's arrival reads.
    FabricFrameReceiver* m_receiver{nullptr};
    uint64_t m_rxPackets{0};
    uint64_t m_rxBytes{0}; //!< wire bytes
    uint32_t m_ifIndex{0};
    bool m_linkUp{true};
    bool m_lossy{false};        //!< m_lossRate > 0
    bool m_eventPending{false}; //!< m_txEvent is scheduled and has not run
    bool m_notifyIdle{false};   //!< the owner wants NotifyPortIdle (a NIC's arbiter)
    // Line 1: the queues.
    FrameRing m_queue[2]; //!< [0] control, strict priority; [1] data
    uint64_t m_queueBytes[2]{0, 0};
    // Line 2: the transmitter.
    int64_t m_busyUntilPs{0}; //!< end of the frame being serialized (or of the last one)
    uint64_t m_txPackets{0};
    uint64_t m_txBytes{0}; //!< wire bytes, overhead included
    uint64_t m_maxQueueBytes{0};
    FabricChannel* m_channelRaw{nullptr}; //!< m_channel without the reference count
    using TxEvent = ReusableEvent<FabricNetDevice, &FabricNetDevice::TransmitComplete>;
    Ptr<TxEvent> m_txEvent;  //!< transmission end, or a deferred start; made on first use
    uint32_t m_psPerByte{0}; //!< exact ps per byte at m_rate, or 0 (see TxTimePs)
    uint8_t m_controlTc{6};
    uint8_t m_pausedMask{0};
    uint8_t m_txDir{0};                        //!< m_channelRaw's direction from here
    LazyTraceBlock<FabricPortTraces> m_traces; //!< null until a sink connects
    // Cold.
    Ptr<Node> m_node;
    Ptr<FabricChannel> m_channel;
    DataRate m_rate;
    int64_t m_rxLatencyPs{0};
    int64_t m_txLatencyPs{0};
    double m_lossRate{0};
    FastRng m_rng;
    int64_t m_pauseStartPs{0};
    uint64_t m_dropLinkDown{0};
    uint64_t m_dropLinkDownRx{0};
    uint64_t m_dropCorrupt{0};
    uint64_t m_pausedPs{0};
    uint64_t m_pauses{0};
    uint16_t m_mtu{9000};

    TracedCallback<Ptr<const Packet>, uint8_t> m_dropTrace;
    TracedCallback<> m_linkChangeCallbacks;
};

} // namespace metaroce
} // namespace ns3

#endif
