# ATHANOR_FUZZ=ON: every library is compiled for libFuzzer with ASan and UBSan
# (clang only), and fuzz/ adds one executable per target. scripts/fuzz
# configures such a build in its own directory with clang-14.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "ATHANOR_FUZZ needs clang (e.g. -DCMAKE_CXX_COMPILER=clang++-14), not ${CMAKE_CXX_COMPILER_ID}")
endif()
if(NOT ATHANOR_SANITIZE STREQUAL "")
  message(FATAL_ERROR "ATHANOR_FUZZ brings its own sanitizers; leave ATHANOR_SANITIZE empty")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                    -fno-omit-frame-pointer -g)
add_link_options(-fsanitize=address,undefined)
