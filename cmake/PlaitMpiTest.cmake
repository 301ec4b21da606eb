# Multi-rank tests under mpirun, registered with CTest (docs/comm.md, "Testing with several
# ranks"). Each test goes through tests/mpi/run_mpi_test.sh, which adds --oversubscribe,
# --allow-run-as-root when root, one OpenMP/BLAS thread per rank, OpenMPI's yield-when-idle,
# a hard timeout, and checks the exit status, stderr and elapsed time.
#
# All MPI tests share the RESOURCE_LOCK plait_mpi and claim 2 PROCESSORS, so `ctest -j` never
# runs two of them at once on this 2-core machine (their ranks would starve each other).

set(PLAIT_MPI_TEST_RUNNER ${PROJECT_SOURCE_DIR}/tests/mpi/run_mpi_test.sh)

# plait_mpi_test(<name> RANKS <n> COMMAND <program> [args...]
#                [EXPECT_FAILURE] [STDERR_REGEX <regex>] [WITHIN <seconds>]
#                [TIMEOUT <seconds>] [LABELS <labels...>])
# Runs `mpirun -np <n> <program> args...` (RANKS 0: the program alone, a one-rank singleton).
# Passes when the exit status is 0, or non-zero with EXPECT_FAILURE. STDERR_REGEX (extended
# regex, matched against the whole stderr, so it may span lines) must match. WITHIN fails a
# job that ran longer, from mpirun's start (use it only where the time is the behaviour under
# test, e.g. how fast a failure stops the job). TIMEOUT (default 120 s) reports a hang.
# <program> may be a target name (e.g. plait) or a generator expression.
function(plait_mpi_test name)
  cmake_parse_arguments(ARG "EXPECT_FAILURE" "RANKS;STDERR_REGEX;WITHIN;TIMEOUT" "COMMAND;LABELS"
                        ${ARGN})
  if(NOT DEFINED ARG_RANKS OR NOT ARG_COMMAND)
    message(FATAL_ERROR "plait_mpi_test(${name}): RANKS and COMMAND are required")
  endif()
  if(NOT DEFINED ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  # TIMEOUT reports a hang; it bounds no speed. The sanitizer build runs every rank several
  # times slower (ASan's shadow checks on each access, UBSan's checks): runtime_mpi.np4, 345
  # tests in one 4-rank job on 2 cores, took over 300 s there on a loaded machine against
  # 60-100 s in Release. So it scales the limit (PLAIT_SANITIZE sets the factor, CMakeLists.txt).
  # WITHIN is not scaled: it is the behaviour under test (how fast a failure stops the job).
  math(EXPR ARG_TIMEOUT "${ARG_TIMEOUT} * ${PLAIT_TEST_TIMEOUT_SCALE}")
  set(options --ranks ${ARG_RANKS} --timeout ${ARG_TIMEOUT})
  if(ARG_EXPECT_FAILURE)
    list(APPEND options --expect-failure)
  endif()
  if(DEFINED ARG_STDERR_REGEX)
    list(APPEND options --stderr-regex ${ARG_STDERR_REGEX})
  endif()
  if(DEFINED ARG_WITHIN)
    list(APPEND options --within ${ARG_WITHIN})
  endif()
  list(POP_FRONT ARG_COMMAND program)
  if(TARGET ${program})
    set(program $<TARGET_FILE:${program}>)
  endif()
  add_test(NAME ${name}
           COMMAND bash ${PLAIT_MPI_TEST_RUNNER} ${options} -- ${program} ${ARG_COMMAND})
  math(EXPR ctest_timeout "${ARG_TIMEOUT} + 30")
  set_tests_properties(${name} PROPERTIES
    TIMEOUT ${ctest_timeout}
    RESOURCE_LOCK plait_mpi
    PROCESSORS 2
    LABELS "mpi;${ARG_LABELS}")
endfunction()

# The GoogleTest main for MPI test executables (tests/mpi/mpi_gtest_main.cpp): every rank runs
# every test; a test that fails on any rank aborts the whole job naming the rank, so a failure
# can neither pass unnoticed on a rank other than 0 nor leave the other ranks waiting.
function(plait_add_mpi_gtest_main)
  if(TARGET plait_mpi_gtest_main)
    return()
  endif()
  add_library(plait_mpi_gtest_main STATIC ${PROJECT_SOURCE_DIR}/tests/mpi/mpi_gtest_main.cpp)
  target_include_directories(plait_mpi_gtest_main PUBLIC ${PROJECT_SOURCE_DIR}/tests/mpi)
  target_link_libraries(plait_mpi_gtest_main PUBLIC plait_comm GTest::gtest)
endfunction()

# plait_mpi_gtest(<name> SOURCES <files...> DEPS <targets...> RANKS <n...> [TIMEOUT <s>])
# Builds the GoogleTest executable test_<name> from SOURCES with the MPI main, and registers
# one CTest `<name>.np<n>` per rank count (0: without mpirun, as a singleton). Tests reach the
# job through plait::test::mpi_session() (tests/mpi/mpi_test_session.h).
function(plait_mpi_gtest name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;RANKS" ${ARGN})
  plait_add_mpi_gtest_main()
  add_executable(test_${name} ${ARG_SOURCES})
  target_link_libraries(test_${name} PRIVATE ${ARG_DEPS} plait_mpi_gtest_main GTest::gtest)
  target_compile_definitions(test_${name} PRIVATE
    PLAIT_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    PLAIT_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared"
    PLAIT_BINARY="$<TARGET_FILE:plait>")
  if(NOT DEFINED ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  foreach(n IN LISTS ARG_RANKS)
    plait_mpi_test(${name}.np${n} RANKS ${n} TIMEOUT ${ARG_TIMEOUT} LABELS ${name}
                   COMMAND test_${name})
  endforeach()
endfunction()
