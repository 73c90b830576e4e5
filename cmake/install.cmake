# SPDX-License-Identifier: BSD-3-Clause
# install.cmake: what `cmake --install` puts where: libraries, headers, the CLI, man pages, pkg-config files, the CMake package, shell completion.
#
# Every destination is a GNUInstallDirs variable, relative to the prefix, and
# every installed text file finds the prefix from its own place (pkg-config's
# ${pcfiledir}, CMake's ${CMAKE_CURRENT_LIST_DIR}), so an install tree can be
# moved, or installed with `cmake --install BUILD --prefix DIR`, and still
# work. test/test_install.sh checks all of it from a consumer's side.
include(CMakePackageConfigHelpers)

set(MCR_CMAKE_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mcroute)
set(MCR_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---------------------------------------------------------------- libraries, CLI
# libmcroute.so.MAJOR (SONAME, see <mcroute_version.h>) with its
# libmcroute.so link, libmcroute.a, and the mcroute command, which links the
# static library and so needs no libmcroute at run time. The two libraries
# are in separate export sets: a program that uses only the shared library
# must not need the static one's dependencies (libyaml, liburcu, libevent
# development files) to find the package.
install(TARGETS mcroute EXPORT mcroute-shared-targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS mcroute_static EXPORT mcroute-static-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS mcroute_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# libmcroute_libmemcached.so.MAJOR: only when libmemcached was found, since
# its header includes <libmemcached/memcached.h>.
if(TARGET mcroute_libmemcached)
  install(TARGETS mcroute_libmemcached EXPORT mcroute-libmemcached-targets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
# libketama.so.2, libketama.a, <mcroute-ketama/ketama.h> and mcroute-ketama.pc
# are installed by compat/libketama/CMakeLists.txt.

# ---------------------------------------------------------------- headers
# Every public header (new ones too), and the generated version header.
file(GLOB MCR_PUBLIC_HEADERS ${PROJECT_SOURCE_DIR}/include/*.h)
list(REMOVE_ITEM MCR_PUBLIC_HEADERS ${PROJECT_SOURCE_DIR}/include/mcroute_version.h) # in-source builds
install(FILES ${MCR_PUBLIC_HEADERS} ${MCR_GENERATED_INCLUDE_DIR}/mcroute_version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# ---------------------------------------------------------------- man pages
# mcroute(1), one page per function in section 3 (aliases are ".so man3/x.3"
# lines, resolved by man from the section directories), mcroute(7).
foreach(sec 1 3 7)
  file(GLOB MCR_MAN_${sec} ${PROJECT_SOURCE_DIR}/man/*.${sec})
  install(FILES ${MCR_MAN_${sec}} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${sec})
endforeach()

# ---------------------------------------------------------------- bash completion
# Installed when the sources have one (checked at configure time).
foreach(f tools/mcroute.bash-completion tools/mcroute-completion.bash tools/mcroute.bash)
  if(EXISTS ${PROJECT_SOURCE_DIR}/${f})
    install(FILES ${PROJECT_SOURCE_DIR}/${f}
            DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
            RENAME mcroute)
    break()
  endif()
endforeach()

# ---------------------------------------------------------------- pkg-config
# ${pcfiledir}/<MCR_PC_UP> is the prefix, wherever the tree was installed.
file(RELATIVE_PATH MCR_PC_UP "/p/${MCR_PKGCONFIG_DIR}" "/p")
string(REGEX REPLACE "/$" "" MCR_PC_UP "${MCR_PC_UP}")
# Libs.private of mcroute.pc: the static link flags of libmcroute's
# dependencies as the build found them (a -L only for a directory the
# compiler does not search already), then threads and libm.
set(MCR_PC_LIBS_PRIVATE "")
foreach(m YAML URCU LIBEVENT)
  foreach(d IN LISTS ${m}_STATIC_LIBRARY_DIRS)
    if(NOT d IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
      list(APPEND MCR_PC_LIBS_PRIVATE "-L${d}")
    endif()
  endforeach()
  foreach(l IN LISTS ${m}_STATIC_LIBRARIES)
    list(APPEND MCR_PC_LIBS_PRIVATE "-l${l}")
  endforeach()
  list(APPEND MCR_PC_LIBS_PRIVATE ${${m}_STATIC_LDFLAGS_OTHER})
endforeach()
list(APPEND MCR_PC_LIBS_PRIVATE -pthread -lm)
list(REMOVE_DUPLICATES MCR_PC_LIBS_PRIVATE)
string(JOIN " " MCR_PC_LIBS_PRIVATE ${MCR_PC_LIBS_PRIVATE})
configure_file(${CMAKE_CURRENT_LIST_DIR}/mcroute.pc.in ${PROJECT_BINARY_DIR}/mcroute.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mcroute.pc DESTINATION ${MCR_PKGCONFIG_DIR})
if(TARGET mcroute_libmemcached)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/mcroute-libmemcached.pc.in
                 ${PROJECT_BINARY_DIR}/mcroute-libmemcached.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/mcroute-libmemcached.pc DESTINATION ${MCR_PKGCONFIG_DIR})
endif()

# ---------------------------------------------------------------- CMake package
# find_package(mcroute CONFIG): mcroute::mcroute (shared), mcroute::mcroute_static,
# mcroute::mcroute_libmemcached when built. Any 0.x satisfies a request for
# 0.y with y <= x, never 1.x: the rule of the SONAME.
install(EXPORT mcroute-shared-targets NAMESPACE mcroute::
        DESTINATION ${MCR_CMAKE_PACKAGE_DIR})
install(EXPORT mcroute-static-targets NAMESPACE mcroute::
        DESTINATION ${MCR_CMAKE_PACKAGE_DIR})
if(TARGET mcroute_libmemcached)
  install(EXPORT mcroute-libmemcached-targets NAMESPACE mcroute::
          DESTINATION ${MCR_CMAKE_PACKAGE_DIR})
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/mcroute-config.cmake.in
  ${PROJECT_BINARY_DIR}/mcroute-config.cmake
  INSTALL_DESTINATION ${MCR_CMAKE_PACKAGE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mcroute-config-version.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mcroute-config.cmake
              ${PROJECT_BINARY_DIR}/mcroute-config-version.cmake
        DESTINATION ${MCR_CMAKE_PACKAGE_DIR})
