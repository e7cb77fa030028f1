#include "helper/mpi/distributed-run.h"

namespace ns3
{
namespace metaroce
{

namespace
{
DistributedRun* g_run = nullptr; // set once by the program before any run
} // namespace

DistributedRun*
CurrentDistributedRun()
{
    return g_run;
}

void
SetDistributedRun(DistributedRun* run)
{
    g_run = run;
}

} // namespace metaroce
} // namespace ns3
