# The layers of libgpurun as CMake targets, one folder each (docs/architecture.md, "Layers").
#
#   gpurun_base     OBJECT  base/: status/errors, logging, version, job directory, safe file writing,
#                           escaping, boolean environment variables, the live-state file parser, the
#                           plan contract (gr_plan.h) and its reader. No MPI, no CUDA: its sources
#                           do not even see mpi.h.
#   gpurun_monitor  OBJECT  monitor/: the --monitor supervisor, its telemetry, Prometheus output and
#                           GPU health, on gpurun_base (+ hwloc, dl).
#   gpurun_tasks    OBJECT  tasks/: the work-stealing pool and the distributed pool, on gpurun_base.
#   gpurun_observe  OBJECT  observe/: what shows a job from outside: the flight recorder, the live
#                           state, their start with the job id, and the names of the calls they
#                           record (gr_* calls and MPI functions), on gpurun_base and MPI. The
#                           collectives and the MPI layer (libgpurun-mpi.so) both record into it.
#   gpurun_coll     OBJECT  collectives/: the gr_comm front end and its backends, the device count
#                           and the job id all ranks agree on, on gpurun_base.
#   gpurun_runtime  OBJECT  runtime/: gr_init/finalize, counters, the placement receipt, streams, on
#                           gpurun_coll and gpurun_tasks.
#   gpurun_shared / gpurun_static: libgpurun = the objects of base, tasks, coll and runtime; the
#                           monitor is gpurun's side and stays out (gpurun_monitor_lib, for the
#                           tests, holds its objects; tests/unit/launcher: launcher_library_contents).
#   gpurun_launcher STATIC  launcher/ on gpurun_monitor + gpurun_base; gpurun links it.
#   gpurun_report_lib STATIC tools/report/ on gpurun_base; gpurun-report links it.
#   gpurun_top_lib  STATIC  tools/top/ on gpurun_base; gpurun-top links it.
#
# gpurun, gpurun-report and gpurun-top therefore link neither libmpi nor libcudart/libnccl
# (tests/unit/launcher: launcher_no_mpi_link checks the binaries with readelf).
#
# Include directories: a layer's folder is on the include path of that layer and of the layers that
# link it, never of a layer below or beside it, so an upward (or sideways) #include "gr_*.h" does
# not compile (tests/unit/launcher: launcher_layers builds one probe per forbidden direction).

# gr_layer_object(TARGET DIR): an OBJECT library for the layer in folder DIR, with the compile
# settings every layer of libgpurun shares (same exported symbols, GR_API; PIC for the shared
# library). DIR is the layer's include directory, seen by the layer and by whoever links it.
function(gr_layer_object target dir)
  add_library(${target} OBJECT)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON
                        C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden)
  target_compile_definitions(${target} PRIVATE GPURUN_BUILDING_LIBRARY)
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
           $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
           $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/${dir}>)
  gpurun_warnings(${target})
endfunction()

# Libraries only some objects need: CUDA's runtime and NCCL (device.c, init.c, stream.c,
# backend_mpi.c's staging, backend_nccl.c).
set(GPURUN_PRIVATE_LIBS m ${CMAKE_DL_LIBS})
if(GPURUN_HAVE_CUDA)
  list(APPEND GPURUN_PRIVATE_LIBS CUDA::cudart)
endif()
if(GPURUN_HAVE_NCCL)
  list(APPEND GPURUN_PRIVATE_LIBS NCCL::nccl)
endif()

# ---- base: no MPI, no CUDA -------------------------------------------------
gr_layer_object(gpurun_base base)
# gr_config.h (generated from base/config.h.in), seen by every layer
target_include_directories(gpurun_base PUBLIC $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/base>)
# The plan reader checks the cpuset with hwloc's parser: the base sees hwloc's headers, and a
# program that calls gr__plan_parse links hwloc (gpurun and libgpurun do; gpurun-report and
# gpurun-top do not call it, so they need no hwloc).
target_include_directories(gpurun_base PRIVATE
  $<TARGET_PROPERTY:PkgConfig::HWLOC,INTERFACE_INCLUDE_DIRECTORIES>)

# ---- monitor: the supervisor gpurun runs (--monitor, --time-limit) ---------
gr_layer_object(gpurun_monitor monitor)
# Linking one OBJECT library to another passes on usage requirements only: a target that needs both
# sets of objects links both (as gpurun_launcher does).
target_link_libraries(gpurun_monitor PUBLIC gpurun_base PkgConfig::HWLOC m ${CMAKE_DL_LIBS})

# ---- tasks: the pool and the distributed pool ------------------------------
gr_layer_object(gpurun_tasks tasks)
target_link_libraries(gpurun_tasks PUBLIC gpurun_base MPI::MPI_C PkgConfig::HWLOC Threads::Threads
                      m ${CMAKE_DL_LIBS})

# ---- observe: flight recorder and live state --------------------------------
gr_layer_object(gpurun_observe observe)
target_link_libraries(gpurun_observe PUBLIC gpurun_base MPI::MPI_C Threads::Threads)

# ---- collectives: gr_comm and its backends ---------------------------------
gr_layer_object(gpurun_coll collectives)
target_link_libraries(gpurun_coll PUBLIC gpurun_observe gpurun_base MPI::MPI_C Threads::Threads
                      PRIVATE ${GPURUN_PRIVATE_LIBS})

# ---- runtime: gr_init on collectives and tasks -----------------------------
gr_layer_object(gpurun_runtime runtime)
target_link_libraries(gpurun_runtime PUBLIC gpurun_coll gpurun_tasks PkgConfig::HWLOC
                      PRIVATE ${GPURUN_PRIVATE_LIBS})

# (sources: the CMakeLists.txt of each folder)

# gr_loaded_library(TARGET SOURCES...): a shared library that another program loads into itself
# (the MPI layer by LD_PRELOAD, NCCL's profiler plugin by dlopen): its sources plus the base's,
# compiled here again, never with a sanitizer, since the program it lands in was not built with
# one (a shell, Python, LAMMPS, NCCL's user) and a sanitized library cannot load there.
function(gr_loaded_library target)
  get_target_property(base_sources gpurun_base SOURCES)
  list(TRANSFORM base_sources REPLACE "^([^/])" "${PROJECT_SOURCE_DIR}/base/\\1") # relative ones
  add_library(${target} SHARED ${ARGN} ${base_sources})
  foreach(prop COMPILE_OPTIONS LINK_OPTIONS)
    get_target_property(opts ${target} ${prop})
    if(opts)
      list(FILTER opts EXCLUDE REGEX "sanitize")
      set_target_properties(${target} PROPERTIES ${prop} "${opts}")
    endif()
  endforeach()
  target_compile_definitions(${target} PRIVATE GPURUN_BUILDING_LIBRARY)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/base
    ${PROJECT_BINARY_DIR}/base ${PROJECT_SOURCE_DIR}/observe ${PROJECT_SOURCE_DIR}/include
    ${PROJECT_BINARY_DIR}/include $<TARGET_PROPERTY:MPI::MPI_C,INTERFACE_INCLUDE_DIRECTORIES>)
  # hwloc: the base's plan reader (unused by these libraries, but among the base's sources)
  target_link_libraries(${target} PRIVATE PkgConfig::HWLOC Threads::Threads ${CMAKE_DL_LIBS} m)
  gpurun_warnings(${target})
endfunction()
