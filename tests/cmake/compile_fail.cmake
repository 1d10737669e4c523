# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# cmake -DCXX=<compiler> -DSOURCE=<file.cpp> -DEXPECT=<regex> -DFLAGS=<;-list> [-DANYWHERE=ON]
#       -P compile_fail.cmake
# cmake -DCXX=<compiler> -DSOURCE=<controls.cpp> -DFLAGS=<;-list> -DCONTROL=ON -P compile_fail.cmake
#
# One compile-fail test (see tests/compile_fail/CMakeLists.txt). SOURCE holds a program with one
# mistake, under #ifdef FLOTILLA_SHOULD_FAIL, and the corrected program otherwise. With it defined
# it must not compile, and the compiler's first error must match EXPECT (a readable static_assert
# message, not the 40th line of a template backtrace). With ANYWHERE=ON the message may be any
# error.
#
# With CONTROL=ON, SOURCE (every case's corrected program, generated) must compile: each case then
# fails for the intended reason, not a typo.
cmake_minimum_required(VERSION 3.21)
set(_required CXX SOURCE EXPECT)
if(CONTROL)
  set(_required CXX SOURCE)
endif()
foreach(var IN LISTS _required)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "compile_fail.cmake: pass -D${var}=...")
  endif()
endforeach()
set(ENV{LC_ALL} C)  # plain ASCII quotes in diagnostics

if(CONTROL)
  execute_process(COMMAND ${CXX} ${FLAGS} -fsyntax-only "${SOURCE}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the corrected programs (without FLOTILLA_SHOULD_FAIL) must compile; the errors name "
                        "the case's file:\n${out}")
  endif()
  message(STATUS "every corrected program compiles (${SOURCE})")
  return()
endif()

execute_process(COMMAND ${CXX} ${FLAGS} -DFLOTILLA_SHOULD_FAIL -fsyntax-only "${SOURCE}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE}: compiled with FLOTILLA_SHOULD_FAIL, but must fail with an error matching\n  ${EXPECT}")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "${SOURCE}: failed to compile as it should, but no error matches\n  ${EXPECT}\n"
                      "Compiler output:\n${out}")
endif()
string(REGEX MATCH "[^\n]*(error|Error)[^\n]*" first_error "${out}")
if(NOT ANYWHERE AND NOT first_error MATCHES "${EXPECT}")
  message(FATAL_ERROR "${SOURCE}: the expected message is in the output but is not the first error, "
                      "which is what a user reads:\n  ${first_error}\nExpected it to match:\n  ${EXPECT}\n"
                      "Compiler output:\n${out}")
endif()
string(REGEX MATCH "[^\n]*${EXPECT}[^\n]*" line "${out}")
string(REGEX MATCHALL "error:" errors "${out}")
list(LENGTH errors n_errors)
message(STATUS "fails as expected (${n_errors} error(s)), with:\n${line}")
