#pragma once
// The transport of a test program built once per process backend: FLOTILLA_TEST_TCP or
// FLOTILLA_TEST_MPI picks it, and backend_options() gives the options every rank starts with.
#if defined(FLOTILLA_TEST_TCP)
#include "flotilla/transport/tcp.hpp"
namespace flotilla_test {
using Backend = flotilla::transport::Tcp;
inline Backend::options backend_options() { return Backend::options::from_environment(); }
}  // namespace flotilla_test
#elif defined(FLOTILLA_TEST_MPI)
#include "flotilla/transport/mpi.hpp"
namespace flotilla_test {
using Backend = flotilla::transport::Mpi;
inline Backend::options backend_options() { return {}; }
}  // namespace flotilla_test
#else
#error "define FLOTILLA_TEST_TCP or FLOTILLA_TEST_MPI"
#endif
