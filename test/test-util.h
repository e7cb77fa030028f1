// Small worlds for tests: a chain of hosts and switches wired by hand.
#ifndef METAROCE_TEST_UTIL_H
#define METAROCE_TEST_UTIL_H

#include "helper/fabric-helper.h"
#include "helper/rdma-helper.h"
#include "model/fabric/fabric-channel.h"
#include "model/fabric/fabric-net-device.h"

#include "ns3/config.h"
#include "ns3/rng-seed-manager.h"
#include "ns3/simulator.h"

#include <nlohmann/json.hpp>
#include <set>
#include <vector>

namespace ns3
{
namespace metaroce
{
namespace test
{

/// Resets global ns-3 state between test cases (Simulator and Config are process-wide).
struct SimGuard
{
    explicit SimGuard(uint32_t run = 1)
    {
        RngSeedManager::SetSeed(1);
        RngSeedManager::SetRun(run);
    }

    ~SimGuard()
    {
        Simulator::Destroy();
        Config::Reset();
    }
};

/// A fabric built from a topology with an RDMA NIC on every host: what every transport and
/// collective test starts from. qpType, if given, is what Connect creates.
struct RdmaWorld
{
    std::unique_ptr<Fabric> fabric;
    std::unique_ptr<RdmaHelper> rdma; // declared after fabric: torn down first

    explicit RdmaWorld(const TopologySpec& topo, const std::string& qpType = "")
    {
        fabric = FabricHelper().Build(topo);
        int64_t s = 1 + fabric->AssignStreams(1);
        rdma = std::make_unique<RdmaHelper>(*fabric, s);
        rdma->InstallNics();
        if (!qpType.empty())
        {
            rdma->SetQueuePairType(qpType);
        }
    }

    explicit RdmaWorld(const nlohmann::json& topo, const std::string& qpType = "")
        : RdmaWorld(ParseTopology(topo, "topology"), qpType)
    {
    }

    explicit RdmaWorld(const char* file, const std::string& qpType = "")
        : RdmaWorld(LoadTopologyFile(file), qpType)
    {
    }
};

/// Records frames arriving at a port.
class FrameLog : public FabricFrameReceiver
{
  public:
    struct Entry
    {
        int64_t atPs;
        FabricFrame frame;
    };

    void ReceiveFrame(FabricNetDevice* port, FabricFrame&& f) override
    {
        entries.push_back({Simulator::Now().GetPicoSeconds(), std::move(f)});
    }

    std::vector<Entry> entries;
};

/// Passes everything a port hands it on to `inner`: a filter overrides ReceiveFrame only.
class ForwardingReceiver : public FabricFrameReceiver
{
  public:
    explicit ForwardingReceiver(FabricFrameReceiver* inner)
        : m_inner(inner)
    {
    }

    void ReceiveFrame(FabricNetDevice* port, FabricFrame&& f) override
    {
        m_inner->ReceiveFrame(port, std::move(f));
    }

    void NotifyDequeue(FabricNetDevice* p, const FabricFrame& f) override
    {
        m_inner->NotifyDequeue(p, f);
    }

    void NotifyPortIdle(FabricNetDevice* p) override { m_inner->NotifyPortIdle(p); }

    bool WantsPortIdle() const override { return m_inner->WantsPortIdle(); }

    void NotifyLinkChange(FabricNetDevice* p, bool up) override
    {
        m_inner->NotifyLinkChange(p, up);
    }

  protected:
    FabricFrameReceiver* m_inner;
};

/// Drops chosen data frames arriving at a port (by arrival count), forwarding all else.
class DropFilter : public ForwardingReceiver
{
  public:
    DropFilter(FabricFrameReceiver* inner, std::set<uint64_t> drop)
        : ForwardingReceiver(inner)
        , m_drop(std::move(drop))
    {
    }

    void ReceiveFrame(FabricNetDevice* port, FabricFrame&& f) override
    {
        if (f.tc != 6 && m_drop.count(m_seen++) != 0)
        {
            ++dropped;
            return;
        }
        m_inner->ReceiveFrame(port, std::move(f));
    }

    uint64_t dropped{0};

    /// Data frames that arrived so far (dropped or not).
    uint64_t Seen() const { return m_seen; }

  private:
    std::set<uint64_t> m_drop;
    uint64_t m_seen{0};
};

/// A minimal fabric for tests: 2 tiers, radix k, `nics` NICs, `planes` planes.
inline nlohmann::json
SmallFpf(uint32_t nics, uint32_t planes, uint32_t radix)
{
    return {{"name", "test"},
            {"kind", "fpf"},
            {"nics", nics},
            {"planes", planes},
            {"switch_radix", radix},
            {"nic_port_gbps", 100},
            {"nic_link_delay_ns", 25},
            {"fabric_link_delay_ns", 500}};
}

/// SmallFpf with one plane (default: 4 NICs, radix 4: two leaves with 2 NICs and 2 uplinks
/// each, two spines), built with its random streams assigned; `sw` overrides switch keys.
inline std::unique_ptr<Fabric>
TinyFabric(nlohmann::json sw = nlohmann::json::object(), uint32_t nics = 4, uint32_t radix = 4)
{
    auto j = SmallFpf(nics, 1, radix);
    if (!sw.empty())
    {
        j["switch"] = sw;
    }
    auto f = FabricHelper().Build(ParseTopology(j, "topology"));
    f->AssignStreams(1);
    return f;
}

} // namespace test
} // namespace metaroce
} // namespace ns3

#endif
