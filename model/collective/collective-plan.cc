#include "collective-plan.h"

#include <algorithm>
#include <map>

namespace ns3
{
namespace metaroce
{

namespace
{
/// Splits `bytes` into `parts` sizes that differ by at most one byte.
uint64_t
PartOf(uint64_t bytes, uint64_t parts, uint64_t i)
{
    return bytes / parts + (i < bytes % parts ? 1 : 0);
}

/// A new in queue. Planners never expect two streams from the same (peer, channel): the
/// plan check (CheckPlan) aborts if one did.
uint32_t
AddIn(RankState& r, uint32_t peer, uint32_t channel, uint64_t expected)
{
    NS_ABORT_MSG_IF(expected > UINT32_MAX, "collective plan: too many messages in one stream");
    NS_ABORT_MSG_IF(channel > UINT16_MAX, "collective plan: channel out of range");
    r.in.emplace_back(peer, static_cast<uint16_t>(channel), static_cast<uint32_t>(expected));
    return static_cast<uint32_t>(r.in.size() - 1);
}

/// A new out queue; AddOp then appends its messages (a queue's are contiguous).
void
AddOut(RankState& r, uint32_t peer, uint32_t channel, uint32_t window)
{
    NS_ABORT_MSG_IF(channel > UINT16_MAX, "collective plan: channel out of range");
    NS_ABORT_MSG_IF(window == 0 || window > UINT16_MAX, "collective plan: window out of range");
    NS_ABORT_MSG_IF(r.ops.size() >= UINT32_MAX, "collective plan: too many messages");
    OutQueue q;
    q.peer = peer;
    q.channel = static_cast<uint16_t>(channel);
    q.window = static_cast<uint16_t>(window);
    q.opBegin = static_cast<uint32_t>(r.ops.size());
    r.out.push_back(q);
}

/// A message of the last out queue; AddDep then appends what it waits for.
void
AddOp(RankState& r, uint64_t bytes, bool reduce)
{
    NS_ABORT_MSG_IF(r.ops.size() >= UINT32_MAX || r.deps.size() >= UINT32_MAX,
                    "collective plan: too many messages");
    SendOp op;
    op.bytes = bytes;
    op.reduce = reduce;
    op.depBegin = static_cast<uint32_t>(r.deps.size());
    op.nDeps = 0;
    r.ops.push_back(op);
    ++r.out.back().nOps;
}

void
AddDep(RankState& r, uint32_t in, uint64_t index)
{
    NS_ABORT_MSG_IF(index > UINT32_MAX, "collective plan: too many messages in one stream");
    r.deps.push_back(Dep{in, static_cast<uint32_t>(index)});
    ++r.ops.back().nDeps;
}

} // namespace

bool
HostLayout::Flat() const
{
    std::vector<uint32_t> hosts(host);
    std::sort(hosts.begin(), hosts.end());
    return std::adjacent_find(hosts.begin(), hosts.end()) == hosts.end();
}

std::vector<std::vector<uint32_t>>
HostLayout::Groups() const
{
    std::vector<std::vector<uint32_t>> groups;
    std::vector<uint32_t> hosts;
    for (uint32_t r = 0; r < host.size(); ++r)
    {
        auto it = std::find(hosts.begin(), hosts.end(), host[r]);
        if (it == hosts.end())
        {
            hosts.push_back(host[r]);
            groups.emplace_back();
            it = hosts.end() - 1;
        }
        groups[static_cast<std::size_t>(it - hosts.begin())].push_back(r);
    }
    for (auto& g : groups)
    {
        std::stable_sort(g.begin(), g.end(),
                         [this](uint32_t a, uint32_t b) { return local[a] < local[b]; });
    }
    return groups;
}

std::vector<uint32_t>
RingOrder(const HostLayout& layout, uint32_t ch)
{
    std::vector<uint32_t> order;
    if (layout.Flat())
    {
        for (uint32_t r = 0; r < layout.host.size(); ++r)
        {
            order.push_back(r);
        }
        return order;
    }
    for (const auto& g : layout.Groups())
    {
        const std::size_t n = g.size();
        for (std::size_t i = 0; i < n; ++i)
        {
            order.push_back(g[(i + ch) % n]);
        }
    }
    return order;
}

TreeShape
MakeTree(const HostLayout& layout, uint32_t t, uint32_t ch)
{
    const uint32_t k = static_cast<uint32_t>(layout.host.size());
    TreeShape tree;
    tree.parent.assign(k, -1);
    tree.kids.assign(k, {});
    auto link = [&tree](uint32_t parent, uint32_t kid)
    {
        tree.parent[kid] = static_cast<int32_t>(parent);
        tree.kids[parent].push_back(kid);
    };
    if (layout.Flat())
    {
        // A heap-ordered binary tree over the ranks; the second is its mirror, so a leaf of
        // one is interior in the other.
        auto rankOf = [&](uint32_t node) { return t == 0 ? node : k - 1 - node; };
        for (uint32_t node = 1; node < k; ++node)
        {
            link(rankOf((node - 1) / 2), rankOf(node));
        }
        return tree;
    }
    // Hosts: the binary tree (and its mirror) over hosts; inside a host a chain from the
    // channel's first accelerator, which is the host's node in the tree.
    const auto groups = layout.Groups();
    const uint32_t h = static_cast<uint32_t>(groups.size());
    std::vector<std::vector<uint32_t>> chain(h);
    for (uint32_t i = 0; i < h; ++i)
    {
        const auto& g = groups[i];
        for (std::size_t j = 0; j < g.size(); ++j)
        {
            chain[i].push_back(g[(j + ch) % g.size()]);
        }
        for (std::size_t j = 1; j < chain[i].size(); ++j)
        {
            link(chain[i][j - 1], chain[i][j]);
        }
    }
    auto hostOf = [&](uint32_t node) { return t == 0 ? node : h - 1 - node; };
    for (uint32_t node = 1; node < h; ++node)
    {
        link(chain[hostOf((node - 1) / 2)][0], chain[hostOf(node)][0]);
    }
    return tree;
}

/// Ring reduce-scatter / all-gather / all-reduce: each rank sends to the next and receives from
/// the previous; per channel, steps x slices messages; a step's slice forwards the slice the
/// previous step received.
void
PlanRing(std::vector<RankState>& ranks, CollectiveOp op, uint64_t bytes, uint32_t channels,
         const CollectiveConfig& cfg, const HostLayout& layout)
{
    const uint32_t k = static_cast<uint32_t>(ranks.size());
    const uint32_t steps = op == CollectiveOp::AllReduce ? 2 * (k - 1) : k - 1;
    std::vector<uint32_t> pos(k);
    for (uint32_t ch = 0; ch < channels; ++ch)
    {
        const std::vector<uint32_t> order = RingOrder(layout, ch);
        for (uint32_t i = 0; i < k; ++i)
        {
            pos[order[i]] = i;
        }
        uint64_t chBytes = PartOf(bytes, channels, ch);
        uint64_t chunkMax = (chBytes + k - 1) / k;
        uint64_t slices =
            std::max<uint64_t>(1, (chunkMax + cfg.ringSliceBytes - 1) / cfg.ringSliceBytes);
        for (uint32_t r = 0; r < k; ++r)
        {
            const uint32_t at = pos[r]; // r's place in this channel's ring
            uint32_t next = order[(at + 1) % k];
            uint32_t prev = order[(at + k - 1) % k];
            RankState& rs = ranks[r];
            uint32_t in = AddIn(rs, prev, ch, static_cast<uint64_t>(steps) * slices);
            AddOut(rs, next, ch, cfg.ringSlicesInFlight);
            for (uint32_t s = 0; s < steps; ++s)
            {
                // The chunk rank r handles at step s: reduce-scatter sends (r - s), all-gather
                // (r + 1 - s') after it; the index only sizes the chunk.
                uint32_t chunk = (at + 2 * k - s) % k;
                uint64_t chunkBytes = PartOf(chBytes, k, chunk);
                for (uint64_t j = 0; j < slices; ++j)
                {
                    AddOp(rs, PartOf(chunkBytes, slices, j),
                          op != CollectiveOp::AllGather &&
                              s < (op == CollectiveOp::AllReduce ? k - 1 : steps) && s > 0);
                    if (s > 0)
                    {
                        AddDep(rs, in, (s - 1) * slices + j);
                    }
                }
            }
        }
    }
}

void
PlanBroadcast(std::vector<RankState>& ranks, uint64_t bytes, uint32_t channels,
              const CollectiveConfig& cfg, const HostLayout& layout)
{
    const uint32_t k = static_cast<uint32_t>(ranks.size());
    for (uint32_t ch = 0; ch < channels; ++ch)
    {
        const std::vector<uint32_t> order = RingOrder(layout, ch);
        const uint32_t root =
            static_cast<uint32_t>(std::find(order.begin(), order.end(), 0u) - order.begin());
        const uint64_t chBytes = PartOf(bytes, channels, ch);
        // NCCL's broadcast moves one step per slice (BROADCAST_SLICESTEPS 1), NCCL_STEPS in
        // flight: the tree's chunk and window.
        const uint64_t slices =
            std::max<uint64_t>(1, (chBytes + cfg.treeChunkBytes - 1) / cfg.treeChunkBytes);
        for (uint32_t i = 0; i < k; ++i)
        {
            const uint32_t r = order[(root + i) % k];
            RankState& rs = ranks[r];
            int64_t in = -1;
            if (i > 0)
            {
                in = AddIn(rs, order[(root + i - 1) % k], ch, slices);
            }
            if (i + 1 == k)
            {
                break; // the ring's last rank only receives
            }
            AddOut(rs, order[(root + i + 1) % k], ch, cfg.treeChunksInFlight);
            for (uint64_t j = 0; j < slices; ++j)
            {
                AddOp(rs, PartOf(chBytes, slices, j), false);
                if (in >= 0)
                {
                    AddDep(rs, static_cast<uint32_t>(in), j);
                }
            }
        }
    }
}

/// Double binary tree all-reduce: two trees (MakeTree), each half the data, tree 0 on
/// channels [0, n) and tree 1 on [n, 2n) as NCCL runs them. Reduce up to the root chunk by
/// chunk, then broadcast down.
void
PlanTree(std::vector<RankState>& ranks, uint64_t bytes, uint32_t channels,
         const CollectiveConfig& cfg, const HostLayout& layout)
{
    const uint32_t k = static_cast<uint32_t>(ranks.size());
    uint32_t perTree = std::max<uint32_t>(1, channels);
    for (uint32_t t = 0; t < 2; ++t)
    {
        uint64_t treeBytes = PartOf(bytes, 2, t);
        for (uint32_t c = 0; c < perTree; ++c)
        {
            uint32_t ch = t * perTree + c;
            const TreeShape tree = MakeTree(layout, t, c);
            uint64_t chBytes = PartOf(treeBytes, perTree, c);
            uint64_t chunks =
                std::max<uint64_t>(1, (chBytes + cfg.treeChunkBytes - 1) / cfg.treeChunkBytes);
            for (uint32_t r = 0; r < k; ++r)
            {
                RankState& rs = ranks[r];
                const std::vector<uint32_t>& kids = tree.kids[r];
                std::vector<uint32_t> fromKids;
                for (uint32_t kid : kids)
                {
                    fromKids.push_back(AddIn(rs, kid, ch, chunks));
                }
                int32_t fromParent = -1;
                if (tree.parent[r] >= 0)
                {
                    uint32_t parent = static_cast<uint32_t>(tree.parent[r]);
                    fromParent = static_cast<int32_t>(AddIn(rs, parent, ch, chunks));
                    AddOut(rs, parent, ch, cfg.treeChunksInFlight);
                    for (uint64_t j = 0; j < chunks; ++j)
                    {
                        AddOp(rs, PartOf(chBytes, chunks, j), !kids.empty());
                        for (uint32_t q : fromKids)
                        {
                            AddDep(rs, q, j);
                        }
                    }
                }
                for (uint32_t kid : kids)
                {
                    AddOut(rs, kid, ch, cfg.treeChunksInFlight);
                    for (uint64_t j = 0; j < chunks; ++j)
                    {
                        AddOp(rs, PartOf(chBytes, chunks, j), false);
                        if (fromParent >= 0)
                        {
                            AddDep(rs, static_cast<uint32_t>(fromParent), j);
                        }
                        else
                        {
                            for (uint32_t q : fromKids) // the root: once the chunk is reduced
                            {
                                AddDep(rs, q, j);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// PAT-like all-gather / reduce-scatter over log2(k) steps (Bruck's algorithm, any k): at
/// distance d = 1, 2, 4, ... an all-gather step sends everything gathered so far (min(d, k-d)
/// blocks of S/k) to rank r - d and receives as much from r + d; a reduce-scatter runs the
/// same steps in reverse order and direction, each step reducing before it forwards. A step
/// waits for the whole message of the step before it.
void
PlanPat(std::vector<RankState>& ranks, CollectiveOp op, uint64_t bytes, uint32_t channels,
        const CollectiveConfig& cfg)
{
    const uint32_t k = static_cast<uint32_t>(ranks.size());
    std::vector<uint32_t> dists;
    for (uint32_t d = 1; d < k; d <<= 1)
    {
        dists.push_back(d);
    }
    if (op == CollectiveOp::ReduceScatter)
    {
        std::reverse(dists.begin(), dists.end());
    }
    for (uint32_t ch = 0; ch < channels; ++ch)
    {
        uint64_t chBytes = PartOf(bytes, channels, ch);
        for (uint32_t r = 0; r < k; ++r)
        {
            RankState& rs = ranks[r];
            int32_t prevIn = -1;
            uint64_t prevPieces = 0;
            for (uint32_t d : dists)
            {
                bool ag = op == CollectiveOp::AllGather;
                uint32_t to = ag ? (r + k - d) % k : (r + d) % k;
                uint32_t from = ag ? (r + d) % k : (r + k - d) % k;
                uint64_t blocks = std::min<uint64_t>(d, k - d);
                uint64_t stepBytes = chBytes * blocks / k;
                uint64_t pieces = std::max<uint64_t>(1, (stepBytes + cfg.ringSliceBytes - 1) /
                                                            cfg.ringSliceBytes);
                AddOut(rs, to, ch, cfg.ringSlicesInFlight);
                for (uint64_t j = 0; j < pieces; ++j)
                {
                    AddOp(rs, PartOf(stepBytes, pieces, j), !ag && prevIn >= 0);
                    for (uint64_t q = 0; prevIn >= 0 && q < prevPieces; ++q)
                    {
                        AddDep(rs, static_cast<uint32_t>(prevIn), q);
                    }
                }
                // The matching receive: this step's message from `from` (distances 1, 2, 4, ...
                // are distinct modulo k, so every step has its own peers).
                prevIn = static_cast<int32_t>(AddIn(rs, from, ch, pieces));
                prevPieces = pieces;
            }
        }
    }
}

/// NCCL's p2p peer order for rank r of k: groups of 8 ranks, group deltas in NCCL's
/// quadratic sequence, then local deltas 0..7.
std::vector<uint32_t>
PeerSchedule(uint32_t r, uint32_t k)
{
    const uint32_t g = 8;
    uint32_t nGroups = (k + g - 1) / g;
    uint32_t pow2 = 1;
    while (pow2 < nGroups)
    {
        pow2 <<= 1;
    }
    std::vector<uint32_t> order;
    uint32_t delta = 0;
    for (uint32_t round = 0, seen = 0; seen < nGroups; ++round)
    {
        if (delta < nGroups)
        {
            ++seen;
            for (uint32_t d = 0; d < g; ++d)
            {
                uint32_t group = (r / g + delta) % nGroups;
                uint32_t peer = group * g + (r % g + d) % g;
                if (peer < k && peer != r)
                {
                    order.push_back(peer);
                }
            }
        }
        delta = (delta + round + 1) % pow2;
    }
    // Ranks a partial last group made unreachable through the pattern are appended.
    std::vector<bool> have(k, false);
    for (uint32_t p : order)
    {
        have[p] = true;
    }
    for (uint32_t p = 0; p < k; ++p)
    {
        if (p != r && !have[p])
        {
            order.push_back(p);
        }
    }
    return order;
}

uint32_t
P2pChannelsPerPeer(uint32_t maxChannels, uint32_t ranks, const CollectiveConfig& cfg)
{
    uint32_t perPeerCh = std::max<uint32_t>(1, maxChannels);
    while (perPeerCh > 1 && perPeerCh * ((ranks - 1 + 7) / 8) > cfg.p2pChannels)
    {
        perPeerCh /= 2;
    }
    return perPeerCh;
}

P2pSplit
SplitP2p(uint64_t bytes, uint32_t perPeerCh, uint32_t ranks, bool multiNode,
         const CollectiveConfig& cfg)
{
    P2pSplit s;
    const uint64_t step = cfg.p2pChunkBytes;
    uint32_t minCh = std::max<uint32_t>(1, perPeerCh);
    while (minCh > 1 && uint64_t{minCh} * ranks > cfg.p2pChannels)
    {
        minCh /= 2;
    }
    const uint64_t minPart = std::max<uint64_t>(1, multiNode ? step / 2 : step / 8);
    const uint64_t maxPart = multiNode ? step : step * 32;
    auto divUp = [](uint64_t a, uint64_t b) { return (a + b - 1) / b; };
    s.channels = static_cast<uint32_t>(
        std::max<uint64_t>(1, std::min<uint64_t>(minCh, divUp(bytes, minPart))));
    uint64_t part = std::max(minPart, divUp(bytes, s.channels));
    while (part > maxPart && s.channels <= perPeerCh / 2)
    {
        s.channels *= 2;
        part = divUp(bytes, s.channels);
    }
    constexpr uint64_t kAlign = 4 << 10;
    s.partBytes = divUp(divUp(std::max<uint64_t>(1, bytes), s.channels), kAlign) * kAlign;
    s.chunkBytes = bytes < step ? step / 4 : bytes < 8 * step ? step / 2 : step;
    return s;
}

uint64_t
P2pPartBytes(const P2pSplit& s, uint64_t bytes, uint32_t i)
{
    const uint64_t begin = std::min<uint64_t>(uint64_t{i} * s.partBytes, bytes);
    const uint64_t end = std::min<uint64_t>(uint64_t{i + 1} * s.partBytes, bytes);
    return end - begin;
}

/// All-to-all: S / k bytes to every peer in NCCL's schedule, each peer's share split over
/// channels as NCCL splits a p2p operation (SplitP2p), in 128 KiB chunks (smaller for small
/// messages). NCCL's kernel runs every p2p channel at once, each a batch of up to
/// p2pPeersInFlight sends: a rank has up to p2pPeersInFlight x p2pChannels parts in flight
/// (assumption: a finished part frees its place for the next in the schedule, where NCCL moves
/// a channel to its next batch once the whole batch is done). The rounds of one node delta
/// share a channel (ncclP2pChannelBaseForRound), so a batch holds about as many sends as a
/// host has ranks, and the network proxy gives each NCCL_SHARED_STEPS / that many chunks in
/// flight (net.cc, sendProxyProgress), at most NCCL_STEPS.
void
PlanDirect(std::vector<RankState>& ranks, uint64_t bytes, uint32_t maxChannels,
           const CollectiveConfig& cfg, const HostLayout& layout)
{
    const uint32_t k = static_cast<uint32_t>(ranks.size());
    // The connections: NCCL's channels per net peer (their numbering below).
    const uint32_t perPeerCh = P2pChannelsPerPeer(maxChannels, k, cfg);
    // PXN: the rank at (host, local index), where the communicator has one.
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> at;
    uint32_t maxHost = 0;
    if (cfg.pxn && !layout.Flat())
    {
        for (uint32_t r = 0; r < k; ++r)
        {
            at.emplace(std::make_pair(layout.host[r], layout.local[r]), r);
            maxHost = std::max(maxHost, layout.host[r]);
        }
    }
    // Streams of forwarded data need channel numbers of their own beside the direct ones
    // (below maxChannels): on the scale-up hop, one per (destination host, channel of the
    // pair); on the network hop, one per (origin's local index, channel of the pair).
    uint32_t maxLocal = 0;
    for (uint32_t l : layout.local)
    {
        maxLocal = std::max(maxLocal, l);
    }
    const bool pxn = !at.empty() && maxChannels + uint64_t{maxHost + 1} * perPeerCh <= UINT16_MAX &&
                     maxChannels + uint64_t{maxLocal + 1} * perPeerCh <= UINT16_MAX;
    uint64_t perPeer = bytes / k;
    // Every peer's share is the same size, so the same split (NCCL's nNodes: the hosts).
    std::vector<uint32_t> hosts(layout.host);
    std::sort(hosts.begin(), hosts.end());
    uint32_t perHost = 0; // the most ranks on one host (NCCL's maxLocalRanks)
    for (std::size_t i = 0, j = 0; i < hosts.size(); i = j)
    {
        for (j = i; j < hosts.size() && hosts[j] == hosts[i]; ++j)
        {
        }
        perHost = std::max<uint32_t>(perHost, static_cast<uint32_t>(j - i));
    }
    const bool multiNode = perHost < k;
    const P2pSplit split = SplitP2p(perPeer, perPeerCh, k, multiNode, cfg);
    const uint32_t batch = std::max<uint32_t>(1, std::min(cfg.p2pPeersInFlight, perHost));
    const uint32_t netWindow =
        std::max<uint32_t>(1, std::min(cfg.p2pChunksInFlight, cfg.p2pSharedSteps / batch));
    for (uint32_t r = 0; r < k; ++r)
    {
        ranks[r].activeLimit = cfg.p2pPeersInFlight * cfg.p2pChannels;
    }
    for (uint32_t r = 0; r < k; ++r)
    {
        RankState& rs = ranks[r];
        for (uint32_t peer : PeerSchedule(r, k))
        {
            uint32_t via = r;
            if (pxn && layout.host[peer] != layout.host[r] && layout.local[peer] != layout.local[r])
            {
                auto it = at.find(std::make_pair(layout.host[r], layout.local[peer]));
                via = it != at.end() ? it->second : r;
            }
            for (uint32_t c = 0; c < split.channels; ++c)
            {
                // Peers start on different channels, so a rank's peers use every channel.
                uint32_t ch = (peer + c) % maxChannels;
                uint64_t part = P2pPartBytes(split, perPeer, c);
                if (part == 0 && c > 0)
                {
                    continue; // NCCL posts no proxy op for an empty part
                }
                const uint64_t chunk = split.chunkBytes;
                uint64_t chunks = std::max<uint64_t>(1, (part + chunk - 1) / chunk);
                if (via == r)
                {
                    const bool net = layout.host[peer] != layout.host[r];
                    AddOut(rs, peer, ch, net ? netWindow : cfg.p2pChunksInFlight);
                    for (uint64_t j = 0; j < chunks; ++j)
                    {
                        AddOp(rs, PartOf(part, chunks, j), false);
                    }
                    AddIn(ranks[peer], r, ch, chunks);
                    continue;
                }
                // To the host-mate on the peer's rail, in the sender's peer schedule...
                uint32_t up = maxChannels + layout.host[peer] * perPeerCh + c;
                AddOut(rs, via, up, cfg.p2pChunksInFlight);
                for (uint64_t j = 0; j < chunks; ++j)
                {
                    AddOp(rs, PartOf(part, chunks, j), false);
                }
                uint32_t in = AddIn(ranks[via], r, up, chunks);
                // ...which sends each chunk on as it arrives (its proxy does, outside the
                // kernel's batch of peers).
                uint32_t net = maxChannels + layout.local[r] * perPeerCh + c;
                RankState& vs = ranks[via];
                AddOut(vs, peer, net, netWindow);
                vs.out.back().unlimited = true;
                vs.out.back().active = true;
                for (uint64_t j = 0; j < chunks; ++j)
                {
                    AddOp(vs, PartOf(part, chunks, j), false);
                    AddDep(vs, in, j);
                }
                AddIn(ranks[peer], via, net, chunks);
            }
        }
    }
}

/// Compacts a rank's plan (it lives as long as the collective, for every rank), sorts its in
/// queues for lookup and lists each in queue's waiters.
void
FinishPlan(RankState& rs)
{
    rs.out.shrink_to_fit();
    rs.ops.shrink_to_fit();
    rs.deps.shrink_to_fit();
    const std::size_t nIn = rs.in.size();
    std::vector<uint64_t> keys;
    keys.reserve(rs.out.size());
    for (const auto& q : rs.out)
    {
        keys.push_back(StreamKey(q.peer, q.channel));
    }
    std::sort(keys.begin(), keys.end());
    NS_ABORT_MSG_IF(std::adjacent_find(keys.begin(), keys.end()) != keys.end(),
                    "collective plan: two out queues for one peer and channel");
    // In queues sorted by (peer, channel); what waits for them follows.
    std::vector<uint32_t> order(nIn);
    for (uint32_t i = 0; i < nIn; ++i)
    {
        order[i] = i;
    }
    std::sort(order.begin(), order.end(),
              [&rs](uint32_t a, uint32_t b) { return rs.in[a].Key() < rs.in[b].Key(); });
    std::vector<InQueue> sorted;
    sorted.reserve(nIn);
    std::vector<uint32_t> where(nIn);
    for (uint32_t i = 0; i < nIn; ++i)
    {
        NS_ABORT_MSG_IF(i > 0 && rs.in[order[i]].Key() == sorted.back().Key(),
                        "collective plan: two in queues for one peer and channel");
        where[order[i]] = i;
        sorted.push_back(std::move(rs.in[order[i]]));
    }
    rs.in.swap(sorted);
    for (auto& d : rs.deps)
    {
        d.in = where[d.in];
    }
    // Waiters, in two passes (count, then fill) so the lists take exact room.
    std::vector<uint32_t> last(nIn, UINT32_MAX);
    rs.waitStart.assign(nIn + 1, 0);
    for (int pass = 0; pass < 2; ++pass)
    {
        std::vector<uint32_t> fill;
        if (pass == 1)
        {
            for (std::size_t i = 0; i < nIn; ++i)
            {
                rs.waitStart[i + 1] += rs.waitStart[i];
            }
            rs.waitList.resize(rs.waitStart.back());
            fill.assign(rs.waitStart.begin(), rs.waitStart.end() - 1);
            last.assign(nIn, UINT32_MAX);
        }
        for (uint32_t qi = 0; qi < rs.out.size(); ++qi)
        {
            const OutQueue& q = rs.out[qi];
            for (uint32_t o = q.opBegin; o < q.opBegin + q.nOps; ++o)
            {
                const SendOp& op = rs.ops[o];
                for (uint32_t d = op.depBegin; d < op.depBegin + op.nDeps; ++d)
                {
                    uint32_t in = rs.deps[d].in;
                    if (last[in] == qi)
                    {
                        continue;
                    }
                    last[in] = qi;
                    if (pass == 0)
                    {
                        ++rs.waitStart[in + 1];
                    }
                    else
                    {
                        rs.waitList[fill[in]++] = qi;
                    }
                }
            }
        }
    }
}

} // namespace metaroce
} // namespace ns3
