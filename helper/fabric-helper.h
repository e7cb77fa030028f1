/*
 * Builds a fabric from a TopologySpec: host nodes (one per NIC, node id = NIC id) with one
 * FabricNetDevice per plane, FabricSwitches wired in the ClosGeometry's port order, links,
 * and one shared ClosRouter. Also the fault controls: link/plane down and up, random loss.
 */
#ifndef METAROCE_FABRIC_HELPER_H
#define METAROCE_FABRIC_HELPER_H

#include "helper/topology-spec.h"
#include "model/fabric/fabric-channel.h"
#include "model/fabric/fabric-net-device.h"
#include "model/fabric/fabric-router.h"
#include "model/fabric/fabric-switch.h"

#include "ns3/node.h"
#include "ns3/object-factory.h"

#include <memory>
#include <vector>

namespace ns3
{
namespace metaroce
{

/// Sets the simulator's time resolution to picoseconds (once, before any simulation):
/// a 4 KiB frame takes 334.24 ns at 100G and 41.78 ns at 800G, which nanoseconds round.
void UsePicosecondTime();

class Fabric
{
  public:
    explicit Fabric(const TopologySpec& spec);
    /// Switches made by `switches`, ports by `ports` if given (FabricHelper's attribute
    /// settings).
    Fabric(const TopologySpec& spec, const ObjectFactory& switches, const ObjectFactory* ports);
    ~Fabric();
    Fabric(const Fabric&) = delete;
    Fabric& operator=(const Fabric&) = delete;

    const TopologySpec& Spec() const { return m_spec; }
    const ClosGeometry& Geometry() const { return m_spec.geometry; }
    uint32_t NumNics() const { return static_cast<uint32_t>(m_hosts.size()); }
    uint32_t NumPlanes() const { return m_spec.planes; }
    Ptr<Node> Host(uint32_t nic) const { return m_hosts[nic]; }
    /// The NIC's port on a plane.
    Ptr<FabricNetDevice> HostPort(uint32_t nic, uint32_t plane) const;
    /// Switch of (site, plane, tier, index within that tier).
    Ptr<FabricSwitch> Switch(uint32_t site, uint32_t plane, uint32_t tier, uint32_t index) const;
    const std::vector<Ptr<FabricSwitch>>& Switches() const { return m_switches; }
    const std::vector<Ptr<FabricChannel>>& Links() const { return m_links; }
    /// Links of one plane (NIC links, fabric links and inter-site links).
    std::pair<std::size_t, std::size_t> PlaneLinkRange(uint32_t plane) const;
    uint64_t NumPorts() const { return m_ports; }
    Ptr<ClosRouter> Router() const { return m_router; }

    /// Brings a link down or up now.
    void SetLinkUp(Ptr<FabricChannel> link, bool up);
    /// Brings every link of a plane down or up now.
    void SetPlaneUp(uint32_t plane, bool up);
    void SchedulePlaneState(uint32_t plane, Time at, bool up);
    void ScheduleLinkState(Ptr<FabricChannel> link, Time at, bool up);
    /// Which links a loss applies to: every one, a NIC's own, switch to switch within a
    /// site, or the long links between sites.
    enum LinkKind : uint8_t
    {
        LINKS_ALL,
        LINKS_NIC,
        LINKS_FABRIC,
        LINKS_LONG
    };

    /// Random loss on the ports of the links of one kind (both directions); plane < 0: all.
    void SetLossRate(double p, int32_t plane = -1, LinkKind kind = LINKS_ALL);
    /// Seeds every port's and switch's random stream from `stream` on; returns streams used.
    int64_t AssignStreams(int64_t stream);

