# Small helpers so that each folder's CMakeLists reads as a list of targets.
#
#   athanor_library(NAME [OBJECT] SRCS a.cc b.cc DEPS x y [PUBLIC_DEPS ...])
#     OBJECT: every object goes into whatever links it directly, for sources
#     that only register themselves (gtest suites), which an archive would drop.
#   athanor_binary(NAME SRCS main.cc DEPS ...)
#   athanor_test(NAME SRCS a_test.cc DEPS ... [LABELS ...] [TIMEOUT s])
#
# Each finds the third-party packages its DEPS name (athanor_find_deps,
# AthanorDeps.cmake).

set(ATHANOR_WARNINGS -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # GCC 12 reports maybe-uninitialized and stringop false positives inside libstdc++ at -O3.
  list(APPEND ATHANOR_WARNINGS -Wno-maybe-uninitialized -Wno-stringop-overflow -Wno-stringop-overread
       -Wno-array-bounds)
endif()
if(ATHANOR_THREAD_SAFETY)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "ATHANOR_THREAD_SAFETY needs clang (e.g. -DCMAKE_CXX_COMPILER=clang++-14)")
  endif()
  # Checks ABSL_GUARDED_BY and friends; GCC ignores the annotations.
  list(APPEND ATHANOR_WARNINGS -Wthread-safety)
endif()
if(ATHANOR_WERROR)
  list(APPEND ATHANOR_WARNINGS -Werror)
endif()

if(ATHANOR_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(ATHANOR_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
  # UCX's memory hooks (libucm) run inside exiting threads, where TSan's own
  # interceptors crash; tests under TSan run without them.
  set(_athanor_test_env ";UCX_MEM_EVENTS=no")
elseif(NOT ATHANOR_SANITIZE STREQUAL "")
  message(FATAL_ERROR "ATHANOR_SANITIZE must be '', 'address' or 'thread', not '${ATHANOR_SANITIZE}'")
endif()

function(_athanor_common target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${ATHANOR_WARNINGS}>)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
endfunction()

function(athanor_library name)
  cmake_parse_arguments(A "OBJECT" "" "SRCS;DEPS;PUBLIC_DEPS" ${ARGN})
  athanor_find_deps(${A_DEPS} ${A_PUBLIC_DEPS})
  if(A_OBJECT)
    add_library(${name} OBJECT ${A_SRCS})
  else()
    add_library(${name} STATIC ${A_SRCS})
  endif()
  _athanor_common(${name})
  target_link_libraries(${name} PUBLIC ${A_DEPS} ${A_PUBLIC_DEPS})
endfunction()

function(athanor_binary name)
  cmake_parse_arguments(A "" "" "SRCS;DEPS" ${ARGN})
  athanor_find_deps(${A_DEPS})
  add_executable(${name} ${A_SRCS})
  _athanor_common(${name})
  target_link_libraries(${name} PRIVATE ${A_DEPS})
endfunction()

function(athanor_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  athanor_find_deps(${A_DEPS} GTest::gtest)
  add_executable(${name} ${A_SRCS})
  _athanor_common(${name})
  target_link_libraries(${name} PRIVATE ${A_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${A_TIMEOUT}
    ENVIRONMENT "ATHANOR_BIN_DIR=${CMAKE_BINARY_DIR}/bin;ATHANOR_SOURCE_DIR=${PROJECT_SOURCE_DIR}${_athanor_test_env}")
  if(A_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${A_LABELS}")
  endif()
endfunction()
