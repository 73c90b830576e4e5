/* SPDX-License-Identifier: BSD-3-Clause */
/* phase.c: the names of a migration's phases (mcroute_router.h), which the state's text and every layer above it (router, fleet, CLI) spell. */
#include "state_internal.h"

static const char *const phase_names[] = {"none",  "planned", "copying", "switched",
                                          "grace", "closing", "done",    "aborted"};

const char *mcr_migration_phase_name(mcr_migration_phase phase)
{
    return (unsigned)phase < sizeof(phase_names) / sizeof(phase_names[0]) ? phase_names[phase]
                                                                          : "unknown";
}
