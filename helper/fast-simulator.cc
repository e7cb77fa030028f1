#include "helper/fast-simulator.h"

#include "model/core/bucket-scheduler.h"
#include "model/core/fast-simulator-impl.h"

#include "ns3/global-value.h"
#include "ns3/string.h"

namespace ns3
{
namespace metaroce
{

void
UseFastSimulator()
{
    GlobalValue::Bind("SimulatorImplementationType",
                      StringValue(FastSimulatorImpl::GetTypeId().GetName()));
    GlobalValue::Bind("SchedulerType", StringValue(BucketScheduler::GetTypeId().GetName()));
}

} // namespace metaroce
} // namespace ns3
