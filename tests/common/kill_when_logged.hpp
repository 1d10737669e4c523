// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
// For tests that kill a training process mid-run: the process kills itself with SIGKILL (no
// handler, no cleanup: as kill -9 from outside) from a thread of its own, once its step log
// (FitOptions::step_log_file) shows a given number of steps.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace flotilla_test {

/// The steps written so far to a step log (JSON lines; 0 while it does not exist).
inline std::size_t logged_steps(const std::filesystem::path& log) {
  std::ifstream in(log);
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line)) n += line.find("\"step\":") != std::string::npos ? 1 : 0;
  return n;
}

/// Starts a detached thread that kills this process once `log` shows `steps` steps.
inline void kill_self_when_logged(std::filesystem::path log, std::size_t steps) {
  std::thread([log = std::move(log), steps] {
    for (;;) {
      if (logged_steps(log) >= steps) ::kill(::getpid(), SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }).detach();
}

}  // namespace flotilla_test
