#include "helper/topology-builder.h"

namespace ns3
{
namespace metaroce
{

TopologyBuilder::TopologyBuilder(const std::string& kind)
    : m_j({{"kind", kind}})
{
}

TopologyBuilder&
TopologyBuilder::Set(const std::string& key, const nlohmann::json& value)
{
    m_j[key] = value;
    return *this;
}

TopologyBuilder&
TopologyBuilder::Switch(const std::string& key, const nlohmann::json& value)
{
    m_j["switch"][key] = value;
    return *this;
}

TopologySpec
TopologyBuilder::Build() const
{
    // The parser of topology files validates and derives: one path for files and programs.
    return ParseTopology(m_j, "topology");
}

} // namespace metaroce
} // namespace ns3
