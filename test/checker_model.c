/* SPDX-License-Identifier: BSD-3-Clause */
/* checker_model.c: the shared key model of test_migrate_checker (see checker_model.h). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "checker_model.h"

#define CK_VALID 0x80u
#define CK_PRESENT 0x01u
#define CK_WILD 0x02u

static size_t table_size(uint32_t nkeys)
{
    return sizeof(ck_table) + (size_t)nkeys * sizeof(ck_key);
}

ck_table *ck_table_new(uint32_t nkeys, uint32_t nprocs)
{
    size_t n = table_size(nkeys);
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        ck_abort_msg("mmap of %zu bytes for the key model: %s", n, strerror(errno));
    ck_table *t = p; /* zero-filled: every key at version 0 */
    t->nkeys = nkeys;
    t->nprocs = nprocs;
    atomic_store(&t->focus, -1);
    for (uint32_t k = 0; k < nkeys; k++)
        atomic_store(&t->keys[k].h[0].meta, CK_VALID); /* version 0: no value */
    return t;
}

void ck_table_free(ck_table *t)
{
    if (t != NULL)
        munmap(t, table_size(t->nkeys));
}

size_t ck_key_name(uint32_t k, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "ck:%05u", k);
    return n < 0 ? 0 : (size_t)n;
}

uint64_t ck_hash(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* The seqlock of a version's record: its writer zeroes meta, writes the
 * hash, then meta; a reader takes a record whose meta was the same before
 * and after it read the hash. Sequentially consistent accesses (no fences:
 * ThreadSanitizer has none) keep both sides in that order. A record
 * written again with the same meta (ck_record) gives either hash, each
 * one the version's at some moment. */
static void slot_write(ck_key *key, uint32_t v, unsigned flags, size_t len, uint64_t hash)
{
    ck_slot *s = &key->h[v % CK_HIST];
    atomic_store(&s->meta, 0);
    atomic_store(&s->hash, hash);
    atomic_store(&s->meta, ((uint64_t)v << 32) | ((uint64_t)len << 8) | flags | CK_VALID);
}

static int slot_read(const ck_key *key, uint32_t v, unsigned *flags, size_t *len, uint64_t *hash)
{
    const ck_slot *s = &key->h[v % CK_HIST];
    uint64_t m1 = atomic_load(&s->meta);
    *hash = atomic_load(&s->hash);
    uint64_t m2 = atomic_load(&s->meta);
    if (m1 != m2 || !(m1 & CK_VALID) || (uint32_t)(m1 >> 32) != v)
        return 0;
    *flags = (unsigned)(m1 & 0xffu);
    *len = (size_t)((m1 >> 8) & 0xffffffu);
    return 1;
}

uint32_t ck_begin(ck_table *t, uint32_t k, int present, const void *val, size_t len)
{
    ck_key *key = &t->keys[k];
    uint32_t v = atomic_load_explicit(&key->issued, memory_order_relaxed) + 1;
    slot_write(key, v, present ? CK_PRESENT : 0, present ? len : 0,
               present ? ck_hash(val, len) : 0);
    atomic_store_explicit(&key->issued, v, memory_order_release);
    return v;
}

void ck_record(ck_table *t, uint32_t k, uint32_t v, int present, int wild, const void *val,
               size_t len)
{
    unsigned flags = (present ? CK_PRESENT : 0) | (wild ? CK_WILD : 0);
    slot_write(&t->keys[k], v, flags, present ? len : 0, present ? ck_hash(val, len) : 0);
}

void ck_ack(ck_table *t, uint32_t k, uint32_t v, int phase)
{
    atomic_store_explicit(&t->keys[k].phase, (uint32_t)phase, memory_order_relaxed);
    atomic_store_explicit(&t->keys[k].acked, v, memory_order_release);
}

void ck_freeze(ck_table *t, uint32_t k)
{
    atomic_store_explicit(&t->keys[k].frozen, 1, memory_order_release);
}

uint32_t ck_read_start(const ck_table *t, uint32_t k)
{
    return atomic_load_explicit(&t->keys[k].acked, memory_order_acquire);
}

int ck_check(const ck_table *t, uint32_t k, uint32_t lo, int hit, const void *val, size_t len,
             uint32_t *age)
{
    const ck_key *key = &t->keys[k];
    uint32_t hi = atomic_load_explicit(&key->issued, memory_order_acquire);
    int frozen = (int)atomic_load_explicit(&key->frozen, memory_order_acquire);
    uint64_t h = hit ? ck_hash(val, len) : 0, vh;
    unsigned flags;
    size_t vlen;

    *age = 0;
    if (hi < lo || hi - lo >= CK_HIST)
        return CK_UNCHECKED;
    for (uint32_t v = lo; v <= hi; v++) {
        if (!slot_read(key, v, &flags, &vlen, &vh))
            return CK_UNCHECKED; /* rewritten meanwhile: the writer ran far ahead */
        if (flags & CK_WILD)
            return CK_OK;
        if (hit ? (flags & CK_PRESENT) && vlen == len && vh == h : !(flags & CK_PRESENT))
            return CK_OK;
    }
    if (!hit)
        return frozen ? CK_OK : CK_MISSING;
    for (uint32_t v = lo; v-- > 0 && lo - v < CK_HIST;)
        if (slot_read(key, v, &flags, &vlen, &vh) && (flags & CK_PRESENT) && vlen == len &&
            vh == h) {
            *age = lo - v;
            break;
        }
    return CK_OLDER;
}

void ck_note(ck_table *t, int proc, const char *fmt, ...)
{
    uint32_t i = atomic_fetch_add(&t->nnotes[proc], 1);
    if (i >= CK_NOTES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->notes[proc][i], CK_NOTE_LEN, fmt, ap);
    va_end(ap);
}

void ck_sum(const ck_table *t, ck_totals *out)
{
    memset(out, 0, sizeof(*out));
    for (uint32_t p = 0; p < t->nprocs; p++) {
        const ck_counts *c = &t->counts[p];
        for (int i = 0; i < CK_PHASES; i++) {
            uint64_t w = atomic_load(&c->writes[i]), r = atomic_load(&c->reads[i]);
            uint64_t orr = atomic_load(&c->older_reads[i]), ow = atomic_load(&c->older_writes[i]);
            uint64_t mr = atomic_load(&c->missing_reads[i]);
            uint64_t mw = atomic_load(&c->missing_writes[i]);
            out->writes += w;
            out->reads += r;
            out->older_reads += orr;
            out->older_writes += ow;
            out->missing_reads += mr;
            out->missing_writes += mw;
            out->writes_in[i] += w;
            out->older_in[i] += orr + ow;
            out->missing_in[i] += mr + mw;
        }
        out->failed += atomic_load(&c->failed);
        out->read_errors += atomic_load(&c->read_errors);
        out->unchecked += atomic_load(&c->unchecked);
        out->via_previous += atomic_load(&c->via_previous);
        out->copies_seen += atomic_load(&c->copies_seen);
        out->stale_copies += atomic_load(&c->stale_copies);
        out->touch_misses += atomic_load(&c->touch_misses);
    }
}

uint32_t ck_frozen_count(const ck_table *t)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < t->nkeys; k++)
        n += atomic_load(&t->keys[k].frozen) != 0;
    return n;
}

void ck_mark(ck_table *t, uint32_t k, int what)
{
    atomic_fetch_or(&t->keys[k].bad, 1u << what);
}

uint32_t ck_marked_count(const ck_table *t, int what)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < t->nkeys; k++)
        n += (atomic_load(&t->keys[k].bad) >> what) & 1u;
    return n;
}
