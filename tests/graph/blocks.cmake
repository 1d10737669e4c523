flotilla_add_graph_test(blocks ${CMAKE_CURRENT_SOURCE_DIR}/test_blocks.cpp)
