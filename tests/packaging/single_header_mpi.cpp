// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The single header, then the MPI transport's separate header, in one translation unit (compiled,
// not run: a run needs mpirun). The trainer over the MPI transport is instantiated.
#include <flotilla.hpp>
#include <flotilla/transport/mpi.hpp>

namespace {
using Model = flotilla::Model<flotilla::Sequential<flotilla::Input<2>, flotilla::Dense<1>>, flotilla::MSE, flotilla::optim::SGD>;
[[maybe_unused]] void train_over_mpi(const flotilla::data::Dataset<float>& data) {
  flotilla::Trainer<Model, flotilla::policy::Synchronous<flotilla::topology::Ring>, flotilla::transport::Mpi> trainer;
  flotilla::FitOptions fit;
  trainer.fit(data, nullptr, fit);
}
}  // namespace
