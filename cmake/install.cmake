# `cmake --install`: libstable-diffusion, its header, a CMake package
# (find_package(stable-diffusion), target `stable-diffusion`, as sd.cpp's package names it)
# and a pkg-config file (stable-diffusion.pc). The tools stay in the build tree.
include(CMakePackageConfigHelpers)

install(TARGETS stable-diffusion EXPORT stable-diffusion-targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET stable-diffusion-omp)
  install(TARGETS stable-diffusion-omp EXPORT stable-diffusion-targets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
if(TARGET stable-diffusion-static)
  install(TARGETS stable-diffusion-static ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

set(SD_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/stable-diffusion)
if(SD_BUILD_SHARED_LIBS)
  # The shared library carries its dependencies; a static-only build is described by
  # stable-diffusion.pc (pkg-config --static) instead.
  install(EXPORT stable-diffusion-targets DESTINATION ${SD_CMAKE_INSTALL_DIR})
  configure_package_config_file(
    ${PROJECT_SOURCE_DIR}/cmake/stable-diffusion-config.cmake.in
    ${PROJECT_BINARY_DIR}/stable-diffusion-config.cmake
    INSTALL_DESTINATION ${SD_CMAKE_INSTALL_DIR}
    PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
  # Compatible as the SONAME says: same major version.
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/stable-diffusion-version.cmake
                                   VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/stable-diffusion-config.cmake
                ${PROJECT_BINARY_DIR}/stable-diffusion-version.cmake
          DESTINATION ${SD_CMAKE_INSTALL_DIR})
endif()

# pkg-config: paths relative to the .pc file's folder, so any --prefix works.
set(SD_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${SD_PC_DIR}")
  set(SD_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH sd_pc_up /x/${SD_PC_DIR} /x)
  string(REGEX REPLACE "/$" "" sd_pc_up "${sd_pc_up}")
  set(SD_PC_PREFIX "\${pcfiledir}/${sd_pc_up}")
endif()
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(SD_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(SD_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
# What linking the static archive needs besides it: the system libraries, linked shared
# (they bring their own dependencies).
set(SD_PC_LIBS_PRIVATE "-ldnnl -lhwy -lgrpc++ -lgrpc -lgpr -labsl_synchronization -lprotobuf -lwebpmux -lwebp -lavformat -lavcodec -lswscale -lavutil -lxxhash -lpng -ljpeg -lz -lpcre2-8 -licuuc -fopenmp -lstdc++ -lm")
if(SD_HAVE_VULKAN)
  string(PREPEND SD_PC_LIBS_PRIVATE "-lvulkan ")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/stable-diffusion.pc.in
               ${PROJECT_BINARY_DIR}/stable-diffusion.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/stable-diffusion.pc DESTINATION ${SD_PC_DIR})
