# PLAIT_FUZZ=ON: instrument every library for libFuzzer's coverage and for AddressSanitizer +
# UndefinedBehaviorSanitizer, so the targets in fuzz/ find both crashes and silent memory or
# arithmetic errors in plait's parsers. Needs clang (Debian: clang, libclang-rt-14-dev; run
# `PLAIT_FUZZ=1 scripts/install-deps.sh`). Configure a separate build tree:
#   CXX=clang++ cmake -S . -B build-fuzz -DPLAIT_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
#   cmake --build build-fuzz --target plait_fuzz && (cd build-fuzz && ctest -L fuzz)
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "PLAIT_FUZZ needs clang (libFuzzer is part of clang's runtime); "
                      "configure with CXX=clang++ (found ${CMAKE_CXX_COMPILER_ID})")
endif()
if(PLAIT_SANITIZE)
  message(FATAL_ERROR "PLAIT_FUZZ already builds with ASan + UBSan; leave PLAIT_SANITIZE off")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                    -fno-omit-frame-pointer -g)
add_link_options(-fsanitize=address,undefined)
