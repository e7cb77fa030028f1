#include "helper/topology-spec.h"

#include "helper/scenario/json-reader.h"

#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/nstime.h"
#include "ns3/uinteger.h"

#include <cmath>

namespace ns3
{
namespace metaroce
{

namespace
{
uint32_t
CeilDiv(uint64_t a, uint64_t b)
{
    return static_cast<uint32_t>((a + b - 1) / b);
}

/// The "switch" object: each key sets one FabricSwitch attribute (all fifteen of them).
AttributeList
ParseSwitch(const JsonReader& r)
{
    AttributeList s;
    auto set = [&s](const char* attribute, const AttributeValue& v)
    { s.emplace_back(attribute, v.Copy()); };
    auto uint = [&](const char* key, const char* attribute, uint64_t min, uint64_t max)
    {
        if (r.Has(key))
        {
            set(attribute, UintegerValue(r.UInt(key, min, max)));
        }
    };
    auto number = [&](const char* key, const char* attribute, double min, double max)
    {
        if (r.Has(key))
        {
            set(attribute, DoubleValue(r.Number(key, min, max)));
        }
    };
    auto boolean = [&](const char* key, const char* attribute)
    {
        if (r.Has(key))
        {
            set(attribute, BooleanValue(r.Bool(key, false)));
        }
    };
    // scale: picoseconds per unit of the key
    auto time = [&](const char* key, const char* attribute, double max, double scale)
    {
        if (r.Has(key))
        {
            set(attribute,
                TimeValue(PicoSeconds(static_cast<int64_t>(r.Number(key, 0.0, max) * scale))));
        }
    };
    uint("buffer_per_port_bytes", "BufferPerPort", 4096, 1ULL << 34);
    uint("buffer_bytes", "BufferBytes", 0, 1ULL << 44);
    number("alpha", "Alpha", 1.0 / 1024, 1024);
    boolean("ecn", "EcnEnabled");
    uint("ecn_kmin_bytes", "EcnKmin", 0, 1ULL << 34);
    uint("ecn_kmax_bytes", "EcnKmax", 0, 1ULL << 34);
    number("ecn_pmax", "EcnPmax", 0.0, 1.0);
    time("latency_ns", "Latency", 1e6, 1000);
    time("convergence_us", "ConvergenceDelay", 1e8, 1e6);
    uint("ecmp_salt", "EcmpSalt", 0, UINT32_MAX);
    boolean("pfc", "PfcEnabled");
    uint("pfc_class", "PfcClass", 0, 7);
    number("pfc_alpha", "PfcAlpha", 1.0 / 1024, 64);
    time("pfc_response_us", "PfcResponseTime", 1e6, 1e6);
    uint("pfc_xon_offset_bytes", "PfcXonOffset", 0, 1ULL << 34);
    if (r.Has("ecn_kmin_bytes") && r.Has("ecn_kmax_bytes") &&
        r.UInt("ecn_kmin_bytes", 0, 1ULL << 34) > r.UInt("ecn_kmax_bytes", 0, 1ULL << 34))
    {
        r.Fail("ecn_kmin_bytes", "must not exceed ecn_kmax_bytes");
    }
    r.Finish();
    return s;
}
} // namespace

TopologySpec
ParseTopology(const nlohmann::json& j, const std::string& path)
{
    JsonReader r(j, path);
    TopologySpec t;
    t.name = r.String("name", "unnamed");
    t.description = r.String("description", "");
    t.kind = r.Choice("kind", {"fpf", "clos"});
    t.nics = static_cast<uint32_t>(r.UInt("nics", 1, 1u << 22));
    t.planes = static_cast<uint32_t>(r.UInt("planes", 1, 1, 16));
    if (t.kind == "clos" && t.planes != 1)
    {
        r.Fail("planes", "a \"clos\" fabric has one plane; use kind \"fpf\" for several");
    }
    t.sites = static_cast<uint32_t>(r.UInt("sites", 1, 1, 16));
    t.radix = static_cast<uint32_t>(r.UInt("switch_radix", 2, 4096));
    t.nicPortGbps = r.Number("nic_port_gbps", 100, 0.001, 1e5);
    t.fabricLinkGbps = r.Number("fabric_link_gbps", t.nicPortGbps, 0.001, 1e5);
    t.nicLinkDelayNs = r.Number("nic_link_delay_ns", 25, 0, 1e9);
    t.fabricLinkDelayNs = r.Number("fabric_link_delay_ns", 500, 0, 1e9);
    t.oversubscription = r.Number("oversubscription", 1.0, 0.01, 100);
    std::string tiers = r.Has("tiers") && r.Raw("tiers").is_string()
                            ? r.Choice("tiers", {"auto"})
                            : (r.Has("tiers") ? std::to_string(r.UInt("tiers", 2, 3)) : "auto");
    if (t.nics % t.sites != 0)
    {
        r.Fail("nics", "must be a multiple of sites (" + std::to_string(t.sites) + ")");
    }
    if (r.Has("switch"))
    {
        t.switchAttributes = ParseSwitch(r.Object("switch"));
    }
    if (r.Has("nic_tx_latency_ns"))
    {
        t.nicTxLatencyNs = r.Number("nic_tx_latency_ns", 0, 1e9);
    }
    if (r.Has("nic_rx_latency_ns"))
    {
        t.nicRxLatencyNs = r.Number("nic_rx_latency_ns", 0, 1e9);
    }
    t.acceleratorsPerHost = static_cast<uint32_t>(r.UInt("accelerators_per_host", 1, 1, 1024));
    t.acceleratorsPerNic = static_cast<uint32_t>(r.UInt("accelerators_per_nic", 1, 1, 1024));
    if (t.acceleratorsPerHost % t.acceleratorsPerNic != 0)
    {
        r.Fail("accelerators_per_nic", "must divide accelerators_per_host (" +
                                           std::to_string(t.acceleratorsPerHost) +
                                           "): a NIC serves accelerators of one host");
    }
    if (t.nics % (t.acceleratorsPerHost / t.acceleratorsPerNic) != 0)
    {
        r.Fail(t.acceleratorsPerNic == 1 ? "accelerators_per_host" : "accelerators_per_nic",
               "a host has " + std::to_string(t.acceleratorsPerHost / t.acceleratorsPerNic) +
                   " NICs, which must divide nics (" + std::to_string(t.nics) + ")");
    }
    if (r.Has("scale_up"))
    {
        if (t.acceleratorsPerHost == 1)
        {
            r.Fail("scale_up", "needs accelerators_per_host > 1");
        }
        JsonReader su = r.Object("scale_up");
        if (su.Has("gbps"))
        {
            t.scaleUpGbps = su.Number("gbps", 0.001, 1e6);
        }
        if (su.Has("latency_ns"))
        {
            t.scaleUpLatencyNs = su.Number("latency_ns", 0, 1e9);
        }
        if (su.Has("chunk_bytes"))
        {
            t.scaleUpChunkBytes = static_cast<uint32_t>(su.UInt("chunk_bytes", 256, 1u << 30));
        }
        su.Finish();
    }
    if (r.Has("endpoint"))
    {
        JsonReader e = r.Object("endpoint");
        for (const char* key :
             {"kernel_step_ns", "proxy_ns", "doorbell_ns", "completion_ns", "flush_ns"})
        {
            if (e.Has(key))
            {
                t.endpointNs[key] = e.Number(key, 0, 1e9);
            }
        }
        e.Finish();
    }
    const uint32_t k = t.radix;
    ClosGeometry& g = t.geometry;
    g.sites = t.sites;
    g.planes = t.planes;
    g.nicsPerSite = t.nics / t.sites;
    const double o = t.oversubscription;
    if (r.Has("nics_per_leaf"))
    {
        g.d = static_cast<uint32_t>(r.UInt("nics_per_leaf", 1, k));
    }
    else
    {
        double d = std::floor(k * o * t.fabricLinkGbps / (t.nicPortGbps + o * t.fabricLinkGbps));
        g.d = std::max<uint32_t>(1, static_cast<uint32_t>(d));
        g.d = std::min(g.d, g.nicsPerSite);
    }
    if (r.Has("leaf_uplinks"))
    {
        g.u = static_cast<uint32_t>(r.UInt("leaf_uplinks", 1, k));
    }
    else
    {
        g.u = std::max<uint32_t>(1, static_cast<uint32_t>(std::ceil(
                                        g.d * t.nicPortGbps / (o * t.fabricLinkGbps) - 1e-9)));
    }
    if (g.d + g.u > k)
    {
        r.Fail(r.Has("leaf_uplinks") ? "leaf_uplinks" : "nics_per_leaf",
               "a leaf needs nics_per_leaf + leaf_uplinks = " + std::to_string(g.d + g.u) +
                   " ports, more than switch_radix " + std::to_string(k));
    }
    g.L = CeilDiv(g.nicsPerSite, g.d);

    if (t.sites > 1)
    {
        JsonReader sa = r.Object("scale_across");
        t.distanceKm = sa.Number("distance_km", 0.001, 40000);
        t.usPerKm = sa.Number("us_per_km", 5.0, 1.0, 10.0);
        t.interSiteGbps = sa.Number("link_gbps", t.fabricLinkGbps, 0.001, 1e5);
        g.x = static_cast<uint32_t>(sa.UInt("links_per_spine", 1, 1, k));
        sa.Finish();
    }
    else if (r.Has("scale_across"))
    {
        r.Fail("scale_across", "needs sites > 1");
    }

    // Two tiers if one spine layer can reach every leaf.
    uint32_t S = g.u;
    if (r.Has("spines"))
    {
        S = static_cast<uint32_t>(r.UInt("spines", 1, g.u));
        if (g.u % S != 0)
        {
            r.Fail("spines", "must divide leaf_uplinks (" + std::to_string(g.u) + ")");
        }
    }
    uint32_t m = g.u / S;
    uint64_t spinePorts = static_cast<uint64_t>(g.L) * m + static_cast<uint64_t>(t.sites - 1) * g.x;
    bool twoFits = spinePorts <= k;
    if (tiers == "2" && !twoFits)
    {
        r.Fail("tiers", "a 2-tier plane cannot hold " + std::to_string(g.nicsPerSite) +
                            " NICs per site: its spines would need " + std::to_string(spinePorts) +
                            " ports, more than switch_radix " + std::to_string(k));
    }
    g.tiers = (tiers == "3" || !twoFits) ? 3 : 2;
    if (g.tiers == 2)
    {
        g.S = S;
        g.m = m;
        // read to accept them, though only 3-tier fabrics use them
        for (const char* key : {"leaves_per_pod", "aggs_per_pod", "agg_uplinks", "cores_per_group"})
        {
            if (r.Has(key))
            {
                r.Fail(key, "only applies to a 3-tier fabric (this one has 2 tiers)");
            }
        }
    }
    else
    {
        if (t.sites > 1)
        {
            r.Fail("sites", "scale-across joins 2-tier sites; " + std::to_string(g.nicsPerSite) +
                                " NICs per site need 3 tiers at switch_radix " + std::to_string(k));
        }
        if (r.Has("spines"))
        {
            r.Fail("spines", "only applies to a 2-tier fabric (this one needs 3 tiers)");
        }
        g.A = static_cast<uint32_t>(r.UInt("aggs_per_pod", g.u, 1, g.u));
        if (g.u % g.A != 0)
        {
            r.Fail("aggs_per_pod", "must divide leaf_uplinks (" + std::to_string(g.u) + ")");
        }
        g.m1 = g.u / g.A;
        g.aUp = static_cast<uint32_t>(r.UInt("agg_uplinks", std::max(1u, k / 2), 1, k - 1));
        uint32_t lpMax = (k - g.aUp) / g.m1;
        if (lpMax == 0)
        {
            r.Fail("agg_uplinks", "leaves no aggregation port for leaves");
        }
        g.Lp = static_cast<uint32_t>(r.UInt("leaves_per_pod", lpMax, 1, lpMax));
        g.C = static_cast<uint32_t>(r.UInt("cores_per_group", g.aUp, 1, g.aUp));
        if (g.aUp % g.C != 0)
        {
            r.Fail("cores_per_group", "must divide agg_uplinks (" + std::to_string(g.aUp) + ")");
        }
        g.m2 = g.aUp / g.C;
        g.P = CeilDiv(g.L, g.Lp);
        if (static_cast<uint64_t>(g.P) * g.m2 > k)
        {
            r.Fail("nics", std::to_string(t.nics) + " NICs need " + std::to_string(g.P) +
                               " pods, more than a core of switch_radix " + std::to_string(k) +
                               " can join (at most " +
                               std::to_string(static_cast<uint64_t>(k / g.m2) * g.Lp * g.d) +
                               " NICs in 3 tiers)");
        }
    }
    r.Finish();
    return t;
}

Ptr<const AttributeValue>
TopologySpec::SwitchAttribute(const std::string& name) const
{
    Ptr<const AttributeValue> v;
    for (const auto& [attribute, value] : switchAttributes)
    {
        if (attribute == name)
        {
            v = value; // the last setting wins, as on the helper
        }
    }
    return v;
}

TopologySpec
LoadTopologyText(const std::string& text, const std::string& file)
{
    try
    {
        return ParseTopology(ParseJson(text, "", ""), "");
    }
    catch (const InputError& e)
    {
        throw InputError(file + ": " + e.what());
    }
}

TopologySpec
LoadTopologyFile(const std::string& file)
{
    std::string text = ReadTextFile(file);
    return AsInputError(file, [&]() { return LoadTopologyText(text, file); });
}

nlohmann::json
TopologySpec::ToJson() const
{
    const ClosGeometry& g = geometry;
    nlohmann::json j = {{"name", name},
                        {"kind", kind},
                        {"nics", nics},
                        {"planes", planes},
                        {"sites", sites},
                        {"switch_radix", radix},
                        {"nic_port_gbps", nicPortGbps},
                        {"fabric_link_gbps", fabricLinkGbps},
                        {"nic_link_delay_ns", nicLinkDelayNs},
                        {"fabric_link_delay_ns", fabricLinkDelayNs},
                        {"oversubscription", oversubscription},
                        {"tiers", g.tiers},
                        {"nics_per_leaf", g.d},
                        {"leaf_uplinks", g.u},
                        {"leaves_per_plane_per_site", g.L}};
    if (g.tiers == 2)
    {
        j["spines_per_plane_per_site"] = g.S;
        j["links_per_leaf_spine"] = g.m;
    }
    else
    {
        j["pods"] = g.P;
        j["leaves_per_pod"] = g.Lp;
        j["aggs_per_pod"] = g.A;
        j["agg_uplinks"] = g.aUp;
        j["cores_per_group"] = g.C;
    }
    if (nicTxLatencyNs)
    {
        j["nic_tx_latency_ns"] = *nicTxLatencyNs;
    }
    if (nicRxLatencyNs)
    {
        j["nic_rx_latency_ns"] = *nicRxLatencyNs;
    }
    if (acceleratorsPerHost > 1)
    {
        j["accelerators_per_host"] = acceleratorsPerHost;
        if (acceleratorsPerNic > 1)
        {
            j["accelerators_per_nic"] = acceleratorsPerNic;
        }
        nlohmann::json su = nlohmann::json::object();
        if (scaleUpGbps)
        {
            su["gbps"] = *scaleUpGbps;
        }
        if (scaleUpLatencyNs)
        {
            su["latency_ns"] = *scaleUpLatencyNs;
        }
        if (scaleUpChunkBytes)
        {
            su["chunk_bytes"] = *scaleUpChunkBytes;
        }
        j["scale_up"] = su;
    }
    if (!endpointNs.empty())
    {
        j["endpoint"] = endpointNs;
    }
    if (sites > 1)
    {
        j["scale_across"] = {{"distance_km", distanceKm},
                             {"us_per_km", usPerKm},
                             {"link_gbps", interSiteGbps},
                             {"links_per_spine", g.x},
                             {"one_way_delay_us", InterSiteDelayNs() / 1000.0}};
    }
    return j;
}

} // namespace metaroce
} // namespace ns3
