/*
 * The module's simulator implementation and scheduler for a program of one's own: the same
 * event order as ns-3's defaults (so the same results), less work per event. A packet-level
 * run of a large fabric is several times faster with them (see FastSimulatorImpl and
 * BucketScheduler). Call before the first Simulator call.
 */
#ifndef METAROCE_FAST_SIMULATOR_H
#define METAROCE_FAST_SIMULATOR_H

namespace ns3
{
namespace metaroce
{

/// Selects FastSimulatorImpl and BucketScheduler (ns-3's SimulatorImplementationType and
/// SchedulerType global values).
void UseFastSimulator();

} // namespace metaroce
} // namespace ns3

#endif
