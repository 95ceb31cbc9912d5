/* Drivers: the three ways samples reach the pipeline (walker, batch,
 * signal rendezvous), each with its own store and grace period, all
 * recording through pn_record (pyroscope_native.h says who may call what).
 *
 * Rendezvous slots: one per joined thread, preallocated with its capture
 * buffer. A slot's state moves FREE -> REQUESTED (sampler thread, before it
 * signals the thread) -> CAPTURING (the thread's signal handler) ->
 * CAPTURED (the handler) -> FREE (the consumer, after recording). The
 * sampler takes back a request nobody answered within wait_ns (REQUESTED ->
 * FREE), so a handler that runs later finds nothing to do. Every change is
 * one atomic operation; nothing here locks, and the handler side only
 * loads and stores.
 *
 * Thread timers (oncpu with opts.thread_timers): each joined thread has a
 * POSIX timer on its own CPU clock that signals it while it runs, so no
 * thread reads clocks or signals for it. Its handler claims its slot
 * itself (FREE -> CAPTURING); the rest is as above. The sampler only
 * keeps the grace hold, the stale callback and the scan for gone threads.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pipeline/driver.h"
#include "sampling/sampler.h"
#include "pyroscope_native.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

enum { SLOT_FREE = 0, SLOT_REQUESTED, SLOT_CAPTURING, SLOT_CAPTURED, SLOT_CONSUMING };

struct pn_capture {
    _Atomic int state;
    /* 1 once the thread found its slot (tl_capture); a slot claimed for it
     * by another thread (pn_rendezvous_join_tid) starts at 0. */
    _Atomic int adopted;
    /* The joined thread; 0: slot unused. Claimed by the joining thread
     * with a CAS, cleared when it leaves. */
    _Atomic pid_t tid;
    pn_driver *d;
    /* Sampler-thread-owned. */
    int64_t cpu_last;           /* -1: no reading yet */
    int64_t carry;              /* CPU (oncpu) or wall time (wall) not yet
                                 * charged to a sample */
    /* Written by the sampler before REQUESTED, read after CAPTURED. gen:
     * the grace generation at the request, older than any label set the
     * handler can load for it. */
    int64_t time_ns, value_ns;
    uint64_t gen;
    /* Thread timers: the timer (valid while timer_on; made by whoever
     * joins the thread, deleted by whoever finds it leaving or gone), and
     * CPU of timer signals that found the slot busy, owed to the next
     * capture (added to by the thread's handler, taken by its next one). */
    timer_t timer;
    _Atomic int timer_on;
    /* 1 until the timer's first signal, which comes after min_cpu_ns, not
     * a whole interval: a thread that lives less than an interval is
     * still sampled (set by timer_start, cleared by the first handler). */
    _Atomic int timer_first;
    _Atomic int64_t timer_carry;
    /* Written by the handler before CAPTURED. */
    const pn_labelset *labels;
    size_t len;
    uint8_t *buf;
};

/* The calling thread's slot, for its signal handler: initial-exec TLS, so
 * reading it in a handler never allocates (one rendezvous driver per
 * thread). */
static __thread pn_capture *tl_capture __attribute__((tls_model("initial-exec")));
/* The serial of tl_capture's driver: a slot of a driver freed since (its
 * agent stopped while this thread stayed joined) is stale, never read. */
static __thread uint64_t tl_serial __attribute__((tls_model("initial-exec")));
static _Atomic uint64_t next_serial = 1;
/* Serials of the rendezvous drivers alive now (an agent has at most 8
 * drivers, one agent at a time); 0: a free entry. */
#define MAX_LIVE 8
/* Wall ticks one sample may carry (see rendezvous_tick). */
#define WALL_CARRY_TICKS 4
/* Thread timers: the sampler thread's rate (at most). Its tick only keeps
 * the grace hold, calls the stale callback and scans for gone threads (a
 * clock read each): none needs the sample rate, and each tick costs a
 * wake-up (15-30 us of CPU on a VM, most of a tick). At 1 Hz a capture
 * left by a thread that blocked before its job ran is recorded within
 * about 1 s, a thread gone without leaving is found as soon, and label
 * sets are freed up to 1 s later; nothing is lost meanwhile (a blocked
 * thread uses no CPU, so its timer asks for nothing). Measured at 100 Hz
 * (bench/ruby/ab.rb under its shim): 5 -> 1 Hz cut our threads' CPU per
 * sample from 1.30 to 0.17 us. */
#define TIMER_TICK_HZ 1
/* Thread timers: the highest sample rate they are used at. The kernel
 * checks CPU timers at its scheduler tick (250 Hz on Debian's kernels):
 * above that one signal stands for several intervals (si_overrun), so the
 * CPU is right but the samples are fewer than the rate asked for. Higher
 * rates keep the sampler thread's signals. */
