# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# cmake -DMPIEXEC=... -DNUMPROC_FLAG=... -DRANKS=3 "-DPREFLAGS=..." -DPROGRAM=... "-DPOSTFLAGS=..."
#       -DLIMIT=<seconds> [-DMODE=throws|stalls|handler|kill|stop] -P check_rank_failure.cmake
#
# Runs rank_failure.cpp under mpirun and checks that the job fails (non-zero exit status), that the
# failure was printed, and that it ended within LIMIT seconds: through MPI_Abort (MODE throws), the
# allreduce watchdog (MODE stalls; MODE handler: through the program's own watchdog handler, which
# must be called with what timed out in place of the default's message), mpirun noticing a rank
# killed by SIGKILL (MODE kill), or the
# others' 2 s receive timeout naming the stopped rank and its host (MODE stop), not through the other ranks' 30 s timeouts, and certainly
# not by hanging (killed after 120 s).
cmake_minimum_required(VERSION 3.21)
string(TIMESTAMP started "%s" UTC)
execute_process(
  COMMAND ${MPIEXEC} ${NUMPROC_FLAG} ${RANKS} ${PREFLAGS} ${PROGRAM} ${POSTFLAGS} ${MODE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 120)
string(TIMESTAMP finished "%s" UTC)
math(EXPR elapsed "${finished} - ${started}")
message(STATUS "exit status ${rc} after ${elapsed} s; output:\n${out}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the job succeeded, but rank 1 failed")
endif()
if(rc MATCHES "timeout|[Tt]erminated")
  message(FATAL_ERROR "the job hung: killed after 120 s")
endif()
if(MODE STREQUAL "kill")
  set(expected "process rank 1 with PID")
  string(FIND "${out}" "signal 9" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the output does not say that rank 1 was killed by signal 9")
  endif()
elseif(MODE STREQUAL "stop")
  # MPI_Get_processor_name gives the host's name, as gethostname does.
  cmake_host_system_information(RESULT host QUERY HOSTNAME)
  set(expected "recv from rank 1 (tag 7) timed out after 2000 ms (no message arrived from rank 1 on host ${host}: it is stopped")
elseif(MODE STREQUAL "handler")
  # Either waiting rank may fire first; the handler replaces the default's message.
  set(handler_line "rank_failure: on_timeout: allreduce_sum of 4 values on rank [02] of ${RANKS} after 2000 ms")
  string(REGEX MATCH "${handler_line}" expected "${out}")
  if(NOT expected)
    message(FATAL_ERROR "the output lacks the handler's line (${handler_line})")
  endif()
  string(FIND "${out}" "ending this process so that mpirun stops the job" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "the default watchdog message was logged although the program set a handler")
  endif()
elseif(MODE STREQUAL "stalls")
  # Any of the waiting ranks may be the first to fire; rank 0 always waits.
  set(expected "failed: allreduce_sum of 4 values timed out after 2000 ms (some rank did not take part")
else()
  set(expected "flotilla: mpi rank 1 of ${RANKS}: failed: rank one broke on purpose")
endif()
string(FIND "${out}" "${expected}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the output lacks \"${expected}\"")
endif()
if(elapsed GREATER LIMIT)
  message(FATAL_ERROR "the job took ${elapsed} s to end, more than ${LIMIT} s: it was not aborted promptly")
endif()
