# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# cmake -DINCLUDE_DIR=<repo>/include -P check_umbrella.cmake
# Fails while a header under include/flotilla/ exists that flotilla/flotilla.hpp does not reach,
# directly or through other headers (optional headers, see optional_headers.cmake, excepted), or
# while the umbrella reaches an optional header or a header that does not exist.
cmake_minimum_required(VERSION 3.21)
if(NOT DEFINED INCLUDE_DIR)
  message(FATAL_ERROR "check_umbrella.cmake: pass -DINCLUDE_DIR=<repo>/include")
endif()
include("${CMAKE_CURRENT_LIST_DIR}/optional_headers.cmake")

file(GLOB_RECURSE headers RELATIVE "${INCLUDE_DIR}" "${INCLUDE_DIR}/flotilla/*.hpp" "${INCLUDE_DIR}/flotilla/*.h")
list(SORT headers)

set(umbrella "flotilla/flotilla.hpp")
# flotilla/src.hpp includes the umbrella (separate compilation's definitions, flotilla/core/linkage.hpp),
# so the umbrella cannot include it; it counts as reached.
set(entry_points "flotilla/src.hpp")
set(reached "")
set(queue "${umbrella}")
set(errors "")
while(queue)
  list(POP_FRONT queue header)
  if(header IN_LIST reached)
    continue()
  endif()
  list(APPEND reached "${header}")
  file(STRINGS "${INCLUDE_DIR}/${header}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]flotilla/[^\">]+[\">]")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<](flotilla/[^\">]+)[\">].*$" "\\1" inc "${line}")
    if(NOT EXISTS "${INCLUDE_DIR}/${inc}")
      string(APPEND errors "\n  ${header} includes ${inc}, which does not exist")
    elseif(inc MATCHES "${FLOTILLA_OPTIONAL_HEADER_REGEX}" OR inc MATCHES "${FLOTILLA_NOT_IN_UMBRELLA_REGEX}")
      string(APPEND errors "\n  ${header} includes ${inc}, which ${umbrella} must not reach")
    elseif(NOT inc IN_LIST reached)
      list(APPEND queue "${inc}")
    endif()
  endforeach()
endwhile()

set(missing "")
foreach(header IN LISTS headers)
  if(NOT header IN_LIST reached AND NOT header IN_LIST entry_points AND NOT header MATCHES "${FLOTILLA_OPTIONAL_HEADER_REGEX}"
     AND NOT header MATCHES "${FLOTILLA_NOT_IN_UMBRELLA_REGEX}")
    string(APPEND missing "\n  #include \"${header}\"")
  endif()
endforeach()
if(missing)
  string(APPEND errors "\n${umbrella} does not reach these headers; add them to it (then run scripts/amalgamate.py):${missing}")
endif()
if(errors)
  message(FATAL_ERROR "umbrella header check failed:${errors}")
endif()
list(LENGTH headers n_all)
list(LENGTH reached n_reached)
list(LENGTH entry_points n_entry)
math(EXPR n_optional "${n_all} - ${n_reached} - ${n_entry}")
message(STATUS "${umbrella} reaches all ${n_reached} headers (itself included); ${n_optional} optional header(s) left out")
