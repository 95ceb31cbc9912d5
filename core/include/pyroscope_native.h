/*
 * pyroscope-native core: the runtime-agnostic half of the profiler.
 *
 * Everything here is plain C11 with no Python/Node/Ruby headers: the API a
 * binding uses. A binding starts an agent (the pipeline: stores, flusher,
 * upload queue, exporters) and adds drivers that feed it samples (a walker
 * the core's sampler thread calls, batches of timestamped samples, or
 * captures made in a signal handler on the sampled thread); the core does
 * aggregation, encoding and uploads. Reports live in pyroscope_report.h;
 * core internals in the headers under core/src, which bindings cannot see.
 *
 * Conventions: public symbols start with pn_. A function that can fail
 * returns 0 on success and -1 on failure, filling the caller's pn_error.
 * Threads: the header says, per function, which thread may call it.
 */
#ifndef PYROSCOPE_NATIVE_H
#define PYROSCOPE_NATIVE_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

typedef enum {
    PN_OK = 0,
    PN_EINVAL,   /* bad argument or setting; message names it */
    PN_ENOMEM,   /* allocation failed */
    PN_ELIMIT,   /* a bound was hit (label count, depth, queue, ...) */
    PN_EIO,      /* file system or network */
    PN_ESTATE,   /* called in the wrong state (e.g. pop without push) */
    PN_EPROTO,   /* malformed input data (a profile we cannot decode) */
    PN_EHTTP,    /* the server answered with an error status */
    PN_ETYPE,    /* a value of the wrong runtime type (a binding's TypeError) */
} pn_code;

typedef struct {
    pn_code code;
    char msg[512];
} pn_error;

