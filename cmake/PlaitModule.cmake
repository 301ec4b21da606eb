# plait_module(<name> DEPS <targets...>): the library plait_<name> from src/plait/<name>/*.cpp.
# One static library per module keeps the one-way dependencies of docs/architecture.md
# checkable by the linker: a module can only use what its DEPS list names.
function(plait_module name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  add_library(plait_${name} STATIC ${sources})
  target_include_directories(plait_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(plait_${name} PUBLIC ${ARG_DEPS})
endfunction()

# plait_test(<name> DEPS <targets...>): one GoogleTest executable test_<name> from
# tests/<name>/*.cpp, each test registered with CTest.
function(plait_test name)
  cmake_parse_arguments(ARG "" "" "DEPS;PROPERTIES" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  add_executable(test_${name} ${sources})
  target_link_libraries(test_${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  # tests/support/: header-only helpers every test may use ("support/temp_dir.h").
  target_include_directories(test_${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  # The plait executable is absent from a PLAIT_KERNELS_ONLY build, whose tests never run it.
  set(binary "")
  if(TARGET plait)
    set(binary $<TARGET_FILE:plait>)
  endif()
  target_compile_definitions(test_${name} PRIVATE
    PLAIT_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    PLAIT_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared"
    PLAIT_BINARY="${binary}")
  gtest_discover_tests(test_${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS ${name} ${ARG_PROPERTIES})
endfunction()
