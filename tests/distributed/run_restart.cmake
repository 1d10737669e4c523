# cmake -DLAUNCH=<flotilla-launch> "-DPROGRAM=<flotilla_distributed_tcp>;ps-restart" -DDIR=<checkpoint directory> -DTIMEOUT=<seconds> -P run_restart.cmake
# Runs the parameter-server restart test (ps_restart.cpp) in a fresh checkpoint directory, with one
# restart allowed, and fails unless the launcher reports the killed server and the restart and the
# job then succeeds.
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
execute_process(COMMAND ${LAUNCH} -n 3 --restarts 1 --grace 2 --timeout ${TIMEOUT} -- ${PROGRAM} ${DIR}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
message("${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the restarted job failed (exit ${rc})")
endif()
if(NOT err MATCHES "rank 2 was killed by signal 9 \\(Killed\\); restarting the job \\(restart 1 of 1\\)")
  message(FATAL_ERROR "the launcher did not report the killed server and the restart")
endif()
if(NOT err MATCHES "checkpoint: resuming from step")
  message(FATAL_ERROR "the second attempt did not resume from a checkpoint")
endif()
file(REMOVE_RECURSE ${DIR})
