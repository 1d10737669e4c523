# cmake -DLAUNCH=<flotilla-launch> -DPROGRAM=<flotilla_distributed_tcp> -DDIR=<checkpoint directory> -DTIMEOUT=<seconds> -P run_sparse_restart.cmake
# Runs sparse_equivalence.cpp's restart job (2 workers, 2 row servers; the last server kills
# itself in the first attempt) in a fresh checkpoint directory with one restart allowed, and fails
# unless the launcher reports the killed server and the restart, the second attempt resumes from a
# checkpoint set, and the job then ends with the uninterrupted run's rows and tower.
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
execute_process(COMMAND ${LAUNCH} -n 4 --restarts 1 --grace 2 --timeout ${TIMEOUT} -- ${PROGRAM} sparse-equivalence 2 ${DIR}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
message("${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the restarted job failed (exit ${rc})")
endif()
if(NOT err MATCHES "rank 3 was killed by signal 9 \\(Killed\\); restarting the job \\(restart 1 of 1\\)")
  message(FATAL_ERROR "the launcher did not report the killed server and the restart")
endif()
if(NOT err MATCHES "checkpoint: resuming from step")
  message(FATAL_ERROR "the second attempt did not resume from a checkpoint set")
endif()
file(REMOVE_RECURSE ${DIR})
