// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_HOSTIDENTITY_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_HOSTIDENTITY_HPP_INCLUDED
// Which processes of a TCP job share a host, for the shared-memory sums (host_allreduce.hpp).
// Two processes can share a segment when they see the same /dev/shm; ranks that flotilla takes
// for one host must also share one network stack, so that what the job's links carry is what it
// expects. The identity is the host name, the kernel's boot ID (distinct for every boot of every
// machine) and the inode of the network namespace: processes in one container or on one machine
// agree on all three, while containers with a network of their own, or the emulated hosts of
// scripts/cluster.sh, differ in the last. Where /proc cannot be read, the host name alone.
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <string>

namespace flotilla::transport::tcp::detail {

/// This process's host, as a word without spaces: "<host name>/<boot ID>/net:<inode>".
inline std::string host_identity() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) name[0] = '\0';
  std::string id(name.data());
  if (id.empty()) id = "unnamed";
  std::string boot;
  if (std::ifstream f("/proc/sys/kernel/random/boot_id"); f) std::getline(f, boot);
  if (!boot.empty()) id += "/" + boot;
  struct stat net {};
  if (::stat("/proc/self/ns/net", &net) == 0) id += "/net:" + std::to_string(static_cast<unsigned long long>(net.st_ino));
  for (char& c : id)
    if (c == ' ' || c == '\t' || c == '\n') c = '_';
  return id;
}

}  // namespace flotilla::transport::tcp::detail
#endif  // FLOTILLA_TRANSPORT_TCP_HOSTIDENTITY_HPP_INCLUDED
