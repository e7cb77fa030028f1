/*
 * Per-object random streams without a RandomVariableStream Object per port: a fabric has
 * millions of ports and a lossy link needs only 8 bytes of state. Seeded from ns-3's global
 * seed and run (RngSeedManager) and a stream number unique to the object, so runs are
 * reproducible and --RngRun changes every stream.
 */
#ifndef METAROCE_FABRIC_RANDOM_H
#define METAROCE_FABRIC_RANDOM_H

#include "ns3/rng-seed-manager.h"

#include <cstdint>

namespace ns3
{
namespace metaroce
{

/// SplitMix64 finaliser: a cheap, well-mixed 64-bit hash.
inline uint64_t
Mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

class FastRng
{
  public:
    FastRng() = default;

    explicit FastRng(uint64_t stream) { Seed(stream); }

    /// Seeds from (global seed, run, stream).
    void Seed(uint64_t stream)
    {
        m_state = Mix64(Mix64(RngSeedManager::GetSeed()) ^ Mix64(RngSeedManager::GetRun() << 1) ^
                        Mix64(stream * 0x2545f4914f6cdd1dULL + 1));
    }

    uint64_t Next()
    {
        m_state += 0x9e3779b97f4a7c15ULL;
        uint64_t z = m_state;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }

    /// Uniform in [0, 1).
    double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  private:
    uint64_t m_state{0};
};

/// The ECMP hash of a switch: the 5-tuple fields a real switch hashes that vary here
/// (source, destination, UDP source port) and a per-switch salt so that consecutive tiers
/// do not make correlated choices.
inline uint32_t
EcmpHash(uint32_t src, uint32_t dst, uint16_t entropy, uint32_t salt)
{
    uint64_t k = (static_cast<uint64_t>(src) << 32) ^ dst;
    return static_cast<uint32_t>(Mix64(Mix64(k) ^ (static_cast<uint64_t>(entropy) << 17) ^ salt) >>
                                 32);
}

} // namespace metaroce
} // namespace ns3

#endif
