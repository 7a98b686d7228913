# Third-party dependencies, each found where it is first needed.
# All of them come from Debian 12 packages (see scripts/install-deps).
#
# A package is REQUIRED only by the targets that link it: athanor_library,
# athanor_binary and athanor_test pass their DEPS to athanor_find_deps, which
# finds the package behind each imported target the first time one is named
# (gRPC::grpc++ -> gRPC, ucx::ucp -> ucx, ...). So a tree of common/ alone
# configures and builds without gRPC, UCX, MPI, SQLite or OpenBLAS installed,
# and the full tree finds exactly what it did when everything was found here.
# Found targets are GLOBAL: a folder that links them by plain
# target_link_libraries sees them once any target has named them.

# athanor_find_deps(<target>...): finds the package of each `Ns::name` not yet
# defined; other names (athanor's own targets, paths) are left alone.
function(athanor_find_deps)
  foreach(dep IN LISTS ARGN)
    if(TARGET "${dep}" OR NOT dep MATCHES "^([A-Za-z0-9_]+)::")
      continue()
    endif()
    set(ns "${CMAKE_MATCH_1}")
    if(ns STREQUAL "Threads")
      find_package(Threads REQUIRED GLOBAL)
    elseif(ns STREQUAL "absl")
      find_package(absl CONFIG REQUIRED GLOBAL)
    elseif(ns STREQUAL "Boost")
      find_package(Boost 1.74 REQUIRED COMPONENTS program_options GLOBAL)
    elseif(ns STREQUAL "nlohmann_json")
      find_package(nlohmann_json CONFIG REQUIRED GLOBAL)
    elseif(ns STREQUAL "GTest")
      find_package(GTest CONFIG REQUIRED GLOBAL)
    elseif(ns STREQUAL "protobuf" OR ns STREQUAL "gRPC")
      # Protobuf first, by CMake's own module, as gRPC's config then reuses it.
      find_package(Protobuf REQUIRED GLOBAL)
      find_package(gRPC CONFIG REQUIRED GLOBAL)
    elseif(ns STREQUAL "SQLite")
      find_package(SQLite3 REQUIRED GLOBAL)
    elseif(ns STREQUAL "CURL")
      find_package(CURL REQUIRED GLOBAL)
    elseif(ns STREQUAL "EXPAT")
      find_package(EXPAT REQUIRED GLOBAL)
    elseif(ns STREQUAL "OpenSSL")
      find_package(OpenSSL REQUIRED GLOBAL)
    elseif(ns STREQUAL "MPI")
      find_package(MPI REQUIRED COMPONENTS C GLOBAL)
    elseif(ns STREQUAL "ucx")
      find_package(ucx CONFIG REQUIRED GLOBAL)
    elseif(dep STREQUAL "PkgConfig::LIBARCHIVE")
      find_package(PkgConfig REQUIRED)
      pkg_check_modules(LIBARCHIVE REQUIRED IMPORTED_TARGET GLOBAL libarchive)
    elseif(dep STREQUAL "PkgConfig::OPENBLAS")
      find_package(PkgConfig REQUIRED)
      pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET GLOBAL openblas)
    endif()
  endforeach()
endfunction()

# CUDA and NCCL are optional: AUTO builds them when the toolkit is found,
# ON fails loudly when it is not, OFF never looks.
set(ATHANOR_HAVE_CUDA OFF)
if(NOT ATHANOR_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  find_path(ATHANOR_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(ATHANOR_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(CUDAToolkit_FOUND AND ATHANOR_NCCL_INCLUDE AND ATHANOR_NCCL_LIBRARY)
    set(ATHANOR_HAVE_CUDA ON)
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      enable_language(CUDA)
      if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
        set(CMAKE_CUDA_ARCHITECTURES 90)
      endif()
    endif()
    add_library(athanor_nccl INTERFACE)
    target_include_directories(athanor_nccl INTERFACE ${ATHANOR_NCCL_INCLUDE})
    target_link_libraries(athanor_nccl INTERFACE ${ATHANOR_NCCL_LIBRARY} CUDA::cudart)
    message(STATUS "athanor: CUDA ${CUDAToolkit_VERSION} and NCCL found; building GPU paths")
  elseif(ATHANOR_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ATHANOR_WITH_CUDA=ON but the CUDA toolkit or NCCL was not found "
                        "(CUDAToolkit_FOUND=${CUDAToolkit_FOUND}, nccl.h=${ATHANOR_NCCL_INCLUDE}, "
                        "libnccl=${ATHANOR_NCCL_LIBRARY})")
  else()
    message(STATUS "athanor: CUDA/NCCL not found; GPU paths are not built")
  endif()
endif()
