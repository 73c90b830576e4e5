# SPDX-License-Identifier: BSD-3-Clause
# cmake/thread_suites.cmake: which test suites run more than one thread (label "threads", the ones scripts/test.sh runs under ThreadSanitizer), checked against their sources at every configure.
#
# ThreadSanitizer finds races between threads; a suite whose process (and
# the mcroute processes it runs) has one thread gains nothing from it. So
# the TSan stage runs only the suites labelled "threads" (and the
# examples), and so that the label cannot rot, mcr_check_thread_labels()
# fails the configure (of every build, the plain one included) when a
# suite's sources show a second thread and the suite is not labelled, or
# the other way round.
#
# A second thread comes from:
#   - the suite itself: pthread_create() or thrd_create();
#   - the library: the functions of MCR_THREAD_STARTERS below. A router's
#     replaced snapshots are freed by liburcu's call_rcu thread (started on
#     first use), so mcr_router_new() counts; mcr_pool_new() takes a router
#     made with it. The list is checked against lib/: a file there that
#     starts a thread (pthread_create, thrd_create, call_rcu, or a router
#     of its own) and is not in the list fails the configure;
#   - the mcroute command, run by a suite that links test/clirun.c: its
#     commands of MCR_THREAD_COMMANDS (checked the same way against
#     tools/), found in the suite as ARGS("command", ...).
# The helpers a suite links (mcr_suite_uses(), test/CMakeLists.txt) are
# read with it. Shell tests (test_cli_completion, test_install, check_*)
# are not Check suites: none runs a thread (their mcroute runs are --help
# and locate); nor does test_clients (test_clients.c, registered apart).
# scripts/test.sh configures every build it makes, so the check runs on
# each of its runs; an existing build dir rechecks when it reconfigures.

# lib/ file = the public functions through which it starts a thread.
set(MCR_THREAD_STARTERS
  "router.c=mcr_router_new"              # liburcu's call_rcu thread
  "watcher.c=mcr_watcher_new"            # the file watcher's thread
  "fleet/follow.c=mcr_fleet_follow"      # the follower's thread
  "fleet/migration.c=mcr_fleet_migration_lock" # the lock's keepalive thread
  "migrate/copy.c=mcr_migrate_run")      # two routers of its own
# tools/ file = the mcroute commands that run it (each makes a router).
set(MCR_THREAD_COMMANDS
  "pool_cmds.c=set,get,delete,probe"
  "watch.c=watch"
  "migrate_cmd.c=migrate"
  "migrate_fleet.c=migrate")

function(mcr_check_thread_labels)
  set(src ${PROJECT_SOURCE_DIR})
  # 1. The library's thread starters, against lib/.
  set(api pthread_create thrd_create)
  set(known)
  foreach(e ${MCR_THREAD_STARTERS})
    string(REPLACE "=" ";" kv "${e}")
    list(GET kv 0 f)
    list(GET kv 1 fns)
    list(APPEND known ${f})
    string(REPLACE "," ";" fns "${fns}")
    list(APPEND api ${fns})
  endforeach()
  file(GLOB_RECURSE libsrc RELATIVE ${src}/lib ${src}/lib/*.c)
  foreach(f ${libsrc})
    file(READ ${src}/lib/${f} text)
    if(text MATCHES "(pthread_create|thrd_create|call_rcu|mcr_router_new)[ \t]*\\(" AND
       NOT f IN_LIST known)
      message(FATAL_ERROR "lib/${f} starts a thread (${CMAKE_MATCH_1}): add it and the public "
                          "functions that reach it to MCR_THREAD_STARTERS in "
                          "cmake/thread_suites.cmake")
    endif()
  endforeach()
  list(JOIN api "|" api_re)
  set(api_re "(${api_re})[ \t]*\\(")

  # 2. The CLI's commands that start threads, against tools/.
  set(known)
  set(cmds)
  foreach(e ${MCR_THREAD_COMMANDS})
    string(REPLACE "=" ";" kv "${e}")
    list(GET kv 0 f)
    list(GET kv 1 c)
    list(APPEND known ${f})
    string(REPLACE "," ";" c "${c}")
    list(APPEND cmds ${c})
  endforeach()
  file(GLOB toolsrc RELATIVE ${src}/tools ${src}/tools/*.c)
  foreach(f ${toolsrc})
    file(READ ${src}/tools/${f} text)
    if(text MATCHES "${api_re}" AND NOT f IN_LIST known)
      message(FATAL_ERROR "tools/${f} calls ${CMAKE_MATCH_1}, which starts a thread: add it "
                          "and its mcroute commands to MCR_THREAD_COMMANDS in "
                          "cmake/thread_suites.cmake")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES cmds)
  list(JOIN cmds "|" cli_re)
  set(cli_re "ARGS\\(\"(${cli_re})\"")

  # 3. Every suite, its sources and helpers read.
  get_property(suites GLOBAL PROPERTY MCR_SUITES)
  foreach(s ${suites})
    get_target_property(files ${s} SOURCES)
    get_target_property(links ${s} LINK_LIBRARIES)
    set(cli 0)
    foreach(l ${links})
      if(l MATCHES "^mcr_test_")
        get_target_property(more ${l} SOURCES)
        list(APPEND files ${more})
        if(l STREQUAL "mcr_test_clirun")
          set(cli 1)
        endif()
      endif()
    endforeach()
    set(why "")
    foreach(f ${files})
      if(NOT IS_ABSOLUTE ${f})
        set(f ${CMAKE_CURRENT_SOURCE_DIR}/${f})
      endif()
      file(READ ${f} text)
      if(text MATCHES "${api_re}")
        set(why "${CMAKE_MATCH_1}() in ${f}")
        break()
      elseif(cli AND text MATCHES "${cli_re}")
        set(why "mcroute ${CMAKE_MATCH_1} in ${f}")
        break()
      endif()
    endforeach()
    get_test_property(${s} LABELS labels)
    if(NOT labels)
      set(labels "")
    endif()
    if(why AND NOT "threads" IN_LIST labels)
      message(FATAL_ERROR "${s} runs a second thread (${why}) but is not labelled threads: "
                          "add it to MCR_THREAD_SUITES in test/CMakeLists.txt, or scripts/test.sh "
                          "will not run it under ThreadSanitizer")
    elseif(NOT why AND "threads" IN_LIST labels)
      message(FATAL_ERROR "${s} is labelled threads but its sources show no second thread: "
                          "take it out of MCR_THREAD_SUITES in test/CMakeLists.txt, or teach "
                          "cmake/thread_suites.cmake how it starts one")
    endif()
  endforeach()
endfunction()
