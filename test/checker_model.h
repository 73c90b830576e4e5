/* SPDX-License-Identifier: BSD-3-Clause */
/* checker_model.h: test_migrate_checker's model of every key, shared by the processes of a test: the versions written and acknowledged, what each left, and the check of a read against them. */
#ifndef MCR_CHECKER_MODEL_H
#define MCR_CHECKER_MODEL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Every key has one writer (the process key % nprocs), so its writes have
 * a total order: versions 1, 2, ... (0: nothing written, no value). Before
 * it sends version v the writer records what v leaves (its value's hash
 * and length, or no value) and raises `issued` to v; once v is
 * acknowledged it raises `acked` to v. A read sent when `acked` was a, and
 * answered when `issued` was i, may return what any of the versions a..i
 * leaves and nothing else (a write acknowledged before the read was sent
 * must be seen; one sent before its reply came may be): a value that none
 * of them leaves is an older value; a miss when every one of them leaves a
 * value is a missing key.
 *
 * A write that failed (an error, a timeout) may have landed on one owner,
 * on both or on neither: its key becomes uncertain ("frozen"): its writer
 * never writes it again, and a read may return what the last acknowledged
 * version or the failed one leaves, or a miss.
 *
 * A write whose reply contradicts the model (a delete that found nothing
 * where a value was acknowledged, an add that found a value after an
 * acknowledged delete) is counted as what it shows, and the version it
 * made records what the server holds now, or "anything" (wild) when the
 * reply does not say: the writer then sets the key afresh.
 *
 * The table lives in memory shared by the test's processes (MAP_SHARED,
 * made before they fork): the fields are atomics and each version's record
 * a seqlock (its one writer, any number of readers).
 */

/* Versions kept per key: a read's window (a..i above) is one or two wide. */
#define CK_HIST 16
/* The longest value written (appends stop short of it). */
#define CK_VALUE_MAX 200
/* Processes of a test, and the notes (first violations) each keeps. */
#define CK_PROCS_MAX 8
#define CK_NOTES 10
#define CK_NOTE_LEN 300
/* mcr_migration_phase values 0..7: counts are kept by the phase the
 * counting process had adopted when it sent the request. */
#define CK_PHASES 8

/* What a read or a write found, as ck_check() tells it. */
enum { CK_OK = 0, CK_OLDER = 1, CK_MISSING = 2, CK_UNCHECKED = 3 };

typedef struct ck_slot {
    _Atomic uint64_t meta; /* version << 32 | length << 8 | flags; 0 while written */
    _Atomic uint64_t hash; /* FNV-1a of the value */
} ck_slot;

typedef struct ck_key {
    _Atomic uint32_t acked;  /* the last version acknowledged */
    _Atomic uint32_t issued; /* the last version sent (>= acked) */
    _Atomic uint32_t frozen; /* 1: a write failed (see above) */
    _Atomic uint32_t phase;  /* the writer's phase when it sent the version acked last */
    _Atomic uint32_t bad;    /* 1 << CK_OLDER, 1 << CK_MISSING: what was met on it */
    ck_slot h[CK_HIST];      /* version v in h[v % CK_HIST] */
} ck_key;

/* One process's counts (written by it alone; read by the test as they grow). */
typedef struct ck_counts {
    _Atomic uint64_t writes[CK_PHASES];         /* writes acknowledged */
    _Atomic uint64_t reads[CK_PHASES];          /* reads checked */
    _Atomic uint64_t older_reads[CK_PHASES];    /* reads that returned an older value */
    _Atomic uint64_t missing_reads[CK_PHASES];  /* reads that missed an acknowledged value */
    _Atomic uint64_t older_writes[CK_PHASES];   /* writes whose reply showed an older value */
    _Atomic uint64_t missing_writes[CK_PHASES]; /* ... or no value where one was acknowledged */
    _Atomic uint64_t failed;       /* writes that failed: as many keys frozen */
    _Atomic uint64_t read_errors;  /* reads that failed (not checked) */
    _Atomic uint64_t unchecked;    /* reads whose window was past CK_HIST versions */
    _Atomic uint64_t via_previous; /* reads answered by a key's previous owner */
    _Atomic uint64_t copies_seen;  /* moved keys seen copied to their new owner (spy reads) */
    _Atomic uint64_t stale_copies; /* ... holding a value older than acknowledged */
    _Atomic uint64_t touch_misses; /* touches of present keys answered "no such key" by the
                                      current owner during a transition (not counted missing) */
} ck_counts;