#define TIMER_MAX_HZ 250
static _Atomic uint64_t live_serials[MAX_LIVE];
/* The signal handler's side of a capture: grouped in .text.hot (with the
 * binding's handler, when it marks it so), a page or two of code where
 * each source file's functions would be a page each; after 10 ms of
 * application work, every page a sample touches is a TLB miss. */
#define HOT __attribute__((hot))

static int serial_live(uint64_t serial)
{
    for (int i = 0; serial && i < MAX_LIVE; i++)
        if (atomic_load(&live_serials[i]) == serial)
            return 1;
    return 0;
}

/* The calling thread's slot in d, or NULL (none, or a stale one). A slot
 * another thread claimed for us is adopted here: a scan by tid, only until
 * found (async-signal-safe: loads, one CAS, thread-local stores). */
HOT static pn_capture *own_capture(pn_driver *d)
{
    if (!d)
        return NULL;
    if (tl_capture && tl_serial == d->serial)
        return tl_capture;
    pid_t tid = pn_gettid();
    for (uint32_t i = 0; i < d->nslots; i++) {
        pn_capture *c = &d->slots[i];
        int no = 0;
        if (atomic_load_explicit(&c->tid, memory_order_relaxed) == tid &&
            atomic_compare_exchange_strong(&c->adopted, &no, 1)) {
            tl_capture = c;
            tl_serial = d->serial;
            return c;
        }
    }
    return NULL;
}
static pthread_key_t leave_key;
static pthread_once_t leave_once = PTHREAD_ONCE_INIT;

static void count(_Atomic uint64_t *c) { atomic_fetch_add_explicit(c, 1, memory_order_relaxed); }

/* ------------------------------------------------------------ recording */

void pn_record_begin(pn_driver *d) { pn_store_write_begin(d->store); }

void pn_record_end(pn_driver *d) { pn_store_write_end(d->store); }

pn_period *pn_record_period(pn_driver *d, int64_t time_ns)
{
    return pn_store_route(d->store, time_ns);
}

void pn_record(pn_driver *d, pn_period *p, const pn_sample *s)
{
    if (!p || !s)
        return;
    uint32_t tname = PN_STR_EMPTY;
    if (d->report_thread_name && s->thread_name && s->thread_name[0])
        tname = pn_symbols_string(pn_period_symbols(p), s->thread_name,
                                  strlen(s->thread_name));
    pn_period_add(p, s->frames, s->depth, s->labels, d->report_thread_id ? s->tid : 0, tname,
                  s->values);
    count(&d->recorded);
}

uint64_t pn_grace_generation(void) { return pn_grace_now(); }

void pn_driver_hold(pn_driver *d, uint64_t generation)
{
    pn_grace_hold(d->capture_reader, generation);
}

void pn_driver_watermark(pn_driver *d, int64_t time_ns)
{
    atomic_store(&d->watermark, time_ns);
}

/* ----------------------------------------------------------- rendezvous */

/* Thread timers: delete c's timer, if it has one. Any thread. */
static void timer_stop(pn_capture *c)
{
    if (atomic_exchange(&c->timer_on, 0))
        timer_delete(c->timer);
}

/* Thread timers: the setting of an armed timer, or of a disarmed one. */
static struct itimerspec timer_spec(const pn_driver *d, int armed)
{
    if (!armed)
        return (struct itimerspec){{0, 0}, {0, 0}};
    return (struct itimerspec){pn_timespec(d->timer_interval), pn_timespec(d->min_cpu_ns)};
}

/* Thread timers: start the CPU timer of thread tid, which joined slot c.
 * Any thread of the process (timers are the process's). */
static int timer_start(pn_driver *d, pn_capture *c, pid_t tid, pn_error *e)
{
    if (!d->timers)
        return 0;
    timer_stop(c); /* one a racing scan for gone threads left behind */
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = d->signo;
    ev.sigev_notify_thread_id = tid;
    timer_t t;
    if (timer_create(pn_thread_cpu_clock(tid), &ev, &t) != 0)
        return pn_fail(e, PN_EIO, "cannot create the CPU timer of thread %d: %s", (int)tid,
                       strerror(errno));
    c->timer = t;
    atomic_store(&c->timer_first, 1);
    atomic_store(&c->timer_on, 1);
    struct itimerspec its = timer_spec(d, !atomic_load(&d->held));
    if (timer_settime(t, 0, &its, NULL) != 0) {
        int err = errno;
        timer_stop(c);
        return pn_fail(e, PN_EIO, "cannot start the CPU timer of thread %d: %s", (int)tid,
                       strerror(err));
    }
    return 0;
}

