/*
 * Fault guard: lets a thread copy memory that may be unmapped underneath it
 * with plain loads, turning the SIGSEGV or SIGBUS of a bad read into a
 * failed copy. A syscall read (process_vm_readv) gives the same answer but
 * costs about a microsecond; walkers copy a few structs per frame, so the
 * syscall was the whole cost of a stack.
 *
 * Our handler is installed once per process and never removed: while no
 * guarded copy runs on the faulting thread it only passes the signal on to
 * the handler that was there before (the application's, faulthandler's, a
 * runtime's, or the default action), and a library that installed its own
 * handler after ours may chain to it. The fast path is used only while our
 * handler is still the installed one: someone who replaced it expects to
 * see every fault first, and Python's faulthandler, for one, would print a
 * fatal error for ours. That is checked when a thread arms (the sampler:
 * every tick) and again before the next copy after a change announced
 * with pn_fault_guard_change_begin/_end (the Python binding brackets
 * faulthandler.enable/disable and signal.signal with them): a copy and an
 * announced change exclude each other, so no guarded copy runs while such
 * a handler is being installed, and none after it until the check.
 *
 * A fault of a guarded copy that reaches us anyway (a handler installed
 * from C between two checks, which chained to us or, like faulthandler,
 * put ours back and re-raised the signal) is still recognised as ours.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pyroscope_native.h"
#include "sampling/sampler.h"

/* The copy that runs on the faulting thread; NULL when none runs. One per
 * thread; initial-exec so the signal handler's read of it cannot call into
 * the dynamic linker (the library may be dlopen'ed, as Python extensions
 * are). */
typedef struct {
    sigjmp_buf jb;
    uintptr_t lo, hi; /* the source range being copied */
} guard;

static __thread guard *tls_guard __attribute__((tls_model("initial-exec")));

/* The handlers ours replaced. Written once, under install_mu and before our
 * handler is installed; read by the handler on any thread afterwards. */
static struct sigaction prev_segv, prev_bus;

static pthread_mutex_t install_mu = PTHREAD_MUTEX_INITIALIZER;
static int installed;           /* under install_mu */
/* Set once the fast path found its handler replaced; any arming thread. */
static atomic_int replaced_logged;

/* Whether this thread's pn_safe_read takes the fast path (per thread, so
 * only a thread that asked for it, the sampler, ever does), and the change
 * generation its handler check saw. */
static __thread int tls_armed __attribute__((tls_model("initial-exec")));
static __thread uint64_t tls_gen __attribute__((tls_model("initial-exec")));

/* Announced handler changes against guarded copies (a Dekker pair, all
 * seq_cst): a copier counts itself in `copiers`, then checks `changing`; a
 * changer counts itself in `changing`, then waits for `copiers` to drain.
 * `gen` counts finished changes, so copiers re-check the handler. Any
 * thread; the fork path resets them in a child. */
static atomic_int copiers, changing;
static _Atomic uint64_t gen;

static void pass_on(int sig, siginfo_t *si, void *uc)
{
    const struct sigaction *p = sig == SIGBUS ? &prev_bus : &prev_segv;
    if (p->sa_flags & SA_SIGINFO) {
        if (p->sa_sigaction) {
            p->sa_sigaction(sig, si, uc);
            return;
        }
    } else if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN) {
        p->sa_handler(sig);
        return;
    }
    /* The default action (an ignored fault is fatal too): restore it and
     * let the faulting instruction run again, or re-raise a sent signal,
     * so the process dies of it with a core, as it would without us. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    if (si == NULL || si->si_code <= 0)
        raise(sig);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    guard *g = tls_guard;
    /* Ours: a fault raised by the kernel inside a guarded copy, at an
     * address it reads (also when another handler ran first and chained to
     * us with its siginfo). x86-64 reports a non-canonical address (a torn
     * pointer) as SI_KERNEL with no address. Or the same fault re-raised
     * on this thread by a handler that ran first and put ours back
     * (faulthandler: raise(), so SI_TKILL from our own pid): inside a copy
     * nothing else runs on this thread that could fault. */
    if (g && si &&
        ((si->si_code > 0 &&
          (si->si_code == SI_KERNEL ||
           ((uintptr_t)si->si_addr >= g->lo && (uintptr_t)si->si_addr < g->hi))) ||
         ((si->si_code == SI_TKILL || si->si_code == SI_USER) && si->si_pid == getpid())))
        siglongjmp(g->jb, 1);
    pass_on(sig, si, uc);
}