    /**
     * Writes every frame of a port's link, both directions as each starts on the wire, to
     * PREFIX-NODE-DEVICE.pcap (ns-3's naming: the port's node id and device index): Ethernet,
     * IPv4, UDP to port 4791 and the RoCEv2 headers, which Wireshark and tshark decode as
     * InfiniBand BTH (and RETH, AETH). snapLen: bytes kept of each frame (the headers are
     * the first 86). The file is complete once the simulation is destroyed. Returns its name.
     */
    static std::string EnablePcap(const std::string& prefix, Ptr<FabricNetDevice> port,
                                  uint32_t snapLen = 65535);
    /// The same into the file `path` exactly (the caller has made sure it may be written).
    static void EnablePcapFile(const std::string& path, Ptr<FabricNetDevice> port,
                               uint32_t snapLen = 65535);
    /// The same for NIC `nic`'s port on `plane` (PREFIX-NIC-PLANE.pcap).
    std::string EnablePcap(const std::string& prefix, uint32_t nic, uint32_t plane,
                           uint32_t snapLen = 65535) const;

    struct Totals
    {
        uint64_t switchDropsBuffer{0};
        uint64_t switchDropsNoRoute{0};
        uint64_t ecnMarks{0};
        uint64_t portDropsLinkDown{0};
        uint64_t portDropsCorrupt{0};
        uint64_t lostInFlight{0};
        uint64_t forwarded{0};
        uint64_t pauses{0};
    };

    Totals CollectTotals() const;

    /// Queue pairs the transports of this fabric's run opened (for the cost report: memory
    /// per QP). Noted by whoever tears the transport down.
    void NoteQueuePairs(uint64_t n) { m_queuePairs += n; }
    uint64_t GetQueuePairs() const { return m_queuePairs; }

  private:
    uint64_t m_queuePairs{0};
    void Build();
    Ptr<FabricChannel> Connect(Ptr<FabricNetDevice> a, Ptr<FabricNetDevice> b, double gbps,
                               double delayNs, LinkKind kind);

    TopologySpec m_spec;
    ObjectFactory m_switchFactory;
    ObjectFactory m_portFactory;
    bool m_portAttributes{false}; //!< m_portFactory sets any attribute (else CreateObject)
    Ptr<ClosRouter> m_router;
    std::vector<Ptr<Node>> m_hosts;
    std::vector<Ptr<FabricSwitch>> m_switches;
    std::vector<uint32_t> m_tierBase; //!< first switch index of (site, plane, tier)
    std::vector<Ptr<FabricChannel>> m_links;
    std::vector<LinkKind> m_linkKinds;         //!< beside m_links
    std::vector<std::size_t> m_planeLinkStart; //!< planes + 1 entries
    uint64_t m_ports{0};
};

/**
 * ns-3 style front end: FabricHelper().Build(spec) or .Build("topologies/x.json"). Switch
 * and port attributes are set on the helper, as on ns-3's device helpers:
 *
 *   FabricHelper fh;
 *   fh.SetSwitchAttribute("PfcEnabled", BooleanValue(true));
 *   fh.SetDeviceAttribute("ControlTrafficClass", UintegerValue(7));
 *   auto fabric = fh.Build(LoadTopologyFile("topologies/fpf-8plane-64.json"));
 *
 * A topology file's "switch" object is the same list of switch attributes (applied first;
 * the helper's own settings then override them). A port's DataRate comes from its link.
 */
class FabricHelper
{
  public:
    FabricHelper();
    /// Sets an attribute of every FabricSwitch built (an unknown name aborts, as in ns-3).
    void SetSwitchAttribute(const std::string& name, const AttributeValue& value);
    /// Sets an attribute of every FabricNetDevice built, hosts' and switches' ports.
    void SetDeviceAttribute(const std::string& name, const AttributeValue& value);
    std::unique_ptr<Fabric> Build(const TopologySpec& spec) const;
    std::unique_ptr<Fabric> Build(const std::string& topologyFile) const;

  private:
    AttributeList m_switchAttributes;
    AttributeList m_deviceAttributes;
};

} // namespace metaroce
} // namespace ns3

#endif
