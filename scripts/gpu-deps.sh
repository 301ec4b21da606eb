#!/usr/bin/env bash
# Packs, from this machine's Debian packages, what scripts/gpu-check.sh needs on a GPU machine
# whose image lacks plait's build dependencies (the device machines: CUDA, CMake, g++ and PyTorch,
# but no OpenBLAS, GoogleTest, nlohmann-json, oneDNN, pkg-config or MPI), into
# .gpu-deps/plait-gpu-deps.tar.xz (about 13 MB; .gpu-deps/ is ignored by git). Carry .gpu-deps to
# the GPU machine; gpu-check.sh unpacks it there when the system lacks a dependency.
#
# What it holds: OpenBLAS (OpenMP build, with cblas.h and libgfortran/libquadmath, which it needs)
# and a relocatable openblas.pc; GoogleTest and GoogleMock (static libraries, headers, CMake
# config); nlohmann-json (headers, CMake config); oneDNN (the library, the OpenCL ICD loader it
# links to, its headers: cmake/PlaitOneDnn.cmake finds them under CMAKE_PREFIX_PATH); pkgconf.
# MPI is not in it (too many libraries): without MPI on the GPU machine, gpu-check.sh builds
# PLAIT_KERNELS_ONLY.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
multiarch="$(gcc -print-multiarch)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
prefix="$stage/plait-gpu-deps"
lib="$prefix/lib/$multiarch"
mkdir -p "$prefix/bin" "$prefix/include" "$lib/pkgconfig" "$lib/cmake" "$prefix/share/cmake"

# OpenBLAS with what it links to beyond glibc and libgomp (which come with the GPU machine's g++).
blas="/usr/lib/$multiarch/openblas-openmp"
cp -L "$blas/libopenblas.so.0" "$lib/"
ln -s libopenblas.so.0 "$lib/libopenblas.so"
for so in libgfortran.so.5 libquadmath.so.0; do cp -L "/lib/$multiarch/$so" "$lib/"; done
cp "/usr/include/$multiarch/openblas-openmp/"*.h "$prefix/include/"
cat > "$lib/pkgconfig/openblas.pc" <<'PC'
prefix=${pcfiledir}/../../..
libdir=${pcfiledir}/..
includedir=${prefix}/include
Name: openblas
Description: OpenBLAS (OpenMP build), carried by plait's scripts/gpu-deps.sh
Version: 0.3.21
Libs: -L${libdir} -lopenblas
Libs.private: -lm -lpthread -lgfortran -lgomp
Cflags: -I${includedir}
PC

# oneDNN: the bf16 matmuls (kernels/bf16_matmul.h); libOpenCL.so.1 only because libdnnl is
# linked to it (plait uses its CPU engine alone).
cp -L "/usr/lib/$multiarch/libdnnl.so.2" "$lib/"
ln -s libdnnl.so.2 "$lib/libdnnl.so"
cp -L "/lib/$multiarch/libOpenCL.so.1" "$lib/"
mkdir -p "$prefix/include/oneapi"
cp -r /usr/include/oneapi/dnnl "$prefix/include/oneapi/"

# GoogleTest / GoogleMock: the Debian layout, whose CMake config finds its prefix relative to
# itself (four directories up from lib/<multiarch>/cmake/GTest).
cp "/usr/lib/$multiarch/"libgtest*.a "/usr/lib/$multiarch/"libgmock*.a "$lib/"
cp -r "/usr/lib/$multiarch/cmake/GTest" "$lib/cmake/"
cp -r /usr/include/gtest /usr/include/gmock "$prefix/include/"

# nlohmann-json: headers and its config (three directories up from share/cmake/nlohmann_json).
cp -r /usr/include/nlohmann "$prefix/include/"
cp -r /usr/share/cmake/nlohmann_json "$prefix/share/cmake/"

# pkgconf, for CMake's FindPkgConfig where the image has no pkg-config.
cp -L "$(command -v pkgconf)" "$prefix/bin/pkgconf"
ln -s pkgconf "$prefix/bin/pkg-config"
cp -L "/lib/$multiarch/libpkgconf.so.3" "$lib/"

mkdir -p "$root/.gpu-deps"
tar -C "$stage" -cJf "$root/.gpu-deps/plait-gpu-deps.tar.xz" plait-gpu-deps
echo "$root/.gpu-deps/plait-gpu-deps.tar.xz: $(du -h "$root/.gpu-deps/plait-gpu-deps.tar.xz" | cut -f1)"