/* Give slot c back: its thread left or is gone. */
static void release(pn_capture *c)
{
    atomic_store(&c->adopted, 0);
    atomic_store(&c->tid, 0);
}

static void leave_at_exit(void *arg)
{
    pn_capture *c = arg;
    /* c->d is read only when tl_serial says the driver is still ours. */
    if (c && tl_capture == c && serial_live(tl_serial))
        pn_rendezvous_leave(c->d);
}

static void make_leave_key(void) { pthread_key_create(&leave_key, leave_at_exit); }

/* Claim a free slot for thread tid. */
static int claim(pn_driver *d, pid_t tid, int adopted, pn_capture **out, pn_error *e)
{
    for (uint32_t i = 0; i < d->nslots; i++) {
        pn_capture *c = &d->slots[i];
        pid_t none = 0;
        if (atomic_load(&c->tid) == 0) {
            atomic_store(&c->adopted, adopted);
            if (atomic_compare_exchange_strong(&c->tid, &none, tid)) {
                /* A scan that read slots_used before this raise misses the
                 * slot once; the next one sees it. */
                uint32_t used = atomic_load(&d->slots_used);
                while (used < i + 1 &&
                       !atomic_compare_exchange_weak(&d->slots_used, &used, i + 1))
                    ;
                *out = c;
                return 0;
            }
        }
    }
    return pn_fail(e, PN_ELIMIT, "more than %u threads joined the %s driver", d->nslots,
                   d->profile_type);
}

int pn_rendezvous_join(pn_driver *d, pn_error *e)
{
    if (!d || d->o.kind != PN_DRIVER_RENDEZVOUS)
        return pn_fail(e, PN_EINVAL, "rendezvous_join: not a rendezvous driver");
    if (tl_capture && tl_serial != d->serial && serial_live(tl_serial))
        return pn_fail(e, PN_ESTATE, "this thread joined another rendezvous driver");
    pthread_once(&leave_once, make_leave_key);
    pn_capture *c = own_capture(d);
    if (!c) {
        pid_t tid = pn_gettid();
        if (claim(d, tid, 1, &c, e) != 0)
            return -1;
        if (timer_start(d, c, tid, e) != 0) {
            release(c);
            return -1;
        }
    }
    tl_capture = c;
    tl_serial = d->serial;
    pthread_setspecific(leave_key, c);
    return 0;
}

int pn_rendezvous_join_tid(pn_driver *d, pid_t tid, pn_error *e)
{
    if (!d || d->o.kind != PN_DRIVER_RENDEZVOUS)
        return pn_fail(e, PN_EINVAL, "rendezvous_join_tid: not a rendezvous driver");
    for (uint32_t i = 0; i < d->nslots; i++)
        if (atomic_load(&d->slots[i].tid) == tid)
            return 0;
    pn_capture *c;
    if (claim(d, tid, 0, &c, e) != 0)
        return -1;
    if (timer_start(d, c, tid, e) != 0) {
        release(c);
        return -1;
    }
    return 0;
}

void pn_rendezvous_leave(pn_driver *d)
{
    pn_capture *c = own_capture(d);
    if (!c)
        return;
    /* First, so that no timer signal claims the slot while we leave (its
     * pending one goes with it). */
    timer_stop(c);
    /* A consumer reading our capture finishes first (it only records). */
    struct timespec step = {0, 50 * 1000};
    while (atomic_load(&c->state) == SLOT_CONSUMING)
        nanosleep(&step, NULL);
    /* Our own handler cannot run a capture while we are here, so a request
     * still pending is one nobody will answer: give it back. */
    int st = atomic_exchange(&c->state, SLOT_FREE);
    if (st == SLOT_REQUESTED || st == SLOT_CAPTURED)
        count(&d->discarded);
    tl_capture = NULL;
    pthread_setspecific(leave_key, NULL);
    release(c);
}

HOT pn_capture *pn_capture_begin(pn_driver *d)
{
    pn_capture *c = own_capture(d);
    int want = SLOT_REQUESTED;
    if (!c || !atomic_compare_exchange_strong(&c->state, &want, SLOT_CAPTURING)) {
        if (d)
            count(&d->discarded);
        return NULL;
    }
    return c;
}

