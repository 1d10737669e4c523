# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# sparse::Trainer in-process: synchronous equivalence with one worker, learning, async against sync.
flotilla_add_sparse_test(trainer test_sparse_trainer.cpp)
