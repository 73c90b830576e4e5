# SPDX-License-Identifier: BSD-3-Clause
# cmake/test_time_scale.cmake: ctest's time limits grown by MCR_TEST_TIME_SCALE, the one factor of the tests' timing (test/testutil.h).
#
# MCR_TEST_TIME_SCALE (a positive number, 1 by default) comes from the
# environment of cmake when it is set there (for that configure run only),
# else from -DMCR_TEST_TIME_SCALE=N (kept in the cache). Every test registered in a directory that calls
# mcr_scale_test_timeouts() gets, at the end of that directory:
#   - TIMEOUT multiplied by the scale (ctest's default of 1500 s when unset);
#   - MCR_TEST_TIME_SCALE_CTEST=<scale> in its environment, which the suites
#     take as their scale when MCR_TEST_TIME_SCALE is not set at run time.
# CI on a slow or loaded machine: MCR_TEST_TIME_SCALE=3 ./scripts/test.sh
# (each stage configures its build, so cmake sees it; the valgrind stage runs
# the binaries directly, which read it from the environment).

set(MCR_TEST_TIME_SCALE 1 CACHE STRING "Factor of every time limit of the tests (see test/testutil.h)")
if(DEFINED ENV{MCR_TEST_TIME_SCALE})
  set(MCR_TEST_TIME_SCALE "$ENV{MCR_TEST_TIME_SCALE}") # shadows the cache, not stored
endif()

# The scale in thousandths, as an integer: CMake's math() has no fractions.
if(NOT MCR_TEST_TIME_SCALE MATCHES "^([0-9]+)(\\.([0-9]*))?$")
  message(FATAL_ERROR "MCR_TEST_TIME_SCALE=\"${MCR_TEST_TIME_SCALE}\": not a positive "
                      "decimal number such as 1, 2.5 or 10")
endif()
set(mcr_scale_int "${CMAKE_MATCH_1}")
string(SUBSTRING "${CMAKE_MATCH_3}000" 0 3 mcr_scale_frac)
math(EXPR MCR_TEST_TIME_SCALE_MILLI "${mcr_scale_int} * 1000 + 1${mcr_scale_frac} - 1000")
if(MCR_TEST_TIME_SCALE_MILLI LESS 1 OR MCR_TEST_TIME_SCALE_MILLI GREATER 1000000)
  message(FATAL_ERROR "MCR_TEST_TIME_SCALE=\"${MCR_TEST_TIME_SCALE}\": must be in "
                      "(0, 1000] (at least 0.001)")
endif()

# seconds * scale, rounded up, into out_var.
function(mcr_scaled_seconds out_var seconds)
  math(EXPR v "(${seconds} * ${MCR_TEST_TIME_SCALE_MILLI} + 999) / 1000")
  set(${out_var} ${v} PARENT_SCOPE)
endfunction()

function(mcr_scale_test_timeouts_now)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS tests)
    get_test_property(${t} TIMEOUT base)
    if(NOT base)
      set(base 1500)
    endif()
    mcr_scaled_seconds(scaled ${base})
    set_tests_properties(${t} PROPERTIES TIMEOUT ${scaled})
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT
                 "MCR_TEST_TIME_SCALE_CTEST=${MCR_TEST_TIME_SCALE}")
  endforeach()
endfunction()

# Call once at the top of a CMakeLists.txt that adds tests: the scaling runs
# when that directory is done, so it covers tests added after the call too.
macro(mcr_scale_test_timeouts)
  cmake_language(DEFER CALL mcr_scale_test_timeouts_now)
endmacro()