static int handler_is_ours(int sig)
{
    struct sigaction cur;
    if (sigaction(sig, NULL, &cur) != 0)
        return 0;
    return (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_fault;
}

int pn_fault_guard_install(pn_error *e)
{
    pthread_mutex_lock(&install_mu);
    int rc = 0;
    if (!installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fault;
        /* NODEFER: the jump out of the handler leaves the signal unblocked
         * without saving the mask in every copy. ONSTACK: faults on a
         * thread's alternate stack (e.g. a runtime's stack-overflow
         * handling) must stay there. */
        sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGSEGV, NULL, &prev_segv) != 0 ||
            sigaction(SIGBUS, NULL, &prev_bus) != 0 || sigaction(SIGSEGV, &sa, NULL) != 0 ||
            sigaction(SIGBUS, &sa, NULL) != 0) {
            /* Whatever got installed stays: our handler passes faults on,
             * so a half install is harmless, and arming will decline. */
            rc = pn_fail(e, PN_EIO, "fault_guard: cannot install the SIGSEGV/SIGBUS handler");
        } else {
            installed = 1;
            atomic_store(&replaced_logged, 0);
        }
    }
    pthread_mutex_unlock(&install_mu);
    return rc;
}

int pn_fault_guard_arm(int on)
{
    /* The generation before the check: a change finishing during it makes
     * the next copy check again. */
    tls_gen = atomic_load(&gen);
    int ours = on && handler_is_ours(SIGSEGV) && handler_is_ours(SIGBUS);
    if (on && !ours && !atomic_exchange(&replaced_logged, 1))
        pn_log(PN_LOG_INFO, "fault_guard: the SIGSEGV/SIGBUS handler is not ours (not "
                            "installed, or replaced since); reading stacks with "
                            "process_vm_readv instead");
    tls_armed = ours;
    return ours;
}

int pn_fault_guard_armed(void) { return tls_armed; }

void pn_fault_guard_change_begin(void)
{
    atomic_fetch_add(&changing, 1);
    /* A copy is a few loads: copiers drain at once unless the copying
     * thread was descheduled in one. Bounded, in case it is stopped (a
     * debugger): then this change races that copy, as an unannounced one
     * would. */
    for (int i = 0; atomic_load(&copiers) != 0 && i < 2000; i++) {
        struct timespec d = {0, i < 100 ? 0 : 50000};
        nanosleep(&d, NULL);
    }
}

void pn_fault_guard_change_end(void)
{
    atomic_fetch_add(&gen, 1);
    atomic_fetch_sub(&changing, 1);
}

void pn_fault_guard_after_fork(void)
{
    /* The child's only thread is the forking one: no copy runs. */
    atomic_store(&copiers, 0);
    atomic_store(&changing, 0);
}

/* noinline: the valgrind suppressions name it as raw_copy's caller. */
__attribute__((noinline)) static int guarded_copy(void *dst, const void *src, size_t n);

/* Plain loads and stores, not memcpy: a sanitizer's memcpy would check (and
 * report) the source, which is exactly the memory we may not own. The
 * empty asm keeps the compiler from turning the loop back into memcpy. */
__attribute__((noinline, no_sanitize("address", "undefined"))) static void
raw_copy(unsigned char *dst, const unsigned char *src, size_t n)
{
    while (n >= sizeof(uint64_t)) {
        uint64_t v;
        __builtin_memcpy(&v, src, sizeof v);
        __builtin_memcpy(dst, &v, sizeof v);
        __asm__ volatile("" ::: "memory");
        src += sizeof v;
        dst += sizeof v;
        n -= sizeof v;
    }
    while (n--) {
        *dst++ = *src++;
        __asm__ volatile("" ::: "memory");
    }
}

int pn_fault_guard_copy(void *dst, const void *src, size_t n)
{
    uintptr_t lo = (uintptr_t)src;
    if (lo + n < lo)
        return -1;
    atomic_fetch_add(&copiers, 1);
    if (atomic_load(&changing) != 0 || atomic_load(&gen) != tls_gen) {
        atomic_fetch_sub(&copiers, 1);
        /* A handler is being changed (this read takes the syscall), or
         * was: check whose it is now, for the reads that follow. */
        if (atomic_load(&changing) == 0)
            pn_fault_guard_arm(1);
        return 1;
    }
    int rc = guarded_copy(dst, src, n);
    atomic_fetch_sub(&copiers, 1);
    return rc;
}

__attribute__((noinline)) static int guarded_copy(void *dst, const void *src, size_t n)
{
    uintptr_t lo = (uintptr_t)src;
    guard g;
    g.lo = lo;
    g.hi = lo + n;
    /* A signal handler on this thread may copy too: restore its caller's
     * guard rather than clearing it. */
    guard *outer = tls_guard;
    if (sigsetjmp(g.jb, 0) != 0) {
        tls_guard = outer;
        return -1;
    }
    tls_guard = &g;
    atomic_signal_fence(memory_order_seq_cst);
    raw_copy(dst, src, n);
    atomic_signal_fence(memory_order_seq_cst);
    tls_guard = outer;
    return 0;
}
