// The distributed Fashion-MNIST example with one process per rank over TCP (Boost.Asio).
//
// On one machine, with the launcher (it sets each process's rank, the world size and the
// coordinator's address):
//   flotilla-launch -n 2 -- ./fashion_mnist_tcp --policy sync
//   flotilla-launch -n 3 -- ./fashion_mnist_tcp --policy async --servers 1   (2 workers, 1 server)
// On several machines, start one process per rank by hand with FLOTILLA_RANK, FLOTILLA_WORLD_SIZE,
// FLOTILLA_COORDINATOR=<rank 0's host>:<port> and FLOTILLA_BIND=<this host's address> (see
// docs/transports.md). Everything else is fashion_mnist_distributed.
#include <flotilla/transport/tcp.hpp>

#include "distributed_common.hpp"

int main(int argc, char** argv) {
  try {
    return example::run_example<flotilla::transport::Tcp>(argc, argv, "fashion_mnist_tcp",
                                                          flotilla::transport::Tcp::options::from_environment());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