typedef struct ck_table {
    uint32_t nkeys, nprocs;
    _Atomic int stop;   /* 1: the processes end their traffic and exit */
    _Atomic int focus;  /* the memcached (the test's index) being copied from, or -1 */
    _Atomic int ready;  /* processes that wrote each of their keys once */
    ck_counts counts[CK_PROCS_MAX];
    _Atomic uint32_t nnotes[CK_PROCS_MAX];
    char notes[CK_PROCS_MAX][CK_NOTES][CK_NOTE_LEN];
    char error[CK_PROCS_MAX][CK_NOTE_LEN]; /* why a process gave up */
    ck_key keys[];
} ck_table;

/* A table of nkeys keys (all at version 0: no value), shared with the
 * processes forked afterwards. Aborts the test when mmap fails. */
ck_table *ck_table_new(uint32_t nkeys, uint32_t nprocs);
void ck_table_free(ck_table *t);

/* Key k's name ("ck:00042") into buf: its length. */
size_t ck_key_name(uint32_t k, char *buf, size_t cap);

uint64_t ck_hash(const void *p, size_t n);

/* The writer's side. ck_begin: the next version of key k, leaving `val`
 * (len bytes) when present, no value otherwise; recorded, then issued.
 * ck_record: record again what version v leaves (the reply said
 * otherwise); wild: anything. ck_ack: v acknowledged (sent in `phase`,
 * for the notes). ck_freeze: the key is uncertain from now on. */
uint32_t ck_begin(ck_table *t, uint32_t k, int present, const void *val, size_t len);
void ck_record(ck_table *t, uint32_t k, uint32_t v, int present, int wild, const void *val,
               size_t len);
void ck_ack(ck_table *t, uint32_t k, uint32_t v, int phase);
void ck_freeze(ck_table *t, uint32_t k);

/* The reader's side: ck_read_start before the read is sent (the version
 * it must see at least), ck_check with its outcome (hit: val, len). *age:
 * for CK_OLDER, how many versions older the value is when the table still
 * knows it (0: not known). */
uint32_t ck_read_start(const ck_table *t, uint32_t k);
int ck_check(const ck_table *t, uint32_t k, uint32_t lo, int hit, const void *val, size_t len,
             uint32_t *age);

/* Keep a note (the first CK_NOTES of process proc), printf-style. */
void ck_note(ck_table *t, int proc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The sums of every process's counts. */
typedef struct ck_totals {
    uint64_t writes, reads, older_reads, missing_reads, older_writes, missing_writes;
    uint64_t failed, read_errors, unchecked, via_previous, copies_seen, stale_copies;
    uint64_t touch_misses;
    uint64_t writes_in[CK_PHASES]; /* writes by phase */
    uint64_t older_in[CK_PHASES];  /* older values (reads and writes) by phase */
    uint64_t missing_in[CK_PHASES];
} ck_totals;
void ck_sum(const ck_table *t, ck_totals *out);

/* Keys frozen. */
uint32_t ck_frozen_count(const ck_table *t);

/* Mark key k as one on which `what` (CK_OLDER, CK_MISSING) was met, and
 * count such keys. */
void ck_mark(ck_table *t, uint32_t k, int what);
uint32_t ck_marked_count(const ck_table *t, int what);

#endif