HOT pn_capture *pn_capture_begin_timer(pn_driver *d, const siginfo_t *si)
{
    if (!d || !d->timers || !si || si->si_code != SI_TIMER)
        return pn_capture_begin(d);
    pn_capture *c = own_capture(d);
    if (!c) {
        count(&d->discarded);
        return NULL;
    }
    /* The CPU this signal stands for, from the timer's schedule (no clock
     * read): its first expiry, or one interval, plus the intervals it
     * overran (the kernel checks CPU timers at its scheduler tick, so
     * above that rate one signal is several). */
    int64_t first = atomic_exchange(&c->timer_first, 0) ? d->min_cpu_ns : d->timer_interval;
    int64_t value = first + (int64_t)(si->si_overrun > 0 ? si->si_overrun : 0) * d->timer_interval;
    int want = SLOT_FREE;
    if (!atomic_compare_exchange_strong(&c->state, &want, SLOT_CAPTURING)) {
        /* This thread's last capture is still waiting for its consumer:
         * the thread has not been back in the runtime since (Ruby runs
         * the recording job at its first interrupt check), so it is
         * still where that capture found it, typically in a C call that
         * released the GVL (zlib, a digest). The CPU is that capture's:
         * carried to the next capture it was charged to the code that ran
         * after the call. Taken back for the moment it takes to add, so a
         * consumer never reads value_ns mid-update. */
        want = SLOT_CAPTURED;
        if (atomic_compare_exchange_strong(&c->state, &want, SLOT_CAPTURING)) {
            c->value_ns += value;
            atomic_store(&c->state, SLOT_CAPTURED);
            count(&d->busy_added);
            return NULL;
        }
        atomic_fetch_add(&c->timer_carry, value);
        count(&d->busy);
        return NULL;
    }
    /* A hold the sampler computes from here on sees the slot taken, and
     * one computed before read an older generation than this. */
    c->gen = pn_grace_now();
    c->time_ns = pn_clock_ns(CLOCK_MONOTONIC);
    c->value_ns = value + atomic_exchange(&c->timer_carry, 0);
    count(&d->requested);
    return c;
}

HOT void *pn_capture_buffer(pn_capture *c, size_t *size)
{
    *size = c->d->capture_bytes;
    return c->buf;
}

HOT void pn_capture_commit(pn_capture *c, size_t used, const pn_labelset *labels)
{
    c->labels = labels;
    c->len = used <= c->d->capture_bytes ? used : c->d->capture_bytes;
    atomic_store(&c->state, SLOT_CAPTURED);
}

HOT void pn_capture_abandon(pn_capture *c)
{
    count(&c->d->discarded);
    /* The thread's timer will not ask again for this CPU: owe it to the
     * next capture. */
    if (c->d->timers)
        atomic_fetch_add(&c->timer_carry, c->value_ns);
    atomic_store(&c->state, SLOT_FREE);
}

size_t pn_rendezvous_drain(pn_driver *d, pn_capture_fn fn, void *ud)
{
    size_t n = 0;
    pn_record_begin(d);
    for (uint32_t i = 0, used = atomic_load(&d->slots_used); i < used; i++) {
        pn_capture *c = &d->slots[i];
        int want = SLOT_CAPTURED;
        /* A plain load first: a locked CAS on every slot costs the
         * consumer (an application thread) microseconds per drain. */
        if (atomic_load_explicit(&c->state, memory_order_relaxed) != SLOT_CAPTURED ||
            !atomic_compare_exchange_strong(&c->state, &want, SLOT_CONSUMING))
            continue;
        pn_capture_view v = {c->buf, c->len, c->labels, (uint64_t)atomic_load(&c->tid),
                             c->time_ns, c->value_ns};
        fn(ud, d, &v);
        count(&d->captured);
        atomic_store(&c->state, SLOT_FREE);
        n++;
    }
    pn_record_end(d);
    return n;
}

/* The oldest generation a capture not yet consumed may hold label sets of
 * (the generation now when there is none), and in *waits whether a
 * captured one has waited for its consumer longer than wait_ns (on Ruby
 * 3.3+ a thread blocked in a system call runs its job only when it wakes:
 * the binding's stale callback records it from elsewhere). One scan. */
static uint64_t oldest_capture(const pn_driver *d, int64_t now, int *waits)
{
    uint64_t oldest = pn_grace_now();
    *waits = 0;
    for (uint32_t i = 0, used = atomic_load(&d->slots_used); i < used; i++) {
        pn_capture *c = &d->slots[i];
        int st = atomic_load(&c->state);
        if (st == SLOT_FREE)
            continue;
        if (c->gen < oldest)
            oldest = c->gen;
        if (st == SLOT_CAPTURED && now - c->time_ns >= d->wait_ns)
            *waits = 1;
    }
    return oldest;
}

/* The rendezvous driver's tick, on its sampler thread: take back the
 * requests nobody answered within wait_ns, then pick the joined threads
 * that used CPU and signal them. It does not wait for the answers (the
 * next tick sees them): a second wake-up per tick would cost this thread
 * more than everything else it does, and a wake-up from the handler would
 * cost the sampled thread a syscall. */
