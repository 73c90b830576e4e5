# SPDX-License-Identifier: BSD-3-Clause
# man.cmake: the build's man pages: every page of man/ with the project's version and release date in its .TH line.
#
# A source page says `.TH NAME N "@MCR_MAN_DATE@" "mcroute @MCR_VERSION@" ...`
# (test/check_docs.sh fails on a page that names a version itself);
# configure_file(@ONLY) writes it to MCR_GENERATED_MAN_DIR with
# MCR_VERSION = PROJECT_VERSION and MCR_MAN_DATE from CMakeLists.txt. An
# alias page (a name of a page that documents several functions) is a
# relative symbolic link to its page in the same directory, man/x.3 ->
# y.3: it is made again as the same link beside the generated pages, and
# installed as a link (install(FILES) keeps a link a link), so that
# `man -l man/x.3`, `man -l PREFIX/share/man/man3/x.3` and `man x` all show
# y.3. (A ".so man3/y.3" line would not do: `man -l` resolves it from the
# current directory.) The directory is not build/man, so that an in-source
# build cannot write over man/.
if(NOT MCR_MAN_DATE MATCHES "^[0-9][0-9][0-9][0-9]-[01][0-9]-[0-3][0-9]$")
  message(FATAL_ERROR "MCR_MAN_DATE '${MCR_MAN_DATE}': need the release date as YYYY-MM-DD")
endif()
set(MCR_VERSION ${PROJECT_VERSION})
set(MCR_GENERATED_MAN_DIR ${PROJECT_BINARY_DIR}/doc/man)
# configure_file() makes it, file(CREATE_LINK) does not: an alias may come first.
file(MAKE_DIRECTORY ${MCR_GENERATED_MAN_DIR})
# CONFIGURE_DEPENDS: a page added to man/ is generated (and installed) by the
# next build, without a manual cmake run.
file(GLOB MCR_MAN_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/man/*.[0-9])
if(NOT MCR_MAN_SOURCES)
  message(FATAL_ERROR "${PROJECT_SOURCE_DIR}/man: no man page")
endif()
# MCR_MAN_PAGES_<N>: the generated pages of section N, for install.cmake.
set(MCR_MAN_SECTIONS 1 3 7)
foreach(sec IN LISTS MCR_MAN_SECTIONS)
  set(MCR_MAN_PAGES_${sec} "")
endforeach()
foreach(page IN LISTS MCR_MAN_SOURCES)
  get_filename_component(name ${page} NAME)
  string(REGEX REPLACE "^.*\\.([0-9])$" "\\1" sec ${name})
  if(NOT sec IN_LIST MCR_MAN_SECTIONS)
    message(FATAL_ERROR "man/${name}: section ${sec}, but pages are installed in sections 1, 3 and 7 only")
  endif()
  set(out ${MCR_GENERATED_MAN_DIR}/${name})
  if(IS_SYMLINK ${page})
    # An alias: the link again, to the generated page. Its target must be a
    # page of the same section in man/ that is not itself an alias.
    file(READ_SYMLINK ${page} target)
    if(NOT target MATCHES "^[^/]+\\.${sec}$" OR IS_SYMLINK ${PROJECT_SOURCE_DIR}/man/${target}
       OR NOT EXISTS ${PROJECT_SOURCE_DIR}/man/${target})
      message(FATAL_ERROR "man/${name} -> ${target}: an alias must be a link to a page of "
                          "section ${sec} in man/ itself (ln -s page.${sec} man/${name})")
    endif()
    if(EXISTS ${out} OR IS_SYMLINK ${out})
      file(REMOVE ${out})
    endif()
    file(CREATE_LINK ${target} ${out} SYMBOLIC)
  else()
    # A page that was an alias before: configure_file would write through
    # the old link, over its target.
    if(IS_SYMLINK ${out})
      file(REMOVE ${out})
    endif()
    configure_file(${page} ${out} @ONLY)
  endif()
  list(APPEND MCR_MAN_PAGES_${sec} ${out})
endforeach()
