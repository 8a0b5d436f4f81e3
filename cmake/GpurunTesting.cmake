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
# Registers "mpirun -np n --oversubscribe [MPIRUN_ARGS] exe args" with label "mpi".
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
           COMMAND ${GPURUN_MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} ${A_NP} --oversubscribe
                   ${A_MPIRUN_ARGS} ${MPIEXEC_PREFLAGS} ${exe} ${A_COMMAND} ${MPIEXEC_POSTFLAGS})
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
