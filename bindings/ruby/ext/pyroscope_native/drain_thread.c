/* The captures of blocked threads are recorded while they stay
 * blocked.
 *
 * From 3.3 on, the job a handler triggers runs on the thread the signal
 * hit, at its next interrupt check, and a thread blocked in sleep, a
 * Mutex, a Queue or IO does not return to Ruby for a signal: its capture
 * waited for it to wake, and every tick meanwhile found its slot busy (a
 * wall profile lost nearly all the time threads spent blocked). The core
 * calls the driver's stale callback on its sampler thread when a capture
 * has waited longer than wait_ns; that writes an eventfd, on which a Ruby
 * thread of ours waits without the GVL. Woken, it takes the GVL and runs
 * the recording job.
 *
 * Threads: the eventfd is made and replaced under the GVL (start, fork
 * child) and written by the sampler thread (drain_wake) and by the ubf;
 * the drain thread reads it. A drain thread runs until the generation it
 * was started for is over (stop, a later start). */
#include "native.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <ruby/thread.h>

static atomic_int efd = -1;
static atomic_uint generation; /* bumped under the GVL by start and stop */
static VALUE drain_thread = Qnil; /* GVL; registered with the GC */

/* Sampler thread (the driver's stale callback) and the ubf: one write, no
 * lock. (It cannot block: the counter would need 2^64 - 2 wakes unread.) */
void drain_wake(void *unused)
{
    (void)unused;
    int fd = atomic_load(&efd);
    uint64_t one = 1;
    /* A failed write (closed meanwhile by a fork child's new start) has
     * nobody to wake. */
    if (fd >= 0)
        (void)!write(fd, &one, sizeof one);
}

static void *wait_nogvl(void *arg)
{
    int fd = (int)(intptr_t)arg;
    uint64_t n;
    while (read(fd, &n, sizeof n) < 0 && errno == EINTR)
        ;
    return NULL;
}

static VALUE drain_main(void *arg)
{
    unsigned mine = (unsigned)(uintptr_t)arg;
    /* The profiler's own thread: not a thread to sample (the THREAD_BEGIN
     * hook joined it). */
    threads_leave_current();
    rb_funcall(rb_thread_current(), rb_intern("name="), 1, rb_str_new_cstr("pyroscope-drain"));
    for (;;) {
        int fd = atomic_load(&efd);
        if (fd < 0 || atomic_load(&generation) != mine)
            break;
        /* drain_wake is the ubf too: Thread#kill and VM exit wake the read */
        rb_thread_call_without_gvl(wait_nogvl, (void *)(intptr_t)fd, drain_wake, NULL);
        if (atomic_load(&generation) != mine)
            break;
        capture_job(NULL);
    }
    return Qnil;
}

/* GVL: a drain thread for this start (and a new eventfd in a forked
 * child, where the parent's would still be shared with it). */
void drain_thread_start(int new_fd)
{
    if (new_fd || atomic_load(&efd) < 0) {
        int old = atomic_exchange(&efd, eventfd(0, EFD_CLOEXEC));
        if (old >= 0)
            close(old);
    }
    if (atomic_load(&efd) < 0) {
        pn_log(PN_LOG_WARN, "no eventfd for the drain thread (%s): samples of blocked "
               "threads wait until they wake", strerror(errno));
        return;
    }
    unsigned gen = atomic_fetch_add(&generation, 1) + 1;
    drain_thread = rb_thread_create(drain_main, (void *)(uintptr_t)gen);
}

/* GVL: the drain thread ends (it is not joined: it may be waiting for the
 * GVL this caller holds). */
void drain_thread_stop(void)
{
    atomic_fetch_add(&generation, 1);
    drain_wake(NULL);
    drain_thread = Qnil;
}

void drain_thread_init(void) { rb_gc_register_address(&drain_thread); }

