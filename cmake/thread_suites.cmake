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
#
# Suites whose threads are in a few tests only (MCR_THREAD_CASE_SUITES,
# test/CMakeLists.txt) keep those tests in a TCase named "threads", and a
# TSan build runs only that TCase of them (CK_RUN_CASE=threads): the plain
# and ASan builds run them whole. For each such suite the check reads the
# suite's file as top-level definitions (START_TEST bodies, functions and
# macros, each up to the next one at column 0) and follows its calls: a
# test whose body reaches a thread starter (directly, or through a function
# or macro of the file that does, at any depth; a name that is only passed,
# as a thread's body is, counts too) must be in the TCase "threads", and a
# test in it must reach one. The helpers such a suite links must start no
# thread (their calls are not followed).

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
    if(s IN_LIST MCR_THREAD_CASE_SUITES)
      if(NOT "threads" IN_LIST labels)
        message(FATAL_ERROR "${s} is in MCR_THREAD_CASE_SUITES but not labelled threads: add it to "
                            "MCR_THREAD_SUITES in test/CMakeLists.txt")
      endif()
      mcr_check_thread_case(${s} "${api_re}" "${cli_re}" ${cli} "${files}")
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

# mcr_check_thread_case(suite api_re cli_re cli files): the tests of the
# suite that reach a thread starter are exactly those of its TCase "threads"
# (see the top of this file). files: the suite's source, then its helpers'.
function(mcr_check_thread_case s api_re cli_re cli files)
  set(starts "${api_re}")
  if(cli)
    set(starts "(${api_re}|${cli_re})")
  endif()
  list(GET files 0 main)
  list(REMOVE_AT files 0)
  foreach(f ${files})
    if(NOT IS_ABSOLUTE ${f})
      set(f ${CMAKE_CURRENT_SOURCE_DIR}/${f})
    endif()
    file(READ ${f} text)
    if(text MATCHES "${starts}")
      message(FATAL_ERROR "${s} is in MCR_THREAD_CASE_SUITES but its helper ${f} starts a thread "
                          "(${CMAKE_MATCH_1}): the check cannot tell which tests do; take ${s} out "
                          "of MCR_THREAD_CASE_SUITES in test/CMakeLists.txt (TSan runs it whole)")
    endif()
  endforeach()
  if(NOT IS_ABSOLUTE ${main})
    set(main ${CMAKE_CURRENT_SOURCE_DIR}/${main})
  endif()
  file(READ ${main} text)
  # Comments out (a name in prose is no call), then the lines as a CMake
  # list: what lists treat specially is replaced first.
  string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" " " body "${text}")
  string(REGEX REPLACE "//[^\n]*" "" body "${body}")
  string(REPLACE "\\" "<bs>" body "${body}")
  string(REPLACE ";" "<sc>" body "${body}")
  string(REPLACE "[" "<lb>" body "${body}")
  string(REPLACE "]" "<rb>" body "${body}")
  string(REPLACE "\n" ";" lines "${body}")
  set(id "[A-Za-z_][A-Za-z0-9_]*")
  set(cur "")
  set(fns "")
  set(tests "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^START_TEST\\((${id})\\)")
      set(cur ${CMAKE_MATCH_1})
      list(APPEND tests ${cur})
    elseif(line MATCHES "^#[ \t]*define[ \t]+(${id})")
      set(cur ${CMAKE_MATCH_1})
    elseif(line MATCHES "^[A-Za-z_]" AND line MATCHES "<sc>[ \t]*$")
      continue() # a declaration at column 0 (a prototype): no body
    elseif(line MATCHES "^[A-Za-z_]([^=(]*[ \t*])?(${id})\\(")
      set(cur ${CMAKE_MATCH_2})
    endif()
    if(cur STREQUAL "")
      continue()
    endif()
    if(NOT DEFINED body_${cur})
      list(APPEND fns ${cur})
      set(body_${cur} "")
    endif()
    string(APPEND body_${cur} "${line}\n")
  endforeach()
  # The definitions that start a thread, then those that reach one; main()
  # and the function that makes the suite, which name every test, are the
  # harness: not followed.
  set(threaded "")
  foreach(fn ${fns})
    if(fn STREQUAL "main" OR body_${fn} MATCHES "suite_create\\(")
      list(REMOVE_ITEM fns ${fn})
    endif()
  endforeach()
  foreach(fn ${fns})
    if(body_${fn} MATCHES "${starts}")
      list(APPEND threaded ${fn})
      set(why_${fn} "${CMAKE_MATCH_1}()")
    endif()
  endforeach()
  set(grew 1)
  while(grew AND threaded)
    set(grew 0)
    list(JOIN threaded "|" t_re)
    foreach(fn ${fns})
      if(NOT fn IN_LIST threaded AND
         body_${fn} MATCHES "[^A-Za-z0-9_](${t_re})([^A-Za-z0-9_]|$)")
        list(APPEND threaded ${fn})
        set(why_${fn} "${CMAKE_MATCH_1}, which calls ${why_${CMAKE_MATCH_1}}")
        set(grew 1)
      endif()
    endforeach()
  endwhile()
  # The TCase "threads" and its tests.
  if(NOT text MATCHES "(${id})[ \t]*=[ \t]*tcase_create\\(\"threads\"\\)")
    message(FATAL_ERROR "${s} is in MCR_THREAD_CASE_SUITES (a TSan build runs only its TCase "
                        "\"threads\") but ${main} makes no TCase \"threads\"")
  endif()
  set(tvar ${CMAKE_MATCH_1})
  if(NOT text MATCHES "suite_add_tcase\\([^,()]*,[ \t]*${tvar}[ \t]*\\)")
    message(FATAL_ERROR "${main}: the TCase \"threads\" (${tvar}) is not added to the suite")
  endif()
  string(REGEX MATCHALL "tcase_add_(loop_)?test\\([ \t]*${id}[ \t]*,[ \t]*${id}" adds "${text}")
  set(incase "")
  foreach(a ${adds})
    string(REGEX MATCH "\\([ \t]*(${id})[ \t]*,[ \t]*(${id})" a "${a}")
    if(CMAKE_MATCH_1 STREQUAL tvar)
      list(APPEND incase ${CMAKE_MATCH_2})
    endif()
  endforeach()
  foreach(t ${tests})
    if(t IN_LIST threaded AND NOT t IN_LIST incase)
      message(FATAL_ERROR "${s}: test ${t} runs a second thread (it calls ${why_${t}}) but is not in "
                          "the TCase \"threads\" of ${main}, the only one a TSan build runs: add it "
                          "there (tcase_add_test(${tvar}, ${t})) instead of its TCase now")
    endif()
  endforeach()
  foreach(t ${incase})
    if(NOT t IN_LIST tests)
      message(FATAL_ERROR "${main}: ${t}, in the TCase \"threads\", is no START_TEST of the file "
                          "(cmake/thread_suites.cmake cannot follow it)")
    elseif(NOT t IN_LIST threaded)
      message(FATAL_ERROR "${s}: test ${t} is in the TCase \"threads\" but shows no second thread: "
                          "put it in another TCase of ${main} (a TSan build runs only \"threads\")")
    endif()
  endforeach()
  if(NOT incase)
    message(FATAL_ERROR "${main}: the TCase \"threads\" has no test")
  endif()
  list(JOIN incase " " names)
  message(STATUS "${s}: a TSan build runs its TCase threads only (${names})")
endfunction()
