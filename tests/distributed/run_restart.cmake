# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# cmake -DLAUNCH=<flotilla-launch> "-DPROGRAM=<program>;<arguments>" -DDIR=<checkpoint directory> -DTIMEOUT=<seconds>
#       [-DRANKS=<ranks, 3>] [-DKILLED=<the server that kills itself, 2>] -P run_restart.cmake
# Runs a server-restart test in a fresh checkpoint directory (appended to the program's arguments),
# with one restart allowed, and fails unless the launcher reports the killed server and the restart,
# the second attempt resumes from a checkpoint, and the job then succeeds:
#   ps_restart.cpp             PROGRAM flotilla_distributed_tcp;ps-restart (2 workers, 1 server)
#   sparse_equivalence.cpp     PROGRAM flotilla_distributed_tcp;sparse-equivalence;2, RANKS 4, KILLED 3
if(NOT DEFINED RANKS)
  set(RANKS 3)
endif()
if(NOT DEFINED KILLED)
  set(KILLED 2)
endif()
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
execute_process(COMMAND ${LAUNCH} -n ${RANKS} --restarts 1 --grace 2 --timeout ${TIMEOUT} -- ${PROGRAM} ${DIR}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
message("${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the restarted job failed (exit ${rc})")
endif()
if(NOT err MATCHES "rank ${KILLED} was killed by signal 9 \\(Killed\\); restarting the job \\(restart 1 of 1\\)")
  message(FATAL_ERROR "the launcher did not report the killed server and the restart")
endif()
if(NOT err MATCHES "checkpoint: resuming from step")
  message(FATAL_ERROR "the second attempt did not resume from a checkpoint")
endif()
file(REMOVE_RECURSE ${DIR})
