# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# cmake "-DLAUNCH=<launcher and its flags, ;-separated>" -DAFTER=<flags after the program> "-DPROGRAM=<program;its subcommand>"
#       -DDIR=<dir> "-DJOB=ring or ps;S" -P run_resume.cmake
# Runs checkpoint_resume.cpp's three jobs (whole, first, resume) in a fresh directory; fails when
# any of them fails, which the last does when the resumed parameters differ from the whole run's.
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
foreach(phase whole first resume)
  execute_process(COMMAND ${LAUNCH} ${PROGRAM} ${AFTER} ${DIR} ${phase} ${JOB} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the '${phase}' job failed (exit ${rc})")
  endif()
endforeach()
file(REMOVE_RECURSE ${DIR})
