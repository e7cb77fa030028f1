// The columns a run's record of each workload kind can carry (outputs.table checks against them).
#include "helper/scenario/result-columns.h"

#include <map>

namespace ns3
{
namespace metaroce
{

const std::vector<std::string>&
ResultColumns(const std::string& workloadKind)
{
    // Kept beside the code that fills the records (RunRaw, RunStreams, RunCollective, RunJob,
    // the watchdog's ended_by and RunWorld's fabric totals); the CLI test checks a run's
    // columns against it.
    static const std::vector<std::string> fabric = {
        "ended_by",        "max_switch_buffer_bytes", "drops_buffer",   "drops_no_route",
        "drops_link_down", "drops_corrupt",           "lost_in_flight", "ecn_marks",
        "pfc_pauses",      "pfc_ports_paused_at_end", "switch_forwards"};
    auto with = [](std::vector<std::string> own)
    {
        own.insert(own.end(), fabric.begin(), fabric.end());
        return own;
    };
    static const std::map<std::string, std::vector<std::string>> columns = {
        {"raw", with({"offered_goodput_gbps", "delivered_goodput_gbps", "delivery_ratio",
                      "mean_latency_us", "max_latency_us", "duration_us", "flows", "packets_sent",
                      "packets_delivered", "out_of_order"})},
        {"streams", with({"goodput_gbps",
                          "completion_us",
                          "msg_fct_mean_us",
                          "msg_fct_p50_us",
                          "msg_fct_p99_us",
                          "msg_fct_max_us",
                          "messages_completed",
                          "messages_total",
                          "bytes_completed",
                          "bytes_delivered",
                          "qps",
                          "qps_unfinished",
                          "data_packets_sent",
                          "retransmitted_packets",
                          "spurious_retransmissions",
                          "timeouts",
                          "acks",
                          "data_frame_wire_bytes",
                          "ack_frame_wire_bytes",
                          "naks",
                          "cnps",
                          "duplicate_packets",
                          "out_of_order_dropped",
                          "ecn_marked_received",
                          "victim_fct_us",
                          "paths_opened",
                          "paths_grown",
                          "losses_sack",
                          "losses_tail",
                          "losses_timeout",
                          "plane_failovers",
                          "plane_recoveries",
                          "max_active_paths",
                          "mean_qwnd_packets",
                          "plane_detection_us",
                          "goodput_median_bin_gbps",
                          "steady_goodput_gbps",
                          "goodput_before_fault_gbps",
                          "goodput_during_fault_gbps",
                          "goodput_after_recovery_gbps",
                          "peak_queue_bytes",
                          "queue_settle_us",
                          "steady_queue_bytes"})},
        {"collective", with({"size_bytes",
                             "count",
                             "op",
                             "type",
                             "redop",
                             "root",
                             "wrong",
                             "ranks",
                             "warmup_iterations",
                             "iterations",
                             "completed",
                             "algorithm",
                             "protocol",
                             "nccl_model_us",
                             "channels",
                             "time_us",
                             "algbw_gbytes_per_s",
                             "busbw_gbytes_per_s",
                             "rank_spread_us",
                             "wire_bytes_per_rank",
                             "messages",
                             "qps",
                             "retransmitted_packets",
                             "timeouts",
                             "data_packets_sent"})},
        {"job", with({"phase", "op", "bytes", "group_size", "groups", "algorithm",
                      "iterations_completed", "time_us", "fastest_group_us", "busbw_gbytes_per_s",
                      "iteration_us", "payload_bytes_posted", "iterations"})},
        {"trace", with({"collective",
                        "op",
                        "trace_name",
                        "replayed_as",
                        "bytes",
                        "group",
                        "group_size",
                        "instances",
                        "completed",
                        "algorithm",
                        "protocol",
                        "channels",
                        "nccl_model_us",
                        "time_us",
                        "start_us",
                        "recorded_us",
                        "ranks",
                        "iteration_us",
                        "recorded_iteration_us",
                        "steps",
                        "step_us",
                        "comm_us",
                        "exposed_comm_us",
                        "collectives_completed",
                        "collectives_total",
                        "timing",
                        "skipped_events",
                        "qps",
                        "retransmitted_packets",
                        "timeouts",
                        "data_packets_sent"})},
    };
    static const std::vector<std::string> none;
    auto it = columns.find(workloadKind);
    return it == columns.end() ? none : it->second;
}

} // namespace metaroce
} // namespace ns3
