# Installation: headers, libraries, the gpurun executable, a CMake package (gpurun::gpurun) and
# gpurun.pc for pkg-config.
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/gpurun DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/gpurun/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpurun)
install(TARGETS gpurun_shared gpurun_static EXPORT gpurunTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(GPURUN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/gpurun)
install(EXPORT gpurunTargets NAMESPACE gpurun:: DESTINATION ${GPURUN_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gpurunConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gpurunConfig.cmake INSTALL_DESTINATION ${GPURUN_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gpurunConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gpurunConfig.cmake ${PROJECT_BINARY_DIR}/gpurunConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake
        DESTINATION ${GPURUN_CMAKE_DIR})

# pkg-config: the MPI's own module (Open MPI's ompi-c, MPICH's mpich) and hwloc carry the flags a
# consumer needs.
set(GPURUN_PC_PRIVATE_LIBS "-lm -ldl -lpthread")
if(GPURUN_HAVE_CUDA)
  set(GPURUN_PC_PRIVATE_LIBS "${GPURUN_PC_PRIVATE_LIBS} -L${CUDAToolkit_LIBRARY_DIR} -lcudart")
endif()
if(GPURUN_HAVE_NCCL)
  get_filename_component(_nccl_dir ${NCCL_LIBRARY} DIRECTORY)
  set(GPURUN_PC_PRIVATE_LIBS "${GPURUN_PC_PRIVATE_LIBS} -L${_nccl_dir} -lnccl")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/gpurun.pc.in ${PROJECT_BINARY_DIR}/gpurun.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gpurun.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Section-3 pages of the C API (man/man3/: one page per function family, a '.so' link page for
# every other public name), under share/man/man3.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/man/man3 DESTINATION ${CMAKE_INSTALL_MANDIR}
        FILES_MATCHING PATTERN "*.3")
