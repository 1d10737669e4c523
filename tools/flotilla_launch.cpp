// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla-launch: starts the ranks of a flotilla TCP job on this machine. The launching itself is
// the library's (flotilla/transport/tcp/launch.hpp: launch(), run_job()), so that programs and
// tests can start jobs themselves; the command line is launch_command_line.hpp. What only a
// program may do stays here: the signal handlers, which turn SIGINT/SIGTERM/SIGHUP into a stop of
// the whole job.
#include <signal.h>

#include <csignal>
#include <exception>
#include <iostream>

#include "launch_command_line.hpp"

namespace {

volatile std::sig_atomic_t interrupted = 0;
extern "C" void on_signal(int) { interrupted = 1; }

}  // namespace

int main(int argc, char** argv) {
  try {
    auto o = flotilla_launch::parse_args(argc, argv);
    if (!o) {
      std::cout << flotilla_launch::usage;
      return 0;
    }
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(s, &sa, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    o->interrupted = &interrupted;
    return flotilla::transport::tcp::run_job(*o).exit_code();
  } catch (const flotilla::ConfigError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "flotilla-launch: " << e.what() << "\n";
    return 2;
  }
}
