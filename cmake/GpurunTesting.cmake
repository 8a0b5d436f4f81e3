# Test helpers. Every test gets a label (unit, mpi, slurm, multinode, gpu, fuzz, nccl-double) and a
# timeout, so a hang fails one test instead of the whole CI run.
find_package(PkgConfig REQUIRED)
pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)

# Environment every MPI test runs with: Open MPI as root, more ranks than the 2 cores here.
set(GPURUN_MPI_TEST_ENV
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  OMPI_MCA_rmaps_base_oversubscribe=1
  # Keep Open MPI's shared-memory files and session dirs out of each other's way between tests.
  OMPI_MCA_btl_vader_single_copy_mechanism=none)
if(GPURUN_SANITIZE MATCHES "address")
  # Open MPI and hwloc keep allocations until exit; those are not ours to report.
  list(APPEND GPURUN_MPI_TEST_ENV
    "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/lsan.supp:print_suppressions=0"
    # Full unwinding: Open MPI's libraries have no frame pointers, and fast unwinding loses the
    # frames the suppressions match on.
    "ASAN_OPTIONS=detect_odr_violation=0:fast_unwind_on_malloc=0")
endif()
if(GPURUN_SANITIZE MATCHES "thread")
  # Open MPI's own lock-order report under MPI_THREAD_MULTIPLE (tests/tsan.supp).
  list(APPEND GPURUN_MPI_TEST_ENV "TSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/tsan.supp")
endif()
set(GPURUN_MPIEXEC ${MPIEXEC_EXECUTABLE} CACHE FILEPATH "mpirun used by the MPI tests")

# The tests start ranks through one front end, tests/lib/mpi-launch, never through the launcher
# itself: it takes a small vocabulary (-n N, --oversubscribe, -x VAR, --host, --rsh-agent, --bind-to,
# ...; the table at its top) and hands each launcher its own words. The launcher's family is found
# once, here, from its --version: openmpi (Open MPI's mpirun), mpich (Hydra's mpiexec: MPICH, and
# the MPICH-family MPIs that use it) or srun.
if(NOT DEFINED GPURUN_TEST_MPI_FAMILY)
  get_filename_component(_gr_mpiexec_name "${GPURUN_MPIEXEC}" NAME)
  execute_process(COMMAND ${GPURUN_MPIEXEC} --version OUTPUT_VARIABLE _gr_v ERROR_VARIABLE _gr_v
                  RESULT_VARIABLE _gr_rc TIMEOUT 20)
  if(_gr_mpiexec_name STREQUAL "srun" OR _gr_v MATCHES "^slurm ")
    set(_gr_family srun)
  elseif(_gr_v MATCHES "Open MPI|OpenRTE")
    set(_gr_family openmpi)
  elseif(_gr_v MATCHES "HYDRA|Hydra|Intel\\(R\\) MPI")
    set(_gr_family mpich)
  else()
    message(FATAL_ERROR "GPURUN_MPIEXEC=${GPURUN_MPIEXEC}: cannot tell its family (Open MPI, MPICH's "
                        "Hydra, srun) from its --version; set GPURUN_TEST_MPI_FAMILY. It said: ${_gr_v}")
  endif()
  set(GPURUN_TEST_MPI_FAMILY ${_gr_family} CACHE STRING
      "family of GPURUN_MPIEXEC for tests/lib/mpi-launch: openmpi, mpich or srun")
