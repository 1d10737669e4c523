# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Embeddings, the binary cross-entropy loss and the per-row optimizers.
flotilla_add_sparse_test(model test_embedding.cpp test_binary_cross_entropy.cpp test_row_optimizers.cpp)
