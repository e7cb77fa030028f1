/*
 * A reliable-connected queue pair, the part both transports share: the verbs-like API
 * (PostSend of messages on ordered streams, completions), message bookkeeping on both sides,
 * counters and trace sources. Subclasses (RoCEv2, MetaRoCE) decide what goes on the wire.
 *
 * Semantics are RDMA WRITE: every packet carries its message's destination offset; the
 * receiver completes a message when all its bytes are placed, and completes the messages of
 * one stream in the order they were posted. Sender completions come in posting order.
 */
#ifndef METAROCE_QUEUE_PAIR_H
#define METAROCE_QUEUE_PAIR_H

#include "model/core/lazy-trace-source.h"
#include "model/fabric/fabric-frame.h"
#include "rdma-congestion-ops.h"
#include "rdma-header.h"

#include "ns3/callback.h"
#include "ns3/nstime.h"
#include "ns3/object-factory.h"
#include "ns3/object.h"
#include "ns3/traced-callback.h"
#include "ns3/traced-value.h"

#include <boost/dynamic_bitset.hpp>
#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace ns3
{
namespace metaroce
{

class RdmaNic;

/// A completed message, as a completion-queue entry reports it.
struct RdmaCompletion
{
    uint16_t stream{0};
    uint32_t seq{0}; //!< the message's position in its stream (0, 1, ...)
    uint64_t bytes{0};
    int64_t postedPs{0}; //!< when the sender posted it
    int64_t completedPs{0};
};

/// What a QP hands the NIC's arbiter when asked for a frame.
enum class PullResult : uint8_t
{
    Nothing, //!< nothing may be sent on this port now (the QP will call NotifyReady later)
    Sent,    //!< a frame was produced; nothing more for now
    More,    //!< a frame was produced and more are ready
};

/// What happened to a MetaRoCE path (trace source PathEvent).
enum class PathEvent : uint8_t
{
    Opened,     //!< a path opened (connection start, replacement, plane back in use)
    Grown,      //!< a path opened because every window sat at its cap (GrowPaths)
    Retired,    //!< a path retired (timeouts, its plane left, rebalancing)
    ClosedIdle, //!< an idle path above MinPaths closed
    Probed,     //!< a probe went out on an avoided plane
    TimedOut,   //!< a path's retransmission timeout fired
};

/**
 * The trace sources of a queue pair, made when the first sink connects (see
 * lazy-trace-source.h): a QP nobody traces carries a null pointer, and its per-ACK code tests
 * only that. Which sources a transport fires is in its TypeId.
 */
struct QueuePairTraces
{
    TracedCallback<uint16_t, uint32_t, uint64_t, Time> receiveComplete;
    TracedCallback<uint16_t, uint32_t, uint64_t, Time> sendComplete;
    TracedCallback<uint32_t, uint32_t> retransmit;
    TracedValue<double> window; //!< QWND in bytes (the sum of the paths' windows)
    TracedValue<double> rate;   //!< pacing rate in bit/s (DCQCN's rate for RoCEv2)
    TracedCallback<uint32_t, double, double> pathWindow;
    TracedCallback<uint32_t, Time, Time> pathRtt;
    TracedCallback<uint32_t, uint32_t, PathEvent> pathEvent;
    TracedCallback<uint32_t, bool> planeState;
    std::vector<double> lastPathWindow; //!< [path] the window pathWindow last reported
};

class QueuePair : public Object
{
  public:
    static TypeId GetTypeId();
    QueuePair();
    ~QueuePair() override;

    using CompletionHandler = std::function<void(const RdmaCompletion&)>;

    /// Posts a message of `bytes` on `stream`; `onSent` runs when the sender's completion
    /// arrives (every byte acknowledged). Returns the message's sequence number in its stream.
    uint32_t PostSend(uint64_t bytes, uint16_t stream = 0, CompletionHandler onSent = nullptr);
    /// Called for every message this QP receives completely, per stream in posting order.
    void SetReceiveHandler(CompletionHandler h) { m_onReceive = std::move(h); }

    /// Called by the NIC when the QP is added.
    void Attach(RdmaNic* nic, uint32_t qpn);
    /// Sets the remote end (NIC id and QPN).
    void Connect(uint32_t remoteNic, uint32_t remoteQpn);
    uint32_t GetQpn() const { return m_qpn; }
    uint32_t GetRemoteNic() const { return m_remoteNic; }
    uint32_t GetRemoteQpn() const { return m_remoteQpn; }
    RdmaNic* GetNic() const { return m_nic; }
    uint32_t GetMtu() const { return m_mtu; }

    /// A new QP configured as this one (attributes, congestion control), with fresh state.
    /// Only for a QP never attached to a NIC: QueuePairFactory's prototype.
    virtual Ptr<QueuePair> Clone() const = 0;

    /// Whether the QP sends on one NIC port only, the one PinToPort chose (RoCEv2); false: it
    /// spreads its traffic over every port itself (MetaRoCE), and a communicator multiplexes
    /// channels over one such QP per peer.
    virtual bool IsPinned() const { return false; }
    /// Pins a pinned QP to `port`; nothing for the others.
    virtual void PinToPort(uint32_t port) {}
    /// A pinned QP's one ECMP path: its UDP source port; nothing for the others, which pick
    /// their paths' entropies themselves.
    virtual void SetEntropy(uint16_t entropy) {}
    /// The congestion control a QP forks at start (a prototype shared by the clones of one
    /// factory; without it each QP builds its own from its CongestionControl type).
    void SetCongestionPrototype(Ptr<RdmaCongestionOps> proto) { m_ccProto = proto; }

    /// The NIC's arbiter asks for the next frame to send on `port`.
    virtual PullResult PullFrame(uint32_t port, FabricFrame& out) = 0;
    /// A frame for this QP arrived on `port` (its RdmaHeader already removed into h).
    virtual void Receive(uint32_t port, FabricFrame& frame, const RdmaHeaderData& h) = 0;
    /// A frame with header h will arrive soon: prefetch what Receive will touch, in stages
    /// one event apart (0, 1, 2; see PreparedEvent), each reading only what the one before
    /// fetched (stage 0: this object's first line). Reads only; changes nothing.
    virtual void PrepareReceive(const RdmaFields& h, uint32_t stage) const {}
    /// The NIC will soon pull a frame for `port`: prefetch what PullFrame will touch, in
    /// stages as PrepareReceive (stage 0: this object's first line is in cache).
    virtual void PreparePull(uint32_t port, uint32_t stage) const {}
    /// Prefetches the line of the receive bookkeeping's pointer (for PrepareReceive).
    void PrefetchPlacement() const
    {
        __builtin_prefetch(&m_recvBook);
        __builtin_prefetch(&m_onReceive);
    }
    /// Prefetches the receive bookkeeping Place reads, a stage after PrefetchPlacement.
    void PrefetchReceiveBook() const
    {
        if (m_recvBook)
        {
            PrefetchRange(m_recvBook.get(), sizeof(RecvBook));
        }
    }
    /// Prefetches the sending side's counters (for PreparePull).
    void PrefetchSendBook() const
    {
        if (m_sendBook)
        {
            __builtin_prefetch(m_sendBook.get());
        }
    }
    /// Prefetches the `bytes` of an object from `p` on (a helper for PrepareReceive).
    static void PrefetchRange(const void* p, std::size_t bytes)
    {
        const char* c = static_cast<const char*>(p);
        for (std::size_t off = 0; off < bytes; off += 64)
        {
            __builtin_prefetch(c + off);
        }
    }
    /// A port of the NIC went down or came back.
    virtual void NotifyPortState(uint32_t port, bool up) {}
    /**
     * The connection has sent and received all it ever will (a communicator's last
     * collective): drop the transport's per-connection state (paths, windows, timers) if
     * nothing is outstanding. Counters and message bookkeeping stay. A later post starts
     * from fresh state; a late frame is handled as a stale one. Results are unchanged: the
     * state would not be consulted again.
     * \return true if the QP is now quiescent (nothing outstanding, no transport state, no
     * event of its own pending): it may be closed and destroyed without changing anything.
     */
    virtual bool ReleaseState() { return false; }
    /// Whether ReleaseState would free anything (it costs an event to ask).
    virtual bool HasReleasableState() const { return false; }

    struct Counters
    {
        uint64_t messagesPosted{0};
        uint64_t bytesPosted{0};
        uint64_t messagesSent{0};     //!< sender completions
        uint64_t messagesReceived{0}; //!< receiver completions
        uint64_t bytesDelivered{0};   //!< payload placed at the receiver, duplicates excluded
        uint64_t dataPacketsSent{0};  //!< including retransmissions
        uint64_t retransmittedPackets{0};
        uint64_t spuriousRetransmissions{0}; //!< retransmitted, yet the original arrived
        uint64_t duplicatePackets{0};        //!< arrived at the receiver already placed
        uint64_t outOfOrderDropped{0};       //!< discarded by an in-order receiver
        uint64_t timeouts{0};
        uint64_t acksSent{0};
        uint64_t naksSent{0};
        uint64_t cnpsSent{0};
        uint64_t ecnMarkedReceived{0};

        void Add(const Counters& o)
        {
            messagesPosted += o.messagesPosted;
            bytesPosted += o.bytesPosted;
            messagesSent += o.messagesSent;
            messagesReceived += o.messagesReceived;
            bytesDelivered += o.bytesDelivered;
            dataPacketsSent += o.dataPacketsSent;
            retransmittedPackets += o.retransmittedPackets;
            spuriousRetransmissions += o.spuriousRetransmissions;
            duplicatePackets += o.duplicatePackets;
            outOfOrderDropped += o.outOfOrderDropped;
            timeouts += o.timeouts;
            acksSent += o.acksSent;
            naksSent += o.naksSent;
            cnpsSent += o.cnpsSent;
            ecnMarkedReceived += o.ecnMarkedReceived;
        }
    };

    /// The counters of both sides (a side that never ran reads zeros).
    Counters GetCounters() const;

    /// The trace block, made now if no sink connected before (for the trace accessors).
    QueuePairTraces& GetTraceBlock();
    /// Whether a sink ever connected to one of this QP's trace sources.
    bool IsTraced() const { return m_traces != nullptr; }

    typedef void (*CompleteTracedCallback)(uint16_t stream, uint32_t seq, uint64_t bytes,
                                           Time when);
    typedef void (*RetransmitTracedCallback)(uint32_t psn, uint32_t path);
    typedef void (*PathWindowTracedCallback)(uint32_t path, double oldBytes, double newBytes);
    typedef void (*PathRttTracedCallback)(uint32_t path, Time oldSrtt, Time newSrtt);
    typedef void (*PathEventTracedCallback)(uint32_t path, uint32_t plane, PathEvent what);
    /// Messages posted and not yet completed at the sender.
    std::size_t GetPendingSends() const { return m_sendQueue.Size(); }
    /// Messages partly received (state still held at the receiver).
    std::size_t GetPendingReceives() const { return m_recvBook ? m_recvBook->messages.size() : 0; }
    /// The application posts `n` receive buffers; each message received consumes one. Only
    /// MetaRoCE's rate hint reads them (a message needs no posted buffer to be received).
    void PostReceive(uint32_t n = 1) { m_postedReceives += n; }
    /// Receive buffers posted and not yet consumed.
    uint32_t GetPostedReceives() const { return m_postedReceives; }

  protected:
    void DoDispose() override;

    struct SendMessage
    {
        uint64_t bytes{0};
        uint64_t ackedBytes{0};
        int64_t postedPs{0};
        uint32_t seq{0};
        uint32_t packets{0};
        uint32_t firstPsn{0}; //!< for transports with one PSN space per QP
        uint16_t stream{0};
        bool done{false};
        bool reported{false}; //!< its completion already ran (MarkSentNow)
        CompletionHandler onSent;
        // for transports that acknowledge packets out of order
        uint32_t nextPkt{0}; //!< next packet never sent yet
        uint32_t ackedCount{0};
        boost::dynamic_bitset<uint64_t> ackedPkts;
    };

    struct RecvMessage
    {
        uint64_t bytes{0};
        uint64_t received{0};
        int64_t postedPs{0};
        boost::dynamic_bitset<uint64_t> placed; //!< per packet; empty for in-order transports
        bool complete{false};
    };

    /// A number per stream: stream 0's in place (a QP pinned to a channel uses no other), the
    /// others grown on use (streams are small numbers).
    struct PerStream
    {
        uint32_t& operator[](uint16_t stream)
        {
            if (stream == 0)
            {
                return first;
            }
            if (stream > rest.size())
            {
                rest.resize(stream, 0);
            }
            return rest[stream - 1];
        }

        uint32_t first{0};
        std::vector<uint32_t> rest;
    };

    /// What a QP keeps once it posted: its counters and streams' next sequence numbers.
    /// Made at the first post: the receiving end of a connection (half of a collective's
    /// QPs) never has one.
    struct SendBook
    {
        uint64_t messagesPosted{0};
        uint64_t bytesPosted{0};
        uint64_t messagesSent{0};
        uint64_t dataPacketsSent{0};
        uint64_t retransmittedPackets{0};
        uint64_t spuriousRetransmissions{0};
        uint64_t timeouts{0};
        PerStream nextSeqToPost;
    };

    /// What a QP keeps once data arrived: its counters, the messages partly received and
    /// each stream's next message to complete. Made at the first data frame.
    struct RecvBook
    {
        uint64_t messagesReceived{0};
        uint64_t bytesDelivered{0};
        uint64_t duplicatePackets{0};
        uint64_t outOfOrderDropped{0};
        uint64_t acksSent{0};
        uint64_t naksSent{0};
        uint64_t cnpsSent{0};
        uint64_t ecnMarkedReceived{0};
        std::map<std::pair<uint16_t, uint32_t>, RecvMessage> messages; //!< (stream, seq)
        PerStream nextSeqToComplete;
    };

    /// An owning pointer that a copy (a prototype's Clone) leaves empty.
    template <class T> struct BookPtr : std::unique_ptr<T>
    {
        BookPtr() = default;
        BookPtr(const BookPtr&)
            : std::unique_ptr<T>()
        {
        }
    };

    /// The sending side's counters and streams, made on first use.
    SendBook& SendSide()
    {
        if (!m_sendBook)
        {
            m_sendBook.reset(new SendBook);
        }
        return *m_sendBook;
    }
    /// The receiving side's counters and messages, made on first use.
    RecvBook& ReceiveSide()
    {
        if (!m_recvBook)
        {
            m_recvBook.reset(new RecvBook);
        }
        return *m_recvBook;
    }
    /// Packets this QP sent again (0 if it never sent).
    uint64_t Retransmitted() const { return m_sendBook ? m_sendBook->retransmittedPackets : 0; }

    /// Hook: a message was posted (the subclass wakes its sender).
    virtual void OnPosted() {}

    /// Packets of a message at this QP's MTU (a 0-byte message still sends one packet).
    uint32_t PacketsOf(uint64_t bytes) const
    {
        return bytes == 0 ? 1 : static_cast<uint32_t>((bytes + m_mtu - 1) / m_mtu);
    }

    /// Payload bytes of a received frame whose transport header is h.
    static uint32_t PayloadOf(const FabricFrame& f, const RdmaHeaderData& h)
    {
        return f.header ? f.header->ipPayloadBytes - RdmaHeader::SizeOf(h.opcode)
                        : f.packet->GetSize(); // a bytes frame: the header was removed
    }

    /// This QP's own instance of congestion control `type`.
    Ptr<RdmaCongestionOps> NewCongestionOps(TypeId type) const;
    /// Builds a frame to the remote NIC carrying h and `payload` bytes.
    FabricFrame MakeFrame(const RdmaHeaderData& h, uint32_t payload, uint16_t entropy, bool data);
    /// Receiver: records a data packet's payload; returns false if it was a duplicate.
    /// trackPlacement: keep a per-packet bitmap (out-of-order transports).
    bool Place(const RdmaHeaderData& h, uint32_t payload, bool trackPlacement);
    /// Sender: marks message `m` fully acknowledged and releases completions in order.
    void MarkSent(SendMessage& m);
    /// Sender: message `index` (counted from the QP's first) is fully acknowledged and
    /// completes now, whatever is still in flight before it: for a QP whose streams are
    /// independent channels (a scale-up connection's). The queue drops it in order.
    void MarkSentNow(uint64_t index);
    /// A completed message's counter, trace and completion handler.
    void Report(SendMessage& m);
    /// Gives a new trace block the QP's current values (window, rate).
    virtual void InitTraces(QueuePairTraces& t) {}

    // Packed: a 100k-rank collective holds tens of millions of QPs.
    Ring<SendMessage> m_sendQueue; //!< lazily allocated: most QPs are idle most of the time
    uint32_t m_sendQueueBase{0};   //!< index of m_sendQueue.Front() among all messages posted
    uint32_t m_qpn{0};
    RdmaNic* m_nic{nullptr};
    uint32_t m_remoteNic{0};
    uint32_t m_remoteQpn{0};
    uint32_t m_postedReceives{0};
    uint16_t m_mtu{4096};
    uint8_t m_dataTc{3};
    uint8_t m_controlTc{6};

    LazyTraceBlock<QueuePairTraces> m_traces; //!< null until a sink connects

  private:
    void ReleaseReceives(RecvBook& book, uint16_t stream);

    BookPtr<SendBook> m_sendBook; //!< null until the first post
    BookPtr<RecvBook> m_recvBook; //!< null until the first data frame
    Ptr<RdmaCongestionOps> m_ccProto;
    CompletionHandler m_onReceive;
};

/**
 * Makes queue pairs of one type and configuration. Building an ns-3 Object through an
 * ObjectFactory sets each of its attributes (some 35 for MetaRoCE) one by one, about 50 us a
 * QP; an all-to-all over 100,000 ranks opens 12.6 M QPs. So the factory builds one prototype
 * on first use and copies it: same attributes, same result, a fraction of the time.
 * Attribute defaults (Config::SetDefault) are read when the prototype is built: the first
 * Create after construction or after any Set.
 */
class QueuePairFactory
{
  public:
    QueuePairFactory() = default;
    void SetTypeId(TypeId tid);
    void SetTypeId(const std::string& name);
    void Set(const std::string& name, const AttributeValue& value);
    TypeId GetTypeId() const { return m_factory.GetTypeId(); }
    Ptr<QueuePair> Create() const;
    /// Whether the factory's QPs are pinned (QueuePair::IsPinned), known without making one.
    bool MakesPinned() const;

  private:
    /// The QP every Create() clones, made at first use after a change.
    const QueuePair& Prototype() const;

    ObjectFactory m_factory;
    mutable Ptr<QueuePair> m_proto;
};

} // namespace metaroce
} // namespace ns3

#endif
