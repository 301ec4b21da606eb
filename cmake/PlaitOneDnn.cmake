# oneDNN (Debian's libdnnl-dev, 2.6): the bf16 matmuls of the CPU backend (kernels/bf16_matmul.h).
# Imported by hand as DNNL::dnnl instead of through the package's own config
# (find_package(dnnl CONFIG)): that config is generated for oneDNN's OpenCL GPU runtime and fails
# unless OpenCL's development files (ocl-icd-opencl-dev, only "recommended" by libdnnl-dev) are
# installed, although plait uses the CPU engine alone; the shared library carries its own
# run-time dependency on libOpenCL.so.1.
find_path(PLAIT_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(PLAIT_DNNL_LIBRARY dnnl)
if(NOT PLAIT_DNNL_INCLUDE_DIR OR NOT PLAIT_DNNL_LIBRARY)
  message(FATAL_ERROR "oneDNN not found (oneapi/dnnl/dnnl.hpp, libdnnl): install libdnnl-dev "
                      "(scripts/install-deps.sh)")
endif()
file(STRINGS ${PLAIT_DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h plait_dnnl_version_lines
     REGEX "#define DNNL_VERSION_(MAJOR|MINOR) ")
string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*" "\\1.\\2" PLAIT_DNNL_VERSION
       "${plait_dnnl_version_lines}")
# 2.6 is the oldest tested: its matmul takes bf16 with a bias, sum and binary post-ops and a
# user-managed scratchpad, and reports the effective ISA.
if(PLAIT_DNNL_VERSION VERSION_LESS 2.6)
  message(FATAL_ERROR "oneDNN ${PLAIT_DNNL_VERSION} found, plait needs 2.6 or newer")
endif()
message(STATUS "oneDNN ${PLAIT_DNNL_VERSION}: ${PLAIT_DNNL_LIBRARY}")
add_library(DNNL::dnnl UNKNOWN IMPORTED)
set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION ${PLAIT_DNNL_LIBRARY}
                      INTERFACE_INCLUDE_DIRECTORIES ${PLAIT_DNNL_INCLUDE_DIR})
