// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_MPI_ENVIRONMENT_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_MPI_ENVIRONMENT_HPP_INCLUDED
// MPI's initialisation and finalisation, owned by flotilla only when it is the first to use MPI,
// and the names of MPI's error codes and thread levels for messages.
#include <mpi.h>

#include <cstddef>
#include <string>

#include "flotilla/core/error.hpp"

namespace flotilla::transport::mpi {

namespace detail {

inline std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(length));
}

inline const char* mpi_thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
    default:
      return "an unknown thread level";
  }
}

/// Owns MPI's initialisation when flotilla was first to use MPI, and finalises at process exit.
/// Finalising at exit rather than when run() returns lets a program call run() more than once: MPI
/// cannot be initialised again once finalised.
class MpiEnvironment {
 public:
  MpiEnvironment() {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized)
      throw ConfigError(
          "mpi: MPI has been finalised already, and cannot be initialised again: keep MPI_Finalize for "
          "the end of the program");
    int provided = MPI_THREAD_SINGLE;
    if (initialized) {
      MPI_Query_thread(&provided);
    } else {
      // SERIALIZED, not FUNNELED: an endpoint is used by one thread at a time, but not always by the
      // thread that initialised MPI (a trainer may communicate from a worker thread).
      const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      if (rc != MPI_SUCCESS) throw ConfigError("mpi: MPI_Init_thread failed: " + mpi_error_string(rc));
      owned_ = true;
    }
    if (provided < MPI_THREAD_SERIALIZED) {
      const std::string level = mpi_thread_level_name(provided);
      if (owned_) {
        MPI_Finalize();
        owned_ = false;
        throw ConfigError("mpi: this MPI library provides only " + level +
                          ", and flotilla needs MPI_THREAD_SERIALIZED (an endpoint may be used by different "
                          "threads in turn): use an MPI library built with thread support");
      }
      throw ConfigError("mpi: MPI was initialised with " + level +
                        ", and flotilla needs MPI_THREAD_SERIALIZED or higher: initialise it with "
                        "MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) instead of MPI_Init");
    }
  }
  ~MpiEnvironment() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) MPI_Finalize();
  }
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

 private:
  bool owned_ = false;
};

/// Initialises MPI once per process (if the program has not), checking the thread level either way.
inline void mpi_ensure_initialized() {
  static MpiEnvironment environment;  // destroyed at exit: MPI_Finalize, if flotilla called MPI_Init_thread
  (void)environment;
}

}  // namespace detail

}  // namespace flotilla::transport::mpi
#endif  // FLOTILLA_TRANSPORT_MPI_ENVIRONMENT_HPP_INCLUDED
