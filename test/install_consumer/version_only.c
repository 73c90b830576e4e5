/* SPDX-License-Identifier: BSD-3-Clause */
/* version_only.c: proof that the installed <mcroute_version.h> compiles on its own (test_install.sh). */
#include <mcroute_version.h>

const char *consumer_header_version(void);

const char *consumer_header_version(void)
{
    return MCR_VERSION_STRING;
}
