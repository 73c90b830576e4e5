/* SPDX-License-Identifier: BSD-3-Clause */
/* statewriter.c: the writer of a state (the agent): PATH.shm created or kept and locked, each state written whole and renamed into place before the generation moves, and the processes read from their slots. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "state_internal.h"

/* A server id the writer wrote, by its hash (the counter blocks'). */
typedef struct named {
    uint64_t hash;
    char *id;
} named;

struct mcr_state_writer {
    char *path;
    char *shm_path;
    mcr__shm shm;
    unsigned mode;
    int set_gid;
    unsigned gid;
    named *ids; /* every server id of the states written */
    size_t nids, ids_cap;
};

/* Remember the ids of snap's servers (best effort: NULL snap, or no
 * memory, remembers nothing more). */
static void remember_ids(mcr_state_writer *w, const mcr_snapshot *snap)
{
    for (size_t i = 0; snap != NULL && i < mcr_snapshot_server_count(snap); i++) {
        mcr_server_desc d;
        if (mcr_snapshot_server(snap, i, &d) != MCR_OK)
            continue;
        uint64_t h = mcr__id_hash(d.id);
        size_t k = 0;
        while (k < w->nids && w->ids[k].hash != h)
            k++;
        if (k < w->nids)
            continue;
        if (w->nids == w->ids_cap) {
            size_t cap = w->ids_cap ? w->ids_cap * 2 : 64;
            named *g = realloc(w->ids, cap * sizeof(*g));
            if (g == NULL)
                return;
            w->ids = g;
            w->ids_cap = cap;
        }
        char *id = strdup(d.id);
        if (id == NULL)
            return;
        w->ids[w->nids++] = (named){h, id};
    }
}

static uint64_t realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Mode and group of a file of the writer's: MCR_OK, or `code` (with the
 * errno kept in err->sys_errno). */
static int set_owner(const mcr_state_writer *w, int fd, unsigned mode, const char *what, int code,
                     mcr_error *err)
{
    int e = 0;
    if (w->set_gid && fchown(fd, (uid_t)-1, (gid_t)w->gid) != 0)
        e = errno;
    else if (fchmod(fd, mode) != 0)
        e = errno;
    if (e == 0)
        return MCR_OK;
    mcr__error_sys(err, e, "state %s: cannot set its %s", what,
                   w->set_gid ? "group or mode" : "mode");
    if (err != NULL)
        err->code = code;
    return code;
}

/* A new PATH.shm of `nslots` slots and counter blocks of `bs` servers
 * made beside it, locked, and renamed into place; the generation starts at
 * `gen`. */
static int create_shm(mcr_state_writer *w, uint32_t nslots, uint32_t bs, uint64_t gen,
                      mcr_error *err)
{
    char tmp[4096];
    size_t size = mcr__shm_size(nslots, bs);
    snprintf(tmp, sizeof(tmp), "%s.new.%ld", w->shm_path, (long)getpid());
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return mcr__error_sys(err, errno, "state %s: cannot create it", tmp);
    int rc = MCR_OK;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 || ftruncate(fd, (off_t)size) != 0)
        rc = mcr__error_sys(err, errno, "state %s: cannot size or lock it", tmp);
    if (rc == MCR_OK)
        rc = set_owner(w, fd, w->mode, tmp, MCR_ERR_SYSTEM, err);
    void *p = rc == MCR_OK ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : NULL;
    if (rc == MCR_OK && p == MAP_FAILED)
        rc = mcr__error_sys(err, errno, "state %s: cannot map it", tmp);
    if (rc != MCR_OK) {
        close(fd);
        unlink(tmp);
        return rc;
    }
    mcr__shm_header *h = p;
    memcpy(h->magic, MCR__SHM_MAGIC, 8);
    h->version = MCR__SHM_VERSION;
    h->header_size = MCR__SHM_HEADER_SIZE;
    h->slot_size = MCR__SHM_SLOT_SIZE;
    h->nslots = nslots;
    h->block_servers = bs;
    atomic_store(&h->generation, gen);
    atomic_store(&h->writer_pid, (uint32_t)getpid());
    if (rename(tmp, w->shm_path) != 0) {
        rc = mcr__error_sys(err, errno, "state %s: cannot rename %s over it", w->shm_path,
                            tmp);
        munmap(p, size);
        close(fd);
        unlink(tmp);
        return rc;
    }
    w->shm.h = h;
    w->shm.size = size;
    w->shm.fd = fd;
    mcr__shm_locate(&w->shm);
    return MCR_OK;
}

