/* SPDX-License-Identifier: BSD-3-Clause */
/* stateshm.c: PATH.shm, the shared memory of a state: its mapping, the generation, and the processes' slots (claimed by compare-and-swap, written under a seqlock by their process alone). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state_internal.h"

_Static_assert(sizeof(mcr__shm_header) == MCR__SHM_HEADER_SIZE, "the header's layout");
_Static_assert(sizeof(mcr__shm_slot) == MCR__SHM_SLOT_SIZE, "a slot's layout");
_Static_assert(offsetof(mcr__shm_header, generation) == 64, "the generation's cache line");
_Static_assert(offsetof(mcr__shm_header, block_servers) == 32, "the header's layout");

int mcr__shm_path(const char *path, char *buf, size_t cap, mcr_error *err)
{
    int n = snprintf(buf, cap, "%s.shm", path);
    if (n < 0 || (size_t)n >= cap)
        return mcr__error(err, MCR_ERR_INVALID, "state path too long: %s", path);
    return MCR_OK;
}

int mcr__shm_open(const char *shm_path, bool writable, mcr__shm *out, mcr_error *err)
{
    struct stat st;
    memset(out, 0, sizeof(*out));
    out->fd = -1;
    int fd = open(shm_path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return mcr__error_sys(err, e,
                                  "state %s (the agent creates it: is `mcroute agent --state` "
                                  "running?)",
                                  shm_path);
        if (e == EACCES && writable)
            return mcr__error_sys(err, e,
                                  "state %s (a process that follows a state writes its slot "
                                  "there: run it in the agent's group, see `mcroute agent "
                                  "--group`)",
                                  shm_path);
        return mcr__error_sys(err, e, "state %s", shm_path);
    }
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < MCR__SHM_HEADER_SIZE) {
        close(fd);
        return mcr__error(err, MCR_ERR_CORRUPT, "state %s: too short for a state's shared memory",
                          shm_path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                   MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return mcr__error_sys(err, e, "state %s: cannot map it", shm_path);
    }
    mcr__shm_header *h = p;
    size_t need = h->nslots <= MCR_HOST_STATE_SLOTS_MAX &&
                          h->block_servers <= MCR_HOST_STATE_COUNTER_SERVERS_MAX
                      ? mcr__shm_size(h->nslots, h->block_servers)
                      : SIZE_MAX;
    if (memcmp(h->magic, MCR__SHM_MAGIC, 8) != 0 || h->version != MCR__SHM_VERSION ||
        h->header_size != MCR__SHM_HEADER_SIZE || h->slot_size != MCR__SHM_SLOT_SIZE ||
        h->nslots == 0 || h->nslots > MCR_HOST_STATE_SLOTS_MAX || h->block_servers == 0 ||
        need == SIZE_MAX || need > (size_t)st.st_size) {
        munmap(p, (size_t)st.st_size);
        close(fd);
        return mcr__error(err, MCR_ERR_CORRUPT,
                          "state %s: not a state's shared memory of version %u (or damaged)",
                          shm_path, MCR__SHM_VERSION);
    }
    out->h = h;
    out->size = (size_t)st.st_size;
    out->fd = fd;
    mcr__shm_locate(out);
    return MCR_OK;
}

size_t mcr__shm_size(uint32_t nslots, uint32_t bs)
{
    size_t block = (size_t)bs * sizeof(mcr__shm_counters);
    size_t size = MCR__SHM_HEADER_SIZE + (size_t)nslots * MCR__SHM_SLOT_SIZE +
                  ((size_t)nslots + 1) * block;
    return size <= MCR__SHM_SIZE_MAX ? size : SIZE_MAX;
}

void mcr__shm_locate(mcr__shm *m)
{
    char *base = (char *)m->h;
    size_t n = m->h->nslots;
    m->slots = (mcr__shm_slot *)(void *)(base + MCR__SHM_HEADER_SIZE);
    m->departed = (mcr__shm_counters *)(void *)(base + MCR__SHM_HEADER_SIZE +
                                                n * MCR__SHM_SLOT_SIZE);
    m->bs = m->h->block_servers;
    m->blocks = m->departed + m->bs;
}

void mcr__shm_close(mcr__shm *m)
{
    if (m->h != NULL)
        munmap(m->h, m->size);
    if (m->fd >= 0)
        close(m->fd);
    memset(m, 0, sizeof(*m));
    m->fd = -1;
}

/* ------------------------------------------------------------ processes */