static void take_back_unanswered(pn_driver *d, int64_t now)
{
    for (uint32_t i = 0, used = atomic_load(&d->slots_used); i < used; i++) {
        pn_capture *c = &d->slots[i];
        int expected = SLOT_REQUESTED;
        if (atomic_load_explicit(&c->state, memory_order_relaxed) == SLOT_REQUESTED &&
            now - c->time_ns >= d->wait_ns &&
            atomic_compare_exchange_strong(&c->state, &expected, SLOT_FREE)) {
            /* Never answered (signal blocked, thread stopped): its CPU is
             * charged to its next capture. */
            c->carry += c->value_ns;
            count(&d->timeouts);
        }
    }
}

/* Whether no thread but the sampler used min_cpu_ns of CPU since the last
 * tick that read the joined threads' clocks: one read of the process's
 * clock instead of one per joined thread (each a system call), so an idle
 * process costs a tick no more with many threads than with one. Nothing
 * is lost by not reading: a thread's clock is cumulative, and the next
 * tick that reads it charges all it used since. CPU mode only (a wall
 * tick samples every thread anyway). */
static int others_idle(pn_driver *d)
{
    int64_t proc = pn_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    pn_sampler_stats st;
    pn_sampler_get_stats(d->sampler, &st);
    /* The sampler's CPU up to its previous tick: its wake-up and this
     * tick so far are left in, the same slack at both ends. */
    int64_t own = (int64_t)st.sampler_cpu_ns;
    if (d->scan_proc_cpu >= 0 && proc >= d->scan_proc_cpu && own >= d->scan_own_cpu &&
        (proc - d->scan_proc_cpu) - (own - d->scan_own_cpu) < d->min_cpu_ns)
        return 1;
    d->scan_proc_cpu = proc;
    d->scan_own_cpu = own;
    return 0;
}

/* Forget slot c of thread tid, found gone without leaving (joined on its
 * behalf, or it adopted its slot in a handler, where no exit hook can be
 * set): free it once nothing is in flight. */
static void forget_gone(pn_driver *d, pn_capture *c, pid_t tid)
{
    count(&d->exited);
    timer_stop(c);
    if (atomic_load(&c->state) == SLOT_FREE) {
        atomic_store(&c->adopted, 0);
        atomic_compare_exchange_strong(&c->tid, &tid, 0);
    }
}

/* Thread timers: the scan for threads gone without leaving. */
static void scan_gone(pn_driver *d)
{
    for (uint32_t i = 0, used = atomic_load(&d->slots_used); i < used; i++) {
        pn_capture *c = &d->slots[i];
        pid_t tid = atomic_load(&c->tid);
        if (tid != 0 && pn_thread_cpu_ns(tid) < 0)
            forget_gone(d, c, tid);
    }
}

/* Thread timers: disarm them all, or arm them again. Sampler thread. */
static void timers_arm(pn_driver *d, int on)
{
    struct itimerspec its = timer_spec(d, on);
    for (uint32_t i = 0; d->timers && i < atomic_load(&d->slots_used); i++)
        if (atomic_load(&d->slots[i].timer_on))
            timer_settime(d->slots[i].timer, 0, &its, NULL);
}