endif()
set_property(CACHE GPURUN_TEST_MPI_FAMILY PROPERTY STRINGS openmpi mpich srun)
message(STATUS "tests launch ranks with ${GPURUN_MPIEXEC} (${GPURUN_TEST_MPI_FAMILY}) through tests/lib/mpi-launch")
# The build's own copy names this build's launcher and family, so a script run by hand (or a test
# that clears the environment) still launches with them; the environment overrides both.
set(GPURUN_MPI_LAUNCH ${PROJECT_BINARY_DIR}/tests/mpi-launch)
file(CONFIGURE OUTPUT ${GPURUN_MPI_LAUNCH} CONTENT [=[#!/bin/sh
# Written by cmake/GpurunTesting.cmake: tests/lib/mpi-launch with this build's MPI launcher.
: "${GPURUN_TEST_MPIEXEC:=@GPURUN_MPIEXEC@}" "${GPURUN_TEST_MPI_FAMILY:=@GPURUN_TEST_MPI_FAMILY@}"
export GPURUN_TEST_MPIEXEC GPURUN_TEST_MPI_FAMILY
exec /bin/sh '@PROJECT_SOURCE_DIR@/tests/lib/mpi-launch' "$@"
]=] @ONLY)
file(CHMOD ${GPURUN_MPI_LAUNCH} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
     GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
list(APPEND GPURUN_MPI_TEST_ENV GPURUN_TEST_MPIEXEC=${GPURUN_MPIEXEC}
     GPURUN_TEST_MPI_FAMILY=${GPURUN_TEST_MPI_FAMILY})

# gr_test_support(TARGET): what every test executable needs in this build. Under AddressSanitizer,
# a no-op dlclose (tests/support/keep_plugins_loaded.c) so that leaks inside Open MPI's plugins can
# be matched by tests/lsan.supp. Idempotent.
function(gr_test_support target)
  get_target_property(done ${target} GR_TEST_SUPPORT)
  if(done)
    return()
  endif()
  set_target_properties(${target} PROPERTIES GR_TEST_SUPPORT ON)
  if(GPURUN_SANITIZE MATCHES "address")
    target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support/keep_plugins_loaded.c)
  endif()
endfunction()

# gr_add_test_executable(NAME SOURCES ... [LIBS ...])
function(gr_add_test_executable name)
  cmake_parse_arguments(A "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE gpurun_internal PkgConfig::CMOCKA ${A_LIBS})
  # tests/lib: the assertions the C tests outside cmocka share (gr_check.h).
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/lib)
  gpurun_warnings(${name})
  gr_test_support(${name})
endfunction()

