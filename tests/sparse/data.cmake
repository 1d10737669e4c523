# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# The click-log readers: streaming gzip, lines, Criteo TSV, libsvm, sharding and shuffling.
flotilla_add_sparse_test(data test_ctr_data.cpp)