/* Keep an existing PATH.shm when it is a state's of this layout (locked
 * first: one writer at a time) and of the slots and counter servers asked
 * (`asked`: when they were given, not defaults); else replace it, telling
 * its followers. */
static int open_shm(mcr_state_writer *w, uint32_t nslots, uint32_t bs, const bool asked[2],
                    mcr_error *err)
{
    mcr__shm old;
    mcr_error e2 = {0};
    int rc = mcr__shm_open(w->shm_path, true, &old, &e2);
    if (rc == MCR_OK && ((asked[0] && old.h->nslots != nslots) || (asked[1] && old.bs != bs))) {
        mcr__shm_close(&old); /* another size asked: replaced below */
        rc = MCR_ERR_CORRUPT;
        e2.code = rc;
    }
    if (rc == MCR_OK) {
        if (flock(old.fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            mcr__shm_close(&old);
            if (e == EWOULDBLOCK)
                return mcr__error(err, MCR_ERR_BUSY,
                                  "state %s: another writer holds it (another agent runs for "
                                  "this state)",
                                  w->shm_path);
            return mcr__error_sys(err, e, "state %s: cannot lock it", w->shm_path);
        }
        w->shm = old;
        atomic_store(&w->shm.h->writer_pid, (uint32_t)getpid());
        /* the mode and group asked now, as for a new one */
        return set_owner(w, w->shm.fd, w->mode, w->shm_path, MCR_ERR_SYSTEM, err);
    }
    if (rc == MCR_ERR_SYSTEM && e2.sys_errno != ENOENT) {
        if (err != NULL)
            *err = e2;
        return rc;
    }
    /* Missing, or not of this layout: a new one. A mapping of an older
     * one of ours hears that it was replaced. */
    uint64_t gen = 0;
    int fd = open(w->shm_path, O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        struct stat st;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            close(fd);
            return mcr__error(err, MCR_ERR_BUSY, "state %s: another writer holds it",
                              w->shm_path);
        }
        if (fstat(fd, &st) == 0 && (size_t)st.st_size >= MCR__SHM_HEADER_SIZE) {
            mcr__shm_header *h = mmap(NULL, MCR__SHM_HEADER_SIZE, PROT_READ | PROT_WRITE,
                                      MAP_SHARED, fd, 0);
            if (h != MAP_FAILED) {
                if (memcmp(h->magic, "MCRSHM", 6) == 0) {
                    gen = atomic_load(&h->generation);
                    atomic_store(&h->replaced, 1);
                    atomic_fetch_add(&h->generation, 1);
                }
                munmap(h, MCR__SHM_HEADER_SIZE);
            }
        }
        rc = create_shm(w, nslots, bs, gen, err);
        close(fd);
        return rc;
    }
    return create_shm(w, nslots, bs, gen, err);
}