# gr_add_unit_test(NAME SOURCES ... [LIBS ...] [LABELS ...] [TIMEOUT s] [ENV ...])
# A plain executable (cmocka), no mpirun. Label "unit" is always added.
function(gr_add_unit_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;LIBS;LABELS;ENV;ARGS" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 120)
  endif()
  gr_add_test_executable(${name} SOURCES ${A_SOURCES} LIBS ${A_LIBS})
  add_test(NAME ${name} COMMAND ${name} ${A_ARGS})
  set_tests_properties(${name} PROPERTIES LABELS "unit;${A_LABELS}" TIMEOUT ${A_TIMEOUT}
                       ENVIRONMENT "${GPURUN_MPI_TEST_ENV};${A_ENV}")
endfunction()

# gr_add_mpi_test(NAME NP n COMMAND exe args... [LABELS ...] [TIMEOUT s] [ENV ...] [MPIRUN_ARGS ...])
# Registers "mpi-launch -n n --oversubscribe [MPIRUN_ARGS] exe args" with label "mpi": MPIRUN_ARGS
# are words of tests/lib/mpi-launch's vocabulary, which it translates for the launcher.
# COMMAND may name a target; its path is substituted.
function(gr_add_mpi_test name)
  cmake_parse_arguments(A "" "NP;TIMEOUT" "COMMAND;LABELS;ENV;MPIRUN_ARGS" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 180)
  endif()
  list(POP_FRONT A_COMMAND exe)
  if(TARGET ${exe})
    gr_test_support(${exe})
    set(exe $<TARGET_FILE:${exe}>)
  endif()
  add_test(NAME ${name}
           COMMAND ${GPURUN_MPI_LAUNCH} -n ${A_NP} --oversubscribe ${A_MPIRUN_ARGS} ${exe} ${A_COMMAND})
  set_tests_properties(${name} PROPERTIES LABELS "mpi;${A_LABELS}" TIMEOUT ${A_TIMEOUT}
                       ENVIRONMENT "${GPURUN_MPI_TEST_ENV};${A_ENV}" PROCESSORS 2)
endfunction()

# gr_add_script_test(NAME COMMAND ... LABELS ... [TIMEOUT s] [ENV ...] [RUN_SERIAL])
# For shell-driven tests (slurm, multinode, install consumer).
function(gr_add_script_test name)
  cmake_parse_arguments(A "RUN_SERIAL" "TIMEOUT" "COMMAND;LABELS;ENV" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  add_test(NAME ${name} COMMAND ${A_COMMAND})
  set_tests_properties(${name} PROPERTIES LABELS "${A_LABELS}" TIMEOUT ${A_TIMEOUT}
                       ENVIRONMENT "${GPURUN_MPI_TEST_ENV};${A_ENV}")
  if(A_RUN_SERIAL)
    set_tests_properties(${name} PROPERTIES RUN_SERIAL ON)
  endif()
endfunction()

# gr_add_fuzz_test(NAME SOURCES ... SEEDS dir ARGS ... TIMEOUT s [CORPUS name] [INCLUDES ...]
#                  [DEFINES ...] [LIBS ...] [SEED_TARGET target SEED_AS file] [LABELS ...]
#                  [CLANG_ONLY])
# A libFuzzer target and its test, label "fuzz" always. With clang: the executable NAME from
# SOURCES (the code under test is compiled into it, so that it carries the fuzzer's coverage
# instrumentation), built and linked with -fsanitize=fuzzer, and a test that copies the seed
# corpus SEEDS to CORPUS (default corpus_NAME without its "fuzz_") in the test's build directory,
# so that libFuzzer's additions never land in the source tree, then runs NAME with ARGS on it.
# SEED_TARGET adds that target's file to the copy as SEED_AS (built first). With another compiler
# the test is registered as skipped (exit 77), or not at all with CLANG_ONLY.
function(gr_add_fuzz_test name)
  cmake_parse_arguments(A "CLANG_ONLY" "SEEDS;CORPUS;TIMEOUT;SEED_TARGET;SEED_AS"
                        "SOURCES;INCLUDES;DEFINES;LIBS;ARGS;LABELS" ${ARGN})
  if(NOT A_SOURCES OR NOT A_SEEDS OR NOT A_ARGS OR NOT A_TIMEOUT)
    message(FATAL_ERROR "gr_add_fuzz_test(${name}): SOURCES, SEEDS, ARGS and TIMEOUT are required")
  endif()
  if(A_SEED_TARGET AND NOT A_SEED_AS)
    message(FATAL_ERROR "gr_add_fuzz_test(${name}): SEED_TARGET needs SEED_AS")
  endif()
  if(NOT A_CORPUS)
    string(REGEX REPLACE "^fuzz_" "" stem ${name})
    set(A_CORPUS corpus_${stem})
  endif()
  if(CMAKE_C_COMPILER_ID MATCHES "Clang")
    add_executable(${name} ${A_SOURCES})
    if(A_INCLUDES)
      target_include_directories(${name} PRIVATE ${A_INCLUDES})
    endif()
    if(A_DEFINES)
      target_compile_definitions(${name} PRIVATE ${A_DEFINES})
    endif()
    if(A_LIBS)
      target_link_libraries(${name} PRIVATE ${A_LIBS})
    endif()
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    gpurun_warnings(${name})
    list(JOIN A_ARGS " " args)
    set(seed_copy "")
    set(seed_file "")
    if(A_SEED_TARGET)
      add_dependencies(${name} ${A_SEED_TARGET})
      set(seed_copy " && cp \"$1\" ${A_CORPUS}/${A_SEED_AS}")
      set(seed_file $<TARGET_FILE:${A_SEED_TARGET}>)
    endif()
    add_test(NAME ${name}
             COMMAND sh -c "rm -rf ${A_CORPUS} && cp -r '${A_SEEDS}' ${A_CORPUS}${seed_copy} && exec \"$0\" ${args} ${A_CORPUS}"
                     $<TARGET_FILE:${name}> ${seed_file}
             WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  elseif(NOT A_CLANG_ONLY)
    add_test(NAME ${name} COMMAND sh -c "echo '${name}: needs clang (libFuzzer); skipped'; exit 77")
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
  else()
    return()
  endif()
  set(labels fuzz ${A_LABELS})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT ${A_TIMEOUT})
endfunction()
