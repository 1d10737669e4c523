# The synthetic click-log generator and the binary-classification metrics (AUC, log loss, AP).
flotilla_add_sparse_test(generator test_ctr_generator.cpp)