int mcr_state_writer_open(const char *path, const mcr_state_writer_options *o,
                          mcr_state_writer **out, mcr_error *err)
{
    mcr_state_writer_options def = {0};
    if (o == NULL)
        o = &def;
    if (path == NULL || out == NULL || *path == '\0')
        return mcr__error(err, MCR_ERR_INVALID, "mcr_state_writer_open: NULL or empty argument");
    if (!mcr__zeroed(o->reserved, sizeof(o->reserved)))
        return mcr__error(err, MCR_ERR_INVALID, "mcr_state_writer_options: reserved is not zero");
    if (o->slots > MCR_HOST_STATE_SLOTS_MAX)
        return mcr__error(err, MCR_ERR_INVALID, "state: slots %u above %u", o->slots,
                          MCR_HOST_STATE_SLOTS_MAX);
    if (o->pad_ != 0)
        return mcr__error(err, MCR_ERR_INVALID, "mcr_state_writer_options: pad_ is not zero");
    if (o->counter_servers > MCR_HOST_STATE_COUNTER_SERVERS_MAX)
        return mcr__error(err, MCR_ERR_INVALID, "state: counter servers %u above %u",
                          o->counter_servers, MCR_HOST_STATE_COUNTER_SERVERS_MAX);
    uint32_t nslots = o->slots ? o->slots : MCR_HOST_STATE_SLOTS;
    uint32_t bs = o->counter_servers ? o->counter_servers : MCR_HOST_STATE_COUNTER_SERVERS;
    if (mcr__shm_size(nslots, bs) == SIZE_MAX)
        return mcr__error(err, MCR_ERR_INVALID,
                          "state: %u slots of %u counter servers make a shared memory above "
                          "%zu GiB: fewer of either",
                          nslots, bs, MCR__SHM_SIZE_MAX >> 30);
    if (o->mode > 07777)
        return mcr__error(err, MCR_ERR_INVALID, "state: mode %o is not a file mode", o->mode);
    mcr_state_writer *w = calloc(1, sizeof(*w));
    char shm_path[4096];
    int rc = w == NULL ? mcr__error(err, MCR_ERR_NOMEM, "out of memory for a state writer")
                       : mcr__shm_path(path, shm_path, sizeof(shm_path), err);
    if (rc == MCR_OK) {
        w->shm.fd = -1;
        w->mode = o->mode ? o->mode : MCR_HOST_STATE_MODE;
        w->set_gid = o->set_gid;
        w->gid = o->gid;
        w->path = strdup(path);
        w->shm_path = strdup(shm_path);
        if (w->path == NULL || w->shm_path == NULL)
            rc = mcr__error(err, MCR_ERR_NOMEM, "out of memory for a state writer");
    }
    if (rc == MCR_OK)
        rc = open_shm(w, nslots, bs, (const bool[2]){o->slots != 0, o->counter_servers != 0},
                      err);
    if (rc != MCR_OK) {
        mcr_state_writer_free(w);
        return rc;
    }
    *out = w;
    return MCR_OK;
}

void mcr_state_writer_free(mcr_state_writer *w)
{
    if (w == NULL)
        return;
    if (w->shm.h != NULL)
        atomic_store(&w->shm.h->writer_pid, 0);
    mcr__shm_close(&w->shm); /* closing the descriptor releases the lock */
    for (size_t i = 0; i < w->nids; i++)
        free(w->ids[i].id);
    free(w->ids);
    free(w->path);
    free(w->shm_path);
    free(w);
}

uint64_t mcr_state_writer_generation(const mcr_state_writer *w)
{
    return w == NULL || w->shm.h == NULL ? 0 : atomic_load(&w->shm.h->generation);
}

/* All of `len` bytes to fd. */
static int write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int mcr_state_write(mcr_state_writer *w, const mcr_state_content *c, uint64_t *generation,
                    mcr_error *err)
{
    char *text = NULL, tmp[4096];
    size_t len = 0;
    if (w == NULL || c == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "mcr_state_write: NULL argument");
    uint64_t gen = atomic_load(&w->shm.h->generation) + 1;
    int rc = mcr__state_text(c, gen, realtime_ms(), &text, &len, err);
    if (rc != MCR_OK)
        return rc;
    snprintf(tmp, sizeof(tmp), "%s.new.%ld", w->path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        rc = mcr__error(err, MCR_ERR_IO, "state %s: cannot create %s: %s", w->path, tmp,
                        strerror(errno));
    if (rc == MCR_OK && (write_all(fd, text, len) != 0 || fdatasync(fd) != 0))
        rc = mcr__error(err, MCR_ERR_IO, "state %s: cannot write %s: %s", w->path, tmp,
                        strerror(errno));
    if (rc == MCR_OK)
        rc = set_owner(w, fd, (w->mode & 0555u) | 0200u, tmp, MCR_ERR_IO, err);
    if (fd >= 0 && close(fd) != 0 && rc == MCR_OK)
        rc = mcr__error(err, MCR_ERR_IO, "state %s: cannot write %s: %s", w->path, tmp,
                        strerror(errno));
    if (rc == MCR_OK && rename(tmp, w->path) != 0)
        rc = mcr__error(err, MCR_ERR_IO, "state %s: cannot rename %s over it: %s", w->path,
                        tmp, strerror(errno));
    free(text);
    if (rc != MCR_OK) {
        unlink(tmp);
        return rc;
    }
    /* the file is in place before anyone is told */
    atomic_store_explicit(&w->shm.h->generation, gen, memory_order_release);
    remember_ids(w, c->snapshot);
    remember_ids(w, c->from);
    remember_ids(w, c->to);
    if (generation != NULL)
        *generation = gen;
    return MCR_OK;
}

int mcr_state_processes(mcr_state_writer *w, mcr_state_process **out, size_t *count,
                        mcr_error *err)
{
    if (w == NULL || out == NULL || count == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "mcr_state_processes: NULL argument");
    uint32_t n = atomic_load(&w->shm.h->high_water);
    if (n > w->shm.h->nslots)
        n = w->shm.h->nslots;
    size_t live = 0, cap = 0;
    mcr_state_process *v = NULL;
    *out = NULL;
    *count = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (atomic_load_explicit(&w->shm.slots[i].owner, memory_order_relaxed) == 0 ||
            mcr__shm_reap(&w->shm, i))
            continue;
        if (live == cap) {
            cap = cap ? cap * 2 : 64;
            mcr_state_process *t = realloc(v, cap * sizeof(*v));
            if (t == NULL) {
                free(v);
                return mcr__error(err, MCR_ERR_NOMEM, "out of memory listing processes");
            }
            v = t;
        }
        live += (size_t)mcr__shm_read_slot(&w->shm, i, &v[live]);
    }
    if (live == 0) {
        free(v);
        return MCR_OK;
    }
    *out = v;
    *count = live;
    return MCR_OK;
}