uint64_t mcr__proc_start_time(uint32_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%u/stat", (unsigned)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* after the command's closing parenthesis: field 3 on; 22 is the start */
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return 0;
    unsigned long long v = 0;
    int field = 2;
    for (p++; *p != '\0' && field < 22; p++)
        if (*p == ' ')
            field++;
    if (field != 22 || sscanf(p, "%llu", &v) != 1)
        return 0;
    return v;
}

bool mcr__proc_alive(uint64_t owner)
{
    uint32_t pid = MCR__SHM_PID(owner), start = MCR__SHM_START(owner);
    if (pid == 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH))
        return false;
    uint64_t now = mcr__proc_start_time(pid);
    return start == 0 || now == 0 || (uint32_t)now == start;
}

/* ------------------------------------------------------------ slots */

static void pack(_Atomic uint64_t *w, size_t nw, const char *s)
{
    char b[64] = {0};
    if (s != NULL)
        strncpy(b, s, nw * 8);
    for (size_t i = 0; i < nw; i++) {
        uint64_t v;
        memcpy(&v, b + 8 * i, 8);
        atomic_store_explicit(&w[i], v, memory_order_relaxed);
    }
}

static void unpack(const _Atomic uint64_t *w, size_t nw, char *out)
{
    for (size_t i = 0; i < nw; i++) {
        uint64_t v = atomic_load_explicit(&w[i], memory_order_acquire);
        memcpy(out + 8 * i, &v, 8);
    }
    out[nw * 8] = '\0';
}

static void clear_fields(mcr__shm_slot *s)
{
    atomic_store_explicit(&s->generation, 0, memory_order_relaxed);
    atomic_store_explicit(&s->epoch, 0, memory_order_relaxed);
    atomic_store_explicit(&s->to_epoch, 0, memory_order_relaxed);
    atomic_store_explicit(&s->adopted_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&s->refused, 0, memory_order_relaxed);
    atomic_store_explicit(&s->phase, 0, memory_order_relaxed);
    atomic_store_explicit(&s->last_refusal, 0, memory_order_relaxed);
    pack(s->checksum, 4, NULL);
    pack(s->migration_id, 4, NULL);
}

/* The owner's writes: seq odd, the fields, seq even again. No fence
 * (ThreadSanitizer knows none): the first increment is a read-modify-write
 * with acquire ordering, which keeps the field stores after it; readers
 * load the fields with acquire ordering, which keeps their second load of
 * seq after them. */
static void write_begin(mcr__shm_slot *s)
{
    atomic_fetch_add_explicit(&s->seq, 1, memory_order_acq_rel);
}

static void write_end(mcr__shm_slot *s)
{
    uint32_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store_explicit(&s->seq, q + 1, memory_order_release);
}

/* An owner word no process has (pid 0): a slot on its way from a process
 * that left to the next, while its counters are folded into the departed
 * block; readers see it free, claimers pass it by. */
#define FOLDING MCR__SHM_OWNER(0, 1)

void mcr__shm_zero_block(const mcr__shm *m, mcr__shm_counters *b)
{
    for (uint32_t k = 0; k < m->bs; k++) {
        if (atomic_load_explicit(&b[k].id_hash, memory_order_relaxed) == 0)
            break; /* the rest is free: never touched */
        atomic_store_explicit(&b[k].id_hash, 0, memory_order_relaxed);
        for (int c = 0; c < MCR__CTR_N; c++)
            atomic_store_explicit(&b[k].v[c], 0, memory_order_relaxed);
        for (int c = 0; c < MCR__LATENCY_BOUNDS; c++)
            atomic_store_explicit(&b[k].le[c], 0, memory_order_relaxed);
    }
}

/* Take slot i from `expect` (a process that left, or this one leaving)
 * and fold its counters into the departed block: only the winner of the
 * exchange does, so none is counted twice. The owner is FOLDING then. */
static bool retire(mcr__shm *m, uint32_t i, uint64_t expect)
{
    mcr__shm_slot *s = &m->slots[i];
    if (!atomic_compare_exchange_strong(&s->owner, &expect, FOLDING))
        return false;
    mcr__shm_fold(m, mcr__shm_block(m, i));
    mcr__shm_zero_block(m, mcr__shm_block(m, i));
    atomic_store_explicit(&s->counters_writer, 0, memory_order_relaxed);
    return true;
}

static bool take(mcr__shm *m, uint32_t i, uint64_t expect, uint64_t owner)
{
    mcr__shm_slot *s = &m->slots[i];
    if (expect != 0 && !retire(m, i, expect))
        return false;
    if (expect != 0)
        atomic_store(&s->owner, owner);
    else if (!atomic_compare_exchange_strong(&s->owner, &expect, owner))
        return false;
    uint32_t hw = atomic_load(&m->h->high_water);
    while (hw < i + 1 && !atomic_compare_exchange_weak(&m->h->high_water, &hw, i + 1))
        ;
    write_begin(s);
    clear_fields(s);
    write_end(s);
    return true;
}

