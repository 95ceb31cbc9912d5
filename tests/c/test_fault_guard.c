/* The fault guard and pn_safe_read's two paths: good reads, every kind of
 * bad read (unmapped, PROT_NONE, a truncated file's SIGBUS, a torn
 * non-canonical pointer), faults that are not ours reaching the handler we
 * replaced or the default action, and a replaced handler turning the fast
 * path off. Tests that need a particular handler before ours run in a
 * forked child, since ours is installed once per process. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "pyroscope_native.h"
#include "aggregation/store.h"
#include "sampling/sampler.h"

static size_t page(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* Two pages, the second unmapped: the first's tail is readable, anything
 * crossing into the second is not. */
static unsigned char *half_mapped(void)
{
    unsigned char *p = mmap(NULL, 2 * page(), PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    for (size_t i = 0; i < page(); i++)
        p[i] = (unsigned char)(i * 7);
    munmap(p + page(), page());
    return p;
}

/* The same answers from both paths, for reads good and bad. */
static void check_reads(int armed)
{
    CHECK_EQ_INT(pn_fault_guard_arm(armed), armed);
    CHECK_EQ_INT(pn_fault_guard_armed(), armed);
    unsigned char *p = half_mapped();
    CHECK(p != NULL);
    if (!p)
        return;
    unsigned char buf[64];
    /* Every size and alignment near the end of the good page. */
    for (size_t n = 1; n <= 40; n++) {
        for (size_t off = 0; off < 9; off++) {
            const unsigned char *src = p + page() - n - off;
            memset(buf, 0xEE, sizeof buf);
            CHECK_EQ_INT(pn_safe_read(buf, src, n), 0);
            CHECK(memcmp(buf, src, n) == 0);
            CHECK_EQ_INT(buf[n], 0xEE); /* nothing past n written */
        }
    }
    CHECK_EQ_INT(pn_safe_read(buf, p + page() - 8, 16), -1);   /* straddles */
    CHECK_EQ_INT(pn_safe_read(buf, p + page(), 1), -1);         /* unmapped */
    CHECK_EQ_INT(pn_safe_read(buf, p + page() - 1, 2), -1);
    CHECK_EQ_INT(pn_safe_read(buf, NULL, 8), -1);
    CHECK_EQ_INT(pn_safe_read(buf, p, 0), 0);
    CHECK_EQ_INT(pn_safe_read(buf, (void *)(UINTPTR_MAX - 3), 8), -1); /* wraps */
#if defined(__x86_64__)
    /* A torn pointer: non-canonical addresses fault as SI_KERNEL. */
    CHECK_EQ_INT(pn_safe_read(buf, (void *)0xdead00000000beefull, 8), -1);
#endif
    /* PROT_NONE is mapped but unreadable. */
    mprotect(p, page(), PROT_NONE);
    CHECK_EQ_INT(pn_safe_read(buf, p + 100, 8), -1);
    munmap(p, page());
    pn_fault_guard_arm(0);
}

static void test_reads_syscall_path(void) { check_reads(0); }

/* Where process_vm_readv is missing (qemu-user answers ENOSYS, seccomp
 * filters ENOSYS or EPERM), the unguarded path gives the same answers. In a
 * forked child: the filter cannot be taken off. */
static void test_reads_without_process_vm_readv(void)
{
    int errnos[] = {ENOSYS, EPERM};
    for (size_t k = 0; k < 2; k++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            struct sock_filter code[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)errnos[k]),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            };
            struct sock_fprog prog = {sizeof code / sizeof code[0], code};
            if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
                prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
                _exit(77);
            char a = 1, b = 0;
            struct iovec l = {&b, 1}, r = {&a, 1};
            if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != -1 || errno != errnos[k])
                _exit(78); /* the filter is not what this test needs */
            pn_check_failures = 0;
            errno = 0;
            check_reads(0);
            CHECK_EQ_INT(errno, 0); /* an application thread's errno is left alone */
            _exit(pn_check_failures ? 1 : 0);
        }
        int st = -1;
        waitpid(pid, &st, 0);
        /* valgrind may refuse a seccomp filter: only there is it a skip. */
        if (WIFEXITED(st) && WEXITSTATUS(st) == 77 && getenv("PN_TEST_SLOW"))
            continue;
        CHECK(WIFEXITED(st));
        CHECK_EQ_INT(WEXITSTATUS(st), 0);
    }
}

static void test_reads_guarded_path(void)
{
    pn_error e = {0};
    CHECK_EQ_INT(pn_fault_guard_install(&e), 0);
    CHECK_EQ_INT(pn_fault_guard_install(&e), 0); /* once per process */
    check_reads(1);
}

