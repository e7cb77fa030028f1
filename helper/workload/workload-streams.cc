// The streams workload: RDMA messages over QPs of a traffic pattern.
#include "helper/mpi/distributed-run.h"
#include "helper/run/run-context.h"
#include "helper/run/run-supervisor.h"
#include "model/metaroce/metaroce-queue-pair.h"
#include "model/workload/rdma-message-source.h"

#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>
#include <tuple>
#include <vector>

namespace ns3
{
namespace metaroce
{

namespace
{
/// On several processes: joins the receivers' completions (QP, stream, seq, ps) with the
/// senders' post times into every message's completion time, and sums the senders' QWNDs
/// in QP order, as one process does.
void
CombineStreams(DistributedRun& d, std::size_t nqps,
               const std::function<Ptr<RdmaMessageSource>(std::size_t)>& app,
               const std::vector<int64_t>& arrivals, const std::vector<int64_t>& windows,
               std::vector<double>& fctUs, double& qwndSum)
{
    std::vector<int64_t> posts;
    for (std::size_t i = 0; i < nqps; ++i)
    {
        if (Ptr<RdmaMessageSource> a = app(i))
        {
            for (const auto& [key, ps] : a->PostedTimes())
            {
                posts.insert(posts.end(), {static_cast<int64_t>(i), key.first, key.second, ps});
            }
        }
    }
    auto key = [](int64_t qp, int64_t stream, int64_t seq)
    { return std::make_tuple(qp, stream, seq); };
    std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> postedAt;
    const std::vector<int64_t> allPosts = d.Gather(posts);
    for (std::size_t k = 0; k + 3 < allPosts.size(); k += 4)
    {
        postedAt[key(allPosts[k], allPosts[k + 1], allPosts[k + 2])] = allPosts[k + 3];
    }
    const std::vector<int64_t> all = d.Gather(arrivals);
    for (std::size_t k = 0; k + 3 < all.size(); k += 4)
    {
        auto it = postedAt.find(key(all[k], all[k + 1], all[k + 2]));
        if (it != postedAt.end())
        {
            fctUs.push_back((all[k + 3] - it->second) / 1e6);
        }
    }
    std::vector<int64_t> w = d.Gather(windows);
    std::map<int64_t, double> byQp;
    for (std::size_t k = 0; k + 1 < w.size(); k += 2)
    {
        double v;
        std::memcpy(&v, &w[k + 1], sizeof(v));
        byQp[w[k]] = v;
    }
    qwndSum = 0;
    for (const auto& [qp, v] : byQp)
    {
        qwndSum += v;
    }
}
} // namespace

/// RDMA streams over a transport.
void
RunStreams(const RunSpec& spec, Fabric& fabric, int64_t& stream, ProgressReporter& progress,
           RunRecord& rec)
{
    const StreamsWorkloadSpec& w = spec.streams;
    const TransportSpec& t = spec.transport;
    TransportSetup setup(t, fabric, stream);
    RdmaHelper& rdma = setup.rdma;
    // On several processes each process makes the QP ends and message sources of its NICs;
    // receivers note completions, joined with the senders' post times after the run.
    DistributedRun* several = SeveralProcesses();
    if (several != nullptr)
    {
        rdma.SetLocalNics([&fabric](uint32_t nic) { return IsLocal(fabric.Host(nic)); });
    }
    FastRng rng(static_cast<uint64_t>(stream++));
    auto flows = PatternFlows(w.who, fabric.NumNics(), rng);
    if (w.bidirectional)
    {
        std::size_t n = flows.size();
        for (std::size_t i = 0; i < n; ++i)
        {
            flows.emplace_back(flows[i].second, flows[i].first);
        }
    }

    struct QpRun
    {
        Ptr<QueuePair> tx;
        Ptr<QueuePair> rx;
        Ptr<RdmaMessageSource> app; //!< posts the QP's messages, on the sender's host
        uint32_t src{0};
        uint32_t dst{0};
        int64_t lastDonePs{-1};
    };

    std::vector<QpRun> qps;
    qps.reserve(flows.size() * w.qpsPerFlow);
    std::vector<double> fctUs;
    //! on several processes: (QP, stream, seq, completion ps) of each message received here
    std::vector<int64_t> arrivals;
    uint64_t completed = 0;
    int64_t lastDonePs = 0;
    const uint64_t total = flows.size() * w.qpsPerFlow * w.messagesPerQp;
    const int64_t startPs = static_cast<int64_t>(w.startUs * 1e6);
    // Each QP's messages come from an application on its sender's host, started with the
    // workload.
    auto Source = [&fabric, startPs](Ptr<QueuePair> qp, uint32_t host, uint64_t bytes,
                                     uint64_t messages, uint32_t outstanding, uint32_t streams)
    {
        Ptr<RdmaMessageSource> app = CreateObject<RdmaMessageSource>();
        app->SetAttribute("MessageBytes", UintegerValue(bytes));
        app->SetAttribute("MaxMessages", UintegerValue(messages));
        app->SetAttribute("Outstanding", UintegerValue(outstanding));
        app->SetAttribute("Streams", UintegerValue(streams));
        app->SetQueuePair(qp);
        app->SetStartTime(PicoSeconds(startPs));
        fabric.Host(host)->AddApplication(app);
        return app;
    };
    for (const auto& [src, dst] : flows)
    {
        for (uint32_t q = 0; q < w.qpsPerFlow; ++q)
        {
            auto [a, b] = rdma.Connect(src, dst);
            qps.push_back(QpRun{a, b, nullptr, src, dst, -1});
        }
    }
    // Messages whose receiver is simulated here (all of them on one process).
    uint64_t localTotal = 0;
    // The victim: one message beside the pattern's traffic.
    int64_t victimDonePs = -1;
    bool victimPending = false;
    if (w.victim)
    {
        auto [a, b] = rdma.Connect(w.victimSrc, w.victimDst);
        if (b)
        {
            victimPending = true;
            b->SetReceiveHandler(
                [&](const RdmaCompletion& c)
                {
                    victimDonePs = c.completedPs;
                    victimPending = false;
                    if (completed == localTotal && several == nullptr)
                    {
                        Simulator::Stop();
                    }
                });
        }
        if (a)
        {
            Source(a, w.victimSrc, w.victimBytes, 1, 1, 1);
        }
    }
    for (auto& r : qps)
    {
        if (r.tx)
        {
            r.app = Source(r.tx, r.src, w.messageBytes, w.messagesPerQp, w.outstandingPerQp,
                           w.streamsPerQp);
        }
    }
    for (std::size_t i = 0; i < qps.size(); ++i)
    {
        if (!qps[i].rx)
        {
            continue;
        }
        localTotal += w.messagesPerQp;
        qps[i].rx->SetReceiveHandler(
            [&, i](const RdmaCompletion& c)
            {
                if (several != nullptr)
                {
                    arrivals.insert(arrivals.end(),
                                    {static_cast<int64_t>(i), c.stream, c.seq, c.completedPs});
                }
                else
                {
                    int64_t postedPs = qps[i].app->TakePostedPs(c.stream, c.seq);
                    if (postedPs >= 0)
                    {
                        fctUs.push_back((c.completedPs - postedPs) / 1e6);
                    }
                }
                ++completed;
                qps[i].lastDonePs = c.completedPs;
                lastDonePs = std::max(lastDonePs, c.completedPs);
                if (completed == localTotal && !victimPending && several == nullptr)
                {
                    Simulator::Stop(); // done: timers still pending need not run
                }
            });
    }

    // Optional time series: delivered throughput, and for an incast the bytes queued towards
    // the target (every plane's last hop).
    struct Sample
    {
        double timeUs;
        double goodputGbps;
        uint64_t queueBytes;
        double qwndPackets; //!< MetaRoCE: mean QWND (sum of path windows) over the QPs
        double activePaths; //!< MetaRoCE: mean active paths per QP
    };

    std::vector<Sample> series;
    nlohmann::json pathRows = nlohmann::json::array();
    uint64_t lastBytes = 0;
    std::vector<FabricNetDevice*> lastHops;
    if (w.who.pattern == "incast")
    {
        for (uint32_t p = 0; p < fabric.NumPlanes(); ++p)
        {
            lastHops.push_back(fabric.HostPort(w.who.incastTarget, p)->GetPeer());
        }
    }
    std::function<void()> sample = [&]()
    {
        uint64_t bytes = 0;
        for (const auto& r : qps)
        {
            bytes += r.rx->GetCounters().bytesDelivered;
        }
        uint64_t q = 0;
        for (auto* d : lastHops)
        {
            q += d->GetQueueBytes();
        }
        double qwnd = 0;
        double paths = 0;
        uint32_t meta = 0;
        for (const auto& r : qps)
        {
            if (auto m = DynamicCast<MetaRoceQueuePair>(r.tx))
            {
                qwnd += m->GetQpWindowBytes() / m->GetMtu();
                paths += m->GetActivePaths();
                ++meta;
            }
        }
        series.push_back({static_cast<double>(Simulator::Now().GetNanoSeconds()) / 1e3,
                          (bytes - lastBytes) * 8.0 / (spec.timeseriesBinUs * 1e3), q,
                          meta ? qwnd / meta : 0.0, meta ? paths / meta : 0.0});
        // Every path of the first QP (MetaRoCE): its window, bytes in flight and RTT.
        if (auto m = qps.empty() ? nullptr : DynamicCast<MetaRoceQueuePair>(qps[0].tx))
        {
            for (uint32_t i = 0; i < m->GetNPathSlots(); ++i)
            {
                auto pv = m->GetPath(i);
                if (pv.state == MetaRoceQueuePair::PATH_RETIRED)
                {
                    continue;
                }
                pathRows.push_back({{"time_us", series.back().timeUs},
                                    {"path", i},
                                    {"plane", pv.plane},
                                    {"entropy", pv.entropy},
                                    {"cwnd_packets", pv.cwndBytes / m->GetMtu()},
                                    {"inflight_packets", pv.inflightBytes / m->GetMtu()},
                                    {"srtt_us", pv.srttPs / 1e6}});
            }
        }
        lastBytes = bytes;
        if (completed < total)
        {
            Simulator::Schedule(MicroSeconds(1) * spec.timeseriesBinUs, sample);
        }
    };
    if (spec.timeseriesBinUs > 0)
    {
        Simulator::Schedule(MicroSeconds(1) * spec.timeseriesBinUs, sample);
    }

    Time limit = MicroSeconds(1) * spec.durationUs;
    RunSupervisor supervisor(spec, fabric, &setup.nics, PicoSeconds(startPs));
    supervisor.Run(progress, limit, [&]() { return completed == localTotal && !victimPending; });

    // Metrics: rates cover completed messages only, from the workload's start to the last
    // completion; bytes of unfinished messages are counted apart (bytes_delivered).
    uint64_t bytes = 0;
    QueuePair::Counters sum;
    uint64_t stuck = 0;
    MetaRoceQueuePair::PathCounters pc;
    uint64_t maxActivePaths = 0;
    double qwndSum = 0;
    uint64_t metaQps = 0;
    //! on several processes: (QP, QWND bits) of each MetaRoCE sender here, summed in QP
    //! order after the run as one process sums them
    std::vector<int64_t> windows;
    for (std::size_t i = 0; i < qps.size(); ++i)
    {
        const QpRun& r = qps[i];
        if (r.rx)
        {
            const auto& d = r.rx->GetCounters();
            bytes += d.bytesDelivered;
            sum.acksSent += d.acksSent;
            sum.naksSent += d.naksSent;
            sum.cnpsSent += d.cnpsSent;
            sum.duplicatePackets += d.duplicatePackets;
            sum.outOfOrderDropped += d.outOfOrderDropped;
            sum.ecnMarkedReceived += d.ecnMarkedReceived;
            // (the run stops at the last receiver completion: the last ACKs may be in flight)
            stuck += d.messagesReceived < w.messagesPerQp ? 1 : 0;
        }
        if (!r.tx)
        {
            continue;
        }
        const auto& c = r.tx->GetCounters();
        sum.retransmittedPackets += c.retransmittedPackets;
        sum.spuriousRetransmissions += c.spuriousRetransmissions;
        sum.timeouts += c.timeouts;
        sum.dataPacketsSent += c.dataPacketsSent;
        if (auto m = DynamicCast<MetaRoceQueuePair>(r.tx))
        {
            if (several != nullptr)
            {
                double qwnd = m->GetQpWindowBytes();
                int64_t bits;
                std::memcpy(&bits, &qwnd, sizeof(bits));
                windows.insert(windows.end(), {static_cast<int64_t>(i), bits});
            }
            const auto& p = m->GetPathCounters();
            pc.pathsOpened += p.pathsOpened;
            pc.pathsGrown += p.pathsGrown;
            pc.lossesDetected += p.lossesDetected;
            pc.lossesTail += p.lossesTail;
            pc.lossesTimeout += p.lossesTimeout;
            pc.planeFailovers += p.planeFailovers;
            pc.planeRecoveries += p.planeRecoveries;
            pc.lastPlaneAvoidedPs = std::max(pc.lastPlaneAvoidedPs, p.lastPlaneAvoidedPs);
            // the slowest QP's first detection
            pc.firstPlaneAvoidedPs = std::max(pc.firstPlaneAvoidedPs, p.firstPlaneAvoidedPs);
            pc.lastPlaneRecoveredPs = std::max(pc.lastPlaneRecoveredPs, p.lastPlaneRecoveredPs);
            maxActivePaths = std::max<uint64_t>(maxActivePaths, m->GetActivePaths());
            qwndSum += m->GetQpWindowBytes();
            ++metaQps;
        }
    }
    if (several != nullptr)
    {
        CombineStreams(
            *several, qps.size(), [&](std::size_t i) { return qps[i].app; }, arrivals, windows,
            fctUs, qwndSum);
        std::vector<uint64_t> sums{completed,
                                   bytes,
                                   stuck,
                                   sum.retransmittedPackets,
                                   sum.spuriousRetransmissions,
                                   sum.timeouts,
                                   sum.dataPacketsSent,
                                   sum.acksSent,
                                   sum.naksSent,
                                   sum.cnpsSent,
                                   sum.duplicatePackets,
                                   sum.outOfOrderDropped,
                                   sum.ecnMarkedReceived,
                                   pc.pathsOpened,
                                   pc.pathsGrown,
                                   pc.lossesDetected,
                                   pc.lossesTail,
                                   pc.lossesTimeout,
                                   pc.planeFailovers,
                                   pc.planeRecoveries,
                                   metaQps,
                                   victimPending ? 1u : 0u};
        std::vector<int64_t> maxima{lastDonePs,
                                    victimDonePs,
                                    static_cast<int64_t>(maxActivePaths),
                                    pc.lastPlaneAvoidedPs,
                                    pc.firstPlaneAvoidedPs,
                                    pc.lastPlaneRecoveredPs};
        several->Sum(sums);
        several->Max(maxima);
        std::size_t k = 0;
        for (uint64_t* x : {&completed,
                            &bytes,
                            &stuck,
                            &sum.retransmittedPackets,
                            &sum.spuriousRetransmissions,
                            &sum.timeouts,
                            &sum.dataPacketsSent,
                            &sum.acksSent,
                            &sum.naksSent,
                            &sum.cnpsSent,
                            &sum.duplicatePackets,
                            &sum.outOfOrderDropped,
                            &sum.ecnMarkedReceived,
                            &pc.pathsOpened,
                            &pc.pathsGrown,
                            &pc.lossesDetected,
                            &pc.lossesTail,
                            &pc.lossesTimeout,
                            &pc.planeFailovers,
                            &pc.planeRecoveries,
                            &metaQps})
        {
            *x = sums[k++];
        }
        victimPending = sums[k] > 0;
        lastDonePs = maxima[0];
        victimDonePs = maxima[1];
        maxActivePaths = static_cast<uint64_t>(maxima[2]);
        pc.lastPlaneAvoidedPs = maxima[3];
        pc.firstPlaneAvoidedPs = maxima[4];
        pc.lastPlaneRecoveredPs = maxima[5];
    }
    std::sort(fctUs.begin(), fctUs.end());
    double spanUs = (lastDonePs - startPs) / 1e6;
    double mean =
        fctUs.empty() ? 0 : std::accumulate(fctUs.begin(), fctUs.end(), 0.0) / fctUs.size();
    const uint64_t completedBytes = completed * w.messageBytes;
    rec.metrics = {
        {"goodput_gbps", spanUs > 0 ? completedBytes * 8.0 / (spanUs * 1e3) : 0.0},
        {"completion_us", spanUs},
        {"msg_fct_mean_us", mean},
        {"msg_fct_p50_us", Percentile(fctUs, 0.5)},
        {"msg_fct_p99_us", Percentile(fctUs, 0.99)},
        {"msg_fct_max_us", fctUs.empty() ? 0.0 : fctUs.back()},
        {"messages_completed", completed},
        {"messages_total", total},
        {"bytes_completed", completedBytes},
        {"bytes_delivered", bytes},
    };
    rec.counters = {
        {"qps", qps.size()},
        {"qps_unfinished", stuck},
        {"data_packets_sent", sum.dataPacketsSent},
        {"retransmitted_packets", sum.retransmittedPackets},
        {"spurious_retransmissions", sum.spuriousRetransmissions},
        {"timeouts", sum.timeouts},
        {"acks", sum.acksSent},
        {"naks", sum.naksSent},
        {"cnps", sum.cnpsSent},
        {"duplicate_packets", sum.duplicatePackets},
        {"out_of_order_dropped", sum.outOfOrderDropped},
        {"ecn_marked_received", sum.ecnMarkedReceived},
    };
    if (spec.flowsOutput)
    {
        // Per-flow completion: the QP's last message received, from the workload's start.
        nlohmann::json flows = nlohmann::json::array();
        for (const auto& r : qps)
        {
            flows.push_back({{"src", r.src},
                             {"dst", r.dst},
                             {"bytes", r.rx->GetCounters().bytesDelivered},
                             {"fct_us", r.lastDonePs < 0 ? -1.0 : (r.lastDonePs - startPs) / 1e6}});
        }
        rec.flows = flows;
    }
    // The MTU of the run's QPs (on several processes the first QP may be another's).
    const uint32_t mtu = qps.empty() ? 0
                         : qps[0].tx ? qps[0].tx->GetMtu()
                                     : rdma.QpFactory().Create()->GetMtu();
    if (!qps.empty())
    {
        // What a full data frame and an ACK take on the wire: with the ACK count, the share of
        // a link that ACKs take from data coming the other way.
        bool meta = metaQps > 0;
        rec.counters["data_frame_wire_bytes"] = FrameWireBytes(
            RdmaHeader::SizeOf(meta ? RdmaOpcode::PathData : RdmaOpcode::Data) + mtu);
        rec.counters["ack_frame_wire_bytes"] =
            FrameWireBytes(RdmaHeader::SizeOf(meta ? RdmaOpcode::PathAck : RdmaOpcode::Ack));
    }
    if (w.victim)
    {
        rec.metrics["victim_fct_us"] = victimDonePs < 0 ? -1.0 : (victimDonePs - startPs) / 1e6;
    }
    if (metaQps > 0)
    {
        rec.counters["paths_opened"] = pc.pathsOpened;
        rec.counters["paths_grown"] = pc.pathsGrown;
        // Data packets found lost, by how: a SACK gap, the tail-loss rule, a path's timeout.
        rec.counters["losses_sack"] = pc.lossesDetected;
        rec.counters["losses_tail"] = pc.lossesTail;
        rec.counters["losses_timeout"] = pc.lossesTimeout;
        rec.counters["plane_failovers"] = pc.planeFailovers;
        rec.counters["plane_recoveries"] = pc.planeRecoveries;
        rec.metrics["max_active_paths"] = maxActivePaths;
        rec.metrics["mean_qwnd_packets"] = qwndSum / metaQps / mtu;
        for (const auto& f : spec.faults)
        {
            if (f.kind == "plane_down" && pc.firstPlaneAvoidedPs >= 0)
            {
                rec.metrics["plane_detection_us"] = pc.firstPlaneAvoidedPs / 1e6 - f.atUs;
            }
        }
    }
    if (!series.empty())
    {
        nlohmann::json ts = nlohmann::json::array();
        for (const auto& x : series)
        {
            nlohmann::json row = {{"time_us", x.timeUs}, {"goodput_gbps", x.goodputGbps}};
            if (spec.transport.kind == "metaroce")
            {
                row["qwnd_packets"] = x.qwndPackets;
                row["active_paths"] = x.activePaths;
            }
            if (!lastHops.empty())
            {
                row["queue_bytes"] = x.queueBytes;
            }
            ts.push_back(row);
        }
        rec.timeseries = ts;
        if (!pathRows.empty())
        {
            rec.paths = pathRows;
        }
        std::vector<double> bins;
        for (const auto& x : series)
        {
            bins.push_back(x.goodputGbps);
        }
        std::sort(bins.begin(), bins.end());
        rec.metrics["goodput_median_bin_gbps"] = Percentile(bins, 0.5);
        if (spec.steadyFromUs >= 0)
        {
            // Steady state: long-lived connections measured after their warm-up.
            double sum = 0;
            int n = 0;
            for (const auto& x : series)
            {
                if (x.timeUs - spec.timeseriesBinUs >= spec.steadyFromUs)
                {
                    sum += x.goodputGbps;
                    ++n;
                }
            }
            rec.metrics["steady_goodput_gbps"] = n ? sum / n : 0.0;
        }
        // Throughput around a plane outage: before it, in its second half (settled), and
        // after recovery once the first bins have passed.
        for (const auto& f : spec.faults)
        {
            if (f.kind != "plane_down" || f.untilUs < 0)
            {
                continue;
            }
            auto mean = [&](double from, double to)
            {
                double sum = 0;
                int n = 0;
                for (const auto& x : series)
                {
                    if (x.timeUs - spec.timeseriesBinUs >= from && x.timeUs <= to)
                    {
                        sum += x.goodputGbps;
                        ++n;
                    }
                }
                return n ? sum / n : 0.0;
            };
            double end = series.back().timeUs;
            rec.metrics["goodput_before_fault_gbps"] = mean(w.startUs + 200, f.atUs);
            rec.metrics["goodput_during_fault_gbps"] = mean((f.atUs + f.untilUs) / 2, f.untilUs);
            rec.metrics["goodput_after_recovery_gbps"] = mean((f.untilUs + end) / 2, end);
        }
        if (!lastHops.empty())
        {
            // Incast: the peak queue at the last hop, and when it settled for good (below a
            // tenth of its peak and never again above a fifth).
            uint64_t peak = 0;
            std::size_t peakAt = 0;
            for (std::size_t i = 0; i < series.size(); ++i)
            {
                if (series[i].queueBytes > peak)
                {
                    peak = series[i].queueBytes;
                    peakAt = i;
                }
            }
            double settle = -1;
            for (std::size_t i = peakAt; i < series.size(); ++i)
            {
                bool stays = true;
                for (std::size_t k = i; k < series.size() && stays; ++k)
                {
                    stays = series[k].queueBytes * 5 <= peak;
                }
                if (series[i].queueBytes * 10 <= peak && stays)
                {
                    settle = series[i].timeUs - w.startUs;
                    break;
                }
            }
            double tail = 0;
            std::size_t n = 0;
            for (std::size_t i = series.size() / 2; i < series.size(); ++i)
            {
                tail += series[i].queueBytes;
                ++n;
            }
            rec.metrics["peak_queue_bytes"] = peak;
            rec.metrics["queue_settle_us"] = settle;
            rec.metrics["steady_queue_bytes"] = n ? tail / n : 0.0;
        }
    }
    std::ostringstream left;
    left << total - completed << " of " << total << " messages unfinished"
         << (victimPending ? " and the victim message" : "") << " (" << stuck << " of "
         << qps.size() << " QPs)";
    supervisor.Finish(rec, left.str());
}

} // namespace metaroce
} // namespace ns3