int mcr__shm_claim(mcr__shm *m, uint64_t owner)
{
    uint32_t n = m->h->nslots;
    for (uint32_t i = 0; i < n; i++)
        if (atomic_load_explicit(&m->slots[i].owner, memory_order_relaxed) == 0 &&
            take(m, i, 0, owner))
            return (int)i;
    /* every slot taken: one of a process that died (no writer reaps them) */
    for (uint32_t i = 0; i < n; i++) {
        uint64_t o = atomic_load_explicit(&m->slots[i].owner, memory_order_relaxed);
        if (o != 0 && o != owner && o != FOLDING && !mcr__proc_alive(o) && take(m, i, o, owner))
            return (int)i;
    }
    return -1;
}

void mcr__shm_release(mcr__shm *m, int i, uint64_t owner)
{
    if (m->h == NULL || i < 0 || (uint32_t)i >= m->h->nslots)
        return;
    if (retire(m, (uint32_t)i, owner))
        atomic_store(&m->slots[i].owner, 0);
}

int mcr__shm_reap(mcr__shm *m, uint32_t i)
{
    uint64_t o = atomic_load_explicit(&m->slots[i].owner, memory_order_relaxed);
    if (o == 0 || o == FOLDING || mcr__proc_alive(o) || !retire(m, i, o))
        return 0;
    atomic_store(&m->slots[i].owner, 0);
    return 1;
}

void mcr__shm_adopted(mcr__shm *m, int i, const mcr__adoption *a)
{
    if (m->h == NULL || i < 0 || (uint32_t)i >= m->h->nslots)
        return;
    mcr__shm_slot *s = &m->slots[i];
    write_begin(s);
    atomic_store_explicit(&s->generation, a->generation, memory_order_relaxed);
    atomic_store_explicit(&s->epoch, a->epoch, memory_order_relaxed);
    atomic_store_explicit(&s->to_epoch, a->to_epoch, memory_order_relaxed);
    atomic_store_explicit(&s->adopted_ns, a->adopted_ns, memory_order_relaxed);
    atomic_store_explicit(&s->phase, (uint32_t)a->phase, memory_order_relaxed);
    pack(s->checksum, 4, a->checksum);
    pack(s->migration_id, 4, a->migration_id);
    write_end(s);
}

void mcr__shm_refused(mcr__shm *m, int i, int status)
{
    if (m->h == NULL || i < 0 || (uint32_t)i >= m->h->nslots)
        return;
    mcr__shm_slot *s = &m->slots[i];
    write_begin(s);
    atomic_store_explicit(&s->refused, atomic_load_explicit(&s->refused, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&s->last_refusal, status, memory_order_relaxed);
    write_end(s);
}

int mcr__shm_read_slot(const mcr__shm *m, uint32_t i, mcr_state_process *out)
{
    mcr__shm_slot *s = &m->slots[i];
    for (;;) {
        uint32_t q = atomic_load_explicit(&s->seq, memory_order_acquire);
        memset(out, 0, sizeof(*out));
        uint64_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
        if (owner == 0 || owner == FOLDING)
            return 0;
        out->pid = MCR__SHM_PID(owner);
        out->slot = i;
        out->generation = atomic_load_explicit(&s->generation, memory_order_acquire);
        out->epoch = atomic_load_explicit(&s->epoch, memory_order_acquire);
        out->to_epoch = atomic_load_explicit(&s->to_epoch, memory_order_acquire);
        out->adopted_ns = atomic_load_explicit(&s->adopted_ns, memory_order_acquire);
        out->refused = atomic_load_explicit(&s->refused, memory_order_acquire);
        out->phase = (mcr_migration_phase)atomic_load_explicit(&s->phase, memory_order_acquire);
        out->last_refusal = atomic_load_explicit(&s->last_refusal, memory_order_acquire);
        unpack(s->checksum, 4, out->checksum);
        unpack(s->migration_id, 4, out->migration_id);
        if ((q & 1) == 0 && atomic_load_explicit(&s->seq, memory_order_acquire) == q)
            break;
        /* its owner is writing (or died while writing: the pid check
         * below is the writer's) */
        if (!mcr__proc_alive(owner))
            break;
        sched_yield();
    }
    if ((unsigned)out->phase > MCR_MIGRATION_ABORTED)
        out->phase = MCR_MIGRATION_NONE;
    return 1;
}
