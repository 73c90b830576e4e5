# SPDX-License-Identifier: BSD-3-Clause
# cmake/options.cmake: which of mcroute's libraries a build makes (MCR_WITH_*), the dependencies each one looks for, and the list of what a build without some of them leaves out.
#
# libmcroute (placement: hashes, configs, rings, snapshots, router, watcher,
# diffs, replicas, libmemcached option strings, libketama files) and
# libketama over it are always built; they need liburcu-bp, threads and
# libm, nothing else. The other libraries are options, each ON by default:
#
#   MCR_WITH_POOL          libmcroute_pool, the connection pool: libevent_core
#   MCR_WITH_TWEMPROXY     libmcroute_twemproxy, nutcracker YAML: libyaml
#   MCR_WITH_FLEET         libmcroute_fleet, pools kept in etcd: libevent_core,
#                          libevent_extra (evhttp), jansson
#   MCR_WITH_MIGRATE       libmcroute_migrate, the key copier of resizes:
#                          libevent_core and libmcroute_pool, so it needs
#                          MCR_WITH_POOL (its default is MCR_WITH_POOL's; ON
#                          with MCR_WITH_POOL=OFF fails the configure)
#   MCR_WITH_LIBMEMCACHED  libmcroute_libmemcached, rings from live
#                          memcached_st handles: libmemcached
#
# A dependency is looked for only when an option that is ON needs it, and
# then it is required: a missing one fails the configure, naming its Debian
# package and the option that does without it (no library is dropped
# silently). With all five OFF, and -DMCR_BUILD_TESTS=OFF
# -DMCR_BUILD_BENCH=OFF, the build needs liburcu-bp alone and makes
# libmcroute, libketama, their headers, pkg-config files and CMake package:
# the placement library, which a distribution can package alone.
#
# The mcroute command (tools/) reads nutcracker files, runs pools, follows
# and changes pools in etcd and runs resizes, from one source file set
# (tools/cli.c calls all four libraries): it is built only when pool,
# twemproxy, fleet and migrate are all ON, and the configure says so when
# it is not.
#
# Parts: MCR_PARTS lists what is built beyond libmcroute and libketama,
# among pool, twemproxy, fleet, migrate, libmemcached and cli (the mcroute
# command). A test, example or benchmark that needs a part that is off is
# neither built nor registered with ctest (ctest -N does not list it), and
# the configure ends with a warning naming each one and what it lacks
# (mcr_parts_missing(), mcr_part_dropped(), mcr_report_parts()).

option(MCR_WITH_POOL "Build libmcroute_pool, the connection pool (needs libevent_core)" ON)
option(MCR_WITH_TWEMPROXY "Build libmcroute_twemproxy, nutcracker YAML (needs libyaml)" ON)
option(MCR_WITH_FLEET "Build libmcroute_fleet, pools kept in etcd (needs libevent_core, libevent_extra, jansson)" ON)
option(MCR_WITH_MIGRATE "Build libmcroute_migrate, the key copier of resizes (needs MCR_WITH_POOL)" ${MCR_WITH_POOL})
option(MCR_WITH_LIBMEMCACHED "Build libmcroute_libmemcached, rings from memcached_st handles (needs libmemcached)" ON)
# The Python package needs the pool and the fleet: on by default when both are.
if(MCR_WITH_POOL AND MCR_WITH_FLEET)
  set(mcr_python_default ON)
else()
  set(mcr_python_default OFF)
endif()
option(MCR_WITH_PYTHON "Build the Python package's C extension into the build tree for its tests (needs python3-dev, MCR_WITH_POOL, MCR_WITH_FLEET)" ${mcr_python_default})
unset(mcr_python_default)
# The nginx module: on by default where nginx-dev is installed, and not in
# the sanitizer and fuzz builds (nginx loads it without their runtimes).
if(EXISTS /usr/share/nginx/src/configure AND NOT MCR_ASAN AND NOT MCR_TSAN AND NOT MCR_FUZZ)
  set(mcr_nginx_default ON)
else()
  set(mcr_nginx_default OFF)
endif()
option(MCR_WITH_NGINX "Build ngx_http_mcroute_module.so into the build tree (needs nginx-dev)" ${mcr_nginx_default})
unset(mcr_nginx_default)

if(MCR_WITH_MIGRATE AND NOT MCR_WITH_POOL)
  message(FATAL_ERROR "MCR_WITH_MIGRATE=ON needs MCR_WITH_POOL=ON: libmcroute_migrate copies keys "
                      "through libmcroute_pool. Configure with -DMCR_WITH_MIGRATE=OFF as well, or "
                      "with -DMCR_WITH_POOL=ON")
endif()

