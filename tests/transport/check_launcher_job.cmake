# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# A TCP job started the way another launcher starts one, without flotilla's variables: RANKS
# processes of PROGRAM (tcp_rank conformance) with CONVENTION's variables (torchrun, open_mpi, slurm),
# the coordinator from MASTER_ADDR and MASTER_PORT, all at once. Every process must finish the
# transport conformance suite as one job of RANKS ranks; a process that trained alone would report
# a job of 1.
#
#   cmake -DPROGRAM=... -DCONVENTION=torchrun -DRANKS=3 -DLIMIT=60 -P check_launcher_job.cmake
execute_process(COMMAND ${PROGRAM} free-port OUTPUT_VARIABLE port RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0 OR NOT port MATCHES "^[0-9]+$")
  message(FATAL_ERROR "no free port: ${rc} ${port}")
endif()
math(EXPR last "${RANKS} - 1")
set(dir "${CMAKE_CURRENT_BINARY_DIR}/launcher_job_${CONVENTION}")
file(REMOVE_RECURSE "${dir}")
file(MAKE_DIRECTORY "${dir}")
# The variables of flotilla's own launcher are removed: the job must form from the others' alone.
set(script "pids=''\n")
foreach(r RANGE 0 ${last})
  if(CONVENTION STREQUAL "torchrun")
    set(vars "RANK=${r} WORLD_SIZE=${RANKS} LOCAL_RANK=${r}")
  elseif(CONVENTION STREQUAL "open_mpi")
    set(vars "OMPI_COMM_WORLD_RANK=${r} OMPI_COMM_WORLD_SIZE=${RANKS} OMPI_COMM_WORLD_LOCAL_RANK=${r}")
  elseif(CONVENTION STREQUAL "slurm")
    set(vars "SLURM_STEP_ID=0 SLURM_PROCID=${r} SLURM_NTASKS=${RANKS} SLURM_LOCALID=${r}")
  else()
    message(FATAL_ERROR "unknown CONVENTION '${CONVENTION}'")
  endif()
  string(APPEND script "env -u FLOTILLA_RANK -u FLOTILLA_WORLD_SIZE -u FLOTILLA_COORDINATOR -u FLOTILLA_LOCAL_RANK "
                       "${vars} MASTER_ADDR=127.0.0.1 MASTER_PORT=${port} '${PROGRAM}' conformance > '${dir}/rank${r}.log' 2>&1 &\n"
                       "pids=\"$pids $!\"\n")
endforeach()
string(APPEND script "status=0\nfor p in $pids; do wait $p || status=1; done\nexit $status\n")
execute_process(COMMAND sh -c "${script}" RESULT_VARIABLE rc TIMEOUT ${LIMIT})
set(logs "")
foreach(r RANGE 0 ${last})
  file(READ "${dir}/rank${r}.log" text)
  string(APPEND logs "--- rank ${r}\n${text}")
endforeach()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the ${CONVENTION} job failed (${rc}):\n${logs}")
endif()
file(READ "${dir}/rank0.log" first)
if(NOT first MATCHES "job of ${RANKS} ranks")
  message(FATAL_ERROR "rank 0 did not report a job of ${RANKS} ranks:\n${logs}")
endif()
message(STATUS "${CONVENTION}: ${RANKS} processes formed one job")
