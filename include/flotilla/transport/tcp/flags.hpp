// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_FLAGS_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_FLAGS_HPP_INCLUDED
// The TCP settings as command-line flags (Flags): one flag per environment variable of
// options.hpp, read through the same checks.
#include <optional>
#include <string>

#include "flotilla/cli/flags.hpp"
#include "flotilla/transport/tcp/options.hpp"

namespace flotilla::transport::tcp {

/// The TCP settings as command-line flags of a cli::Flags, each falling back to its environment
/// variable: --rank, --world-size, --coordinator, --bind, --timeout-ms, --connect-timeout-ms,
/// --socket-buffer, --secret-file, --heartbeat-ms, --checksum-data, --frame-mac, --shared-memory, --spin-us, --rejoin. (The secret
/// itself has no flag: a command line is visible to every user of the machine. FLOTILLA_SECRET still applies.)
///
///   cli::Flags flags("train", "...");
///   transport::TcpFlags tcp(flags);
///   if (!flags.parse(argc, argv, std::cout)) return 0;
///   transport::Tcp::run(tcp.options(), 4, body);
class Flags {
 public:
  explicit Flags(cli::Flags& flags)
      : rank_(flags.add<std::string>("rank", "", "this process's rank, 0 to world-size - 1", "FLOTILLA_RANK")),
        world_size_(flags.add<std::string>("world-size", "", "the number of processes in the job (unset: 1)",
                                           "FLOTILLA_WORLD_SIZE")),
        coordinator_(flags.add<std::string>("coordinator", "",
                                            "host:port where rank 0 listens for the others to register",
                                            "FLOTILLA_COORDINATOR")),
        bind_(flags.add<std::string>("bind", "127.0.0.1",
                                     "the address this rank listens on (0.0.0.0: every interface)", "FLOTILLA_BIND")),
        timeout_(flags.add<std::string>("timeout-ms", "30000", "the longest any transport wait may last, in ms",
                                        "FLOTILLA_TIMEOUT_MS")),
        connect_timeout_(flags.add<std::string>("connect-timeout-ms", "30000",
                                                "how long the rendezvous of the ranks may take, in ms",
                                                "FLOTILLA_CONNECT_TIMEOUT_MS")),
        socket_buffer_(flags.add<std::string>("socket-buffer", "0",
                                              "socket buffer size in bytes (0: the kernel's automatic tuning)",
                                              "FLOTILLA_SOCKET_BUFFER")),
        unsent_limit_(flags.add<std::string>("unsent-limit", "131072",
                                             "a send returns once at most this many of its bytes wait unsent in the kernel "
                                             "(0: the kernel's limit)",
                                             "FLOTILLA_UNSENT_LIMIT")),
        read_while_sending_(flags.add<std::string>("read-while-sending", "1",
                                                   "1: a send reads what other peers send meanwhile (0: only a receive reads)",
                                                   "FLOTILLA_READ_WHILE_SENDING")),
        secret_file_(flags.add<std::string>("secret-file", "",
                                            "a file holding the shared secret (readable by its owner only)",
                                            "FLOTILLA_SECRET_FILE")),
        heartbeat_(flags.add<std::string>("heartbeat-ms", "500", "heartbeat interval in ms; a peer silent for 6 is stalled",
                                          "FLOTILLA_HEARTBEAT_MS")),
        checksum_data_(flags.add<std::string>("checksum-data", "auto",
                                              "data frames with a CRC-32C of their payload: auto (on connections to other hosts), 0 or 1",
                                              "FLOTILLA_CHECKSUM_DATA")),
        frame_mac_(flags.add<std::string>("frame-mac", "auto",
                                          "frames with a tag (AES-256-GMAC, keyed by the secret) that nobody without the secret can forge: "
                                          "auto (on connections to other hosts), 0 or 1",
                                          "FLOTILLA_FRAME_MAC")),
        shared_memory_(flags.add<std::string>("shared-memory", "auto",
                                              "ranks that share a host sum through shared memory (hierarchically across hosts): auto, on, off, or on with "
                                              "pieces of this many bytes",
                                              "FLOTILLA_SHARED_MEMORY")),
        spin_(flags.add<std::string>("spin-us", "50",
                                     "how long a wait retries its sockets before it sleeps, in microseconds (0: sleep at once)",
                                     "FLOTILLA_SPIN_US")),
        rejoin_(flags.add<std::string>("rejoin", "",
                                       "instead of the rendezvous, rejoin a running job as the lost --rank: host:port of "
                                       "each rank to reconnect to, comma-separated (the parameter servers print theirs)",
                                       "FLOTILLA_REJOIN")) {}

  /// The options given (call after Flags::parse); ConfigError naming the flag for a bad value.
  /// Without --rank and --world-size (or their variables), another launcher's (Options::from_environment).
  Options options() const {
    auto item = [](const std::string& v, const char* flag, const char* env) {
      detail::TcpSettingText s;
      s.name = std::string("--") + flag + " (" + env + ")";
      if (!v.empty()) s.text = v;
      return s;
    };
    return detail::tcp_options_from({item(rank_, "rank", "FLOTILLA_RANK"),
                                     item(world_size_, "world-size", "FLOTILLA_WORLD_SIZE"),
                                     item(coordinator_, "coordinator", "FLOTILLA_COORDINATOR"),
                                     item(bind_, "bind", "FLOTILLA_BIND"),
                                     item(timeout_, "timeout-ms", "FLOTILLA_TIMEOUT_MS"),
                                     item(connect_timeout_, "connect-timeout-ms", "FLOTILLA_CONNECT_TIMEOUT_MS"),
                                     item(socket_buffer_, "socket-buffer", "FLOTILLA_SOCKET_BUFFER"),
                                     item(unsent_limit_, "unsent-limit", "FLOTILLA_UNSENT_LIMIT"),
                                     item(read_while_sending_, "read-while-sending", "FLOTILLA_READ_WHILE_SENDING"), detail::tcp_setting_from_env("FLOTILLA_SECRET"),
                                     item(secret_file_, "secret-file", "FLOTILLA_SECRET_FILE"),
                                     item(heartbeat_, "heartbeat-ms", "FLOTILLA_HEARTBEAT_MS"),
                                     item(checksum_data_, "checksum-data", "FLOTILLA_CHECKSUM_DATA"),
                                     item(frame_mac_, "frame-mac", "FLOTILLA_FRAME_MAC"),
                                     item(shared_memory_, "shared-memory", "FLOTILLA_SHARED_MEMORY"),
                                     item(spin_, "spin-us", "FLOTILLA_SPIN_US"), item(rejoin_, "rejoin", "FLOTILLA_REJOIN"),
                                     detail::tcp_setting_from_env("FLOTILLA_LAUNCH_SECRET"), launch_environment()});
  }

 private:
  const std::string &rank_, &world_size_, &coordinator_, &bind_, &timeout_, &connect_timeout_, &socket_buffer_, &unsent_limit_,
      &read_while_sending_;
  const std::string &secret_file_, &heartbeat_, &checksum_data_, &frame_mac_, &shared_memory_, &spin_, &rejoin_;
};

}  // namespace flotilla::transport::tcp
#endif  // FLOTILLA_TRANSPORT_TCP_FLAGS_HPP_INCLUDED
