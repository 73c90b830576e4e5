/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_snapshot.c: fuzz target of snapshot files and texts (lib/snapshot/snapfile.c): the input as it is (loaded from a file and parsed in memory, with one verdict), then with its checksum made right so that the parser behind the checksum is reached; what loads verifies and saves back to the same bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

/* Inputs are kept small (libFuzzer's -max_len in run.sh, and here), and a
 * "table" line above this is skipped: a maglev table is built before
 * anything else is compared, and the largest (67,108,859 entries) takes
 * 90 s and 600 MB to be refused (issue 11, item 10, being fixed in
 * snapfile.c). With the fix this limit can go. */
#define MAX_INPUT 16384
#define TABLE_SKIP 1048576u

/* MD5(header || MD5(server line 1) || ...): the checksum that
 * mcroute_snapshot.h describes, of `n` bytes of whole lines. */
static void checksum(const char *t, size_t n, char out[MCR_SNAPSHOT_CHECKSUM_LEN + 1])
{
    size_t first = n; /* offset of the first "server " line */
    size_t nlines = 0;
    for (size_t p = 0; p < n;) {
        const char *nl = memchr(t + p, '\n', n - p);
        size_t e = (size_t)(nl - t) + 1;
        if (first == n && e - p >= 7 && memcmp(t + p, "server ", 7) == 0)
            first = p;
        if (first != n)
            nlines++;
        p = e;
    }
    unsigned char *buf = malloc(first + 16 * nlines + 1);
    FUZZ_CHECK(buf != NULL, "out of memory");
    memcpy(buf, t, first);
    size_t k = 0;
    for (size_t p = first; p < n; k++) {
        const char *nl = memchr(t + p, '\n', n - p);
        size_t e = (size_t)(nl - t) + 1;
        mcr_md5(t + p, e - p, buf + first + 16 * k);
        p = e;
    }
    unsigned char d[16];
    mcr_md5(buf, first + 16 * k, d);
    free(buf);
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* 1 when a "table N" line asks for more than TABLE_SKIP entries. */
static int huge_table(const uint8_t *data, size_t size)
{
    for (size_t p = 0; p + 6 <= size;) {
        const uint8_t *nl = memchr(data + p, '\n', size - p);
        size_t e = nl ? (size_t)(nl - data) : size;
        if (memcmp(data + p, "table ", 6) == 0) {
            unsigned long long v = 0;
            for (size_t i = p + 6; i < e && data[i] >= '0' && data[i] <= '9' && v < 1ull << 40;
                 i++)
                v = v * 10 + (data[i] - '0');
            if (v > TABLE_SKIP)
                return 1;
        }
        p = e + 1;
    }
    return 0;
}

/* Load the file at `path`: a success is checked all through; a failure
 * must say why. Returns the status. */
static int load(const char *path, const char *text, size_t len, const uint8_t *data, size_t size)
{
    mcr_snapshot *snap = NULL;
    mcr_error err;
    int rc = mcr_snapshot_load(path, NULL, 0, &snap, &err);
    /* the same text in memory: the same verdict */
    mcr_snapshot *mem = NULL;
    mcr_error merr;
    int mrc = mcr_snapshot_parse(text, len, path, NULL, 0, &mem, &merr);
    FUZZ_CHECK(mrc == rc, "mcr_snapshot_parse says %d, mcr_snapshot_load %d", mrc, rc);
    FUZZ_CHECK(rc != MCR_OK || strcmp(mcr_snapshot_checksum(mem), mcr_snapshot_checksum(snap)) == 0,
               "mcr_snapshot_parse built another snapshot than mcr_snapshot_load");
    FUZZ_CHECK(rc == MCR_OK || strcmp(merr.message, err.message) == 0,
               "parse and load disagree on the message: \"%s\" / \"%s\"", merr.message,
               err.message);
    mcr_snapshot_unref(mem);
    if (rc != MCR_OK) {
        fuzz_check_error(rc, &err, "mcr_snapshot_load");
        FUZZ_CHECK(snap == NULL, "output set by a failed load");
        return rc;
    }
    /* the checksum verifies: it is the file's last line */
    const char *sum = mcr_snapshot_checksum(snap);
    FUZZ_CHECK(len >= 42 && memcmp(text + len - 33, sum, 32) == 0 && text[len - 1] == '\n',
               "loaded checksum %s is not the file's", sum);
    /* saved again: the very same bytes (a file is accepted only when canonical) */
    const char *p2 = fuzz_tmp_path(1);
    rc = mcr_snapshot_save(snap, p2, &err);
    FUZZ_CHECK(rc == MCR_OK, "save: %s", err.message);
    size_t l2;
    char *t2 = fuzz_read_file(p2, &l2);
    FUZZ_CHECK(l2 == len && memcmp(t2, text, len) == 0,
               "a loaded file (%zu bytes) saves as other bytes (%zu)", len, l2);
    free(t2);
    /* stale against itself, accepted when forced */
    mcr_snapshot *again = NULL;
    rc = mcr_snapshot_load(path, snap, 0, &again, &err);
    FUZZ_CHECK(rc == MCR_ERR_STALE, "the same epoch again is not stale: %d", rc);
    fuzz_check_error(rc, &err, "stale load");
    rc = mcr_snapshot_load(path, snap, 1, &again, &err);
    FUZZ_CHECK(rc == MCR_OK, "forced load: %s", err.message);
    FUZZ_CHECK(strcmp(mcr_snapshot_checksum(again), sum) == 0, "forced load, other checksum");
    mcr_snapshot_unref(again);
    fuzz_check_snapshot(snap, data, size);
    mcr_snapshot_unref(snap);
    return MCR_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT || huge_table(data, size))
        return 0;
    /* 1. As it is. */
    const char *path = fuzz_write_file(0, data, size);
    int rc = load(path, (const char *)data, size, data, size);
    if (rc == MCR_OK)
        return 0;

    /* 2. With the checksum line it should have: the input's last line
     * replaced (when it is one) or appended, a missing final newline
     * added. */
    size_t body = size;
    if (body > 0 && data[body - 1] != '\n') {
        /* an unterminated last line: dropped if it is a checksum line */
        size_t s = body;
        while (s > 0 && data[s - 1] != '\n')
            s--;
        if (body - s >= 9 && memcmp(data + s, "checksum ", 9) == 0)
            body = s;
    } else if (body > 0) {
        size_t s = body - 1;
        while (s > 0 && data[s - 1] != '\n')
            s--;
        if (body - s >= 9 && memcmp(data + s, "checksum ", 9) == 0)
            body = s;
    }
    char *text = malloc(body + 1 + 9 + MCR_SNAPSHOT_CHECKSUM_LEN + 2);
    FUZZ_CHECK(text != NULL, "out of memory");
    memcpy(text, data, body);
    size_t len = body;
    if (len > 0 && text[len - 1] != '\n')
        text[len++] = '\n';
    char sum[MCR_SNAPSHOT_CHECKSUM_LEN + 1];
    checksum(text, len, sum);
    len += (size_t)sprintf(text + len, "checksum %s\n", sum);
    path = fuzz_write_file(0, text, len);
    rc = load(path, text, len, data, size);
    /* A NUL byte, or a header short of lines, is refused before the
     * checksum; anything else with this checksum must get past it. */
    if (rc == MCR_ERR_INVALID && memchr(text, '\0', len) == NULL) {
        mcr_snapshot *s = NULL;
        mcr_error err;
        mcr_snapshot_load(path, NULL, 0, &s, &err);
        FUZZ_CHECK(strstr(err.message, "checksum mismatch") == NULL,
                   "the checksum computed as documented is refused: %s", err.message);
    }
    free(text);
    return 0;
}
