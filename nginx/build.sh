#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# build.sh: build ngx_http_mcroute_module.so against Debian's nginx-dev the way Debian builds its own dynamic modules: nginx's configure with the flags of Debian's nginx binary (so that load_module accepts the module's signature) and --add-dynamic-module, then `make modules`.
#
# Usage: build.sh NGINX_SRC WORK MODULE_DIR INCLUDE_DIRS LIBDIR OUT
#   NGINX_SRC     /usr/share/nginx/src (nginx-dev: configure, auto/, headers, conf_flags)
#   WORK          a directory of the build tree to configure in (made, kept)
#   MODULE_DIR    this directory (config, ngx_http_mcroute_module.c)
#   INCLUDE_DIRS  mcroute's header directories, space-separated
#   LIBDIR        where libmcroute.so is (linked, and the module's RUNPATH)
#   OUT           where to copy the module
set -eu
src=$1 work=$2 mod=$3 incs=$4 libdir=$5 out=$6
[ -x "$src/configure" ] && [ -f "$src/conf_flags" ] ||
  { echo "build.sh: $src has no nginx configure or conf_flags (Debian package nginx-dev)" >&2; exit 1; }
mkdir -p "$work"
# configure writes into its own tree: a copy, made again when nginx-dev changes
if [ ! -f "$work/src/configure" ] || [ "$src/conf_flags" -nt "$work/src/configure" ]; then
  rm -rf "$work/src"
  cp -a "$src" "$work/src"
fi
cd "$work/src"
# conf_flags: NGX_CONF_FLAGS=( ... ), the flags Debian's nginx was built with
NGX_CONF_FLAGS=$(sed -n 's/^NGX_CONF_FLAGS=( *\(.*\) *)$/\1/p' conf_flags)
[ -n "$NGX_CONF_FLAGS" ] || { echo "build.sh: no NGX_CONF_FLAGS in $src/conf_flags" >&2; exit 1; }
stamp="$work/configured"
want="$NGX_CONF_FLAGS|$incs|$libdir|$mod"
if [ ! -f objs/Makefile ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ "$mod/config" -nt "$stamp" ]; then
  # shellcheck disable=SC2086 # the flags are words
  MCR_NGX_INCS=$incs MCR_NGX_LIBS="-L$libdir -lmcroute -Wl,-rpath,$libdir" \
    ./configure $NGX_CONF_FLAGS --add-dynamic-module="$mod" > "$work/configure.log" 2>&1 ||
    { echo "build.sh: nginx's configure failed, see $work/configure.log" >&2; tail -20 "$work/configure.log" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
make -f objs/Makefile modules > "$work/make.log" 2>&1 ||
  { echo "build.sh: make modules failed, see $work/make.log" >&2; tail -30 "$work/make.log" >&2; exit 1; }
cp objs/ngx_http_mcroute_module.so "$out"
