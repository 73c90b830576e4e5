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
# libmcroute_pool, libmcroute_twemproxy, libmcroute_fleet and
# libmcroute_migrate likewise, each beside libmcroute in the same two export
# sets.
install(TARGETS mcroute mcroute_pool mcroute_twemproxy mcroute_fleet mcroute_migrate
        EXPORT mcroute-shared-targets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS mcroute_static mcroute_pool_static mcroute_twemproxy_static mcroute_fleet_static
                mcroute_migrate_static
        EXPORT mcroute-static-targets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
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
# lines, resolved by man from the section directories), mcroute(7): the
# generated pages, with the version and date (cmake/man.cmake).
foreach(sec IN LISTS MCR_MAN_SECTIONS)
  install(FILES ${MCR_MAN_PAGES_${sec}} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${sec})
endforeach()

# ---------------------------------------------------------------- bash completion
install(FILES ${PROJECT_SOURCE_DIR}/tools/mcroute.bash-completion
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME mcroute)

# ---------------------------------------------------------------- pkg-config
# ${pcfiledir}/<MCR_PC_UP> is the prefix, wherever the tree was installed.
file(RELATIVE_PATH MCR_PC_UP "/p/${MCR_PKGCONFIG_DIR}" "/p")
string(REGEX REPLACE "/$" "" MCR_PC_UP "${MCR_PC_UP}")
# mcr_pc_libs_private(OUT MODULES...): the Libs.private of a .pc file: the
# static link flags of the pkg-config MODULES (YAML, URCU, LIBEVENT: the
# prefixes of pkg_check_modules) as the build found them (a -L only for a
# directory the compiler does not search already).
function(mcr_pc_libs_private out)
  set(flags "")
  foreach(m IN LISTS ARGN)
    foreach(d IN LISTS ${m}_STATIC_LIBRARY_DIRS)
      if(NOT d IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
        list(APPEND flags "-L${d}")
      endif()
    endforeach()
    foreach(l IN LISTS ${m}_STATIC_LIBRARIES)
      list(APPEND flags "-l${l}")
    endforeach()
    list(APPEND flags ${${m}_STATIC_LDFLAGS_OTHER})
  endforeach()
  list(REMOVE_DUPLICATES flags)
  string(JOIN " " flags ${flags})
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()
mcr_pc_libs_private(MCR_PC_LIBS_PRIVATE URCU)
string(APPEND MCR_PC_LIBS_PRIVATE " -pthread -lm")
mcr_pc_libs_private(MCR_PC_POOL_LIBS_PRIVATE LIBEVENT)
mcr_pc_libs_private(MCR_PC_TWEMPROXY_LIBS_PRIVATE YAML)
mcr_pc_libs_private(MCR_PC_FLEET_LIBS_PRIVATE LIBEVENT_EXTRA LIBEVENT JANSSON)
string(APPEND MCR_PC_FLEET_LIBS_PRIVATE " -pthread")
mcr_pc_libs_private(MCR_PC_MIGRATE_LIBS_PRIVATE LIBEVENT)
configure_file(${CMAKE_CURRENT_LIST_DIR}/mcroute.pc.in ${PROJECT_BINARY_DIR}/mcroute.pc @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/mcroute-pool.pc.in ${PROJECT_BINARY_DIR}/mcroute-pool.pc @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/mcroute-twemproxy.pc.in
               ${PROJECT_BINARY_DIR}/mcroute-twemproxy.pc @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/mcroute-fleet.pc.in ${PROJECT_BINARY_DIR}/mcroute-fleet.pc @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/mcroute-migrate.pc.in ${PROJECT_BINARY_DIR}/mcroute-migrate.pc
               @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mcroute.pc ${PROJECT_BINARY_DIR}/mcroute-pool.pc
              ${PROJECT_BINARY_DIR}/mcroute-twemproxy.pc ${PROJECT_BINARY_DIR}/mcroute-fleet.pc
              ${PROJECT_BINARY_DIR}/mcroute-migrate.pc
        DESTINATION ${MCR_PKGCONFIG_DIR})
if(TARGET mcroute_libmemcached)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/mcroute-libmemcached.pc.in
                 ${PROJECT_BINARY_DIR}/mcroute-libmemcached.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/mcroute-libmemcached.pc DESTINATION ${MCR_PKGCONFIG_DIR})
endif()

# ---------------------------------------------------------------- CMake package
# find_package(mcroute CONFIG): mcroute::mcroute, mcroute::mcroute_pool,
# mcroute::mcroute_twemproxy, mcroute::mcroute_fleet, mcroute::mcroute_migrate
# (shared), their _static twins, and
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
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${MCR_PACKAGE_COMPATIBILITY})
install(FILES ${PROJECT_BINARY_DIR}/mcroute-config.cmake
              ${PROJECT_BINARY_DIR}/mcroute-config-version.cmake
        DESTINATION ${MCR_CMAKE_PACKAGE_DIR})