/* A file-backed mapping past the end of its (truncated) file: SIGBUS. */
static void test_sigbus_is_a_failed_read(void)
{
    char path[] = "/tmp/pn-fault-guard-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    unlink(path);
    CHECK_EQ_INT(ftruncate(fd, (off_t)page()), 0);
    unsigned char *p = mmap(NULL, page(), PROT_READ, MAP_SHARED, fd, 0);
    CHECK(p != MAP_FAILED);
    CHECK_EQ_INT(ftruncate(fd, 0), 0);
    pn_error e = {0};
    CHECK_EQ_INT(pn_fault_guard_install(&e), 0);
    CHECK_EQ_INT(pn_fault_guard_arm(1), 1);
    unsigned char buf[8];
    CHECK_EQ_INT(pn_safe_read(buf, p, sizeof buf), -1);
    pn_fault_guard_arm(0);
    CHECK_EQ_INT(pn_safe_read(buf, p, sizeof buf), -1);
    munmap(p, page());
    close(fd);
}

/* Guarded reads from many threads at once each jump back to their own
 * copy, never another thread's. */
static void *reader(void *arg)
{
    unsigned char *p = arg;
    pn_fault_guard_arm(1);
    long bad = 0;
    unsigned char buf[16];
    for (int i = 0; i < 20000; i++) {
        if (pn_safe_read(buf, p + page() - 8 + (i & 15), 8) != 0)
            bad++;
    }
    return (void *)bad;
}

static void test_threads_read_concurrently(void)
{
    pn_error e = {0};
    CHECK_EQ_INT(pn_fault_guard_install(&e), 0);
    unsigned char *p = half_mapped();
    CHECK(p != NULL);
    if (!p)
        return;
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, reader, p);
    for (int i = 0; i < 4; i++) {
        void *bad;
        pthread_join(th[i], &bad);
        /* All offsets but the first of every 16 reach the unmapped page. */
        CHECK_EQ_INT((long)bad, 20000 / 16 * 15);
    }
    munmap(p, page());
}

/* ------------------------------------------------ faults that are not ours */

static volatile sig_atomic_t app_faults;
static unsigned char *app_page;
static size_t app_page_size;

/* The application's own handler: it makes the page readable, so the
 * faulting load runs again and succeeds. */
static void app_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    unsigned char *at = si->si_addr;
    if (at >= app_page && at < app_page + app_page_size)
        app_faults++;
    mprotect(app_page, app_page_size, PROT_READ | PROT_WRITE);
}

/* Run scenario `name` in a fresh exec of this program (see run_scenario);
 * returns its wait status. */