/* Fills e (if not NULL) and returns -1, so callers can `return pn_fail(...)`. */
int pn_fail(pn_error *e, pn_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void pn_error_clear(pn_error *e);

/* --------------------------------------------------------------- logging */

/* Levels use the numbers of Python's logging module so bindings map 1:1. */
enum { PN_LOG_DEBUG = 10, PN_LOG_INFO = 20, PN_LOG_WARN = 30, PN_LOG_ERROR = 40,
       PN_LOG_OFF = 100 };

/* Called from core threads (exporter, flusher) and from API callers; never
 * from the sampler's tick. It must not wait on a thread that is inside
 * pn_agent_stop() (e.g. a Python callback must not need a GIL that the
 * stopping thread holds: release it around stop). */
typedef void (*pn_log_fn)(void *ud, int level, const char *msg);

/* Install the handler (NULL: write to stderr). Any thread, at configure time. */
void pn_log_set_handler(pn_log_fn fn, void *ud);
void pn_log_set_level(int min_level);
int pn_log_level(void);
void pn_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int pn_log_level_parse(const char *s, int *out);

/* ------------------------------------------------------------- safe read */

/* Copy n bytes from addr in this process; returns 0, or -1 when any byte is
 * unmapped (no fault, no signal). Used by walkers to read runtime memory that
 * another thread may free or move underneath them. Any thread, lock-free. */
int pn_safe_read(void *dst, const void *addr, size_t n);

/* Bracket a change of the SIGSEGV/SIGBUS handler (any thread; not in a
 * signal handler): no guarded read runs while one is changed, and the next
 * checks whether the installed handler is still the guard's. Blocks until
 * a running read ends (a few loads; bounded at ~0.1 s). Bindings call it
 * around their runtime's ways to change these handlers. */
void pn_fault_guard_change_begin(void);
void pn_fault_guard_change_end(void);


/* ------------------------------------------------------ page-backed tables */

/* Zeroed tables taken from the kernel with mmap, reserved for their maximum
 * and costing RAM only where written; clearing hands the pages back. Each
 * ends below a PROT_NONE guard page. For caches a walker sizes up front
 * (support/pages.h says why not malloc). No locks; not for a signal handler.
 * new: NULL when the address space cannot be reserved. clear: zero the
 * first `used` bytes (all that were written) and give their pages back. */
void *pn_pages_new(size_t bytes);
void pn_pages_free(void *p, size_t bytes);
void pn_pages_clear(void *p, size_t used);
size_t pn_pages_resident(const void *p, size_t bytes);

/* --------------------------------------------------------------- symbols */

/* Per-period intern tables: strings and frames (function, file, line). A
 * pn_symbols belongs to one store period and is written only by the store's
 * writer; it is read by the exporter after the period was swapped out. It is
 * bounded: when full, new strings/frames map to the "[unknown]" frame and
 * are counted in pn_symbols_dropped(). */
typedef struct pn_symbols pn_symbols;
typedef uint32_t pn_frame_id;

#define PN_STR_EMPTY 0u            /* string id of "" */
#define PN_FRAME_UNKNOWN 0u        /* "[unknown]": symbol table full or bad read */
#define PN_FRAME_TRUNCATED 1u      /* "[truncated]": stack cut at max depth */
#define PN_FRAME_OVERFLOW 2u       /* "[overflow]": store full, sample kept here */
#define PN_FRAME_FIRST_USER 3u

#define PN_MAX_STRING 1024 /* longer names are cut (and end in "...") */

pn_symbols *pn_symbols_new(size_t max_string_bytes, uint32_t max_frames);
void pn_symbols_free(pn_symbols *s);
/* Forget everything but the synthetic frames; bumps the generation. */
void pn_symbols_reset(pn_symbols *s);
/* Walkers may cache ids keyed by their own objects while the generation
 * stays the same. Generations are unique across all tables of the process
 * (a new value at creation and at every reset), so the generation alone
 * tells which table and which period an id belongs to. */
uint64_t pn_symbols_generation(const pn_symbols *s);
uint32_t pn_symbols_string(pn_symbols *s, const char *str, size_t len);
pn_frame_id pn_symbols_frame(pn_symbols *s, uint32_t name_sid, uint32_t file_sid,
                             uint32_t line);
/* Convenience: intern name and file, then the frame. */
pn_frame_id pn_symbols_frame3(pn_symbols *s, const char *name, size_t nlen,
                              const char *file, size_t flen, uint32_t line);
const char *pn_symbols_str(const pn_symbols *s, uint32_t sid, size_t *len);
int pn_symbols_frame_get(const pn_symbols *s, pn_frame_id f, uint32_t *name_sid,
                         uint32_t *file_sid, uint32_t *line);
uint32_t pn_symbols_frame_count(const pn_symbols *s);
uint32_t pn_symbols_string_count(const pn_symbols *s);
uint64_t pn_symbols_dropped(const pn_symbols *s);

/* ---------------------------------------------------------------- labels */

typedef struct {
    const char *key;
    const char *value;
} pn_label;

/* Server rules (see DESIGN.md): names [a-zA-Z_][a-zA-Z0-9_.]*, no leading
 * "__", <= 1024 bytes; values non-empty, <= 2048 bytes, valid UTF-8; at most
 * PN_MAX_LABELS per set. Series tags (the ingest name=) also refuse "{},=" in
 * values (pn_label_check_value); per-sample labels may hold them
 * (pn_label_check_sample_value): the server reads them from the pprof string
 * table. */
#define PN_MAX_LABELS 100
#define PN_MAX_LABEL_NAME 1024
#define PN_MAX_LABEL_VALUE 2048
int pn_label_check_name(const char *key, pn_error *e);
int pn_label_check_value(const char *key, const char *value, pn_error *e);
int pn_label_check_sample_value(const char *key, const char *value, pn_error *e);
/* Application names may also contain '-' and '/'. */
int pn_label_check_app_name(const char *name, pn_error *e);

/* An immutable, sorted, interned label set. Sets with equal contents are the
 * same object and have the same id; the empty set has id 0 and is never
 * freed. Reference counted; creation and release take a mutex that the
 * sampler never takes. Any thread. */
typedef struct pn_labelset pn_labelset;

const pn_labelset *pn_labelset_empty(void);
uint64_t pn_labelset_id(const pn_labelset *ls);
size_t pn_labelset_count(const pn_labelset *ls);
/* i-th pair in key order; valid while the caller holds a reference. */
pn_label pn_labelset_at(const pn_labelset *ls, size_t i);
/* NULL if absent. */
const char *pn_labelset_get(const pn_labelset *ls, const char *key);
/* base ∪ kv (kv wins on equal keys); returns a new reference. Request-time
 * labels (tag_wrapper, wrapWithLabels, span labels, thread tags) go through
 * here, so unless strict labels are on, a pair that cannot be sent as given
 * never fails: its name is made valid (other characters become '_', a
 * leading digit or "__" becomes one '_', cut to 1024 bytes), its value made
 * valid UTF-8 (U+FFFD) and cut to 2048 bytes; a NULL or empty name or value,
 * and pairs past PN_MAX_LABELS, are dropped. Each is counted
 * (pn_labels_fix_counts) and logged, one warning a minute naming the label.
 * Strict: the same inputs fail with PN_EINVAL/PN_ELIMIT naming the label. */
const pn_labelset *pn_labelset_merge(const pn_labelset *base, const pn_label *kv,
                                     size_t n, pn_error *e);
/* base without `key` (only when its value equals `value`, if value != NULL). */
const pn_labelset *pn_labelset_without(const pn_labelset *base, const char *key,
                                       const char *value);
void pn_labelset_ref(const pn_labelset *ls);
void pn_labelset_unref(const pn_labelset *ls);
/* Strict request-time labels (setting strict_labels; default off). Any
 * thread; the agent sets it from its config at start. */
void pn_labels_set_strict(int on);
int pn_labels_strict(void);
/* A binding's own fix of a request-time label (a value of a type it cannot
 * send, labels that are not a mapping): counted and logged as the core's. */
void pn_labels_note_fix(int dropped, const char *key, const char *what);
/* Pairs coerced / dropped by the request-time rules since the process began. */
void pn_labels_fix_counts(uint64_t *coerced, uint64_t *dropped);
/* Number of live (non-empty) label sets: for tests and stats. */
size_t pn_labelset_live(void);

/* Per-OS-thread current set. The calling thread owns its slot; the sampler
 * reads any thread's slot with one atomic load. */
int pn_labels_push(const pn_label *kv, size_t n, pn_error *e);
int pn_labels_pop(pn_error *e);
size_t pn_labels_depth(void);
int pn_labels_thread_add(const char *key, const char *value, pn_error *e);
int pn_labels_thread_remove(const char *key, const char *value, pn_error *e);
/* Replace the calling thread's set (takes a new reference to ls; releases
 * the old). For bindings that keep labels in async context (Node). */
void pn_labels_set_current(const pn_labelset *ls);
/* The calling thread's set, borrowed. */
const pn_labelset *pn_labels_current(void);

/* ------------------------------------------------------------- recording
 *
 * The pipeline (store -> flusher -> queue -> exporters) is fed by drivers.
 * A driver is one of three kinds:
 *   walker      the core's sampler thread calls the binding's walker each
 *               tick (CPython);
 *   batch       the binding hands over samples taken earlier, with their
 *               CLOCK_MONOTONIC timestamps (Node's V8 profiles);
 *   rendezvous  the sampler thread signals the threads that used CPU; the
 *               binding's signal handler captures into the thread's
 *               preallocated slot; a consumer records the captures later
 *               (Ruby: a postponed job under the GVL).
 * Every kind records through the same calls below. Each driver has its
 * own store and its own grace period (several drivers can run side by
 * side) and its own sample types.
 *
 * Threads: one thread at a time records per driver (the sampler thread for
 * a walker; the binding's thread for batch and rendezvous consumers). The
 * recording calls take no lock, allocate nothing and never call back into
 * the runtime. Label sets passed with samples must stay valid until they
 * are recorded: a set loaded inside a recording section is (grace
 * periods); a set captured earlier (a signal handler) is when the driver
 * holds the generation read at capture time (pn_driver_hold). */

#define PN_MAX_VALUES 4 /* values per sample */

typedef struct {
    const char *type;
    const char *unit;
} pn_value_type;

typedef struct pn_driver pn_driver;
typedef struct pn_period pn_period;

/* One sample as a driver hands it over. */
typedef struct {
    const pn_frame_id *frames;  /* leaf first, ids of the target period's symbols */
    size_t depth;
    const pn_labelset *labels;  /* NULL: none */
    uint64_t tid;               /* kernel thread id; kept when report_thread_id */
    const char *thread_name;    /* NULL: none; kept when report_thread_name */
    const int64_t *values;      /* the driver's nvalues */
    int64_t time_ns;            /* CLOCK_MONOTONIC when taken; 0: now */
} pn_sample;

/* A recording section: begin, then for each sample find its period, intern
 * its frames in that period's symbols, record; then end. period returns
 * NULL when the sample is older than every open period (counted as late).
 * The period handle is valid until end. */
void pn_record_begin(pn_driver *d);
pn_period *pn_record_period(pn_driver *d, int64_t time_ns);
pn_symbols *pn_period_symbols(pn_period *p);
void pn_record(pn_driver *d, pn_period *p, const pn_sample *s);
void pn_record_end(pn_driver *d);

/* The grace generation now (async-signal-safe), and the oldest one whose
 * label sets a batch or rendezvous driver still holds in captures not yet
 * recorded (0: none). */
uint64_t pn_grace_generation(void);
void pn_driver_hold(pn_driver *d, uint64_t generation);
/* (For rendezvous drivers the sampler thread keeps the hold itself, from
 * the generation of each request.)
 * Batch drivers: every sample taken before CLOCK_MONOTONIC `time_ns` has
 * been recorded (INT64_MAX: no more samples). A cut period is sealed once
 * the watermark passes its end, or max_delay after the cut. Any thread. */
void pn_driver_watermark(pn_driver *d, int64_t time_ns);

/* Labels of kernel thread `tid`'s slot (the empty set when it has none):
 * one source of a sample's labels. Lock-free; valid until the recording
 * section ends. */
const pn_labelset *pn_labels_of_thread(pid_t tid);

/* --------------------------------------------------------- walker driver */

typedef struct pn_tick pn_tick;

/* Called once per tick on the sampler thread. It must not allocate, lock
 * anything an application thread can hold, or call into the runtime; it
 * reads memory through pn_safe_read. */
typedef void (*pn_walker_fn)(void *ctx, pn_tick *tick);

typedef struct {
    double hz;                  /* ticks per second (default 100) */
    int oncpu;                  /* value = thread CPU ns (1) or wall ns (0) */
    int report_thread_id;
    int report_thread_name;
    int fault_guard;            /* read stacks through the fault guard */
    double cpu_budget;          /* % of one core the sampler thread may use;
                                 * over it, ticks go further apart. 0: none */
} pn_sampler_opts;

/* Walker API, valid only inside the walker callback. */
pn_symbols *pn_tick_symbols(pn_tick *t);
const pn_sampler_opts *pn_tick_opts(const pn_tick *t);
/* CPU ns thread `tid` used since the previous tick that asked about it
 * (a thread seen for the first time reports at most one interval); -1 when
 * the thread's clock cannot be read (it exited). */
int64_t pn_tick_cpu_delta(pn_tick *t, pid_t tid);
/* Decide whether to sample thread tid this tick and with what value: in
 * on-CPU mode 0 (skip) when its CPU clock did not advance, else 1 with
 * *value_ns = CPU ns; in wall mode always 1 with the tick's wall ns. */
int pn_tick_begin_thread(pn_tick *t, pid_t tid, int64_t *value_ns);
/* One sample that stands for several threads (CPython's gil_only: the GIL
 * holder stands for every thread that ran Python since the last tick). In
 * on-CPU mode, pool adds the CPU thread tid used since the last tick to
 * the period's pooled CPU; begin_pooled pools tid's own, then samples tid
 * with the tick's wall time as its value, or returns 0 when no pooled
 * thread used CPU since the last pooled sample. At export the period's
 * pooled values are scaled so they total the pooled CPU: the CPU is what
 * the threads used, split between stacks by ticks. Ask about every thread
 * every tick, or a thread's CPU counts from its next sighting only. In
 * wall mode pool does nothing and begin_pooled is begin_thread. */
void pn_tick_pool_thread(pn_tick *t, pid_t tid);
int pn_tick_begin_pooled(pn_tick *t, pid_t tid, int64_t *value_ns);
/* Nanoseconds of wall time this tick stands for: from the previous tick's
 * deadline to this one's (the interval, times the budget's stride, plus
 * missed deadlines). */
int64_t pn_tick_wall_ns(const pn_tick *t);
/* Record one stack for `tid` with the given value (CPU or wall ns, per the
 * mode); labels come from tid's slot, read when the thread was begun.
 * thread_name may be NULL. */
void pn_tick_sample(pn_tick *t, pid_t tid, const pn_frame_id *frames, size_t depth,
                    int64_t value_ns, const char *thread_name);
/* The same with labels the walker read itself (e.g. from the execution
 * context running on the thread); NULL: none. */
void pn_tick_sample_labels(pn_tick *t, pid_t tid, const pn_frame_id *frames, size_t depth,
                           int64_t value_ns, const char *thread_name,
                           const pn_labelset *labels);
/* The same with labels = tid's slot ∪ `context` (the set of the execution
 * context running on the thread, e.g. a contextvar; its pairs win on equal
 * keys; NULL: the slot alone). The store merges each pair of sets once per
 * period, so this neither allocates nor locks. */
void pn_tick_sample_context(pn_tick *t, pid_t tid, const pn_frame_id *frames, size_t depth,
                            int64_t value_ns, const char *thread_name,
                            const pn_labelset *context);

/* ----------------------------------------------------- rendezvous driver */

/* A capture slot of one registered thread. */
typedef struct pn_capture pn_capture;

/* The calling thread joins (leave: leaves) the threads the driver samples;
 * a thread that exits leaves by itself. Application threads. */
int pn_rendezvous_join(pn_driver *d, pn_error *e);
void pn_rendezvous_leave(pn_driver *d);
/* Join kernel thread `tid` of this process on its behalf (for threads that
 * existed before the driver started and cannot be made to run code): its
 * handler adopts the slot at its first signal; it leaves as a joined
 * thread does, and a slot whose thread is gone before adopting it is
 * freed by the sampler. Control threads. */
int pn_rendezvous_join_tid(pn_driver *d, pid_t tid, pn_error *e);

/* In the binding's handler of the driver's signal (async-signal-safe): the
 * calling thread's requested capture, or NULL (nothing requested, or the
 * sampler stopped waiting: counted as discarded). Fill the buffer, then
 * commit (with the labels that ran, read after begin) or abandon it. */
pn_capture *pn_capture_begin(pn_driver *d);
void *pn_capture_buffer(pn_capture *c, size_t *size);
void pn_capture_commit(pn_capture *c, size_t used, const pn_labelset *labels);
void pn_capture_abandon(pn_capture *c);
/* pn_capture_begin for a handler installed with SA_SIGINFO, on a driver
 * with thread_timers: a signal from the thread's own CPU timer (si_code
 * SI_TIMER) claims the thread's free slot itself, for (1 + si_overrun)
 * intervals of CPU; one that finds the slot not consumed yet adds that to
 * the next capture (counted as busy). Any other signal: pn_capture_begin. */
pn_capture *pn_capture_begin_timer(pn_driver *d, const siginfo_t *si);

/* A committed capture, for the consumer. */
typedef struct {
    const void *data;
    size_t len;
    const pn_labelset *labels;
    uint64_t tid;
    int64_t time_ns;            /* CLOCK_MONOTONIC of the request */
    int64_t value_ns;           /* CPU (or wall) ns this sample stands for */
} pn_capture_view;

/* Consumer (one thread at a time, e.g. a postponed job): calls fn for each
 * committed capture, inside a recording section, then frees its slot.
 * Returns the number of captures passed to fn. */
typedef void (*pn_capture_fn)(void *ud, pn_driver *d, const pn_capture_view *c);
size_t pn_rendezvous_drain(pn_driver *d, pn_capture_fn fn, void *ud);

/* --------------------------------------------------------- memory driver
 *
 * Sampled allocations and the live heap (kind PN_DRIVER_MEMORY). The
 * binding's allocator hook asks, for every allocation, whether it is
 * sampled: the calling thread counts bytes down from a gap drawn from an
 * exponential distribution of mean memory_interval (as Go's and tcmalloc's
 * heap profilers do), so an allocation of s bytes is sampled with
 * probability 1 - exp(-s / interval) and each sample is scaled by its
 * inverse: totals are unbiased. A sampled allocation gets a slot of a
 * bounded table (memory_max_live; never grows: a full table is counted and
 * its samples go to [overflow] with their weight) holding its raw stack (the
 * binding's own bytes, symbolized later on a core thread), labels and size;
 * the hook on free finds it there. Each period holds the allocations
 * sampled in it (alloc_objects/count, alloc_space/bytes) and a snapshot of
 * the sampled objects alive at its end (inuse_objects/count,
 * inuse_space/bytes).
 *
 * Threads: sampled, alloc_* and free run on application threads inside
 * the allocator hook: no lock, no allocation, no call into the runtime.
 * Label sets passed to commit must stay alive until commit returns (the
 * thread's own context holds them); the core copies them off-thread. The
 * symbolize callback runs on the driver's own thread (and the flusher's),
 * under no runtime lock: it reads runtime memory with pn_safe_read. */
typedef struct pn_mem_slot pn_mem_slot;

/* Leaf first; returns the depth written (<= max). */
typedef size_t (*pn_mem_symbolize_fn)(void *ctx, const void *raw, size_t len, pn_symbols *sym,
                                      pn_frame_id *out, size_t max);

/* 1 when this allocation of `size` bytes by the calling thread is sampled. */
int pn_mem_sampled(pn_driver *d, size_t size);
/* Claim a slot for sampled allocation ptr (NULL when the table is full:
 * counted, its weight kept under [overflow]); buf and cap: where the raw
 * stack goes. Then commit (the bytes of buf used; the slot labels of the thread
 * and its context's; NULL: none) or abandon, on any thread (Ruby commits from
 * a postponed job): until then the slot stays unrecorded. */
pn_mem_slot *pn_mem_alloc_begin(pn_driver *d, const void *ptr, size_t size, void **buf,
                                size_t *cap);
/* The same for a binding that weighs its samples itself (Ruby samples one
 * allocation per window and gives it the objects allocated since the last
 * one): ptr is only a key for pn_mem_free, any unique non-NULL value. */
pn_mem_slot *pn_mem_alloc_begin_weighted(pn_driver *d, const void *ptr, int64_t objects,
                                         int64_t bytes, void **buf, size_t *cap);
void pn_mem_alloc_commit(pn_mem_slot *s, size_t used, const pn_labelset *base,
                         const pn_labelset *context);
void pn_mem_alloc_abandon(pn_mem_slot *s);
/* ptr is being freed (any pointer: a cheap filter passes most by). */
void pn_mem_free(pn_driver *d, const void *ptr);
/* A fresh gap in bytes (>= 1, exponentially distributed with mean
 * memory_interval) to the next sampled allocation, for a binding that keeps
 * its own countdown (Python: one under the GIL); INT64_MAX when d is NULL. */
int64_t pn_mem_next_gap(pn_driver *d);

/* The filter a free is tested against first, inline in a binding's hook:
 * a count per 2^PN_MEM_FILTER_SHIFT bytes of address space (modulo
 * PN_MEM_FILTER_SIZE counts) of the sampled objects alive there, so 0 for
 * nearly every free: pn_mem_free has nothing to do. Consecutive frees read
 * the same cache line. pn_mem_free_filter(d) stays valid until d stops;
 * with d NULL it is all zero and always valid. */
#define PN_MEM_FILTER_SHIFT 8
#define PN_MEM_FILTER_SIZE (1u << 19)
const uint8_t *pn_mem_free_filter(pn_driver *d);
static inline int pn_mem_filter_hit(const uint8_t *f, const void *ptr)
{
    uintptr_t g = ((uintptr_t)ptr >> PN_MEM_FILTER_SHIFT) & (PN_MEM_FILTER_SIZE - 1);
    return __atomic_load_n(&f[g], __ATOMIC_RELAXED) != 0;
}

typedef struct {
    uint64_t sampled;           /* allocations sampled */
    uint64_t table_full;        /* sampled but no slot: weight under [overflow] */
    uint64_t freed;             /* sampled allocations seen freed */
    uint64_t live;              /* slots in use now */
    uint64_t symbols_full;      /* frames that fell to [unknown]: its table is full */
    uint64_t free_probes;       /* frees the filter let through to the address table */
} pn_mem_stats;
void pn_mem_get_stats(pn_driver *d, pn_mem_stats *out);

/* --------------------------------------------------------------- drivers */

typedef enum {
    PN_DRIVER_WALKER = 1, PN_DRIVER_BATCH, PN_DRIVER_RENDEZVOUS, PN_DRIVER_MEMORY
} pn_driver_kind;

typedef struct {
    pn_driver_kind kind;
    /* "cpu", "wall", ...: names the profile in uploads and files. NULL:
     * "cpu" or "wall" after the config's oncpu. */
    const char *profile_type;
    /* Sample types, one per value. nvalues 0: the default pair (profile
     * type in nanoseconds, then "samples"/"count"). period_type/period
     * default to the first type and 1e9/sample_rate. */
    int nvalues;
    pn_value_type sample_types[PN_MAX_VALUES];
    pn_value_type period_type;
    int64_t period;

    /* walker */
    pn_walker_fn walker;
    void *ctx;                  /* passed to walker, notify, after_fork_child */

    /* memory: the raw stack's bytes per slot (capture_bytes, default 2
     * KiB) and how they become frames. Its sample types are fixed (the
     * four above); interval and table size come from the config. */
    pn_mem_symbolize_fn symbolize;

    /* rendezvous */
    int signo;                  /* default SIGPROF */
    size_t capture_bytes;       /* per thread (default 8 KiB) */
    uint32_t max_threads;       /* registered at once (default 1024) */
    int64_t min_cpu_ns;         /* CPU a thread must use before it is
                                 * signalled (default 1/10 interval) */
    int64_t wait_ns;            /* how long a request may stay unanswered;
                                 * the next tick after that takes it back
                                 * as a timeout (default min(interval/2,
                                 * 10 ms)) */
    /* Optional, sampler thread: a tick signalled threads (their captures
     * arrive after it). */
    void (*notify)(void *ctx);
    /* Optional, sampler thread, at a tick: a capture has waited longer
     * than wait_ns for pn_rendezvous_drain. Must be async-signal-safe in
     * spirit: no locks an application thread can hold. */
    void (*stale)(void *ctx);
    /* Optional, sampler thread, at every tick (1 Hz with thread timers):
     * the binding's own checks (Ruby: is our SIGPROF handler still the
     * installed one). The same rules as stale. Nonzero: the signal is not
     * ours now; none is sent and thread timers are disarmed until it
     * returns 0 again (a signal whose handler became SIG_DFL would end the
     * process). */
    int (*housekeeping)(void *ctx);
    /* Nonzero, and the config's oncpu on: each joined thread gets a POSIX
     * timer on its own CPU clock (interval 1/sample_rate) that signals it
     * while it runs, instead of the sampler thread reading every joined
     * thread's clock and signalling the ones that ran. The handler must
     * call pn_capture_begin_timer. Ignored in wall mode and above 250 Hz
     * (the kernel checks CPU timers at its tick: fewer samples than
     * asked for). */
    int thread_timers;

    /* batch */
    int64_t max_delay_ns;       /* a cut period waits this long for late
                                 * samples (default 2 s) */

    /* Optional: in a forked child, from the fork path, before the driver's
     * threads restart (drop per-process caches). */
    void (*after_fork_child)(void *ctx);
} pn_driver_opts;

typedef struct {
    pn_driver_kind kind;
    const char *profile_type;
    uint64_t recorded;          /* samples recorded */
    uint64_t late;              /* samples older than every open period */
    uint64_t requested;         /* rendezvous: captures requested */
    uint64_t captured;          /* rendezvous: committed */
    uint64_t timeouts;          /* rendezvous: not answered within wait_ns */
    uint64_t discarded;         /* rendezvous: abandoned, or too late */
    uint64_t busy;              /* rendezvous: slot not consumed yet */
    uint64_t busy_added;        /* rendezvous: a timer signal's CPU added to
                                 * the thread's capture not consumed yet */
    uint64_t exited;            /* rendezvous: thread gone when signalled */
    uint64_t below_min_cpu;     /* rendezvous: CPU carried to a later tick */
} pn_driver_stats;

/* Thread names (for report_thread_name). A runtime keeps its names in its
 * own objects, which the sampler must not touch, so bindings copy them here
 * from application threads (set: any thread, takes a lock the sampler never
 * takes; NULL or "" forgets the tid). get is lock-free, for the walker: it
 * copies the name of `tid` into buf and returns 1, or returns 0 when there
 * is none (or a writer is changing it right now). Names are cut to
 * PN_THREAD_NAME_MAX - 1 bytes at a character boundary. */
#define PN_THREAD_NAME_MAX 128
int pn_thread_name_set(pid_t tid, const char *name, pn_error *e);
int pn_thread_name_get(pid_t tid, char *buf, size_t size);
/* Forget every name (e.g. in a forked child, where only one thread lives). */
void pn_thread_names_clear(void);

/* CPU time of kernel thread tid of this process, ns; -1 if unreadable. */
int64_t pn_thread_cpu_ns(pid_t tid);
pid_t pn_gettid(void);
/* The kernel's CPU clock of thread tid of this process. */
clockid_t pn_thread_cpu_clock(pid_t tid);

/* ------------------------------------------------------ clocks and threads
 * What the core's threads use, for the bindings' own threads too. */

/* A clock's reading as int64 nanoseconds, and back to a timespec for the
 * absolute-time waits (condvars on CLOCK_MONOTONIC, clock_nanosleep). */
static inline int64_t pn_clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline struct timespec pn_timespec(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    return ts;
}

/* pthread_create with every signal but the synchronous faults blocked in
 * the new thread (the application's handlers run on its own threads only),
 * then named (names are cut to 15 bytes by the kernel). Returns
 * pthread_create's code. Any thread. */
int pn_thread_spawn(pthread_t *t, void *(*fn)(void *), void *arg, const char *name);

/* A condition variable whose timed waits take CLOCK_MONOTONIC deadlines. */
void pn_cond_init_monotonic(pthread_cond_t *cv);

/* ---------------------------------------------------------------- config */

/* Every setting of DESIGN.md. Strings are owned (malloc'ed) by the config. */
typedef struct {
    char *application_name;
    char *server_address;       /* NULL/empty: no HTTP upload */
    double sample_rate;         /* Hz, default 100 */
    double upload_interval;     /* seconds, default 10 */
    int oncpu;                  /* default 1 */
    pn_label *tags;             /* global tags */
    size_t ntags;
    char *basic_auth_username;
    char *basic_auth_password;
    char *tenant_id;
    pn_label *http_headers;
    size_t nheaders;
    char *output_dir;           /* NULL/empty: no folder output */
    int report_pid;
    int report_thread_id;
    int report_thread_name;
    int log_level;              /* PN_LOG_*, default WARN */
    uint32_t max_stacks;        /* per period, default 16384 */
    uint32_t max_depth;         /* default 128 */
    double stop_timeout;        /* seconds stop may take, default 5 */
    char *spy_name;             /* set by the binding, e.g. "pyspy" */
    int fault_guard;            /* default 1; 0: syscall reads only */
    /* OTLP profiles export (beside or instead of server_address). */
    char *otlp_endpoint;        /* NULL/empty: none */
    pn_label *otlp_headers;     /* sent with each OTLP request (auth) */
    size_t notlp_headers;
    char *resource_attributes;  /* "k=v,..." as OTEL_RESOURCE_ATTRIBUTES */
    int otlp_protocol;          /* PN_OTLP_* below; default http/protobuf */
    char *runtime_name;         /* set by the binding: process.runtime.* */
    char *runtime_version;
    double sampler_cpu_budget;  /* % of one core, default 1; 0: no limit */
    int strict_labels;          /* default 0: request-time labels coerced */
    int memory;                 /* memory profile, default 0 (off) */
    uint32_t memory_interval;   /* mean bytes between samples, default 512 KiB */
    uint32_t memory_max_live;   /* sampled live objects tracked, default 65536 */
    /* Settings a binding gave (bit i: pn_config_setting(i)), set by
     * pn_config_set/_set_pairs: their variables are then not read. */
    uint64_t given;
    /* The values of PN_SETTING_EXTERNAL rows (bit i: row i), in their string
     * form, resolved like the others for the binding that reads them; NULL:
     * the row's default. Owned (pn_config_free). */
    char *external[64];
} pn_config;

/* otlp_protocol: OTEL_EXPORTER_OTLP_PROTOCOL's values. */
enum { PN_OTLP_HTTP_PROTOBUF = 0, PN_OTLP_HTTP_JSON = 1, PN_OTLP_GRPC = 2 };

void pn_config_init(pn_config *c);
void pn_config_free(pn_config *c);
int pn_config_copy(pn_config *dst, const pn_config *src, pn_error *e);
/* Set one setting by its name from its string form (the env-var syntax):
 * booleans true/false/1/0/yes/no/on/off, numbers in decimal, tags and
 * headers as "k=v,k2=v2". Unknown names and bad values fail with a message
 * naming the setting and the rule. An alias row sets its alias_of, in its
 * own unit; a setting set by two rows with different values fails naming
 * both. A PN_SETTING_LENIENT row's value out of range is warned about and
 * ignored. */
int pn_config_set(pn_config *c, const char *name, const char *value, pn_error *e);
/* Set "tags" or "http_headers" from pairs (bindings pass their dicts here,
 * since a header value may itself contain ',' or '='). Same rules as the
 * string form; replaces the previous pairs. */
int pn_config_set_pairs(pn_config *c, const char *name, const pn_label *kv, size_t n,
                        pn_error *e);
/* Apply every PYROSCOPE_<NAME> variable of envp (NULL: environ), except
 * those of settings already given (c->given). Unknown PYROSCOPE_* variables
 * are logged as warnings (once per process per name) and ignored. The standard
 * OpenTelemetry variables come first, so PYROSCOPE_* ones win:
 * OTEL_SERVICE_NAME (application_name, when it passes its rules),
 * OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT or else OTEL_EXPORTER_OTLP_ENDPOINT
 * (otlp_endpoint), OTEL_EXPORTER_OTLP_PROFILES_HEADERS or else
 * OTEL_EXPORTER_OTLP_HEADERS (otlp_headers, values percent-decoded),
 * OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL or else OTEL_EXPORTER_OTLP_PROTOCOL
 * (otlp_protocol: grpc, http/protobuf, http/json) and
 * OTEL_RESOURCE_ATTRIBUTES (resource_attributes). */
int pn_config_apply_env(pn_config *c, char *const *envp, pn_error *e);
/* Whole-config rules (an application name, at least one destination...). */
int pn_config_validate(const pn_config *c, pn_error *e);
/* The list of setting names, NULL-terminated (for bindings' keyword checks). */
const char *const *pn_config_names(void);

/* The settings as data: one row per setting, the source of every binding's
 * keywords, conversions and defaults. Precedence, applied once by
 * pn_config_resolve: a binding's keyword, then PYROSCOPE_<NAME> (then its
 * aliases), then the OTEL_* variables, then the default. */
typedef enum {
    PN_KIND_STRING,   /* text; "" means unset */
    PN_KIND_BOOL,     /* PN_BOOL_WORDS */
    PN_KIND_NUMBER,   /* decimal, lo..hi unit */
    PN_KIND_INTEGER,  /* whole number, lo..hi */
    PN_KIND_DURATION, /* seconds lo..hi: "10", "2.5s", "500ms", "1m" */
    PN_KIND_PAIRS,    /* "k=v,k2=v2", or pairs (pn_config_set_pairs) */
    PN_KIND_LEVEL,    /* a log level word or 0..100 */
    PN_KIND_CHOICE,   /* one of `spellings` */
} pn_setting_kind;

enum {
    PN_SETTING_SECRET = 1,  /* never shown (passwords) */
    PN_SETTING_BINDING = 2, /* set by the binding (spy_name...), not a keyword */
    PN_SETTING_EXTERNAL = 4, /* no pn_config field: checked and resolved as text
                                (c->external) for the binding that acts on it
                                (auth_token: the core, an Authorization header) */
    /* A variable of it that is malformed or out of range is a warning and is
     * ignored (the anchors' own variables, which they never refused). */
    PN_SETTING_LENIENT_ENV = 8,
    /* ...and a keyword out of range too (the anchors' value of no meaning). */
    PN_SETTING_LENIENT = 16,
    /* An alias given as a period: alias_of = alias_ratio / value (Hz of µs). */
    PN_SETTING_PERIOD = 32
};

/* The boolean words of every binding and variable ("true" and "false" first). */
#define PN_BOOL_TRUE_WORDS "true", "1", "yes", "on"
#define PN_BOOL_FALSE_WORDS "false", "0", "no", "off"

typedef struct {
    const char *name;          /* core name (pn_config_set) */
    pn_setting_kind kind;
    const char *kind_name;     /* "string", "bool", "number", "integer", ... */
    const char *default_value; /* string form; NULL: unset */
    double lo, hi;             /* numbers and durations (seconds) */
    const char *unit;          /* "Hz", "s", "% of one core", "" */
    const char *spellings;     /* accepted words, comma-separated (bool, level, choice) */
    const char *env;           /* PYROSCOPE_<NAME> */
    const char *env_aliases;   /* read when env is unset, comma-separated, or NULL */
    const char *otel_env;      /* OTEL_* variables feeding it (first wins), or NULL */
    /* The keyword in each binding, then '|'-separated accepted aliases;
     * NULL: not a keyword there. */
    const char *python, *node, *ruby;
    unsigned flags;            /* PN_SETTING_* */
    const char *meaning;
    /* Another spelling of the setting alias_of, in its own unit: that
     * setting = value / alias_ratio (ms: 1000), or alias_ratio / value with
     * PN_SETTING_PERIOD. Both given (by keywords, or by variables) with
     * different values: an error naming both. NULL: not an alias. */
    const char *alias_of;
    double alias_ratio;
} pn_setting_info;

/* Row i, or NULL past the last (iterate from 0). Any thread. */
const pn_setting_info *pn_config_setting(size_t i);
const pn_setting_info *pn_config_setting_find(const char *name);
/* "true"/"1"/"yes"/"on" -> 1, "false"/"0"/"no"/"off" -> 0 (any case, spaces
 * around); else -1 with a message naming `what`. */
int pn_config_parse_bool(const char *what, const char *value, int *out, pn_error *e);
/* A runtime's value for a setting, as its binding maps it: the core
 * decides which types a setting's kind takes, and says why not. */
typedef enum {
    PN_ARG_TEXT,   /* text, len bytes (a NUL inside is refused) */
    PN_ARG_BOOL,
    PN_ARG_INT,    /* integer */
    PN_ARG_FLOAT,  /* number (a non-finite one is refused) */
    PN_ARG_PAIRS,  /* pairs, npairs: a map of text to text */
    PN_ARG_OTHER,  /* anything else: always the wrong type */
} pn_arg_type;

typedef struct {
    pn_arg_type type;
    const char *text;
    size_t len;
    int boolean;
    long long integer;
    double number;
    const pn_label *pairs;
    size_t npairs;
    const char *shown;  /* the value or its type as the runtime shows it ("str") */
} pn_arg;

/* A runtime's words for what a kind takes ("a str", "a String", "a
 * string"), in the errors, and its leniencies kept from its anchor. */
typedef struct {
    const char *text, *boolean, *number, *integer, *level, *pairs;
    int text_parsed; /* text for a bool or number is read like its variable */
    int int_bool;    /* 0 and 1 are false and true */
} pn_arg_words;

/* Checks v against the setting's kind (PN_ETYPE: wrong type; PN_EINVAL: a
 * non-finite number, a NUL, or what pn_config_set refuses), then sets it
 * like pn_config_set / pn_config_set_pairs. */
int pn_config_set_arg(pn_config *c, const char *name, const pn_arg *v,
                        const pn_arg_words *w, pn_error *e);
/* Sets a setting's value without marking it given, unless a keyword gave
 * it: a variable still wins (bindings' own defaults: spy_name...). */
int pn_config_set_default(pn_config *c, const char *name, const char *value, pn_error *e);
/* The whole start-up contract once: envp (NULL: environ) applied under the
 * precedence rule above, every PYROSCOPE_* variable the table does not know
 * warned about once per process, no destination at all (server, OTLP
 * endpoint, folder) meaning server_address's default, then
 * pn_config_validate. A bad value fails naming its setting and source. */
int pn_config_resolve(pn_config *c, char *const *envp, pn_error *e);
/* A setting's value in its string form (pairs "k=v,k2=v2", levels by name;
 * an external row's value or default) into buf; -1 for an unknown name, an
 * alias row (read its alias_of) or a buf too small. */
int pn_config_get(const pn_config *c, const char *name, char *buf, size_t size);

/* ----------------------------------------------------------------- stats */

typedef struct {
    uint64_t ticks;
    uint64_t missed_ticks;      /* deadlines skipped because a tick overran */
    uint64_t samples;
    uint64_t idle_skipped;      /* threads skipped by on-CPU mode */
    uint64_t syscall_ticks;     /* ticks read without the fault guard */
    int64_t sampler_cpu_ns;     /* CPU used by the sampler thread itself */
    uint64_t budget_throttled_ticks; /* deadlines skipped to stay in the CPU budget */
    double effective_rate_hz;   /* the rate now: sample_rate / the budget's stride */
} pn_sampler_stats;

/* One exporter's own counts (each retries and gives up on its own). */
#define PN_MAX_EXPORTERS 4
typedef struct {
    const char *name;           /* "http" (Pyroscope), "otlp", "folder"; static */
    uint64_t sent;              /* payloads its receiver accepted */
    uint64_t failed;            /* payloads given up: rejected, out of attempts,
                                 * or not encoded */
    uint64_t retries;
    uint64_t bytes_sent;
} pn_exporter_stats;

typedef struct {
    uint64_t uploads_ok;
    uint64_t uploads_failed;    /* gave up after retries or a 4xx */
    uint64_t uploads_dropped;   /* queue full (oldest dropped) or stop timeout */
    uint64_t uploads_unconfirmed; /* sent whole, the answer never read (a
                                   * binding's sender at exit): not resent */
    uint64_t retries;
    uint64_t bytes_sent;
    pn_exporter_stats exporters[PN_MAX_EXPORTERS];
    size_t nexporters;
} pn_queue_stats;

/* ----------------------------------------------------------------- agent */

typedef struct pn_agent pn_agent;

typedef struct {
    pn_sampler_stats sampler;
    pn_queue_stats queue;
    uint64_t periods;
    uint64_t profiles_encoded;
    uint64_t samples_dropped;   /* folded into [overflow] or symbol drops */
    uint64_t encode_errors;
    uint64_t late_samples;      /* batch samples too late for any open period */
    uint64_t samples_recorded;  /* by every driver (walker ticks included) */
} pn_agent_stats;

/* Validates the config and starts the pipeline: the flusher and exporter
 * threads. Then add drivers. Any thread; one agent per process at a time
 * (one whose stop has begun no longer counts). */
pn_agent *pn_agent_start(const pn_config *c, pn_error *e);
/* Add a driver (at most 8): its store, and for walker and rendezvous
 * drivers its sampler thread. Control threads. The driver lives until the
 * agent stops. */
pn_driver *pn_agent_add_driver(pn_agent *a, const pn_driver_opts *o, pn_error *e);
void pn_driver_get_stats(pn_driver *d, pn_driver_stats *out);
/* Swap the current period out, encode and queue it, and wait until queued
 * uploads are done, at most timeout_s (negative or NaN: 0; more than a
 * day: a day). May run on several threads, and
 * while pn_agent_stop runs on another (it then fails at once, and stop
 * waits for it to return before freeing). */
int pn_agent_flush(pn_agent *a, double timeout_s, pn_error *e);
/* Keep a from being freed by a concurrent pn_agent_stop until release: for
 * a binding that hands the pointer to a thread that has not called into
 * the agent yet. Any thread; hold before the stop can start. */
void pn_agent_hold(pn_agent *a);
void pn_agent_release(pn_agent *a);
/* Final flush within the config's stop_timeout, stop all threads, free. */
/* The first, immediate step of a stop, for a caller that hands the rest
 * to another thread: flushes are refused from now on and a new agent may
 * start at once. pn_agent_stop must still follow. Any thread. */
void pn_agent_stop_begin(pn_agent *a);
void pn_agent_stop(pn_agent *a);
/* The same, also returning the counters as they were at the end (the final
 * flush included); final may be NULL. */
void pn_agent_stop_stats(pn_agent *a, pn_agent_stats *final);
void pn_agent_get_stats(pn_agent *a, pn_agent_stats *out);
const pn_config *pn_agent_config(const pn_agent *a);

/* The counters as data: row i (NULL past the last), its value in st
 * (real: a rate, else a count, ns or bytes). Every binding's stats() walks
 * this table (Node spells the names in camelCase), then adds its runtime's
 * own counters. Per exporter: "<exporter name>_<row name>". */
typedef struct {
    const char *name;
    const char *meaning;
    int real;
} pn_stat_info;
const pn_stat_info *pn_stat_row(size_t i);
double pn_stat_value(const pn_agent_stats *st, size_t i);
const pn_stat_info *pn_stat_exporter_row(size_t i);
/* A driver's (named as they are) and a memory driver's ("memory_*"). */
const pn_stat_info *pn_stat_driver_row(size_t i);
double pn_stat_driver_value(const pn_driver_stats *x, size_t i);
const pn_stat_info *pn_stat_memory_row(size_t i);
double pn_stat_memory_value(const pn_mem_stats *x, size_t i);
double pn_stat_exporter_value(const pn_exporter_stats *x, size_t i);

/* ------------------------------------------------------------------ fork */

/* The one fork path, in a fixed order: prepare takes every core lock (the
 * agent's, the queue's, labels, thread names), parent releases them, child
 * re-creates them, forgets threads that do not exist there, and restarts
 * the running agent's threads (its profiles carry the child's pid). A
 * binding calls these from its runtime's own hook (os.register_at_fork,
 * Process._fork); they also run from pthread_atfork (registered by the
 * first pn_agent_start) for code that forks from C. Each runs once per
 * fork whichever calls it first; the thread that forks. */
void pn_fork_prepare(void);
void pn_fork_parent(void);
void pn_fork_child(void);
/* A binding's own locks join the path (at most 4 hooks): its prepare runs
 * before the core's, its parent/child after. Any thread, once per hook. */
void pn_fork_hook(void (*prepare)(void), void (*parent)(void), void (*child)(void));

/* ------------------------------------------------------- binding's sender */

/* A binding may send the HTTP uploads itself (Node through its own `http`
 * module) instead of libcurl, which is then not loaded unless the sender
 * declines. The core builds the whole request; the sender only transports
 * it. A Pyroscope ingest request given to a sender carries the gzip'ed
 * pprof as the raw body, `format=pprof` in the query and Content-Type
 * application/octet-stream (the shape @pyroscope/nodejs sends), so no
 * multipart body is needed; libcurl's own requests stay multipart
 * (curl_mime). OTLP requests are the same on both paths. */
typedef struct {
    const char *url;            /* with the ingest query; may hold user:password@ */
    const pn_label *headers;    /* name, value: Content-Type, User-Agent, ... */
    size_t nheaders;
    const char *basic_auth_user;     /* NULL: none (the URL's userinfo, if any) */
    const char *basic_auth_password; /* NULL: empty */
    const uint8_t *body;        /* the whole body, as is */
    size_t body_len;
    double timeout_s;           /* whole request */
    double connect_timeout_s;
    /* PEM file the server's certificate is checked against (ca_file, or
     * $SSL_CERT_FILE); NULL: the sender's default trust. */
    const char *ca_file;
    /* A directory of hashed certificates ($SSL_CERT_DIR), also trusted;
     * NULL: none. A sender that cannot use one should decline. */
    const char *ca_dir;
} pn_http_request;

#define PN_HTTP_REPLY_KEEP 300
typedef struct {
    long status;                /* the HTTP status when the server answered */
    char error[256];            /* a transport error: why no status came */
    int permanent;              /* with error: retrying will not help (a
                                 * certificate refused), not retried */
    char reply[PN_HTTP_REPLY_KEEP + 1]; /* the reply body's first bytes */
} pn_http_response;

enum {
    PN_SENDER_ANSWERED = 0,     /* out->status holds the server's answer */
    PN_SENDER_FAILED = -1,      /* out->error says why (counted, retried) */
    PN_SENDER_DECLINED = 1,     /* cannot send now: the core uses libcurl */
    /* The whole request went out but its answer will never be read (the
     * process is exiting): not sent again, since the server most likely
     * has it (a second copy would count twice); counted as
     * uploads_unconfirmed. out->error may say more. */
    PN_SENDER_UNCONFIRMED = 2
};

/* Runs on the exporter thread and blocks until the request ended; it must
 * return by deadline_ns (CLOCK_MONOTONIC) and soon after *abort becomes
 * non-zero. Everything in req lives only during the call. */
typedef int (*pn_http_sender_fn)(void *ud, const pn_http_request *req, int64_t deadline_ns,
                                 const volatile int *abort, pn_http_response *out);

/* Used by HTTP exporters made from now on (by pn_agent_start); NULL:
 * libcurl again. Any thread, before the agent starts. */
void pn_http_set_sender(pn_http_sender_fn fn, void *ud);

/* A sender for when libcurl cannot be loaded (an image without
 * libcurl.so.4): HTTP exporters made from now on without a sender
 * (pn_http_set_sender) load libcurl as before and use this one only if
 * that fails; it then sends every request (declining one fails it). NULL:
 * none (such an exporter is not made). Any thread, before the agent starts. */
void pn_http_set_fallback_sender(pn_http_sender_fn fn, void *ud);
/* Whether libcurl can be loaded (it is, the first time this says yes): a
 * binding starts what its fallback sender needs only when it cannot. Any
 * thread. */
int pn_http_libcurl_available(void);

/* The relay: a fallback sender for a binding whose runtime sends on a thread
 * of its own (Python's http.client, Ruby's Net::HTTP), so the exporter
 * thread never calls into the runtime. install: make the relay the fallback
 * sender (module load). A runtime thread attaches (1) while it serves
 * requests and detaches (0) when it ends; with none attached a request
 * fails at once. */
typedef struct {
    unsigned long id;           /* for pn_http_relay_done */
    pn_http_request req;        /* a copy, owned by the relayed request */
} pn_http_relayed;

void pn_http_relay_install(void);
void pn_http_relay_attach(int on);
/* The next request, waiting up to wait_s (without any runtime lock: call
 * it with the GIL/GVL released); NULL when none came. Free it with
 * pn_http_relay_free. The sender thread. */
pn_http_relayed *pn_http_relay_next(double wait_s);
/* Its answer: the server's status and reply bytes, or error (NULL: none)
 * and whether retrying cannot help. Late answers are dropped. */
void pn_http_relay_done(unsigned long id, long status, const char *reply, size_t reply_len,
                        const char *error, int permanent);
void pn_http_relay_free(pn_http_relayed *r);

#ifdef __cplusplus
}
#endif
#endif