set(MCR_PARTS "")
foreach(part pool twemproxy fleet migrate libmemcached)
  string(TOUPPER ${part} opt)
  if(MCR_WITH_${opt})
    list(APPEND MCR_PARTS ${part})
  endif()
endforeach()
set(MCR_CLI_PARTS pool twemproxy fleet migrate)
set(mcr_cli ON)
foreach(part IN LISTS MCR_CLI_PARTS)
  if(NOT part IN_LIST MCR_PARTS)
    set(mcr_cli OFF)
  endif()
endforeach()
if(mcr_cli)
  list(APPEND MCR_PARTS cli)
endif()
unset(mcr_cli)

# mcr_need_module(PREFIX MODULE PACKAGE WHAT OPTION): pkg_check_modules
# (PREFIX, imported target PkgConfig::PREFIX) of MODULE, which WHAT needs;
# when it is missing, a configure error naming the Debian package and the
# option (OPTION, or "" for what is always built) that does without it. A
# macro: pkg_check_modules' variables (PREFIX_STATIC_LIBRARIES...) stay in
# the caller's scope, where install.cmake reads them.
macro(mcr_need_module prefix module package what option)
  if(NOT TARGET PkgConfig::${prefix})
    pkg_check_modules(${prefix} IMPORTED_TARGET ${module})
  endif()
  if(NOT ${prefix}_FOUND)
    if("${option}" STREQUAL "")
      message(FATAL_ERROR "${what} needs ${module} (Debian package ${package}; scripts/deps.sh "
                          "installs it)")
    else()
      message(FATAL_ERROR "${what} needs ${module} (Debian package ${package}; scripts/deps.sh "
                          "installs it), or configure with -D${option}=OFF")
    endif()
  endif()
endmacro()

# mcr_parts_missing(OUT part...): the parts among those named that this
# build does not make, each with the option that turns it on ("pool
# (MCR_WITH_POOL=OFF)"), in OUT; empty when all are built. "core" is always
# built.
function(mcr_parts_missing out)
  set(missing "")
  foreach(part IN LISTS ARGN)
    if(part STREQUAL "core" OR part IN_LIST MCR_PARTS)
      continue()
    endif()
    if(part STREQUAL "cli")
      list(APPEND missing "the mcroute command")
    elseif(part MATCHES "^(pool|twemproxy|fleet|migrate|libmemcached)$")
      string(TOUPPER ${part} opt)
      list(APPEND missing "libmcroute_${part} (MCR_WITH_${opt}=OFF)")
    else()
      message(FATAL_ERROR "mcr_parts_missing: unknown part '${part}' (core, pool, twemproxy, "
                          "fleet, migrate, libmemcached or cli)")
    endif()
  endforeach()
  list(JOIN missing ", " missing)
  set(${out} "${missing}" PARENT_SCOPE)
endfunction()

# mcr_part_dropped(WHAT MISSING): records that WHAT (a test, an example, a
# benchmark) is not built, for want of MISSING (mcr_parts_missing()'s
# text); mcr_report_parts() lists them all at the end of the configure.
function(mcr_part_dropped what missing)
  set_property(GLOBAL APPEND PROPERTY MCR_DROPPED "${what}: needs ${missing}")
endfunction()

# mcr_report_parts(): what is built and what is not, at the end of the
# configure (the top CMakeLists.txt calls it last). A test, example or
# benchmark left out for a library that is off is a warning, one line each.
function(mcr_report_parts)
  set(built libmcroute libketama)
  set(not_built "")
  foreach(part pool twemproxy fleet migrate libmemcached)
    string(TOUPPER ${part} opt)
    if(part IN_LIST MCR_PARTS)
      list(APPEND built libmcroute_${part})
    else()
      list(APPEND not_built "libmcroute_${part} (MCR_WITH_${opt}=OFF)")
    endif()
  endforeach()
  if("cli" IN_LIST MCR_PARTS)
    list(APPEND built "the mcroute command")
  else()
    list(APPEND not_built "the mcroute command (it needs MCR_WITH_POOL, MCR_WITH_TWEMPROXY, MCR_WITH_FLEET and MCR_WITH_MIGRATE all ON)")
  endif()
  list(JOIN built ", " built)
  message(STATUS "mcroute: building ${built}")
  if(not_built) # (not "off": if(off) is if(OFF))
    list(JOIN not_built "\n   " not_built)
    message(NOTICE "mcroute: not built:\n   ${not_built}")
  endif()
  get_property(dropped GLOBAL PROPERTY MCR_DROPPED)
  if(dropped)
    list(LENGTH dropped n)
    list(JOIN dropped "\n   " dropped)
    message(WARNING "mcroute: ${n} tests, examples and benchmarks are not built nor registered "
                    "with ctest, their libraries being off:\n   ${dropped}")
  endif()
endfunction()
