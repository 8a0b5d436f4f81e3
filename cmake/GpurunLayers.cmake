# The layers of libgpurun as CMake targets (issue 15, first step; docs/architecture.md, "Layers").
#
#   gpurun_base     OBJECT  status/errors, logging, version, job directory, safe file writing,
#                           escaping, boolean environment variables, the live-state file parser.
#                           No MPI, no CUDA, no hwloc: its sources do not even see mpi.h.
#   gpurun_monitor  OBJECT  the --monitor supervisor, its telemetry, Prometheus output and GPU
#                           health, on gpurun_base (+ hwloc, dl).
#   gpurun_obj      OBJECT  everything that needs MPI or CUDA: collectives, pool, dpool, gr_init...
#   gpurun_shared / gpurun_static: libgpurun = the objects of all three (it still has everything).
#   gpurun_launcher STATIC  launcher/ on gpurun_monitor + gpurun_base; gpurun links it.
#   gpurun_report_lib STATIC launcher/report/ on gpurun_base; gpurun-report links it.
#   gpurun_top_lib  STATIC  launcher/top/ on gpurun_base; gpurun-top links it.
#
# gpurun, gpurun-report and gpurun-top therefore link neither libmpi nor libcudart/libnccl
# (tests/unit/launcher: launcher_no_mpi_link checks the binaries with readelf).
#
# Include directories: a layer's consumers see only that layer's headers. The headers still live in
# runtime/ (files are not moved in this step), so each layer publishes symbolic links to its own
# headers under ${PROJECT_BINARY_DIR}/layers/<layer>/, and that folder is the layer's public include
# directory. A launcher source that includes "gr_pool.h" or <mpi.h> does not compile.
# (A file inside runtime/ still finds its neighbours through "..." includes; moving the files into
# one folder per layer closes that, in a later step.)

# gr_layer_headers(TARGET DIR HEADERS...): publish runtime/HEADERS as TARGET's interface.
function(gr_layer_headers target)
  set(dir ${PROJECT_BINARY_DIR}/layers/${target})
  file(MAKE_DIRECTORY ${dir})
  foreach(h ${ARGN})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/runtime/${h} ${dir}/${h} SYMBOLIC)
  endforeach()
  target_include_directories(${target} INTERFACE ${dir})
endfunction()

# Compile settings every layer that ends up in libgpurun shares with gpurun_obj, so that the same
# symbols are exported (GR_API) and the objects can go into the shared library.
function(gr_layer_object target)
  add_library(${target} OBJECT)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON
                        C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden)
  target_compile_definitions(${target} PRIVATE GPURUN_BUILDING_LIBRARY)
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
           $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>)
  gpurun_warnings(${target})
endfunction()

# ---- base: no MPI, no CUDA -------------------------------------------------
gr_layer_object(gpurun_base)
target_include_directories(gpurun_base PRIVATE ${PROJECT_BINARY_DIR}/runtime) # gr_config.h
gr_layer_headers(gpurun_base gr_error.h gr_log.h gr_jobdir.h gr_safefile.h gr_escape.h gr_env_bool.h
                 gr_live_file.h)
# the file formats gpurun-report reads (writer and reader include the same header; docs/formats.md)
gr_layer_headers(gpurun_base gr_monitor_csv.h gr_counters_format.h gr_flight_format.h)
# (sources: runtime/CMakeLists.txt, "base" lines)

# ---- monitor: the supervisor gpurun runs (--monitor, --time-limit) ---------
gr_layer_object(gpurun_monitor)
gr_layer_headers(gpurun_monitor gr_supervise.h gr_telemetry.h gr_prom.h gr_health.h)
# Linking one OBJECT library to another passes on usage requirements only: a target that needs both
# sets of objects links both (as gpurun_launcher does).
target_link_libraries(gpurun_monitor PUBLIC gpurun_base PkgConfig::HWLOC m ${CMAKE_DL_LIBS})
# (sources: runtime/CMakeLists.txt, "supervision and telemetry" line)