static void rendezvous_tick(void *ctx, pn_tick *t)
{
    pn_driver *d = ctx;
    take_back_unanswered(d, pn_clock_ns(CLOCK_MONOTONIC));
    /* Hold what captures not yet consumed may point to, and no more: the
     * hold moves on as the consumer catches up. */
    int waits;
    pn_grace_hold(d->capture_reader,
                  oldest_capture(d, pn_clock_ns(CLOCK_MONOTONIC), &waits));
    if (waits && d->o.stale)
        d->o.stale(d->o.ctx);
    int hold = d->o.housekeeping && d->o.housekeeping(d->o.ctx);
    if (hold != atomic_load(&d->held)) {
        atomic_store(&d->held, hold);
        timers_arm(d, !hold);
    }
    if (d->timers) {
        scan_gone(d);
        return;
    }
    if (hold)
        return;
    int oncpu = pn_tick_opts(t)->oncpu;
    if (oncpu && !d->last_asked && others_idle(d))
        return;
    int64_t now = pn_clock_ns(CLOCK_MONOTONIC);
    /* getpid is a system call; the sampler thread's first tick asks (a
     * forked child starts a new sampler thread, with its own). */
    static __thread pid_t pid;
    if (!pid)
        pid = getpid();
    uint32_t asked = 0;
    for (uint32_t i = 0, used = atomic_load(&d->slots_used); i < used; i++) {
        pn_capture *c = &d->slots[i];
        pid_t tid = atomic_load(&c->tid);
        if (tid == 0) {
            c->cpu_last = -1;
            c->carry = 0;
            continue;
        }
        int64_t cpu = pn_thread_cpu_ns(tid);
        if (cpu < 0) {
            forget_gone(d, c, tid);
            continue;
        }
        if (c->cpu_last < 0 || cpu < c->cpu_last) {
            /* First reading (or a reused tid): what ran before belongs to
             * no sample of ours. */
            c->cpu_last = cpu;
            c->carry = 0;
            continue;
        }
        int64_t used_ns = cpu - c->cpu_last;
        c->cpu_last = cpu;
        int64_t value;
        if (oncpu) {
            c->carry += used_ns;
            if (c->carry < d->min_cpu_ns) {
                if (c->carry > 0)
                    count(&d->below_min_cpu);
                continue;
            }
            value = c->carry;
        } else {
            /* A tick that finds the last capture not consumed yet is owed
             * to the next one (the thread has not run its job, so its
             * stack has not changed), for a few ticks at most: a capture
             * that waits long must not put minutes into one sample. */
            int64_t wall = pn_tick_wall_ns(t);
            c->carry += wall;
            if (c->carry > WALL_CARRY_TICKS * wall)
                c->carry = WALL_CARRY_TICKS * wall;
            value = c->carry;
        }
        if (atomic_load(&c->state) != SLOT_FREE) {
            count(&d->busy);
            continue;
        }
        c->time_ns = now;
        c->value_ns = value;
        /* Not older than the hold taken above, so the hold covers it. */
        c->gen = pn_grace_now();
        atomic_store(&c->state, SLOT_REQUESTED);
        if (syscall(SYS_tgkill, pid, tid, d->signo) != 0) {
            int expected = SLOT_REQUESTED;
            atomic_compare_exchange_strong(&c->state, &expected, SLOT_FREE);
            count(&d->exited);
            continue;
        }
        c->carry = 0;
        count(&d->requested);
        asked++;
    }
    d->last_asked = asked > 0;
    if (asked && d->o.notify)
        d->o.notify(d->o.ctx);
}

/* Thread timers: stop them all (the driver stops or ends). */
static void timers_stop(pn_driver *d)
{
    for (uint32_t i = 0; d->slots && i < d->nslots; i++)
        timer_stop(&d->slots[i]);
}

/* --------------------------------------------------------------- driver */

static int copy_types(pn_driver *d, const pn_driver_opts *o, const pn_config *c, pn_error *e)
{
    const char *type = o->profile_type ? o->profile_type
                       : o->kind == PN_DRIVER_MEMORY ? "memory"
                       : (c->oncpu ? "cpu" : "wall");
    if (!type[0] || strlen(type) >= sizeof d->profile_type)
        return pn_fail(e, PN_EINVAL, "driver profile_type must be 1..%zu bytes",
                       sizeof d->profile_type - 1);
    strcpy(d->profile_type, type);
    if (o->kind == PN_DRIVER_MEMORY) {
        /* Go's heap profile names: Pyroscope shows them under memory. */
        d->nvalues = 4;
        d->types[0] = (pn_value_type){"alloc_objects", "count"};
        d->types[1] = (pn_value_type){"alloc_space", "bytes"};
        d->types[2] = (pn_value_type){"inuse_objects", "count"};
        d->types[3] = (pn_value_type){"inuse_space", "bytes"};
        d->period_type = (pn_value_type){"space", "bytes"};
        d->period = c->memory_interval ? c->memory_interval : 512 * 1024;
        d->sample_rate = c->sample_rate;
        return 0;
    } else if (o->nvalues == 0) {
        d->nvalues = 2;
        d->types[0] = (pn_value_type){d->profile_type, "nanoseconds"};
        d->types[1] = (pn_value_type){"samples", "count"};
    } else {
        if (o->nvalues < 1 || o->nvalues > PN_MAX_VALUES)
            return pn_fail(e, PN_EINVAL, "driver nvalues must be 1..%d, got %d", PN_MAX_VALUES,
                           o->nvalues);
        d->nvalues = o->nvalues;
        for (int i = 0; i < o->nvalues; i++) {
            if (!o->sample_types[i].type || !o->sample_types[i].unit)
                return pn_fail(e, PN_EINVAL, "driver sample_types[%d] needs a type and a unit",
                               i);
            d->types[i] = o->sample_types[i];
        }
    }
    d->period_type = o->period_type.type && o->period_type.unit ? o->period_type : d->types[0];
    d->period = o->period > 0 ? o->period : (int64_t)(1e9 / c->sample_rate + 0.5);
    d->sample_rate = c->sample_rate;
    return 0;
}

