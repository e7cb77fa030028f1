/*
 * An RDMA NIC on a host: one port per plane, a transmit arbiter per port that round-robins
 * over the queue pairs with something to send, and a receive path that hands each frame to
 * its queue pair. Control frames (ACK, NAK, CNP) bypass arbitration into the port's
 * strict-priority queue. The arbiter keeps at most one data frame queued at a port, so
 * every decision (window, pacing, path choice) is taken when the wire is free.
 */
#ifndef METAROCE_RDMA_NIC_H
#define METAROCE_RDMA_NIC_H

#include "model/fabric/fabric-net-device.h"
#include "queue-pair.h"

#include "ns3/node.h"
#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/traced-callback.h"

#include <vector>

namespace ns3
{
namespace metaroce
{

class alignas(64) RdmaNic final : public Object, public FabricFrameReceiver
{
  public:
    static TypeId GetTypeId();
    RdmaNic();
    ~RdmaNic() override;

    /// Takes over every FabricNetDevice of `host`; nicId is the host's fabric address. The
    /// NIC is aggregated to the host: host->GetObject<RdmaNic>() and the Config path
    /// /NodeList/N/$ns3::metaroce::RdmaNic reach it (and QueuePairList/QPN its QPs).
    void Install(Ptr<Node> host, uint32_t nicId);
    /// Disposes the QPs and lets go of the host and ports (the NIC and its QPs reference each
    /// other); the NIC stays aggregated to its host, which disposes it with the node.
    void Close();
    uint32_t GetNicId() const { return m_nicId; }
    Ptr<Node> GetHost() const { return m_host; }
    uint32_t GetNPorts() const { return static_cast<uint32_t>(m_ports.size()); }
    FabricNetDevice* GetPort(uint32_t i) const { return m_ports[i].dev; }
    /// Sum of the line rates of the ports whose links are up (cached; links change rarely).
    double GetUpCapacityBps() const;
    bool IsPortUp(uint32_t i) const { return m_ports[i].dev->IsLinkUp(); }

    /// Adds a queue pair and gives it the next QPN (QPNs start at 1).
    uint32_t AddQueuePair(Ptr<QueuePair> qp);
    /// Takes the next QPN for a queue pair attached later (a connection opened at its first
    /// use keeps the QPN, hence the results, of one opened up front).
    uint32_t ReserveQpn();
    void AttachQueuePair(uint32_t qpn, Ptr<QueuePair> qp);
    /// Closes a QPN: frames that still arrive for it are dropped (GetUnknownQpDrops).
    void DetachQueuePair(uint32_t qpn);
    Ptr<QueuePair> GetQueuePair(uint32_t qpn) const;
    /// QPNs given out, attached or not.
    uint32_t GetNQueuePairs() const { return static_cast<uint32_t>(m_qps.size() - 1); }

    /// A queue pair has frames for `port`: queue it in the port's round robin.
    void NotifyReady(QueuePair* qp, uint32_t port);
    /// Sends a control frame (ACK, NAK, CNP) now, ahead of data.
    void SendControl(uint32_t port, FabricFrame&& f);

    // FabricFrameReceiver
    void ReceiveFrame(FabricNetDevice* port, FabricFrame&& frame) override;
    void PrepareFrame(const FabricFrame& frame, uint32_t stage) const override;
    void PrepareIdle(uint32_t port, uint32_t stage) const override;
    void NotifyPortIdle(FabricNetDevice* port) override;

    bool WantsPortIdle() const override { return true; }
    void NotifyLinkChange(FabricNetDevice* port, bool up) override;

    uint64_t GetUnknownQpDrops() const { return m_unknownQp; }
    /// A queue pair placed `bytes` of new payload (duplicates excluded): the progress a run's
    /// stall watchdog looks for.
    void NotePlaced(uint32_t bytes) { m_placedBytes += bytes; }
    uint64_t GetPlacedBytes() const { return m_placedBytes; }
    /// A queue pair of this NIC posted a message of `bytes` (for the delivery invariant).
    void NotePosted(uint64_t bytes) { m_postedBytes += bytes; }
    uint64_t GetPostedBytes() const { return m_postedBytes; }
    /// A queue pair of this NIC found a delivery invariant broken (a model bug).
    void ReportViolation(const std::string& what) { m_violationTrace(what); }
    typedef void (*ViolationTracedCallback)(const std::string& what);

  protected:
    void DoDispose() override;

  private:
    struct Port
    {
        FabricNetDevice* dev{nullptr};
        Ring<QueuePair*> ready; //!< QPs with something for this port, round-robin
        bool pulling{false};    //!< inside Arbitrate: a QP's NotifyReady must not re-enter
    };

    void Arbitrate(uint32_t port);
    /// Hands a received frame to the QP its header names.
    void Deliver(FabricNetDevice* port, FabricFrame& frame, const RdmaHeaderData& h);

    // In the line of FabricFrameReceiver's vtable pointer: what receiving reads.
    std::vector<Ptr<QueuePair>> m_qps; //!< index = QPN; [0] unused
    Ptr<Node> m_host;
    std::vector<Port> m_ports;
    std::vector<uint32_t> m_readyMask; //!< per QPN: ports whose round robin holds it
    uint32_t m_nicId{0};
    uint64_t m_placedBytes{0};
    mutable double m_upCapacityBps{-1}; //!< see GetUpCapacityBps; < 0: recompute
    uint64_t m_unknownQp{0};
    uint64_t m_postedBytes{0};
    Time m_txLatency; //!< transmit processing per frame (pipelined)
    Time m_rxLatency; //!< receive processing per frame (pipelined)
    TracedCallback<const std::string&> m_violationTrace;
};

} // namespace metaroce
} // namespace ns3

#endif
