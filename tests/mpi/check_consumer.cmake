# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# cmake -DTOP_BUILD_DIR=... -DWORK_DIR=... -DCONSUMER_DIR=... "-DGENERATOR=..." "-DMAKE_PROGRAM=..."
#       "-DCXX_COMPILER=..." -DBUILD_TYPE=... "-DEIGEN3_DIR=..." -DMPIEXEC=... -DNUMPROC_FLAG=...
#       "-DPREFLAGS=..." "-DPOSTFLAGS=..." -P check_consumer.cmake
#
# Installs TOP_BUILD_DIR (configured with FLOTILLA_WITH_MPI=ON) into WORK_DIR/prefix, then configures,
# builds and runs (mpirun -n 2) the consumer project in CONSUMER_DIR against that install: the
# `mpi` component of flotilla's CMake package works the way a user's project uses it.
cmake_minimum_required(VERSION 3.21)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " pretty "${ARGN}")
    message(FATAL_ERROR "${what} failed (${rc}): ${pretty}\n${out}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
run("install" "${CMAKE_COMMAND}" --install "${TOP_BUILD_DIR}" --prefix "${prefix}" --config "${BUILD_TYPE}")
if(NOT EXISTS "${prefix}/share/cmake/flotilla/flotillaMpiTargets.cmake")
  message(FATAL_ERROR "the install lacks share/cmake/flotilla/flotillaMpiTargets.cmake")
endif()
set(args "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
         "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
if(EIGEN3_DIR)
  list(APPEND args "-DEigen3_DIR=${EIGEN3_DIR}")
endif()
if(MAKE_PROGRAM)
  list(APPEND args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
run("configure" "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}" ${args})
run("build" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build" --config "${BUILD_TYPE}")
if(EXISTS "${WORK_DIR}/build/${BUILD_TYPE}/consumer")
  set(program "${WORK_DIR}/build/${BUILD_TYPE}/consumer")  # multi-config generators
else()
  set(program "${WORK_DIR}/build/consumer")
endif()
run("run" ${MPIEXEC} ${NUMPROC_FLAG} 2 ${PREFLAGS} "${program}" ${POSTFLAGS})
if(NOT last_output MATCHES "flotilla mpi consumer: sum 3 over 2 ranks")
  message(FATAL_ERROR "unexpected output:\n${last_output}")
endif()
message(STATUS "${last_output}")
