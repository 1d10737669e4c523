# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Held-out AUC against the planted model's, on generated click logs (test_ctr_accuracy.cpp): it
# trains real amounts of data, so it keeps the build type's optimisation.
flotilla_add_sparse_test(accuracy test_ctr_accuracy.cpp)
flotilla_test_full_optimization(flotilla_sparse_accuracy_tests)
set_tests_properties(sparse.accuracy PROPERTIES LABELS "sparse;accuracy" PROCESSORS 2)
