/* Thread names for report_thread_name.
 *
 * A runtime's thread names live in its own objects (Python's threading
 * module, for one), which the sampler must not touch. So bindings copy each
 * name here, from the application thread, when a thread starts or is
 * renamed; the sampler looks it up by kernel tid without locks.
 *
 * The table is open-addressed by tid. Each slot carries a sequence counter
 * (odd while a writer is changing it), so a reader copies the name and
 * keeps it only when the counter was even and unchanged around the copy.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "pyroscope_native.h"
#include "sampling/sampler.h"
#include "support/utf8.h"

#define NAME_SLOTS 8192u /* a power of two; threads named at once */

typedef struct {
    _Atomic pid_t tid;          /* 0: never used; -1: freed (probe chains go on) */
    _Atomic uint32_t seq;
    char name[PN_THREAD_NAME_MAX];
} name_slot;

/* Written under names_lock by application threads; read lock-free by the
 * sampler (pn_thread_name_get). */
static name_slot names[NAME_SLOTS];
static _Atomic uint32_t names_probe; /* longest probe distance ever used */
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

/* Fork path (pipeline/fork.c): held across fork() so the child never
 * inherits it held by a thread that is not there. */
void pn_thread_names_fork_prepare(void) { pthread_mutex_lock(&names_lock); }
void pn_thread_names_fork_release(void) { pthread_mutex_unlock(&names_lock); }

static uint32_t home(pid_t tid) { return ((uint32_t)tid * 2654435761u) & (NAME_SLOTS - 1); }

/* The name as a label value (the server's rules, pn_label_check_value):
 * '{' '}' ',' '=' and control characters (C0, DEL, C1) become '_', bytes
 * that are not UTF-8 become '?', and it is cut at a character boundary to
 * fit PN_THREAD_NAME_MAX - 1 bytes. Thread names are whatever the program
 * chose, so they are made valid here rather than refused. */
static size_t label_safe(char *out, const char *name)
{
    const unsigned char *s = (const unsigned char *)name;
    size_t left = strlen(name), o = 0;
    while (left > 0) {
        uint32_t cp = 0;
        size_t n = pn_utf8_char(s, left, &cp);
        const char *put = (const char *)s;
        size_t put_n = n;
        if (n == 0) {
            put = "?", put_n = 1, n = 1;
        } else if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || (cp < 0x80 && strchr("{},=", (int)cp) != NULL)) {
            put = "_", put_n = 1;
        }
        if (o + put_n > PN_THREAD_NAME_MAX - 1)
            break;
        memcpy(out + o, put, put_n);
        o += put_n;
        s += n;
        left -= n;
    }
    out[o] = '\0';
    return o;
}

/* Copy name into the slot, made label-safe. */
static void write_name(name_slot *s, const char *name)
{
    char safe[PN_THREAD_NAME_MAX];
    size_t n = label_safe(safe, name);
    atomic_fetch_add(&s->seq, 1); /* odd: readers back off */
    atomic_thread_fence(memory_order_release);
    memcpy(s->name, safe, n + 1);
    atomic_thread_fence(memory_order_release);
    atomic_fetch_add(&s->seq, 1);
}

int pn_thread_name_set(pid_t tid, const char *name, pn_error *e)
{
    if (tid <= 0)
        return pn_fail(e, PN_EINVAL, "thread name: %d is not a thread id", (int)tid);
    pn_fork_register();
    int clear = name == NULL || name[0] == '\0';
    pthread_mutex_lock(&names_lock);
    uint32_t h = home(tid), probe = atomic_load(&names_probe);
    name_slot *found = NULL, *free_slot = NULL;
    uint32_t free_d = 0;
    for (uint32_t d = 0; d <= probe && !found; d++) {
        name_slot *s = &names[(h + d) & (NAME_SLOTS - 1)];
        pid_t t = atomic_load(&s->tid);
        if (t == tid)
            found = s;
        else if (t <= 0 && !free_slot)
            free_slot = s, free_d = d;
    }
    if (clear) {
        if (found)
            atomic_store(&found->tid, -1);
        pthread_mutex_unlock(&names_lock);
        return 0;
    }
    if (!found && !free_slot) {
        for (uint32_t d = probe + 1; d < NAME_SLOTS && !free_slot; d++) {
            name_slot *s = &names[(h + d) & (NAME_SLOTS - 1)];
            if (atomic_load(&s->tid) <= 0)
                free_slot = s, free_d = d;
        }
    }
    if (!found && !free_slot) {
        pthread_mutex_unlock(&names_lock);
        return pn_fail(e, PN_ELIMIT, "thread name: more than %u named threads at once",
                       NAME_SLOTS);
    }
    if (found) {
        write_name(found, name);
    } else {
        /* Fill the name before the tid makes the slot visible. */
        write_name(free_slot, name);
        atomic_store(&free_slot->tid, tid);
        if (free_d > probe)
            atomic_store(&names_probe, free_d);
    }
    pthread_mutex_unlock(&names_lock);
    return 0;
}

int pn_thread_name_get(pid_t tid, char *buf, size_t size)
{
    if (tid <= 0 || size == 0)
        return 0;
    uint32_t h = home(tid), probe = atomic_load(&names_probe);
    for (uint32_t d = 0; d <= probe; d++) {
        name_slot *s = &names[(h + d) & (NAME_SLOTS - 1)];
        if (atomic_load(&s->tid) != tid)
            continue;
        for (int attempt = 0; attempt < 4; attempt++) {
            uint32_t before = atomic_load(&s->seq);
            if (before & 1)
                continue;
            atomic_thread_fence(memory_order_acquire);
            size_t n = size - 1 < PN_THREAD_NAME_MAX - 1 ? size - 1 : PN_THREAD_NAME_MAX - 1;
            memcpy(buf, s->name, n);
            buf[n] = '\0';
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load(&s->seq) == before && atomic_load(&s->tid) == tid) {
                /* A small buffer must not end inside a character either. */
                size_t len = strlen(buf), lead = len;
                while (lead > 0 && ((unsigned char)buf[lead - 1] & 0xC0) == 0x80)
                    lead--;
                uint32_t cp;
                if (lead > 0 && (unsigned char)buf[lead - 1] >= 0x80 &&
                    pn_utf8_char((const unsigned char *)buf + lead - 1, len - lead + 1, &cp) == 0)
                    buf[lead - 1] = '\0';
                return buf[0] != '\0';
            }
        }
        return 0; /* a writer kept it busy: no name this time */
    }
    return 0;
}

void pn_thread_names_clear(void)
{
    pthread_mutex_lock(&names_lock);
    for (uint32_t i = 0; i < NAME_SLOTS; i++) {
        if (atomic_load(&names[i].tid) != 0)
            atomic_store(&names[i].tid, -1);
    }
    pthread_mutex_unlock(&names_lock);
}