static int in_child(const char *name)
{
    /* The path, not /proc/self/exe itself: under valgrind that is the
     * tool, while readlink answers with the program valgrind runs. */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("PN_FAULT_GUARD_SCENARIO", name, 1);
        execl(self, "test_fault_guard", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

static void child_chains_to_app_handler(void)
{
    app_page_size = page();
    app_page = mmap(NULL, app_page_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = app_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    pn_error e = {0};
    if (pn_fault_guard_install(&e) != 0 || pn_fault_guard_arm(1) != 1)
        _exit(10);
    /* A guarded read of the page is ours: the app never sees it. */
    unsigned char buf[8];
    if (pn_safe_read(buf, app_page, 8) != -1 || app_faults != 0)
        _exit(11);
    /* A plain load outside any copy, even on an armed thread, is the
     * application's fault and reaches its handler. */
    volatile unsigned char *v = app_page;
    unsigned char x = v[1];
    if (app_faults != 1 || x != 0)
        _exit(12);
    _exit(0);
}

static void test_other_faults_reach_the_previous_handler(void)
{
    int st = in_child("chain");
    CHECK(WIFEXITED(st));
    CHECK_EQ_INT(WEXITSTATUS(st), 0);
}

static void child_faults_with_default_action(void)
{
    signal(SIGSEGV, SIG_DFL);
    pn_error e = {0};
    if (pn_fault_guard_install(&e) != 0)
        _exit(10);
    pn_fault_guard_arm(1);
    /* Through a volatile pointer, so the compiler cannot see the address. */
    static volatile uintptr_t where = 16;
    volatile int *bad = (volatile int *)where;
    *bad = 1;
    _exit(0); /* not reached: the fault must kill us */
}

static void child_raises_with_default_action(void)
{
    signal(SIGBUS, SIG_DFL);
    pn_error e = {0};
    if (pn_fault_guard_install(&e) != 0)
        _exit(10);
    raise(SIGBUS);
    _exit(0);
}

/* Python's faulthandler, in short: a handler installed after ours that, on
 * a fault, reports it (here: counts), puts back the handler it replaced and
 * raises the signal again. */
static volatile sig_atomic_t fh_faults;
static struct sigaction fh_prev;

static void fh_handler(int sig)
{
    fh_faults++;
    sigaction(sig, &fh_prev, NULL);
    raise(sig);
}

static void fh_enable(int announce)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fh_handler;
    sa.sa_flags = SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (announce)
        pn_fault_guard_change_begin();
    sigaction(SIGSEGV, &sa, &fh_prev);
    if (announce)
        pn_fault_guard_change_end();
}

static void fh_disable(int announce)
{
    if (announce)
        pn_fault_guard_change_begin();
    sigaction(SIGSEGV, &fh_prev, NULL);
    if (announce)
        pn_fault_guard_change_end();
}

/* Installed from C between two checks, faulthandler sees our fault first
 * and re-raises it: still a failed read, not a crash. */
static void child_reraised_fault_is_ours(void)
{
    pn_error e = {0};
    if (pn_fault_guard_install(&e) != 0 || pn_fault_guard_arm(1) != 1)
        _exit(10);
    fh_enable(0);
    unsigned char buf[8];
    if (pn_safe_read(buf, (void *)16, sizeof buf) != -1)
        _exit(11);
    /* It ran once and put ours back. */
    if (fh_faults != 1 || pn_fault_guard_arm(1) != 1)
        _exit(12);
    _exit(0);
}

/* An announced change is seen before the next guarded read: faulthandler
 * never sees a fault of ours, then or after it is disabled again. */
static void child_announced_change_is_seen(void)
{
    pn_error e = {0};
    if (pn_fault_guard_install(&e) != 0 || pn_fault_guard_arm(1) != 1)
        _exit(10);
    unsigned char buf[8];
    fh_enable(1);
    if (pn_safe_read(buf, (void *)16, sizeof buf) != -1 || pn_fault_guard_armed())
        _exit(11);
    if (pn_safe_read(buf, (void *)16, sizeof buf) != -1 || fh_faults != 0)
        _exit(12);
    fh_disable(1);
    if (pn_fault_guard_arm(1) != 1 || pn_safe_read(buf, (void *)16, sizeof buf) != -1)
        _exit(13);
    _exit(fh_faults == 0 ? 0 : 14);
}

static atomic_int toggling;

static void *toggler(void *arg)
{
    (void)arg;
    while (atomic_load(&toggling)) {
        fh_enable(1);
        fh_disable(1);
    }
    return NULL;
}

/* The same with another thread toggling it as fast as it can while this
 * one reads bad memory (re-arming every 64 reads, as a sampler's ticks). */
static void child_toggled_while_reading(void)
{
    pn_error e = {0};
    if (pn_fault_guard_install(&e) != 0 || pn_fault_guard_arm(1) != 1)
        _exit(10);
    atomic_store(&toggling, 1);
    pthread_t th;
    pthread_create(&th, NULL, toggler, NULL);
    unsigned char buf[8];
    long failed = 0;
    double end = pn_test_now_s() + 0.5;
    long i;
    for (i = 0; pn_test_now_s() < end; i++) {
        if (i % 64 == 0)
            pn_fault_guard_arm(1);
        failed += pn_safe_read(buf, (void *)16, sizeof buf) == -1;
    }
    atomic_store(&toggling, 0);
    pthread_join(th, NULL);
    _exit(failed == i && fh_faults == 0 ? 0 : 11);
}

static void test_foreign_handlers_never_see_our_faults(void)
{
    const char *names[] = {"reraise", "announced", "toggled"};
    for (size_t i = 0; i < 3; i++) {
        int st = in_child(names[i]);
        CHECK(WIFEXITED(st));
        CHECK_EQ_INT(WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st), 0);
    }
}

static void test_unhandled_faults_still_kill(void)
{
    int st = in_child("fault");
    CHECK(WIFSIGNALED(st));
    if (WIFSIGNALED(st))
        CHECK_EQ_INT(WTERMSIG(st), SIGSEGV);
    st = in_child("raise");
    CHECK(WIFSIGNALED(st));
    if (WIFSIGNALED(st))
        CHECK_EQ_INT(WTERMSIG(st), SIGBUS);
}

/* ------------------------------------------------ on the sampler thread */

/* What the sampler thread's reads returned; written there, read after stop. */
typedef struct {
    const unsigned char *good, *bad;
    atomic_long ok, failed, wrong;
} probe;

static void probing_walker(void *ctx, pn_tick *t)
{
    (void)t;
    probe *p = ctx;
    unsigned char buf[32];
    const void *bad[] = {p->bad, p->good + page() - 8, (void *)0x9c34e54000000000ull};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (pn_safe_read(buf, bad[i], 16) == -1)
            atomic_fetch_add(&p->failed, 1);
        else
            atomic_fetch_add(&p->wrong, 1);
    }
    if (pn_safe_read(buf, p->good, sizeof buf) == 0 && memcmp(buf, p->good, sizeof buf) == 0)
        atomic_fetch_add(&p->ok, 1);
    else
        atomic_fetch_add(&p->wrong, 1);
}

