# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
flotilla_add_graph_test(norm ${CMAKE_CURRENT_SOURCE_DIR}/test_norm.cpp)