void pn_driver_period_rate(pn_driver *d, const pn_period *p, uint32_t *sample_rate,
                           int64_t *period)
{
    double hz = d->sample_rate;
    *period = d->period;
    /* A period the CPU budget did not throttle keeps the configured rate
     * (a missed deadline is the machine's doing; its time is folded into
     * the next tick's value). One it did: the rate the ticks really had,
     * ticks per second of the intervals they covered, and as period their
     * mean spacing, so samples x period is still the time covered. The
     * values are nanoseconds, right whatever the rate. */
    pn_period_stats st;
    pn_period_get_stats(p, &st);
    if (st.throttled_slots > 0 && st.ticks > 0 && st.tick_slots >= st.ticks) {
        hz = d->sample_rate * (double)st.ticks / (double)st.tick_slots;
        if (d->o.period <= 0)
            *period = (int64_t)(1e9 / hz + 0.5);
    }
    /* sampleRate is a whole number of Hz: never 0 for a rate below 1 Hz
     * (the period field keeps the exact spacing). */
    long r = lround(hz);
    *sample_rate = r < 1 ? 1 : (uint32_t)r;
}

/* Whether a rendezvous driver made from o and c uses thread timers. */
static int thread_timers(const pn_driver_opts *o, const pn_config *c)
{
    return o->kind == PN_DRIVER_RENDEZVOUS && o->thread_timers && c->oncpu &&
           c->sample_rate <= TIMER_MAX_HZ;
}

static int init_rendezvous(pn_driver *d, const pn_driver_opts *o, int64_t interval,
                           const pn_config *c, pn_error *e)
{
    d->signo = o->signo ? o->signo : SIGPROF;
    if (d->signo <= 0 || d->signo >= NSIG || d->signo == SIGSEGV || d->signo == SIGBUS ||
        d->signo == SIGKILL || d->signo == SIGSTOP)
        return pn_fail(e, PN_EINVAL, "rendezvous driver: signal %d cannot be used", d->signo);
    d->capture_bytes = o->capture_bytes ? o->capture_bytes : 8192;
    d->nslots = o->max_threads ? o->max_threads : 1024;
    if (d->nslots > 65536 || d->capture_bytes > (16u << 20))
        return pn_fail(e, PN_EINVAL, "rendezvous driver: max_threads (%u) or capture_bytes "
                       "(%zu) too large", d->nslots, d->capture_bytes);
    d->min_cpu_ns = o->min_cpu_ns > 0 ? o->min_cpu_ns : interval / 10;
    d->scan_proc_cpu = d->scan_own_cpu = -1;
    d->timers = thread_timers(o, c);
    d->timer_interval = interval;
    d->wait_ns = o->wait_ns > 0 ? o->wait_ns : (interval / 2 < 10000000 ? interval / 2 : 10000000);
    d->slots = calloc(d->nslots, sizeof *d->slots);
    /* Page-backed: a slot's buffer costs RAM once a capture wrote it. */
    d->buffers_bytes = (size_t)d->nslots * d->capture_bytes;
    d->buffers = pn_pages_new(d->buffers_bytes);
    if (!d->slots || !d->buffers)
        return pn_fail(e, PN_ENOMEM, "rendezvous driver: out of memory for %u slots",
                       d->nslots);
    d->serial = atomic_fetch_add(&next_serial, 1);
    for (int i = 0; i < MAX_LIVE; i++) {
        uint64_t none = 0;
        if (atomic_compare_exchange_strong(&live_serials[i], &none, d->serial))
            break;
    }
    for (uint32_t i = 0; i < d->nslots; i++) {
        d->slots[i].d = d;
        d->slots[i].cpu_last = -1;
        d->slots[i].buf = d->buffers + (size_t)i * d->capture_bytes;
    }
    return 0;
}

void pn_driver_free(pn_driver *d)
{
    if (!d)
        return;
    for (int i = 0; d->serial && i < MAX_LIVE; i++) {
        uint64_t mine = d->serial;
        atomic_compare_exchange_strong(&live_serials[i], &mine, 0);
    }
    timers_stop(d);
    pn_sampler_free(d->sampler);
    pn_store_free(d->store);
    pn_grace_reader_free(d->capture_reader);
    free(d->slots);
    pn_pages_free(d->buffers, d->buffers_bytes);
    free(d);
}

