/*
 * A full-duplex point-to-point link between two FabricNetDevices with a propagation Delay.
 * Frames in flight wait in a FIFO per direction with a single pending arrival event, so a
 * long link (a 1.5 ms scale-across hop holds thousands of frames) costs one event, not one
 * per frame. Arrivals are scheduled with the receiving node's context (logging, MPI).
 */
#ifndef METAROCE_FABRIC_CHANNEL_H
#define METAROCE_FABRIC_CHANNEL_H

#include "fabric-frame.h"
#include "reusable-event.h"

#include "ns3/channel.h"
#include "ns3/nstime.h"

namespace ns3
{
namespace metaroce
{

class FabricNetDevice;

class FabricChannel final : public Channel
{
  public:
    static TypeId GetTypeId();
    FabricChannel();
    ~FabricChannel() override;

    /// Connects the two ends (and attaches the channel to them).
    void Connect(Ptr<FabricNetDevice> a, Ptr<FabricNetDevice> b);
    /// Called by a device whose transmitter starts sending frame now (nowPs: the simulator's
    /// time, which the caller has), which takes txPs on the wire.
    void Transmit(const FabricNetDevice* from, FabricFrame&& frame, int64_t txPs, int64_t nowPs);
    FabricNetDevice* GetPeer(const FabricNetDevice* dev) const;

    /// Fails or restores the link: both ends see the change; frames in flight are lost.
    void SetUp(bool up);
    bool IsUp() const { return m_up; }

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

    Ptr<FabricNetDevice> m_dev[2];
    uint32_t m_dstNode[2]{0, 0}; //!< [d]: node id of the device frames in direction d reach
    FrameRing m_inFlight[2];     //!< [d]: frames from m_dev[d] to m_dev[1-d], readyPs = arrival
    int64_t m_delayPs{0};
    int64_t m_handoverPs[2]{0, 0}; //!< [d]: m_delayPs + receiving device's pipeline latency
    uint64_t m_lostInFlight{0};
    Ptr<ArrivalEvent> m_arrival[2]; //!< [d]: the one pending arrival event, made on first use
    bool m_up{true};
};

} // namespace metaroce
} // namespace ns3

#endif
