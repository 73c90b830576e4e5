/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_state.c: fuzz target of state files (lib/state/statetext.c): the input as it is (parsed in memory and read from a file, one verdict), then with its checksum line made right so that the parser behind it is reached; a state that parses is written again by the writer's own text to the very same bytes, and its snapshots are checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "state/state_internal.h"

#define MAX_INPUT 32768

/* Parse, read from a file, compare; a success checked all through. */
static int check(const char *text, size_t len, const uint8_t *data, size_t size)
{
    mcr_state_info info, finfo;
    mcr_error err = {0}, ferr = {0};
    int rc = mcr_state_parse(text, len, "in", &info, &err);
    const char *path = fuzz_write_file(0, text, len);
    int frc = mcr_state_read(path, &finfo, &ferr);
    FUZZ_CHECK(frc == rc, "mcr_state_read says %d, mcr_state_parse %d", frc, rc);
    if (rc != MCR_OK) {
        fuzz_check_error(rc, &err, "mcr_state_parse");
        FUZZ_CHECK(info.snapshot == NULL && info.generation == 0, "output left by a failure");
        return rc;
    }
    FUZZ_CHECK(finfo.generation == info.generation, "read and parse disagree");
    mcr_state_info_clear(&finfo);

    FUZZ_CHECK(info.generation >= 1 && info.snapshot != NULL, "a state without its basics");
    bool routes = info.phase >= MCR_MIGRATION_COPYING && info.phase <= MCR_MIGRATION_CLOSING;
    FUZZ_CHECK((info.from != NULL) == routes && (info.to != NULL) == routes,
               "phase %d with snapshots %p %p", (int)info.phase, (void *)info.from,
               (void *)info.to);
    FUZZ_CHECK(info.phase == MCR_MIGRATION_NONE || info.to_epoch > info.from_epoch,
               "migration epochs out of order");
    /* written again: the same bytes (the format has one spelling) */
    {
        mcr_state_content c = {.pool = info.pool, .snapshot = info.snapshot,
                               .phase = info.phase,
                               .migration_id = info.phase ? info.migration_id : NULL,
                               .from = info.from, .to = info.to,
                               .from_epoch = info.from_epoch, .to_epoch = info.to_epoch};
        char *again = NULL;
        size_t alen = 0;
        int wrc = mcr__state_text(&c, info.generation, info.written_ms, &again, &alen, &err);
        FUZZ_CHECK(wrc == MCR_OK, "a parsed state is not written: %s", err.message);
        FUZZ_CHECK(alen == len && memcmp(again, text, len) == 0,
                   "a parsed state (%zu bytes) is written as other bytes (%zu)", len, alen);
        free(again);
    }
    fuzz_check_snapshot(info.snapshot, data, size);
    if (info.to != NULL)
        fuzz_check_snapshot(info.to, data, size);
    mcr_state_info_clear(&info);
    return MCR_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    /* 1. As it is. */
    if (check((const char *)data, size, data, size) == MCR_OK)
        return 0;

    /* 2. With the checksum line it should have: the input's last line
     * replaced when it is one, else appended. */
    size_t body = size;
    if (body > 0 && data[body - 1] != '\n') {
        size_t s = body;
        while (s > 0 && data[s - 1] != '\n')
            s--;
        body = s; /* an unterminated last line goes */
    } else if (body > 0) {
        size_t s = body - 1;
        while (s > 0 && data[s - 1] != '\n')
            s--;
        if (body - s >= 9 && memcmp(data + s, "checksum ", 9) == 0)
            body = s;
    }
    char *text = malloc(body + 9 + 32 + 2);
    FUZZ_CHECK(text != NULL, "out of memory");
    memcpy(text, data, body);
    unsigned char d[16];
    mcr_md5(text, body, d);
    size_t len = body + (size_t)sprintf(text + body, "checksum ");
    for (int i = 0; i < 16; i++)
        len += (size_t)sprintf(text + len, "%02x", d[i]);
    text[len++] = '\n';
    int rc = check(text, len, data, size);
    if (rc != MCR_OK) {
        mcr_state_info info;
        mcr_error err = {0};
        mcr_state_parse(text, len, "in", &info, &err);
        FUZZ_CHECK(strstr(err.message, "checksum mismatch") == NULL,
                   "the checksum computed as documented is refused: %s", err.message);
    }
    free(text);
    return 0;
}
