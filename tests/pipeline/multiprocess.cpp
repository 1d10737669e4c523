// A pipelined step over processes computes one worker's gradients: every rank of a job started by
// flotilla-launch (TCP) or mpirun (MPI) runs this program, builds its stage of a D x P layout, and
// compares its gradient slice with the whole network's, which it computes itself on the whole batch.
//
//   flotilla-launch -n <D*P> -- flotilla_pipeline_tcp <P> <D> <1f1b|gpipe> <M>
//   mpirun -n <D*P> flotilla_pipeline_mpi <P> <D> <1f1b|gpipe> <M>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "../common/blobs.hpp"
#include "flotilla/flotilla.hpp"
#include "../common/process_backend.hpp"
using flotilla_test::Backend;
using flotilla_test::backend_options;

using namespace flotilla;
namespace pl = flotilla::pipeline;
using Net = Sequential<Input<1, 6, 6>, Conv2D<3, 3>, ReLU, MaxPool2D<2>, Flatten, Dense<10>, Tanh, Dropout<10>, Dense<3>>;
using M = Model<Net, SoftmaxCrossEntropy, optim::SGD, double>;

int main(int argc, char** argv) {
  try {
    if (argc != 5) throw ConfigError("usage: flotilla_pipeline_<tcp|mpi> <stages> <replicas> <1f1b|gpipe> <micro-batches>");
    const std::size_t P = std::stoul(argv[1]), D = std::stoul(argv[2]), micro = std::stoul(argv[4]);
    const auto schedule = std::string(argv[3]) == "gpipe" ? pl::Schedule::fill_drain : pl::Schedule::one_forward_one_backward;
    const std::size_t n = 13;  // uneven over replicas and micro-batches
    const std::uint64_t seed = 23;
    const auto d = flotilla_test::blobs<double>(n, 11);
    std::vector<std::uint64_t> ids(n);
    std::iota(ids.begin(), ids.end(), std::uint64_t{0});

    // The whole network, the whole batch.
    Network<Net, double> net;
    std::vector<double> p(Network<Net, double>::parameter_count), g(p.size(), 0.0);
    net.initialize(p, seed);
    const auto out = net.forward(ConstMatrixView<double>(d.inputs.data(), 36, static_cast<Eigen::Index>(n)), p,
                                 RunInfo{Mode::train, ids, seed, 0});
    Matrix<double> dout(out.rows(), out.cols());
    MatrixView<double> gv(dout.data(), dout.rows(), dout.cols());
    SoftmaxCrossEntropy::value_and_gradient(out, Targets<double>{d.labels}, gv, 1.0 / static_cast<double>(n));
    net.backward(ConstMatrixView<double>(dout.data(), dout.rows(), dout.cols()), p, g);

    int status = 0;
    Backend::run(backend_options(), P * D, [&](Backend::endpoint& e) {
      pl::Runner<M, Backend::endpoint> r(e, pl::Plan::automatic<Net, double>(P),
                                              {.schedule = schedule, .micro_batches = micro, .max_batch = n, .replicas = D, .seed = seed});
      const auto [first, end] = flotilla::detail::split_range(n, D, r.replica());
      const data::Batch<double> b{ConstMatrixView<double>(d.inputs.data() + 36 * first, 36, static_cast<Eigen::Index>(end - first)),
                                  Targets<double>{std::span<const std::int32_t>(d.labels).subspan(first, end - first)},
                                  std::span<const std::uint64_t>(ids).subspan(first, end - first), 0, 0, n};
      r.compute_gradients(b);
      double diff = 0, norm = 0;
      for (std::size_t i = 0; i < r.gradients().size(); ++i) {
        diff = std::max(diff, std::abs(r.gradients()[i] - g[r.parameter_offset() + i]));
        norm = std::max(norm, std::abs(g[r.parameter_offset() + i]));
      }
      std::printf("rank %zu (replica %zu, stage %zu of %zu, %s, M=%zu): max |difference| / max |gradient| = %.3g\n", e.rank(),
                  r.replica(), r.stage(), P, std::string(pl::name(schedule)).c_str(), micro, norm > 0 ? diff / norm : diff);
      status = diff <= 1e-12 * norm ? 0 : 1;  // a stage without parameters has none to differ
    });
    return status;
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "error: %s\n", ex.what());
    return 1;
  }
}
