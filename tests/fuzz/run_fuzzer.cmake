# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Runs one libFuzzer harness for a fixed time:
#   cmake -DEXE= -DSEEDS= -DCORPUS= -DSECONDS= -DSEED= -P run_fuzzer.cmake
# The committed seeds are copied into a working corpus in the build tree first, so what the fuzzer
# adds never lands in the source tree. libFuzzer exits non-zero on a crash, a sanitizer report, a
# leak, an input slower than -timeout or memory beyond -rss_limit_mb; so does this script then.
file(MAKE_DIRECTORY ${CORPUS})
file(GLOB seeds ${SEEDS}/*)
file(COPY ${seeds} DESTINATION ${CORPUS})
get_filename_component(dir ${CORPUS} DIRECTORY)
# SEED: libFuzzer's random seed (0: a new one each run, which libFuzzer prints as "Seed: N").
execute_process(COMMAND ${EXE} -seed=${SEED} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048 -max_len=65536
                        -print_final_stats=1 -artifact_prefix=${dir}/ ${CORPUS}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} failed (exit ${rc}, -seed=${SEED}); the input that failed is in ${dir}/ "
                      "(crash-*, leak-*, timeout-*, oom-*): run ${EXE} on it to reproduce")
endif()
