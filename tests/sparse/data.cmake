# The click-log readers: streaming gzip, lines, Criteo TSV, libsvm, sharding and shuffling.
flotilla_add_sparse_test(data test_ctr_data.cpp)
