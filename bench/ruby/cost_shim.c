/* An LD_PRELOAD library for bench/ruby: measures a profiler's direct cost
 * on the application's threads the same way for every profiler, without
 * changing any of them.
 *
 * - SIGPROF handlers: sigaction(SIGPROF, ...) installs a wrapper in place
 *   of the profiler's handler; the wrapper times each run of it on the
 *   thread CPU clock. A query of the handler answers with the profiler's
 *   own, so a profiler that checks what is installed sees what it set.
 * - Postponed jobs: rb_postponed_job_register_one(flags, func, data)
 *   registers a trampoline of func instead (one per distinct func, so the
 *   VM's de-duplication by func is unchanged); the trampoline times func.
 *   (Ruby 3.1/3.2: what both stackprof and pyroscope-native call there.)
 *
 * Each timed span includes the tail of one clock read (a system call,
 * about 0.5 us here), the same for every profiler. pn_bench_costs()
 * hands the totals to work.rb (through Fiddle).
 *
 * Threads: the handler wrapper runs in signal handlers (atomics only, no
 * allocation); trampolines run under the GVL; the totals are atomics. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

typedef void (*info_fn)(int, siginfo_t *, void *);
typedef void (*plain_fn)(int);
typedef void (*job_fn)(void *);
typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef int (*register_fn)(unsigned int, job_fn, void *);

static sigaction_fn real_sigaction;
static register_fn real_register;
/* The profiler's SIGPROF handler the wrapper calls (one of the two). */
static _Atomic(info_fn) prof_info;
static _Atomic(plain_fn) prof_plain;
static _Atomic uint64_t handler_ns, handlers;

__attribute__((constructor)) static void resolve(void)
{
    real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    real_register = (register_fn)dlsym(RTLD_NEXT, "rb_postponed_job_register_one");
}

static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void add(_Atomic uint64_t *total, _Atomic uint64_t *n, int64_t t0)
{
    atomic_fetch_add_explicit(total, (uint64_t)(cpu_ns() - t0), memory_order_relaxed);
    atomic_fetch_add_explicit(n, 1, memory_order_relaxed);
}

static void timed_handler(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    int64_t t0 = cpu_ns();
    errno = saved;
    info_fn f = atomic_load(&prof_info);
    plain_fn p = atomic_load(&prof_plain);
    if (f)
        f(sig, si, uc);
    else if (p)
        p(sig);
    saved = errno;
    add(&handler_ns, &handlers, t0);
    errno = saved;
}

/* Whether a handler (as sigaction describes it) is ours. */
static int is_wrapper(const struct sigaction *sa)
{
    return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == timed_handler;
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (!real_sigaction)
        resolve();
    if (sig != SIGPROF)
        return real_sigaction(sig, act, old);
    info_fn was_info = atomic_load(&prof_info);
    plain_fn was_plain = atomic_load(&prof_plain);
    struct sigaction mine;
    const struct sigaction *use = act;
    if (act && (act->sa_flags & SA_SIGINFO ? act->sa_sigaction != timed_handler
                                          : act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN)) {
        /* The profiler's handler first, then the wrapper that calls it. */
        if (act->sa_flags & SA_SIGINFO) {
            atomic_store(&prof_info, act->sa_sigaction);
            atomic_store(&prof_plain, (plain_fn)0);
        } else {
            atomic_store(&prof_plain, act->sa_handler);
            atomic_store(&prof_info, (info_fn)0);
        }
        mine = *act;
        mine.sa_flags |= SA_SIGINFO;
        mine.sa_sigaction = timed_handler;
        use = &mine;
    }
    int rc = real_sigaction(sig, use, old);
    if (rc == 0 && old && is_wrapper(old)) {
        if (was_info) {
            old->sa_sigaction = was_info;
        } else {
            old->sa_flags &= ~SA_SIGINFO;
            old->sa_handler = was_plain;
        }
    }
    return rc;
}

/* Trampolines: the funcs seen, each with its own trampoline and totals
 * (the VM's own jobs, such as deferred finalizers, are told apart by the
 * library their func is in when the totals are read). */
#define TRAMPOLINES 4
static _Atomic(job_fn) job_funcs[TRAMPOLINES];
static _Atomic uint64_t job_ns[TRAMPOLINES], jobs[TRAMPOLINES];

static void run_job(int i, void *data)
{
    int64_t t0 = cpu_ns();
    atomic_load(&job_funcs[i])(data);
    add(&job_ns[i], &jobs[i], t0);
}

static void tramp0(void *d) { run_job(0, d); }
static void tramp1(void *d) { run_job(1, d); }
static void tramp2(void *d) { run_job(2, d); }
static void tramp3(void *d) { run_job(3, d); }
static const job_fn tramps[TRAMPOLINES] = {tramp0, tramp1, tramp2, tramp3};

int rb_postponed_job_register_one(unsigned int flags, job_fn func, void *data)
{
    if (!real_register)
        return 0;
    for (int i = 0; i < TRAMPOLINES; i++) {
        job_fn want = (job_fn)0;
        if (atomic_load(&job_funcs[i]) == func ||
            atomic_compare_exchange_strong(&job_funcs[i], &want, func) || want == func)
            return real_register(flags, tramps[i], data);
    }
    return real_register(flags, func, data); /* more funcs than trampolines: untimed */
}

/* Totals so far: handler ns, handler runs, and ns and runs of the jobs
 * outside libruby (the profiler's). */
__attribute__((visibility("default"))) void pn_bench_costs(uint64_t out[4])
{
    out[0] = atomic_load(&handler_ns);
    out[1] = atomic_load(&handlers);
    out[2] = out[3] = 0;
    for (int i = 0; i < TRAMPOLINES; i++) {
        Dl_info info;
        job_fn f = atomic_load(&job_funcs[i]);
        if (!f || (dladdr((void *)f, &info) && info.dli_fname && strstr(info.dli_fname, "libruby")))
            continue;
        out[2] += atomic_load(&job_ns[i]);
        out[3] += atomic_load(&jobs[i]);
    }
}
