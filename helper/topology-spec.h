/*
 * A parametric fabric description (what the files in topologies/ hold) and its validation.
 * A few numbers expand into the whole fabric: never a list of links.
 */
#ifndef METAROCE_TOPOLOGY_SPEC_H
#define METAROCE_TOPOLOGY_SPEC_H

#include "model/fabric/clos-geometry.h"

#include "ns3/attribute.h"
#include "ns3/ptr.h"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace ns3
{
namespace metaroce
{

/// FabricSwitch attributes a topology sets, in the order given (the others keep their
/// defaults): what FabricHelper::SetSwitchAttribute receives when the fabric is built.
using AttributeList = std::vector<std::pair<std::string, Ptr<const AttributeValue>>>;

struct TopologySpec
{
    std::string name;
    std::string description;
    std::string kind; //!< "fpf" (multiplane) or "clos" (one plane)
    uint32_t nics{0};
    uint32_t planes{1};
    uint32_t sites{1};
    uint32_t radix{0};
    double nicPortGbps{100};
    double fabricLinkGbps{100};
    double nicLinkDelayNs{25};
    double fabricLinkDelayNs{500};
    double oversubscription{1.0};
    // scale-across (sites > 1)
    double distanceKm{0};
    double usPerKm{5.0};
    double interSiteGbps{0};
    AttributeList switchAttributes; //!< from the file's "switch" object
    /// The value the topology gives switch attribute `name`, or null (the default).
    Ptr<const AttributeValue> SwitchAttribute(const std::string& name) const;
    // Accelerator hosts of acceleratorsPerHost accelerators sharing a scale-up domain, each
    // NIC serving acceleratorsPerNic of them: accelerator a (numbered host by host) uses NIC
    // a / acceleratorsPerNic, so accelerator i of every host uses its host's NIC
    // i / acceleratorsPerNic (rail-aligned). Collectives and jobs place ranks on accelerators.
    uint32_t acceleratorsPerHost{1};
    uint32_t acceleratorsPerNic{1};

    /// Accelerators: the ranks collectives and jobs place.
    uint32_t Accelerators() const { return nics * acceleratorsPerNic; }
    /// An accelerator's share of its NIC (every plane's port), bytes/s: what NCCL's cost
    /// model sees, as Communicator derives it from the NICs it runs on.
    uint64_t AcceleratorBytesPerSecond() const
    {
        return static_cast<uint64_t>(nicPortGbps * 1e9 / 8) * planes / acceleratorsPerNic;
    }
    std::optional<double> nicTxLatencyNs; //!< unset: the RdmaNic attribute defaults
    std::optional<double> nicRxLatencyNs;
    std::optional<double> scaleUpGbps; //!< unset: the ScaleUpDomain attribute defaults
    std::optional<double> scaleUpLatencyNs;
    std::optional<uint32_t> scaleUpChunkBytes;
    //! endpoint latencies, ns, by key (kernel_step_ns, ...); absent: NcclEndpoint's defaults
    std::map<std::string, double> endpointNs;
    ClosGeometry geometry; //!< derived and validated

    /// One-way delay of an inter-site link in ns.
    double InterSiteDelayNs() const { return distanceKm * usPerKm * 1000.0; }
    /// The spec as JSON, derived geometry included (for --dry-run and result records).
    nlohmann::json ToJson() const;
};

/// Parses and validates a topology object; `path` prefixes key names in errors.
TopologySpec ParseTopology(const nlohmann::json& j, const std::string& path);
/// Reads a topology file; every error, whatever raised it, is an InputError naming the file
/// (and the key).
TopologySpec LoadTopologyFile(const std::string& file);
/// LoadTopologyFile on a file's text; errors are InputErrors but for faults of the loader
/// itself (what fuzzing looks for).
TopologySpec LoadTopologyText(const std::string& text, const std::string& file);

} // namespace metaroce
} // namespace ns3

#endif
