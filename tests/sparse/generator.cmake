# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# The synthetic click-log generator and the binary-classification metrics (AUC, log loss, AP).
flotilla_add_sparse_test(generator test_ctr_generator.cpp)

# The program: a training and a held-out file with the planted model's report, and a bad flag
# refused with its name. (The tools are built only where the TCP transport is.)
if(TARGET flotilla-ctr-generate)
  set(_ctr_dir ${CMAKE_CURRENT_BINARY_DIR}/ctr_generate)
  file(MAKE_DIRECTORY ${_ctr_dir})
  add_test(NAME sparse.generator.program
           COMMAND flotilla-ctr-generate --lines 3000 --out ${_ctr_dir}/train.txt --test-lines 3000
                   --test-out ${_ctr_dir}/test.txt --threads 2)
  set_tests_properties(sparse.generator.program PROPERTIES LABELS sparse
                       PASS_REGULAR_EXPRESSION "test: 3000 lines to .*planted model on the test lines: auc 0\\.[78]")
  add_test(NAME sparse.generator.program_bad_flag
           COMMAND flotilla-ctr-generate --lines 10 --out ${_ctr_dir}/bad.txt --zipf -1)
  set_tests_properties(sparse.generator.program_bad_flag PROPERTIES LABELS sparse
                       PASS_REGULAR_EXPRESSION "--zipf: '-1' must be above 0")
endif()
