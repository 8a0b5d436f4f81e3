# FindNCCL: locate NVIDIA's NCCL.
# Honours, in order: NCCL_ROOT (CMake variable or environment), NCCL_HOME (environment), the CUDA
# toolkit's directories, then the system paths.
# Result: NCCL_FOUND, NCCL_INCLUDE_DIR, NCCL_LIBRARY, NCCL_VERSION and the imported target NCCL::nccl.
set(_nccl_hints)
foreach(_h "${NCCL_ROOT}" "$ENV{NCCL_ROOT}" "$ENV{NCCL_HOME}" "${CUDAToolkit_LIBRARY_ROOT}"
        "${CUDAToolkit_ROOT}" /usr/local/cuda)
  if(_h)
    list(APPEND _nccl_hints "${_h}")
  endif()
endforeach()

find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl HINTS ${_nccl_hints} PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)

# A path the user gave that does not hold NCCL counts as not found.
if(NCCL_INCLUDE_DIR AND NOT EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  set(NCCL_INCLUDE_DIR "NCCL_INCLUDE_DIR-NOTFOUND" CACHE PATH "" FORCE)
endif()
if(NCCL_LIBRARY AND NOT EXISTS "${NCCL_LIBRARY}")
  set(NCCL_LIBRARY "NCCL_LIBRARY-NOTFOUND" CACHE FILEPATH "" FORCE)
endif()

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_ver REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${_part} +[0-9]+" _m "${_nccl_ver}")
    string(REGEX REPLACE "NCCL_${_part} +" "" NCCL_VERSION_${_part} "${_m}")
  endforeach()
  set(NCCL_VERSION "${NCCL_VERSION_MAJOR}.${NCCL_VERSION_MINOR}.${NCCL_VERSION_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
                                  VERSION_VAR NCCL_VERSION)
if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
