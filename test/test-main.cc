// Catch2 main: the simulator runs in picoseconds, as in metaroce-sim.
#define CATCH_CONFIG_RUNNER
#include "helper/fabric-helper.h"

#include <catch2/catch.hpp>

int
main(int argc, char* argv[])
{
    ns3::metaroce::UsePicosecondTime();
    return Catch::Session().run(argc, argv);
}
