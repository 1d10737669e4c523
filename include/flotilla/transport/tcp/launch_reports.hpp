// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_LAUNCHREPORTS_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_LAUNCHREPORTS_HPP_INCLUDED
// What the ranks of a job started by flotilla-launch tell the launcher, and how it reads it.
//
// The launcher makes a directory of its own (mode 0700, under TMPDIR) and names it in
// FLOTILLA_LAUNCH_REPORTS. In it a rank writes
//   rank-<k>             when it fails: the rank whose failure ended it (its own, or the peer it
//                        learned it from). Ranks that fail because another did often exit
//                        before it; this is how the launcher still names the rank that failed first.
//   lost-<p>-by-<k>      when it declares peer p lost (its connection closed, or it went silent
//                        for the stall limit), whether the rank then fails or goes on without it.
//                        A stalled process never exits by itself: this is how the launcher learns
//                        that the job has given it up, names it, and ends it.
// The files are empty or hold one number; a rank writes them with plain system calls, without
// allocating beyond the path, since it may be failing for want of memory.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "flotilla/transport/tcp/socket.hpp"

namespace flotilla::transport::tcp::detail {

/// The launcher's report directory, when this process was started by flotilla-launch.
inline const char* launch_reports_dir() noexcept {
  const char* dir = std::getenv("FLOTILLA_LAUNCH_REPORTS");
  return dir != nullptr && *dir != '\0' ? dir : nullptr;
}

/// Records which rank's failure ended this one (rank-<rank> holds `culprit`).
inline void tcp_report_failure(std::size_t rank, std::size_t culprit) noexcept {
  try {
    const char* dir = launch_reports_dir();
    if (dir == nullptr) return;
    const std::string path = std::string(dir) + "/rank-" + std::to_string(rank);
    const Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd) return;
    const std::string text = std::to_string(culprit) + "\n";
    if (::write(fd.get(), text.data(), text.size()) < 0) return;
  } catch (...) {
  }
}

/// Records that `rank` has declared `peer` lost (lost-<peer>-by-<rank>).
inline void tcp_report_lost_peer(std::size_t rank, std::size_t peer) noexcept {
  try {
    const char* dir = launch_reports_dir();
    if (dir == nullptr) return;
    const std::string path = std::string(dir) + "/lost-" + std::to_string(peer) + "-by-" + std::to_string(rank);
    const Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  } catch (...) {
  }
}

/// The launcher's side: the directory, made at construction and removed with its contents at
/// destruction. Without one (mkdtemp failed) the job runs without reports.
class LaunchReports {
 public:
  LaunchReports() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/flotilla-launch-XXXXXX";
    if (::mkdtemp(templ.data()) != nullptr) path_ = templ;
  }
  LaunchReports(const LaunchReports&) = delete;
  LaunchReports& operator=(const LaunchReports&) = delete;
  ~LaunchReports() {
    if (path_.empty()) return;
    if (DIR* d = ::opendir(path_.c_str())) {
      while (const dirent* e = ::readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
          ::unlinkat(::dirfd(d), e->d_name, 0);
      ::closedir(d);
    }
    ::rmdir(path_.c_str());
  }
  const std::string& path() const noexcept { return path_; }

  /// The rank that rank k says failed first (itself, or the peer it learned it from), if it said
  /// and the number is one of the job's `ranks`.
  std::optional<std::size_t> culprit(std::size_t k, std::size_t ranks) const {
    if (path_.empty()) return std::nullopt;
    const Fd fd(::open((path_ + "/rank-" + std::to_string(k)).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return std::nullopt;
    char buf[32];
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    std::size_t v = 0;
    if (n <= 0) return std::nullopt;
    const auto [end, ec] = std::from_chars(buf, buf + n, v);
    if (ec != std::errc{} || end == buf || v >= ranks) return std::nullopt;
    return v;
  }

  /// Every (lost rank, declaring rank) pair reported so far, both below `ranks`.
  std::vector<std::pair<std::size_t, std::size_t>> losses(std::size_t ranks) const {
    std::vector<std::pair<std::size_t, std::size_t>> found;
    if (path_.empty()) return found;
    DIR* d = ::opendir(path_.c_str());
    if (d == nullptr) return found;
    while (const dirent* e = ::readdir(d)) {
      const std::string_view name(e->d_name);
      if (name.substr(0, 5) != "lost-") continue;
      const char* p = name.data() + 5;
      const char* end = name.data() + name.size();
      std::size_t lost = 0, by = 0;
      auto r = std::from_chars(p, end, lost);
      if (r.ec != std::errc{} || std::string_view(r.ptr, static_cast<std::size_t>(end - r.ptr)).substr(0, 4) != "-by-")
        continue;
      r = std::from_chars(r.ptr + 4, end, by);
      if (r.ec != std::errc{} || r.ptr != end || lost >= ranks || by >= ranks) continue;
      found.emplace_back(lost, by);
    }
    ::closedir(d);
    return found;
  }

 private:
  std::string path_;
};

}  // namespace flotilla::transport::tcp::detail
#endif  // FLOTILLA_TRANSPORT_TCP_LAUNCHREPORTS_HPP_INCLUDED
