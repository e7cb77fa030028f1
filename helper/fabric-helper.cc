#include "helper/fabric-helper.h"

#include "ns3/abort.h"
#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/log.h"
#include "ns3/object-factory.h"
#include "ns3/pcap-file-wrapper.h"
#include "ns3/simulator.h"
#include "ns3/trace-helper.h"
#include "ns3/uinteger.h"

#include <sstream>

namespace ns3
{
namespace metaroce
{

NS_LOG_COMPONENT_DEFINE("FabricHelper");

void
UsePicosecondTime()
{
    if (Time::GetResolution() != Time::PS)
    {
        Time::SetResolution(Time::PS);
    }
}

Fabric::Fabric(const TopologySpec& spec)
    : Fabric(spec, ObjectFactory("ns3::metaroce::FabricSwitch"), nullptr)
{
}

Fabric::Fabric(const TopologySpec& spec, const ObjectFactory& switches, const ObjectFactory* ports)
    : m_spec(spec)
    , m_switchFactory(switches)
    ,
    // Without attributes to set, CreateObject makes the same port faster (the 100k-NIC
    // fabric has 3.2 M ports).
    m_portFactory(ports != nullptr ? *ports : ObjectFactory())
    , m_portAttributes(ports != nullptr)
{
    UsePicosecondTime();
    Build();
}

Fabric::~Fabric() = default;

namespace
{
void
WritePcap(Ptr<PcapFileWrapper> file, Ptr<const Packet> frame)
{
    file->Write(Simulator::Now(), frame);
}
} // namespace

std::string
Fabric::EnablePcap(const std::string& prefix, Ptr<FabricNetDevice> port, uint32_t snapLen)
{
    NS_ABORT_MSG_IF(!port->GetNode(), "EnablePcap: the port belongs to no node");
    std::ostringstream name;
    name << prefix << "-" << port->GetNode()->GetId() << "-" << port->GetIfIndex() << ".pcap";
    EnablePcapFile(name.str(), port, snapLen);
    return name.str();
}

void
Fabric::EnablePcapFile(const std::string& path, Ptr<FabricNetDevice> port, uint32_t snapLen)
{
    Ptr<PcapFileWrapper> file =
        PcapHelper().CreateFile(path, std::ios::out, PcapHelper::DLT_EN10MB, snapLen);
    // A link is point to point: what the peer sends is what this port receives.
    port->TraceConnectWithoutContext("Sniffer", MakeBoundCallback(&WritePcap, file));
    if (FabricNetDevice* peer = port->GetPeer())
    {
        peer->TraceConnectWithoutContext("Sniffer", MakeBoundCallback(&WritePcap, file));
    }
}

std::string
Fabric::EnablePcap(const std::string& prefix, uint32_t nic, uint32_t plane, uint32_t snapLen) const
{
    NS_ABORT_MSG_IF(nic >= NumNics() || plane >= NumPlanes(),
                    "EnablePcap: no port " << nic << ":" << plane);
    return EnablePcap(prefix, HostPort(nic, plane), snapLen);
}

Ptr<FabricChannel>
Fabric::Connect(Ptr<FabricNetDevice> a, Ptr<FabricNetDevice> b, double gbps, double delayNs,
                LinkKind kind)
{
    auto ch = CreateObject<FabricChannel>();
    ch->SetDelay(PicoSeconds(static_cast<int64_t>(delayNs * 1000.0 + 0.5)));
    DataRate rate(static_cast<uint64_t>(gbps * 1e9 + 0.5));
    a->SetDataRate(rate);
    b->SetDataRate(rate);
    ch->Connect(a, b);
    m_links.push_back(ch);
    m_linkKinds.push_back(kind);
    return ch;
}

void
Fabric::Build()
{
    const ClosGeometry& g = m_spec.geometry;
    m_router = Create<ClosRouter>(g);

    ObjectFactory& swf = m_switchFactory;
    auto newPort = [this]()
    {
        return m_portAttributes ? m_portFactory.Create<FabricNetDevice>()
                                : CreateObject<FabricNetDevice>();
    };

    // Hosts first, so that a NIC's id is its node id.
    const uint32_t N = g.TotalNics();
    m_hosts.reserve(N);
    for (uint32_t n = 0; n < N; ++n)
    {
        auto host = CreateObject<Node>();
        for (uint32_t p = 0; p < g.planes; ++p)
        {
            host->AddDevice(newPort());
            ++m_ports;
        }
        m_hosts.push_back(host);
    }

    // Switches in (site, plane, tier, index) order, each with all its ports.
    const uint32_t tiers = g.tiers;
    m_tierBase.assign(static_cast<std::size_t>(g.sites) * g.planes * tiers + 1, 0);
    for (uint32_t s = 0; s < g.sites; ++s)
    {
        for (uint32_t p = 0; p < g.planes; ++p)
        {
            for (uint32_t t = 0; t < tiers; ++t)
            {
                m_tierBase[(s * g.planes + p) * tiers + t] =
                    static_cast<uint32_t>(m_switches.size());
                uint32_t count = g.SwitchesInTier(t);
                uint32_t ports = g.PortsInTier(t);
                for (uint32_t i = 0; i < count; ++i)
                {
                    Ptr<FabricSwitch> sw = swf.Create<FabricSwitch>();
                    for (uint32_t k = 0; k < ports; ++k)
                    {
                        sw->AddPort(newPort());
                    }
                    m_ports += ports;
                    SwitchCoord c;
                    c.site = static_cast<uint16_t>(s);
                    c.plane = static_cast<uint16_t>(p);
                    c.tier = static_cast<uint8_t>(t);
                    c.index = i;
                    sw->SetRouter(m_router, c);
                    m_switches.push_back(sw);
                }
            }
        }
    }
    m_tierBase.back() = static_cast<uint32_t>(m_switches.size());

    auto port = [](Ptr<FabricSwitch> sw, uint32_t i)
    { return Ptr<FabricNetDevice>(sw->GetPort(i)); };
    const double nicGbps = m_spec.nicPortGbps;
    const double fabGbps = m_spec.fabricLinkGbps;
    m_planeLinkStart.assign(g.planes + 1, 0);
    for (uint32_t p = 0; p < g.planes; ++p)
    {
        m_planeLinkStart[p] = m_links.size();
        for (uint32_t s = 0; s < g.sites; ++s)
        {
            for (uint32_t l = 0; l < g.L; ++l)
            {
                Ptr<FabricSwitch> leaf = Switch(s, p, 0, l);
                for (uint32_t i = 0; i < g.d; ++i)
                {
                    uint32_t local = l * g.d + i;
                    if (local >= g.nicsPerSite)
                    {
                        break;
                    }
                    Connect(HostPort(s * g.nicsPerSite + local, p), port(leaf, i), nicGbps,
                            m_spec.nicLinkDelayNs, LINKS_NIC);
                }
                if (tiers == 2)
                {
                    for (uint32_t sp2 = 0; sp2 < g.S; ++sp2)
                    {
                        Ptr<FabricSwitch> spine = Switch(s, p, 1, sp2);
                        for (uint32_t k = 0; k < g.m; ++k)
                        {
                            Connect(port(leaf, g.d + sp2 * g.m + k), port(spine, l * g.m + k),
                                    fabGbps, m_spec.fabricLinkDelayNs, LINKS_FABRIC);
                        }
                    }
                }
                else
                {
                    uint32_t pod = l / g.Lp;
                    uint32_t ll = l % g.Lp;
                    for (uint32_t j = 0; j < g.A; ++j)
                    {
                        Ptr<FabricSwitch> agg = Switch(s, p, 1, pod * g.A + j);
                        for (uint32_t k = 0; k < g.m1; ++k)
                        {
                            Connect(port(leaf, g.d + j * g.m1 + k), port(agg, ll * g.m1 + k),
                                    fabGbps, m_spec.fabricLinkDelayNs, LINKS_FABRIC);
                        }
                    }
                }
            }
            if (tiers == 3)
            {
                for (uint32_t pod = 0; pod < g.P; ++pod)
                {
                    for (uint32_t j = 0; j < g.A; ++j)
                    {
                        Ptr<FabricSwitch> agg = Switch(s, p, 1, pod * g.A + j);
                        for (uint32_t c = 0; c < g.C; ++c)
                        {
                            Ptr<FabricSwitch> core = Switch(s, p, 2, j * g.C + c);
                            for (uint32_t k = 0; k < g.m2; ++k)
                            {
                                Connect(port(agg, g.Lp * g.m1 + c * g.m2 + k),
                                        port(core, pod * g.m2 + k), fabGbps,
                                        m_spec.fabricLinkDelayNs, LINKS_FABRIC);
                            }
                        }
                    }
                }
            }
        }
        // Scale-across: spine s of every site meets spine s of every other site.
        for (uint32_t a = 0; a < g.sites; ++a)
        {
            for (uint32_t b = a + 1; b < g.sites; ++b)
            {
                for (uint32_t sp2 = 0; sp2 < g.S; ++sp2)
                {
                    for (uint32_t k = 0; k < g.x; ++k)
                    {
                        Connect(port(Switch(a, p, 1, sp2), g.L * g.m + (b - 1) * g.x + k),
                                port(Switch(b, p, 1, sp2), g.L * g.m + a * g.x + k),
                                m_spec.interSiteGbps, m_spec.InterSiteDelayNs(), LINKS_LONG);
                    }
                }
            }
        }
    }
    m_planeLinkStart[g.planes] = m_links.size();

    // Ports left unwired (a partly filled leaf or pod) are down: nothing routes to them.
    for (const auto& sw : m_switches)
    {
        for (uint32_t i = 0; i < sw->GetNPorts(); ++i)
        {
            if (!sw->GetPort(i)->GetFabricChannel())
            {
                sw->GetPort(i)->MarkUnwired();
            }
        }
    }
    NS_LOG_INFO("fabric " << m_spec.name << ": " << N << " NICs, " << m_switches.size()
                          << " switches, " << m_links.size() << " links");
}

Ptr<FabricNetDevice>
Fabric::HostPort(uint32_t nic, uint32_t plane) const
{
    return StaticCast<FabricNetDevice>(m_hosts[nic]->GetDevice(plane));
}

Ptr<FabricSwitch>
Fabric::Switch(uint32_t site, uint32_t plane, uint32_t tier, uint32_t index) const
{
    const ClosGeometry& g = m_spec.geometry;
    return m_switches[m_tierBase[(site * g.planes + plane) * g.tiers + tier] + index];
}

std::pair<std::size_t, std::size_t>
Fabric::PlaneLinkRange(uint32_t plane) const
{
    return {m_planeLinkStart[plane], m_planeLinkStart[plane + 1]};
}

void
Fabric::SetLinkUp(Ptr<FabricChannel> link, bool up)
{
    link->SetUp(up);
}

void
Fabric::SetPlaneUp(uint32_t plane, bool up)
{
    auto [b, e] = PlaneLinkRange(plane);
    for (std::size_t i = b; i < e; ++i)
    {
        m_links[i]->SetUp(up);
    }
}

void
Fabric::SchedulePlaneState(uint32_t plane, Time at, bool up)
{
    Simulator::Schedule(at - Simulator::Now(), &Fabric::SetPlaneUp, this, plane, up);
}

void
Fabric::ScheduleLinkState(Ptr<FabricChannel> link, Time at, bool up)
{
    Simulator::Schedule(at - Simulator::Now(), &FabricChannel::SetUp, link, up);
}

void
Fabric::SetLossRate(double p, int32_t plane, LinkKind kind)
{
    std::size_t b = 0;
    std::size_t e = m_links.size();
    if (plane >= 0)
    {
        std::tie(b, e) = PlaneLinkRange(static_cast<uint32_t>(plane));
    }
    for (std::size_t i = b; i < e; ++i)
    {
        if (kind != LINKS_ALL && m_linkKinds[i] != kind)
        {
            continue;
        }
        for (std::size_t d = 0; d < 2; ++d)
        {
            StaticCast<FabricNetDevice>(m_links[i]->GetDevice(d))->SetLossRate(p);
        }
    }
}

int64_t
Fabric::AssignStreams(int64_t stream)
{
    int64_t s = stream;
    for (const auto& l : m_links)
    {
        for (std::size_t d = 0; d < 2; ++d)
        {
            s += StaticCast<FabricNetDevice>(l->GetDevice(d))->AssignStreams(s);
        }
    }
    for (const auto& sw : m_switches)
    {
        s += sw->AssignStreams(s);
    }
    return s - stream;
}

Fabric::Totals
Fabric::CollectTotals() const
{
    Totals t;
    for (const auto& sw : m_switches)
    {
        const auto& c = sw->GetCounters();
        t.switchDropsBuffer += c.dropBuffer;
        t.switchDropsNoRoute += c.dropNoRoute;
        t.ecnMarks += c.ecnMarked;
        t.forwarded += c.forwarded;
    }
    for (const auto& l : m_links)
    {
        t.lostInFlight += l->GetLostInFlight();
        for (std::size_t d = 0; d < 2; ++d)
        {
            const auto& c = StaticCast<FabricNetDevice>(l->GetDevice(d))->GetCounters();
            t.portDropsLinkDown += c.dropLinkDown;
            t.portDropsCorrupt += c.dropCorrupt;
            t.pauses += c.pauses;
        }
    }
    return t;
}

FabricHelper::FabricHelper() = default;

void
FabricHelper::SetSwitchAttribute(const std::string& name, const AttributeValue& value)
{
    ObjectFactory("ns3::metaroce::FabricSwitch").Set(name, value); // aborts on a bad one now
    m_switchAttributes.emplace_back(name, value.Copy());
}

void
FabricHelper::SetDeviceAttribute(const std::string& name, const AttributeValue& value)
{
    ObjectFactory("ns3::metaroce::FabricNetDevice").Set(name, value);
    m_deviceAttributes.emplace_back(name, value.Copy());
}

std::unique_ptr<Fabric>
FabricHelper::Build(const TopologySpec& spec) const
{
    // One path for a file's switch settings and a program's: the topology's first, then the
    // helper's own, which override them.
    ObjectFactory switches("ns3::metaroce::FabricSwitch");
    for (const auto& [name, value] : spec.switchAttributes)
    {
        switches.Set(name, *value);
    }
    for (const auto& [name, value] : m_switchAttributes)
    {
        switches.Set(name, *value);
    }
    ObjectFactory ports("ns3::metaroce::FabricNetDevice");
    for (const auto& [name, value] : m_deviceAttributes)
    {
        ports.Set(name, *value);
    }
    return std::make_unique<Fabric>(spec, switches, m_deviceAttributes.empty() ? nullptr : &ports);
}

std::unique_ptr<Fabric>
FabricHelper::Build(const std::string& topologyFile) const
{
    return Build(LoadTopologyFile(topologyFile));
}

} // namespace metaroce
} // namespace ns3
