/*
 * A full-duplex point-to-point link between two FabricNetDevices with a propagation Delay.
 * Frames in flight wait in a FIFO per direction with a single pending arrival event, so a
 * long link (a 1.5 ms scale-across hop holds thousands of frames) costs one event, not one
 * per frame. Arrivals are scheduled with the receiving node's context (logging, MPI).
 * Each direction's state fills one cache line of its own: a frame's hop over the link
 * touches that line only (a large fabric's links do not fit in any cache).
 */
#ifndef METAROCE_FABRIC_CHANNEL_H
#define METAROCE_FABRIC_CHANNEL_H

#include "fabric-frame.h"
#include "model/core/reusable-event.h"

#include "ns3/channel.h"
#include "ns3/nstime.h"

namespace ns3
{
namespace metaroce
{

class FabricChannel;
class FabricNetDevice;
class FabricFrameReceiver;

/// Takes the frames a link sends towards a device that another process simulates (a
/// distributed run: see helper/mpi-fabric.h), or drops those of a device this process only
/// holds a copy of.
class FabricRemoteSink
{
  public:
    virtual ~FabricRemoteSink() = default;
    /// A frame sent in direction dir, due at its far end at frame.readyPs; `downs`: how many
    /// times the link had gone down when it was sent (see FabricChannel::ReceiveRemote).
    virtual void SendRemote(FabricChannel* link, uint32_t dir, FabricFrame&& frame,
                            uint8_t downs) = 0;
    /// A PFC PAUSE (pause) or RESUME of class `cls` sent over direction dir, taking effect at
    /// the far end at atPs.
    virtual void SendPause(FabricChannel* link, uint32_t dir, int64_t atPs, uint8_t cls,
                           bool pause) = 0;
};

class alignas(64) FabricChannel final : public Channel
{
  public:
    static TypeId GetTypeId();
    FabricChannel();
    ~FabricChannel() override;

    /// Connects the two ends (and attaches the channel to them).
    void Connect(Ptr<FabricNetDevice> a, Ptr<FabricNetDevice> b);
    /// Called by a device whose transmitter starts sending frame now (nowPs: the simulator's
    /// time, which the caller has), which takes txPs on the wire; dir: DirectionFrom(device).
    void Transmit(uint32_t dir, FabricFrame&& frame, int64_t txPs, int64_t nowPs);
    /// The direction of the frames dev sends: 0 for the first device given to Connect.
    uint32_t DirectionFrom(const FabricNetDevice* dev) const
    {
        return dev == PeekPointer(m_dev[0]) ? 0 : 1;
    }
    /// What a transmission in direction dir touches (a prefetch hint).
    const void* HotLine(uint32_t dir) const { return &m_dir[dir]; }
    /// Takes note of the ends' frame receivers again (for prefetch hints; see FabricNetDevice).
    void RefreshReceivers();
    /// See PreparedEvent: direction dir's arrival is coming.
    void PrepareEvent(uint32_t dir, uint32_t stage) const;
    /// Prefetches the slot the next frame sent in direction dir will be written to.
    void PrepareTransmit(uint32_t dir) const { PrefetchSlot(m_dir[dir].inFlight.NextSlot()); }
    /// Prefetches a frame slot for writing (48 bytes: it may straddle two lines).
    static void PrefetchSlot(const FabricFrame* slot)
    {
        if (slot != nullptr)
        {
            const char* first = reinterpret_cast<const char*>(slot);
            const char* last = first + sizeof(FabricFrame) - 1;
            __builtin_prefetch(first, 1);
            if (((reinterpret_cast<std::uintptr_t>(first) ^
                  reinterpret_cast<std::uintptr_t>(last)) &
                 ~std::uintptr_t(63)) != 0)
            {
                __builtin_prefetch(last, 1);
            }
        }
    }
    FabricNetDevice* GetPeer(const FabricNetDevice* dev) const;

    /// Where this process's links send their remote directions' frames (one per process: a
    /// static, so that a link spends no byte on it; null when no link is remote).
    static void SetRemoteSink(FabricRemoteSink* sink) { s_remoteSink = sink; }
    static FabricRemoteSink* GetRemoteSink() { return s_remoteSink; }
    /// Frames sent in direction dir go to the remote sink instead of the far end.
    void SetRemote(uint32_t dir, bool remote);
    bool IsRemote(uint32_t dir) const { return m_dir[dir].remote; }
    /// A frame another process sent over direction dir arrives now; `downs` as given to
    /// SendRemote. It is lost if the link has gone down since it was sent, as a frame in
    /// flight here would be (every process's copy of a link goes down and up alike).
    void ReceiveRemote(uint32_t dir, FabricFrame&& frame, uint8_t downs);
    /// The same for an engine that takes frames from other processes ahead of their arrival
    /// (FastSimulatorImpl in TieOrder::Node, frame.readyPs not before now): the frame joins
    /// this direction's frames in flight as if sent here, and is lost as they are if the link
    /// goes down before it arrives.
    void EnqueueRemote(uint32_t dir, FabricFrame&& frame, uint8_t downs);
    /// How many times the link has gone down (modulo 256: never that many during one traversal).
    uint8_t GetDowns() const { return m_dir[0].downs; }

    /// Fails or restores the link: both ends see the change; frames in flight are lost.
    void SetUp(bool up);
    bool IsUp() const { return m_dir[0].up; }

    void SetDelay(Time d)
    {
        m_delayPs = d.GetPicoSeconds();
        RefreshDelays();
    }
    /// Recomputes the per-direction hand-over delay (propagation + receiver's pipeline).
    void RefreshDelays();
    Time GetDelay() const { return PicoSeconds(m_delayPs); }
    int64_t GetDelayPs() const { return m_delayPs; }
    uint64_t GetLostInFlight() const { return m_lostInFlight; }

    std::size_t GetNDevices() const override;
    Ptr<NetDevice> GetDevice(std::size_t i) const override;

  protected:
    void DoDispose() override;

  private:
    void Deliver(uint32_t dir);
    void ScheduleDeliver(uint32_t dir, int64_t delayPs, bool withContext);

    using ArrivalEvent = ReusableEvent<FabricChannel, &FabricChannel::Deliver>;

    // Cold: ownership and configuration (the first line, beside ns-3's Object fields).
    Ptr<FabricNetDevice> m_dev[2];
    int64_t m_delayPs{0};
    uint64_t m_lostInFlight{0};
    inline static FabricRemoteSink* s_remoteSink{nullptr};

    /// Direction d: frames from m_dev[d] to m_dev[1-d].
    struct alignas(64) Direction
    {
        FrameRing inFlight;                       //!< readyPs = arrival time
        FabricNetDevice* to{nullptr};             //!< m_dev[1-d], without the reference count
        FabricFrameReceiver* toReceiver{nullptr}; //!< to's receiver (a hint only)
        int64_t handoverPs{0};     //!< m_delayPs + the receiving device's pipeline latency
        Ptr<ArrivalEvent> arrival; //!< the one pending arrival event, made on first use
        uint32_t toNode{0};        //!< node id of `to` (the arrival's context)
        bool up{true};             //!< the link (same in both directions)
        bool remote{false};        //!< frames go to the remote sink
        bool divert{false};        //!< !up || remote: one test on the send path
        uint8_t downs{0};          //!< times the link went down (same in both directions)
    };
    static_assert(sizeof(Direction) == 64, "a direction is one cache line");

    Direction m_dir[2];
};

} // namespace metaroce
} // namespace ns3

#endif
