flotilla_add_graph_test(layers ${CMAKE_CURRENT_SOURCE_DIR}/test_layers.cpp)
