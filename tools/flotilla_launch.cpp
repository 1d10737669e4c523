// flotilla-launch: starts the ranks of a flotilla TCP job on this machine. All of it lives in
// flotilla/transport/tcp_launch.hpp (launch_main), so that programs can launch jobs themselves.
#include "flotilla/transport/tcp_launch.hpp"

int main(int argc, char** argv) { return flotilla::transport::launch_main(argc, argv); }
