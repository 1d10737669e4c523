# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# The `bench_smoke` test: runs every benchmark program once with tiny sizes and random data, to prove
# that each one builds, starts and finishes (the numbers mean nothing). Invoked by CTest as
#   cmake -DBENCH_DIR=<dir of the programs> -DLAUNCH=<flotilla-launch or empty> -DTCP_BENCHES=<0|1> -P smoke.cmake
# (MPI programs need mpirun and are left out.)

function(smoke)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 30)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "bench_smoke: `${ARGN}` failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "ok: ${ARGN}")
endfunction()

set(b ${BENCH_DIR})
smoke(${b}/flotilla_sgemm_bench --reps 1 "128->10")
smoke(${b}/flotilla_allreduce_bench none)  # a mode that times nothing: start and exit
smoke(${b}/flotilla_train_bench --synthetic 640 --model mlp --mode run --steps 5 --warmup 2 --repeat 1)
smoke(${b}/flotilla_train_bench --synthetic 640 --model cnn --mode run --steps 2 --warmup 1 --repeat 1 --threads 2)
smoke(${b}/flotilla_train_bench --synthetic 640 --model mlp --mode curve --epochs 1)
smoke(${b}/flotilla_straggler_bench --synthetic 1024 --workers 2 --straggler 1 --factor 2 --max-steps 3 --policies sync,ssp1,async)
smoke(${b}/flotilla_cost_fit --measurements ${CMAKE_CURRENT_LIST_DIR}/../docs/data/cost_500mbit.jsonl)
smoke(${b}/flotilla_reproducible_bench --synthetic 1024 --models mlp --configs 2x1 --shards 8 --steps 2 --repeat 1)
if(EXISTS ${b}/flotilla_core_latency_bench)
  smoke(${b}/flotilla_core_latency_bench --trips 1000 --repeat 1)
endif()
if(EXISTS ${b}/flotilla_loopback_bench)
  smoke(${b}/flotilla_loopback_bench --sizes 4K,1M --repeat 1 --target 0.001)
endif()
smoke(${b}/flotilla_ctr_server_load --lines 2048 --workers 2 --batch 64 --server-counts 1,2)
smoke(${b}/flotilla_pipeline_bench --stage-counts 2 --micro-batch-counts 2 --batch 16 --steps 1 --warmup 1 --repeat 1)
if(TCP_BENCHES AND LAUNCH)
  smoke(${LAUNCH} -n 2 --timeout 20 -- ${b}/flotilla_tcp_busbw_bench --sizes 4K,64K --repeat 1 --target 0.001)
  smoke(${LAUNCH} -n 2 --timeout 20 -- ${b}/flotilla_tcp_train_bench --synthetic 1024 --steps 3 --warmup 1 --repeat 1)
  smoke(${LAUNCH} -n 2 --timeout 20 -- ${b}/flotilla_tcp_bandwidth_bench --mode sendrecv --max 1048576 --bytes-per-size 4194304)
  smoke(${LAUNCH} -n 2 --timeout 20 -- ${b}/flotilla_exchange_step_bench --exchange ring --mib 1 --steps 1)
  smoke(${LAUNCH} -n 3 --timeout 20 -- ${b}/flotilla_exchange_step_bench --exchange servers --servers 1 --codec fp16 --mib 1 --steps 1)
endif()
