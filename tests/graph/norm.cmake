flotilla_add_graph_test(norm ${CMAKE_CURRENT_SOURCE_DIR}/test_norm.cpp)