pn_driver *pn_driver_new(const pn_driver_opts *o, const pn_config *c, pn_error *e)
{
    if (!o || o->kind < PN_DRIVER_WALKER || o->kind > PN_DRIVER_MEMORY)
        return pn_fail(e, PN_EINVAL, "driver kind must be walker, batch, rendezvous or memory"),
               NULL;
    if (o->kind == PN_DRIVER_WALKER && !o->walker)
        return pn_fail(e, PN_EINVAL, "a walker driver needs a walker"), NULL;
    pn_driver *d = calloc(1, sizeof *d);
    if (!d)
        return pn_fail(e, PN_ENOMEM, "out of memory creating a driver"), NULL;
    d->o = *o;
    d->report_thread_id = c->report_thread_id;
    d->report_thread_name = c->report_thread_name;
    d->max_delay_ns = o->max_delay_ns > 0 ? o->max_delay_ns : 2000000000LL;
    atomic_store(&d->watermark, 0);
    pn_store_limits lim;
    pn_store_limits_default(&lim);
    lim.max_stacks = c->max_stacks;
    lim.max_depth = c->max_depth;
    /* The rendezvous tick reads no other thread's memory, so it needs no
     * fault guard (arming it costs two sigaction calls a tick, and its
     * handler would sit in front of the runtime's SIGSEGV handler). */
    int guard = o->kind == PN_DRIVER_RENDEZVOUS ? 0 : c->fault_guard;
    pn_sampler_opts so = {c->sample_rate, c->oncpu, c->report_thread_id, c->report_thread_name,
                          guard, c->sampler_cpu_budget};
    int64_t interval = (int64_t)(1e9 / c->sample_rate);
    if (thread_timers(o, c) && so.hz > TIMER_TICK_HZ)
        so.hz = TIMER_TICK_HZ;
    if (copy_types(d, o, c, e) != 0)
        goto fail;
    lim.nvalues = d->nvalues;
    if (!(d->store = pn_store_new(&lim, e)) || !(d->capture_reader = pn_grace_reader_new(e)))
        goto fail;
    if (o->kind == PN_DRIVER_WALKER &&
        !(d->sampler = pn_sampler_new(d->store, &so, o->walker, o->ctx, e)))
        goto fail;
    if (o->kind == PN_DRIVER_RENDEZVOUS &&
        (init_rendezvous(d, o, interval, c, e) != 0 ||
         !(d->sampler = pn_sampler_new(d->store, &so, rendezvous_tick, d, e))))
        goto fail;
    return d;
fail:
    pn_driver_free(d);
    return NULL;
}

int pn_driver_start(pn_driver *d, pn_error *e)
{
    return d->sampler ? pn_sampler_start(d->sampler, e) : 0;
}

void pn_driver_stop(pn_driver *d)
{
    pn_sampler_stop(d->sampler);
    timers_stop(d);
    /* Nothing of ours signals its threads any more: release their slots'
     * hold on label sets. */
    if (d->capture_reader)
        pn_grace_exit(d->capture_reader);
}

void pn_driver_get_stats(pn_driver *d, pn_driver_stats *out)
{
    memset(out, 0, sizeof *out);
    out->kind = d->o.kind;
    out->profile_type = d->profile_type;
    out->recorded = atomic_load(&d->recorded);
    if (d->sampler) {
        pn_sampler_stats ss;
        pn_sampler_get_stats(d->sampler, &ss);
        out->recorded += ss.samples;
    }
    out->late = pn_store_late(d->store);
    out->requested = atomic_load(&d->requested);
    out->captured = atomic_load(&d->captured);
    out->timeouts = atomic_load(&d->timeouts);
    out->discarded = atomic_load(&d->discarded);
    out->busy = atomic_load(&d->busy);
    out->busy_added = atomic_load(&d->busy_added);
    out->exited = atomic_load(&d->exited);
    out->below_min_cpu = atomic_load(&d->below_min_cpu);
}

void pn_driver_fork_child(pn_driver *d)
{
    if (d->o.after_fork_child)
        d->o.after_fork_child(d->o.ctx);
    /* Only the forking thread lives: every other joined thread is gone. */
    for (uint32_t i = 0; d->slots && i < d->nslots; i++) {
        pn_capture *c = &d->slots[i];
        if (c != tl_capture)
            atomic_store(&c->tid, 0);
        atomic_store(&c->state, SLOT_FREE);
        c->cpu_last = -1;
        c->carry = 0;
        /* A child inherits no timer: the ids are not ours to delete. */
        atomic_store(&c->timer_on, 0);
        atomic_store(&c->timer_carry, 0);
    }
    if (own_capture(d)) {
        pid_t tid = pn_gettid();
        atomic_store(&tl_capture->tid, tid);
        /* The forking thread's timer, remade; without it the child's
         * thread is not sampled (nothing else to do in a fork path). */
        timer_start(d, tl_capture, tid, NULL);
    }
    atomic_store(&d->watermark, 0);
    atomic_store(&d->recorded, 0);
    d->scan_proc_cpu = d->scan_own_cpu = -1; /* the child's clocks start over */
    d->last_asked = 0;
    if (d->sampler) {
        pn_sampler_fork_child(d->sampler); /* fresh store, new thread */
    } else {
        pn_store_reset(d->store, pn_clock_ns(CLOCK_REALTIME));
    }
}