/* The sampler's own thread (signals blocked but the faults) reads bad
 * memory every tick through the guard and lives. */
static void test_sampler_thread_survives_bad_reads(void)
{
    unsigned char *p = half_mapped();
    CHECK(p != NULL);
    if (!p)
        return;
    probe pr = {.good = p, .bad = p + page()};
    pn_store_limits l;
    pn_store_limits_default(&l);
    pn_error e = {0};
    pn_store *st = pn_store_new(&l, &e);
    pn_sampler_opts o = {.hz = 1000, .oncpu = 0, .fault_guard = 1};
    pn_sampler *s = pn_sampler_new(st, &o, probing_walker, &pr, &e);
    CHECK(st && s);
    if (!st || !s)
        return;
    CHECK_EQ_INT(pn_sampler_start(s, &e), 0);
    /* Until 11 ticks ran: 11 ms on an idle machine, at most 60 s. */
    pn_sampler_stats stats;
    double give_up = pn_test_now_s() + 60;
    do {
        struct timespec d = {0, 10 * 1000000};
        nanosleep(&d, NULL);
        pn_sampler_get_stats(s, &stats);
    } while (stats.ticks <= 10 && pn_test_now_s() < give_up);
    pn_sampler_stop(s);
    pn_sampler_get_stats(s, &stats);
    CHECK(stats.ticks > 10);
    CHECK_EQ_INT(stats.syscall_ticks, 0); /* every tick used the guard */
    CHECK_EQ_INT(atomic_load(&pr.ok), (long long)stats.ticks);
    CHECK_EQ_INT(atomic_load(&pr.failed), 3 * (long long)stats.ticks);
    CHECK_EQ_INT(atomic_load(&pr.wrong), 0);
    pn_sampler_free(s);
    pn_store_free(st);
    munmap(p, page());
}

/* A scenario child runs before main, so nothing else is installed yet. */
__attribute__((constructor)) static void run_scenario(void)
{
    const char *name = getenv("PN_FAULT_GUARD_SCENARIO");
    if (!name)
        return;
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    if (strcmp(name, "chain") == 0)
        child_chains_to_app_handler();
    else if (strcmp(name, "fault") == 0)
        child_faults_with_default_action();
    else if (strcmp(name, "raise") == 0)
        child_raises_with_default_action();
    else if (strcmp(name, "reraise") == 0)
        child_reraised_fault_is_ours();
    else if (strcmp(name, "announced") == 0)
        child_announced_change_is_seen();
    else if (strcmp(name, "toggled") == 0)
        child_toggled_while_reading();
    _exit(20);
}

static void test_replaced_handler_disarms(void)
{
    pn_error e = {0};
    CHECK_EQ_INT(pn_fault_guard_install(&e), 0);
    CHECK_EQ_INT(pn_fault_guard_arm(1), 1);
    struct sigaction mine, ours;
    memset(&mine, 0, sizeof mine);
    mine.sa_sigaction = app_handler;
    mine.sa_flags = SA_SIGINFO;
    sigemptyset(&mine.sa_mask);
    app_page_size = page();
    sigaction(SIGSEGV, &mine, &ours);
    /* Someone else sees faults first now: no plain loads, and a bad read
     * still fails quietly through the syscall. */
    CHECK_EQ_INT(pn_fault_guard_arm(1), 0);
    CHECK_EQ_INT(pn_fault_guard_armed(), 0);
    unsigned char buf[8];
    CHECK_EQ_INT(pn_safe_read(buf, (void *)16, sizeof buf), -1);
    /* A second install does not stack ours on top again. */
    CHECK_EQ_INT(pn_fault_guard_install(&e), 0);
    CHECK_EQ_INT(pn_fault_guard_arm(1), 0);
    sigaction(SIGSEGV, &ours, NULL);
    CHECK_EQ_INT(pn_fault_guard_arm(1), 1);
    pn_fault_guard_arm(0);
}

TEST_MAIN(T(test_reads_syscall_path), T(test_reads_without_process_vm_readv), T(test_reads_guarded_path), T(test_sigbus_is_a_failed_read),
          T(test_threads_read_concurrently), T(test_sampler_thread_survives_bad_reads), T(test_other_faults_reach_the_previous_handler),
          T(test_unhandled_faults_still_kill), T(test_replaced_handler_disarms),
          T(test_foreign_handlers_never_see_our_faults))
