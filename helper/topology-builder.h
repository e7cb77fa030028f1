/*
 * A topology described in C++, without a file: typed setters for what a topology file holds,
 * validated and expanded (the Clos geometry derived) by the same code that reads the files,
 * so a program and a file describing the same fabric build the same one.
 *
 *   TopologySpec topo = TopologyBuilder("fpf").Nics(64).Planes(8).SwitchRadix(16).Build();
 *   FabricHelper fh;
 *   fh.SetSwitchAttribute("PfcEnabled", BooleanValue(true));
 *   auto fabric = fh.Build(topo);
 *
 * Set(key, value) reaches any key of topologies/README.md (shape overrides, scale_across,
 * switch, accelerators); Build() throws an InputError naming the key of a bad value.
 */
#ifndef METAROCE_TOPOLOGY_BUILDER_H
#define METAROCE_TOPOLOGY_BUILDER_H

#include "helper/topology-spec.h"

#include <nlohmann/json.hpp>
#include <string>

namespace ns3
{
namespace metaroce
{

class TopologyBuilder
{
  public:
    /// kind: "fpf" (planes of Clos fabrics) or "clos" (one plane).
    explicit TopologyBuilder(const std::string& kind = "fpf");

    TopologyBuilder& Name(const std::string& name) { return Set("name", name); }
    TopologyBuilder& Nics(uint32_t n) { return Set("nics", n); }
    TopologyBuilder& Planes(uint32_t n) { return Set("planes", n); }
    TopologyBuilder& Sites(uint32_t n) { return Set("sites", n); }
    TopologyBuilder& SwitchRadix(uint32_t ports) { return Set("switch_radix", ports); }
    TopologyBuilder& NicPortGbps(double gbps) { return Set("nic_port_gbps", gbps); }
    TopologyBuilder& FabricLinkGbps(double gbps) { return Set("fabric_link_gbps", gbps); }
    TopologyBuilder& NicLinkDelayNs(double ns) { return Set("nic_link_delay_ns", ns); }
    TopologyBuilder& FabricLinkDelayNs(double ns) { return Set("fabric_link_delay_ns", ns); }
    TopologyBuilder& Oversubscription(double ratio) { return Set("oversubscription", ratio); }
    TopologyBuilder& Tiers(uint32_t tiers) { return Set("tiers", tiers); }
    TopologyBuilder& NicsPerLeaf(uint32_t n) { return Set("nics_per_leaf", n); }
    TopologyBuilder& Spines(uint32_t n) { return Set("spines", n); }
    TopologyBuilder& AcceleratorsPerHost(uint32_t n) { return Set("accelerators_per_host", n); }
    /// A switch setting under a topology file's key (e.g. "ecn_kmin_bytes"); a program can
    /// also set FabricSwitch attributes by name on FabricHelper.
    TopologyBuilder& Switch(const std::string& key, const nlohmann::json& value);
    /// Any key of a topology file.
    TopologyBuilder& Set(const std::string& key, const nlohmann::json& value);

    /// The validated topology with its geometry derived.
    TopologySpec Build() const;
    /// What a topology file with the same content holds.
    const nlohmann::json& ToJson() const { return m_j; }

  private:
    nlohmann::json m_j;
};

} // namespace metaroce
} // namespace ns3

#endif