void mcr_state_processes_free(mcr_state_process *p)
{
    free(p);
}

int mcr_state_counters(mcr_state_writer *w, mcr_state_server_counters **out, size_t *count,
                       mcr_error *err)
{
    if (w == NULL || out == NULL || count == NULL)
        return mcr__error(err, MCR_ERR_INVALID, "mcr_state_counters: NULL argument");
    mcr__server_total *t = NULL;
    size_t n = 0;
    *out = NULL;
    *count = 0;
    if (mcr__shm_sum(&w->shm, &t, &n) != MCR_OK)
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory adding the counters up");
    if (n == 0)
        return MCR_OK;
    mcr_state_server_counters *c = calloc(n, sizeof(*c));
    if (c == NULL) {
        free(t);
        return mcr__error(err, MCR_ERR_NOMEM, "out of memory adding the counters up");
    }
    for (size_t j = 0; j < n; j++) {
        const char *id = NULL;
        for (size_t k = 0; k < w->nids && id == NULL; k++)
            if (w->ids[k].hash == t[j].id_hash)
                id = w->ids[k].id;
        if (id != NULL)
            snprintf(c[j].id, sizeof(c[j].id), "%s", id);
        else
            snprintf(c[j].id, sizeof(c[j].id), "#%016llx", (unsigned long long)t[j].id_hash);
        c[j].requests = t[j].v[MCR__CTR_REQUESTS];
        c[j].hits = t[j].v[MCR__CTR_HITS];
        c[j].misses = t[j].v[MCR__CTR_MISSES];
        c[j].errors = t[j].v[MCR__CTR_ERRORS];
        c[j].timeouts = t[j].v[MCR__CTR_TIMEOUTS];
        c[j].connect_failures = t[j].v[MCR__CTR_REFUSALS];
        c[j].ejections = t[j].v[MCR__CTR_EJECTIONS];
        c[j].fallback_reads = t[j].v[MCR__CTR_FALLBACK_READS];
        c[j].fallback_hits = t[j].v[MCR__CTR_FALLBACK_HITS];
        c[j].latency_count = t[j].v[MCR__CTR_LAT_COUNT];
        c[j].latency_sum_s = (double)t[j].v[MCR__CTR_LAT_SUM_US] / 1e6;
        for (int b = 0; b < MCR_HOST_STATE_BUCKETS; b++) {
            c[j].buckets[b] = t[j].le[b];
            c[j].bounds_s[b] = (double)mcr__latency_bounds_us[b] / 1e6;
        }
    }
    free(t);
    *out = c;
    *count = n;
    return MCR_OK;
}

uint64_t mcr_state_counters_dropped(const mcr_state_writer *w)
{
    if (w == NULL || w->shm.h == NULL)
        return 0;
    return atomic_load_explicit(&w->shm.h->counters_dropped, memory_order_relaxed);
}

void mcr_state_counters_free(mcr_state_server_counters *c)
{
    free(c);
}
