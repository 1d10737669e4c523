# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Embedding tables on parameter servers: row shards, the row servers and their clients.
flotilla_add_sparse_test(rows test_row_servers.cpp test_key_map.cpp)
