# The CUDA backend's build (docs/engine.md, "The CUDA kernels"): PLAIT_CUDA = AUTO (the default:
# build it when a CUDA compiler is found), ON (fail without one) or OFF (never; the build is then
# exactly the CPU build). Sets, for the rest of the project:
#   PLAIT_HAVE_CUDA   the CUDA kernels (src/plait/kernels/cuda/, plait_kernels_cuda), their GPU
#                     tests and their CPU-emulated tests are built
#   PLAIT_HAVE_NCCL   NCCL was found too: comm/ builds NcclCommunicator (plait_comm_nccl)
#
# Architectures: Hopper (sm_90, the H100/H200 of the device machines) and Ampere (sm_80, the
# A100), as machine code, plus compute_90 PTX so that a newer GPU can still JIT the kernels.
# Override with -DCMAKE_CUDA_ARCHITECTURES=... (scripts/gpu-check.sh builds 90-real only).
#
# Why nvcc is found by path as well as on PATH: CI images put the toolkit in /usr/local/cuda
# without always adding its bin/ to PATH.
set(PLAIT_CUDA AUTO CACHE STRING "Build the CUDA kernels, GPU tests and NCCL transport (AUTO, ON, OFF)")
set_property(CACHE PLAIT_CUDA PROPERTY STRINGS AUTO ON OFF)
set(PLAIT_HAVE_CUDA OFF)
set(PLAIT_HAVE_NCCL OFF)

if(NOT PLAIT_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "PLAIT_CUDA must be AUTO, ON or OFF; got '${PLAIT_CUDA}'")
endif()

if(NOT PLAIT_CUDA STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX}
     AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    # One CUDA runtime per program, the shared one: a C++ target linking the kernels' static
    # library would otherwise add libcudart_static beside their libcudart.so.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    # C++20 like the rest of plait (the kernels share std::span signatures with the CPU ones;
    # CUDA sources take CXX_STANDARD when CUDA_STANDARD is unset). CMake 3.25 does not know
    # nvcc's C++20 flag (nvcc has had it since CUDA 12.0): teach it.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
      list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
    endif()
    set(PLAIT_HAVE_CUDA ON)
  elseif(PLAIT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PLAIT_CUDA=ON but no CUDA compiler was found (set CUDACXX or "
                        "CMAKE_CUDA_COMPILER to nvcc, or configure with -DPLAIT_CUDA=OFF)")
  endif()
endif()

if(PLAIT_HAVE_CUDA)
  # NCCL ships beside the toolkit on the machines plait targets (/usr/local/cuda-13.0/include
  # and lib), or as a system package; found as a plain header and library pair.
  find_path(PLAIT_NCCL_INCLUDE_DIR nccl.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/include)
  find_library(PLAIT_NCCL_LIBRARY nccl
               HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
                     ${CUDAToolkit_LIBRARY_ROOT}/lib64)
  if(PLAIT_NCCL_INCLUDE_DIR AND PLAIT_NCCL_LIBRARY)
    add_library(plait_nccl INTERFACE IMPORTED)
    target_include_directories(plait_nccl INTERFACE ${PLAIT_NCCL_INCLUDE_DIR})
    target_link_libraries(plait_nccl INTERFACE ${PLAIT_NCCL_LIBRARY})
    set(PLAIT_HAVE_NCCL ON)
  endif()
  message(STATUS "plait: CUDA ${CMAKE_CUDA_COMPILER_VERSION} for architectures "
                 "${CMAKE_CUDA_ARCHITECTURES}; NCCL: ${PLAIT_HAVE_NCCL}")
else()
  message(STATUS "plait: CUDA backend off (PLAIT_CUDA=${PLAIT_CUDA})")
endif()
