# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# cmake -DCONSUMER=<find_package|add_subdirectory|fetch_content|single_header> -DSOURCE_DIR=<repo>
#       -DWORK_DIR=<scratch dir> -DTOP_BUILD_DIR=<this build> -DGENERATOR=... [-DMAKE_PROGRAM=...]
#       -DCXX_COMPILER=... -DBUILD_TYPE=... [-DCXX_FLAGS=...] [-DEIGEN3_DIR=...] -DVERSION=x.y.z
#       -P run_consumer.cmake
#
# Configures, builds and runs the consumer project tests/consumers/<CONSUMER> in WORK_DIR (wiped
# first), the way a user's project would use flotilla:
#   find_package      installs TOP_BUILD_DIR to WORK_DIR/prefix, then find_package(flotilla CONFIG)
#   add_subdirectory  add_subdirectory(SOURCE_DIR)
#   fetch_content     FetchContent from a file:// git repository: a snapshot of SOURCE_DIR's working
#                     tree (tracked and untracked-but-not-ignored files; on a clean checkout, exactly
#                     HEAD's content), so that uncommitted work is what gets tested
#   single_header     single_include/flotilla.hpp copied alone into WORK_DIR/single_include
cmake_minimum_required(VERSION 3.21)
foreach(var CONSUMER SOURCE_DIR WORK_DIR TOP_BUILD_DIR GENERATOR CXX_COMPILER BUILD_TYPE VERSION)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer.cmake: pass -D${var}=...")
  endif()
endforeach()

function(run what)
  string(REPLACE ";" " " pretty "${ARGN}")
  message(STATUS "[${CONSUMER}] ${what}: ${pretty}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "[${CONSUMER}] ${what} failed (${rc}):\n${out}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(args "")

if(CONSUMER STREQUAL "find_package")
  set(prefix "${WORK_DIR}/prefix")
  run("install" "${CMAKE_COMMAND}" --install "${TOP_BUILD_DIR}" --prefix "${prefix}" --config "${BUILD_TYPE}")
  foreach(f include/flotilla.hpp include/flotilla/flotilla.hpp include/flotilla/version.hpp
            share/cmake/flotilla/flotillaConfig.cmake share/cmake/flotilla/flotillaConfigVersion.cmake
            share/cmake/flotilla/flotillaTargets.cmake share/pkgconfig/flotilla.pc
            share/doc/flotilla/LICENSE)
    if(NOT EXISTS "${prefix}/${f}")
      message(FATAL_ERROR "[${CONSUMER}] the install lacks ${f}")
    endif()
  endforeach()
  find_program(PKG_CONFIG pkg-config)
  if(PKG_CONFIG)
    set(ENV{PKG_CONFIG_PATH} "${prefix}/share/pkgconfig")
    run("pkg-config" "${PKG_CONFIG}" --cflags flotilla)
    if(NOT last_output MATCHES "-I[^ ]*/prefix/share/pkgconfig/\\.\\./\\.\\./include")
      message(FATAL_ERROR "[${CONSUMER}] pkg-config --cflags flotilla gave: ${last_output}")
    endif()
  endif()
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" major_minor "${VERSION}")
  list(APPEND args "-DCMAKE_PREFIX_PATH=${prefix}" "-DFLOTILLA_REQUIRED_VERSION=${major_minor}"
       -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
elseif(CONSUMER STREQUAL "add_subdirectory")
  list(APPEND args "-DFLOTILLA_SOURCE_DIR=${SOURCE_DIR}")
elseif(CONSUMER STREQUAL "fetch_content")
  find_program(GIT git)
  if(NOT GIT)
    message(STATUS "FLOTILLA_TEST_SKIPPED: git not found")
    return()
  endif()
  set(git "${GIT}" -c "safe.directory=${SOURCE_DIR}" -c core.quotepath=off)
  execute_process(COMMAND ${git} -C "${SOURCE_DIR}" rev-parse --show-toplevel
                  RESULT_VARIABLE rc OUTPUT_VARIABLE toplevel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT rc EQUAL 0)
    message(STATUS "FLOTILLA_TEST_SKIPPED: ${SOURCE_DIR} is not a git checkout")
    return()
  endif()
  run("list files" ${git} -C "${SOURCE_DIR}" ls-files --cached --others --exclude-standard)
  string(REPLACE "\n" ";" files "${last_output}")
  set(repo "${WORK_DIR}/repo")
  set(n 0)
  foreach(f IN LISTS files)
    if(f AND EXISTS "${SOURCE_DIR}/${f}" AND NOT IS_DIRECTORY "${SOURCE_DIR}/${f}")
      get_filename_component(dir "${repo}/${f}" DIRECTORY)
      file(COPY "${SOURCE_DIR}/${f}" DESTINATION "${dir}")
      math(EXPR n "${n} + 1")
    endif()
  endforeach()
  set(git_id -c user.name=flotilla-tests -c user.email=flotilla-tests@localhost -c commit.gpgsign=false)
  run("git init" "${GIT}" init -q "${repo}")
  run("git add" "${GIT}" -C "${repo}" add -A)
  run("git commit" "${GIT}" -C "${repo}" ${git_id} commit -q -m "snapshot of ${SOURCE_DIR} (${n} files)")
  run("git rev-parse" "${GIT}" -C "${repo}" rev-parse HEAD)
  string(STRIP "${last_output}" sha)
  list(APPEND args "-DFLOTILLA_GIT_REPOSITORY=file://${repo}" "-DFLOTILLA_GIT_TAG=${sha}")
elseif(CONSUMER STREQUAL "single_header")
  if(NOT EXISTS "${SOURCE_DIR}/single_include/flotilla.hpp")
    message(FATAL_ERROR "[${CONSUMER}] ${SOURCE_DIR}/single_include/flotilla.hpp is missing: run scripts/amalgamate.py")
  endif()
  file(COPY "${SOURCE_DIR}/single_include/flotilla.hpp" DESTINATION "${WORK_DIR}/single_include")
  file(STRINGS "${WORK_DIR}/single_include/flotilla.hpp" stray REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]flotilla/")
  if(stray)
    message(FATAL_ERROR "[${CONSUMER}] the single header still includes separate headers: ${stray}")
  endif()
  list(APPEND args "-DFLOTILLA_SINGLE_INCLUDE_DIR=${WORK_DIR}/single_include")
else()
  message(FATAL_ERROR "run_consumer.cmake: unknown CONSUMER ${CONSUMER}")
endif()

if(MAKE_PROGRAM)
  list(APPEND args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(EIGEN3_DIR)
  list(APPEND args "-DEigen3_DIR=${EIGEN3_DIR}")
endif()
set(build "${WORK_DIR}/build")
run("configure" "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/tests/consumers/${CONSUMER}" -B "${build}" -G "${GENERATOR}"
    "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}" "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
    ${args})
run("build" "${CMAKE_COMMAND}" --build "${build}" --config "${BUILD_TYPE}")
set(exe "${build}/consumer")
if(NOT EXISTS "${exe}" AND EXISTS "${build}/${BUILD_TYPE}/consumer")  # multi-config generators
  set(exe "${build}/${BUILD_TYPE}/consumer")
endif()
run("run" "${exe}")
message(STATUS "[${CONSUMER}] ${last_output}")
