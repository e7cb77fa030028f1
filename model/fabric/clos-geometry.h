/*
 * The arithmetic shape of a (multiplane) Clos fabric: how many switches of each tier, how
 * their ports are numbered, and where a destination NIC lies. Routing is computed from this
 * in O(1) per hop with O(1) memory per switch: no per-destination tables, no global routing.
 *
 * Every site and every plane has the same shape. NIC n belongs to site n / nicsPerSite; its
 * port p attaches to plane p. Port numbering (k indexes parallel links of a bundle):
 *   leaf l:        [0, d) NICs (NIC l*d+i on port i); [d, d+u) uplinks: d + s*m + k -> spine s
 *                  (2 tiers) or d + j*m1 + k -> aggregation j of its pod (3 tiers)
 *   spine s:       [0, L*m) leaf l on l*m + k; then scale-across bundles: L*m + r*x + k to
 *                  spine s of the r-th other site
 *   aggregation j  [0, Lp*m1) leaf (pod-local ll) on ll*m1 + k; [Lp*m1, Lp*m1+aUp) core c of
 *   of pod p:      group j on Lp*m1 + c*m2 + k
 *   core c of      [0, P*m2) pod p on p*m2 + k
 *   group j:
 */
#ifndef METAROCE_CLOS_GEOMETRY_H
#define METAROCE_CLOS_GEOMETRY_H

#include <cstdint>

namespace ns3
{
namespace metaroce
{

/// A contiguous range of equal-cost egress ports.
struct PortRange
{
    uint32_t first{0};
    uint32_t count{0};
};

/// Where a switch sits in the fabric.
struct SwitchCoord
{
    uint32_t index{0}; //!< index within (site, plane, tier); aggs: pod*A + j; cores: j*C + c
    uint16_t site{0};
    uint16_t plane{0};
    uint8_t tier{0}; //!< 0 leaf, 1 spine (2 tiers) or aggregation (3 tiers), 2 core
};

struct ClosGeometry
{
    uint32_t sites{1};
    uint32_t planes{1};
    uint32_t nicsPerSite{0};
    uint32_t tiers{2};
    uint32_t d{0}; //!< NICs per leaf
    uint32_t u{0}; //!< leaf uplinks
    uint32_t L{0}; //!< leaves per (site, plane)
    // two tiers
    uint32_t S{0}; //!< spines per (site, plane)
    uint32_t m{1}; //!< links per leaf-spine pair
    uint32_t x{0}; //!< scale-across links from a spine to its peer spine in each other site
    // three tiers
    uint32_t Lp{0};  //!< leaves per pod
    uint32_t A{0};   //!< aggregation switches per pod
    uint32_t m1{1};  //!< links per leaf-aggregation pair
    uint32_t aUp{0}; //!< aggregation uplinks
    uint32_t C{0};   //!< cores per group (one group per aggregation index)
    uint32_t m2{1};  //!< links per aggregation-core pair
    uint32_t P{0};   //!< pods

    uint32_t TotalNics() const { return nicsPerSite * sites; }

    /// Switches of one tier in one (site, plane).
    uint32_t SwitchesInTier(uint32_t tier) const
    {
        if (tier == 0)
        {
            return L;
        }
        if (tiers == 2)
        {
            return tier == 1 ? S : 0;
        }
        return tier == 1 ? P * A : (tier == 2 ? A * C : 0);
    }

    /// Ports a switch of this tier has.
    uint32_t PortsInTier(uint32_t tier) const
    {
        if (tier == 0)
        {
            return d + u;
        }
        if (tiers == 2)
        {
            return L * m + (sites - 1) * x;
        }
        return tier == 1 ? Lp * m1 + aUp : P * m2;
    }

    /// Equal-cost next hops towards NIC dst from a switch; count 0 if dst does not exist.
    PortRange Route(const SwitchCoord& at, uint32_t dst) const
    {
        if (dst >= TotalNics())
        {
            return {0, 0};
        }
        uint32_t site = dst / nicsPerSite;
        uint32_t local = dst - site * nicsPerSite;
        uint32_t leaf = local / d;
        if (at.tier == 0)
        {
            if (site == at.site && leaf == at.index)
            {
                return {local - leaf * d, 1};
            }
            return {d, u};
        }
        if (tiers == 2)
        {
            if (site == at.site)
            {
                return {leaf * m, m};
            }
            uint32_t r = site < at.site ? site : site - 1;
            return {L * m + r * x, x};
        }
        if (at.tier == 1)
        {
            uint32_t pod = at.index / A;
            if (leaf / Lp == pod)
            {
                return {(leaf % Lp) * m1, m1};
            }
            return {Lp * m1, aUp};
        }
        return {(leaf / Lp) * m2, m2};
    }
};

} // namespace metaroce
} // namespace ns3

#endif
