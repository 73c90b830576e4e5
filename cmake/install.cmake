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
# libmcroute_migrate likewise, those that are built (MCR_WITH_*,
# cmake/options.cmake), each beside libmcroute in the same two export sets;
# and the command when it is built.
set(mcr_shared mcroute)
set(mcr_static mcroute_static)
foreach(part pool twemproxy fleet migrate)
  if(part IN_LIST MCR_PARTS)
    list(APPEND mcr_shared mcroute_${part})
    list(APPEND mcr_static mcroute_${part}_static)
  endif()
endforeach()
install(TARGETS ${mcr_shared}
        EXPORT mcroute-shared-targets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS ${mcr_static}
        EXPORT mcroute-static-targets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET mcroute_cli)
  install(TARGETS mcroute_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# libmcroute_libmemcached.so.MAJOR: only when libmemcached was found, since
# its header includes <libmemcached/memcached.h>.
if(TARGET mcroute_libmemcached)
  install(TARGETS mcroute_libmemcached EXPORT mcroute-libmemcached-targets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  # The preload module (LD_PRELOAD=libmcroute_preload.so): no export, no
  # link name; it finds libmcroute.so.MAJOR as any program does.
  install(TARGETS mcroute_preload LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
# libketama.so.2, libketama.a, <mcroute-ketama/ketama.h> and mcroute-ketama.pc
# are installed by compat/libketama/CMakeLists.txt.

# ---------------------------------------------------------------- headers
# Every public header (new ones too), and the generated version header;
# but the header of a library that is not built (MCR_HEADER_PART_<header>:
# the part it belongs to; any other header is libmcroute's).
set(MCR_HEADER_PART_mcroute_pool.h pool)
set(MCR_HEADER_PART_mcroute_twemproxy.h twemproxy)
set(MCR_HEADER_PART_mcroute_fleet.h fleet)
set(MCR_HEADER_PART_mcroute_migrate.h migrate)
set(MCR_HEADER_PART_mcroute_memcached_st.h libmemcached)
set(MCR_HEADER_PART_mcroute_memcached_attach.h libmemcached)
file(GLOB MCR_PUBLIC_HEADERS ${PROJECT_SOURCE_DIR}/include/*.h)
list(REMOVE_ITEM MCR_PUBLIC_HEADERS ${PROJECT_SOURCE_DIR}/include/mcroute_version.h) # in-source builds
set(mcr_headers "")
foreach(h IN LISTS MCR_PUBLIC_HEADERS)
  get_filename_component(n ${h} NAME)
  if(NOT DEFINED MCR_HEADER_PART_${n} OR MCR_HEADER_PART_${n} IN_LIST MCR_PARTS)
    list(APPEND mcr_headers ${h})
  endif()
endforeach()
install(FILES ${mcr_headers} ${MCR_GENERATED_INCLUDE_DIR}/mcroute_version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# ---------------------------------------------------------------- man pages
# mcroute(1), one page per function in section 3 (an alias is a link to
# the page that documents it, cmake/man.cmake), mcroute(7): the generated
# pages, with the version and date. Not those of what is not built:
# mcroute(1) without the command, nor a section 3 page whose SYNOPSIS
# includes (".B #include <...>") the header of a library that is not built
# (an alias reads as its page, and goes with it).
foreach(sec IN LISTS MCR_MAN_SECTIONS)
  set(pages "")
  foreach(page IN LISTS MCR_MAN_PAGES_${sec})
    get_filename_component(n ${page} NAME)
    set(keep ON)
    if(n STREQUAL "mcroute.1" AND NOT TARGET mcroute_cli)
      set(keep OFF)
    elseif(sec EQUAL 3)
      file(STRINGS ${page} incs REGEX "^\\.B #include <[^>]*>")
      foreach(i IN LISTS incs)
        string(REGEX REPLACE "^\\.B #include <([^>]*)>.*" "\\1" i "${i}")
        if(DEFINED MCR_HEADER_PART_${i} AND NOT MCR_HEADER_PART_${i} IN_LIST MCR_PARTS)
          set(keep OFF)
        endif()
      endforeach()
    endif()
    if(keep)
      list(APPEND pages ${page})
    endif()
  endforeach()
  install(FILES ${pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${sec})
endforeach()

# ---------------------------------------------------------------- bash completion
if(TARGET mcroute_cli)
  install(FILES ${PROJECT_SOURCE_DIR}/tools/mcroute.bash-completion
          DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
          RENAME mcroute)
endif()

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
# mcroute.pc always; mcroute-<part>.pc for each library built beside it.
mcr_pc_libs_private(MCR_PC_LIBS_PRIVATE URCU XXHASH)
string(APPEND MCR_PC_LIBS_PRIVATE " -pthread -lm")
configure_file(${CMAKE_CURRENT_LIST_DIR}/mcroute.pc.in ${PROJECT_BINARY_DIR}/mcroute.pc @ONLY)
set(mcr_pc_files ${PROJECT_BINARY_DIR}/mcroute.pc)
set(MCR_PC_MODULES_pool LIBEVENT)
set(MCR_PC_MODULES_twemproxy YAML)
set(MCR_PC_MODULES_fleet LIBEVENT_EXTRA LIBEVENT JANSSON)
set(MCR_PC_EXTRA_fleet " -pthread")
set(MCR_PC_MODULES_migrate LIBEVENT)
foreach(part pool twemproxy fleet migrate)
  if(part IN_LIST MCR_PARTS)
    string(TOUPPER ${part} p)
    mcr_pc_libs_private(MCR_PC_${p}_LIBS_PRIVATE ${MCR_PC_MODULES_${part}})
    string(APPEND MCR_PC_${p}_LIBS_PRIVATE "${MCR_PC_EXTRA_${part}}")
    configure_file(${CMAKE_CURRENT_LIST_DIR}/mcroute-${part}.pc.in
                   ${PROJECT_BINARY_DIR}/mcroute-${part}.pc @ONLY)
    list(APPEND mcr_pc_files ${PROJECT_BINARY_DIR}/mcroute-${part}.pc)
  else()
    # Not the file of an earlier configure that had the part.
    file(REMOVE ${PROJECT_BINARY_DIR}/mcroute-${part}.pc)
  endif()
endforeach()
install(FILES ${mcr_pc_files} DESTINATION ${MCR_PKGCONFIG_DIR})
if(TARGET mcroute_libmemcached)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/mcroute-libmemcached.pc.in
                 ${PROJECT_BINARY_DIR}/mcroute-libmemcached.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/mcroute-libmemcached.pc DESTINATION ${MCR_PKGCONFIG_DIR})
else()
  file(REMOVE ${PROJECT_BINARY_DIR}/mcroute-libmemcached.pc)
endif()

# ---------------------------------------------------------------- CMake package
# find_package(mcroute CONFIG): mcroute::mcroute and, those built,
# mcroute::mcroute_pool, mcroute::mcroute_twemproxy, mcroute::mcroute_fleet,
# mcroute::mcroute_migrate (shared), their _static twins, and
# mcroute::mcroute_libmemcached; components pool, twemproxy, fleet, migrate
# and libmemcached say which this install has (mcroute-config.cmake.in).
# Any 0.x satisfies a request for 0.y with y <= x, never 1.x
# (MCR_PACKAGE_COMPATIBILITY, CMakeLists.txt).
# MCR_CONFIG_PARTS: the libraries built beside libmcroute. MCR_CONFIG_STATIC_FINDS:
# the pkg-config modules the static libraries need, found again by the
# package (as imported targets PkgConfig::mcroute_<x>, the names mcr_library()
# gives them in the static export set), one call a line.
set(MCR_CONFIG_PARTS "")
set(mcr_text "")
foreach(part pool twemproxy fleet migrate libmemcached)
  if(part IN_LIST MCR_PARTS)
    string(APPEND MCR_CONFIG_PARTS " ${part}")
    list(APPEND mcr_text libmcroute_${part})
  endif()
endforeach()
if(mcr_text)
  list(JOIN mcr_text ", " mcr_text)
  set(MCR_CONFIG_PARTS_TEXT "libmcroute, with ${mcr_text}")
else()
  set(MCR_CONFIG_PARTS_TEXT "libmcroute alone (placement; every MCR_WITH_* option was OFF)")
endif()
set(mcr_static_modules "mcroute_urcu_bp liburcu-bp" "mcroute_xxhash libxxhash")
if("twemproxy" IN_LIST MCR_PARTS)
  list(APPEND mcr_static_modules "mcroute_yaml yaml-0.1")
endif()
if("pool" IN_LIST MCR_PARTS OR "fleet" IN_LIST MCR_PARTS OR "migrate" IN_LIST MCR_PARTS)
  list(APPEND mcr_static_modules "mcroute_event_core libevent_core")
endif()
if("fleet" IN_LIST MCR_PARTS)
  list(APPEND mcr_static_modules "mcroute_event_extra libevent_extra" "mcroute_jansson jansson")
endif()
set(MCR_CONFIG_STATIC_FINDS "")
foreach(m IN LISTS mcr_static_modules)
  string(APPEND MCR_CONFIG_STATIC_FINDS "  _mcroute_find_module(_mcroute_missing ${m})\n")
endforeach()
string(REGEX REPLACE "\n$" "" MCR_CONFIG_STATIC_FINDS "${MCR_CONFIG_STATIC_FINDS}")
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
