/*
 * The CRuby extension of pyroscope-native: Pyroscope::Native.
 *
 * Sampling is the core's rendezvous driver: its sampler thread signals the
 * Ruby threads whose CPU clock advanced (SIGPROF); our handler captures the
 * stack with rb_profile_frames into the thread's preallocated slot
 * (capture.c); a postponed job turns the frames into names under the GVL
 * and records them (symbolize.c). thread_registry.c keeps the registry of joined
 * threads and pins the frames of captures not yet symbolized; gc_guard.c
 * counts GC cycles so a capture that overlapped one is dropped; fiber_labels.c
 * keeps each Fiber's label set and mirrors the running Fiber's into a
 * thread-local the handler reads; log_bridge.c hands core log lines to Ruby.
 *
 * Threads: "GVL" below means a Ruby thread holding the GVL (all Ruby API
 * calls); "handler" means our SIGPROF handler on the signalled thread,
 * which only reads thread-locals and atomics and calls rb_profile_frames.
 */
#ifndef PYROSCOPE_RUBY_NATIVE_H
#define PYROSCOPE_RUBY_NATIVE_H

#include <ruby.h>
#include <stdatomic.h>
#include <stdint.h>

#include "pyroscope_native.h"

/* Capture buffer layout (in the core's slot): header, frames, lines. */
struct rthread;
typedef struct {
    struct rthread *owner;      /* the registry entry whose pin covers it */
    uint64_t gc_cycle;          /* gc_guard cycle at capture */
    int32_t depth;
    int32_t lines_at;           /* the lines: at frames + lines_at */
    int16_t truncated;          /* deeper than max_depth */
    int16_t in_gc;              /* the signal came during a GC step: no
                                 * frames, recorded as "(garbage collection)" */
} capture_header;

/* On the signal handler's path: grouped with the core's (driver.c) in
 * .text.hot, so a sample touches few pages of code (after 10 ms of
 * application work each is a TLB and cache miss). */
#define HANDLER_PATH __attribute__((hot))

/* native.c: the running driver (NULL when stopped). Written under the GVL
 * by start/stop, read by the handler. */
extern _Atomic(pn_driver *) g_driver;
extern int g_max_depth;         /* frames per capture; GVL at start */
extern int g_thread_names;      /* report_thread_name; GVL at start */
extern VALUE g_mNative, g_eConfigError, g_eError;
/* The handler brackets its use of g_driver (stop waits for none left). */
void handler_enter(void);
void handler_exit(void);

/* capture.c */
int capture_install(pn_error *e);       /* GVL: refuse a foreign handler */
void capture_set_in_job(int on);        /* GVL: capture in the postponed job */
int capture_in_job(void);
void capture_vm_exited(void);           /* from ruby_vm_at_exit */
void capture_before_exec(void);         /* GVL: no SIGPROF survives exec */
int capture_check_handler(void *unused); /* sampler thread: 1 when ours was replaced */
uint64_t capture_handler_replaced(void);  /* times ours was found replaced */
int capture_handler_replaced_now(void); /* any thread: ours is replaced now */
uint64_t capture_torn(void);            /* abandoned: a GC overlapped */
uint64_t capture_gc(void);              /* samples taken during a GC step */
uint64_t capture_altstack(void);        /* abandoned: on the alt stack */
uint64_t capture_handler_ns(void);      /* time in handlers that captured (estimated from 1 in 16) */
uint64_t capture_job_ns(void);          /* time in jobs recording (estimated from 1 in 16) */
size_t capture_bytes_for(int max_depth);
/* Postponed job entry (GVL): capture (fallback mode) then symbolize. */
void capture_job(void *unused);

/* symbolize.c: record every committed capture (GVL). */
int symbolize_prepare(int max_depth);  /* GVL, before sampling */
void symbolize_drain(pn_driver *d);
void symbolize_reset(void);
void symbolize_mark(void);              /* GC mark: the cache's frames */
uint64_t symbolize_jobs(void);
uint64_t symbolize_torn(void);          /* dropped: a frame was not a frame */
int symbolize_frame_ok(VALUE f);        /* an iseq or method entry (GVL) */

/* The memory profile's capture in a slot of the memory driver: the header,
 * then the frames as rb_profile_frames wrote them (VALUEs, then lines at
 * lines_at), which the job rewrites in place as (name id, line) pairs. */
typedef struct {
    int32_t depth;
    int32_t truncated;          /* deeper than max_depth */
    int32_t lines_at;           /* raw: the lines at frames + lines_at */
    int32_t unused;
} mem_capture_header;
typedef struct {
    uint32_t id;                /* frame_names entry; 0: [unknown] */
    uint32_t line;
} mem_frame;

/* memory_hooks.c: sampling windows of the NEWOBJ hook feeding the memory
 * driver. */
void memory_init(void);
size_t memory_capture_bytes(int max_depth);
int memory_start(pn_driver *d, int max_depth, uint32_t interval, uint32_t max_live,
                 pn_error *e);                  /* GVL */
void memory_stop(void);                 /* GVL: no more windows, the last sample committed */
void memory_off_for_ractor(void);       /* GVL: Ruby < 3.3, before Ractor.new */
void memory_drain(void);                /* GVL: commit the pending sample, sweep the dead */
void memory_mark(void);                 /* GC mark: the pending sample, name cache */
void memory_after_fork_child(void);     /* fork path, child */
pn_driver *memory_driver(void);         /* GVL: NULL when off */
uint64_t memory_windows(void);          /* windows opened */
uint64_t memory_job_errors(void);      /* exceptions dropped inside our jobs */
uint64_t memory_torn(void);             /* a frame was not a frame: no stack */
void memory_arm_from_handler(void);     /* our SIGPROF handler: the timer's signal */
void memory_arm_overdue(void);          /* GVL, the CPU sampler's job */
/* The window timer's sigev_value: not a pointer the core's timers use (0). */
#define MEMORY_TIMER_MARK ((void *)(uintptr_t)0x6d656d77)

/* memory_timer.c: the POSIX timer that opens the windows. */
void memory_timer_set(int64_t at_ns);   /* GVL: next window (CLOCK_MONOTONIC) */
int memory_timer_overdue(void);         /* any: a request went unanswered */
void memory_timer_stop(void);           /* GVL */
void memory_timer_after_fork_child(void);

/* memory_liveness.c: sampled objects followed by id, swept for the dead. */
int liveness_prepare(uint32_t max_live); /* GVL */
int liveness_follow(VALUE obj, uintptr_t *key); /* GVL: 1 followed, 0 not */
void liveness_drop_last(void);          /* GVL */
void liveness_sweep(pn_driver *d, int force); /* GVL */
void liveness_forget(void);
uint64_t liveness_not_followed(void);

/* frame_names.c: (name, file) entries the memory driver's thread reads. */
int frame_names_prepare(void);          /* GVL */
uint32_t frame_names_id(VALUE frame);   /* GVL; 0: table full */
void frame_names_mark(void);
void frame_names_reset_cache(void);     /* GVL */
uint64_t frame_names_full(void);
size_t frame_names_symbolize(void *ctx, const void *raw, size_t len, pn_symbols *sym,
                             pn_frame_id *out, size_t max); /* any thread */

/* source_path.c: frame file names as the pyroscope gem reported them. */
void source_path_refresh(void);         /* GVL: read the working directory */
const char *source_path_short(const char *p, size_t n, size_t *out_len); /* GVL */
void source_path_init(VALUE mNative);

/* thread_registry.c */
typedef struct rthread {
    _Atomic pid_t tid;          /* 0: free entry */
    _Atomic int adopted;        /* the thread found it (tl_rt) */
    /* Pinned frames of this thread's capture not yet symbolized: set by
     * the handler before it commits, cleared by the job (GVL) or when the
     * thread leaves (GVL). Read by the GC mark function (GVL). */
    _Atomic(VALUE *) pin_frames;
    _Atomic int pin_depth;
    /* The thread's alternate signal stack (Ruby gives each thread one),
     * read at join: the handler checks its own stack pointer against it
     * without a syscall. */
    uintptr_t altstack_lo, altstack_hi;
    /* The name last handed to the core (report_thread_name), GVL only. */
    char name[64];
} rthread;
void threads_init(VALUE mNative);
int threads_join_current(pn_error *e);  /* GVL */
void threads_leave_current(void);       /* GVL */
void threads_start(void);               /* GVL: hooks on, existing threads joined by tid */
void threads_stop(pn_driver *d);         /* GVL */
void threads_after_fork_child(void);    /* GVL, in the child */
void threads_refresh_name(void);        /* GVL: the calling thread's name */
rthread *threads_current(void);         /* handler-safe TLS read */
uint64_t threads_joined_count(void);

/* gc_guard.c: a number that changes when a GC cycle begins; odd while a
 * GC step runs on this thread (a capture then is not safe). Handler-safe. */
uint64_t gc_guard_cycle(void);

/* drain_thread.c: records the captures of blocked threads from
 * a thread of ours (every Ruby version). */
void drain_wake(void *unused);          /* the driver's stale callback */
void drain_thread_start(int new_fd);    /* GVL; new_fd: in a fork child */
void drain_thread_stop(void);           /* GVL */
void drain_thread_init(void);

/* fiber_labels.c */
void labels_init(VALUE mNative);
/* The running Fiber's set, for the handler (borrowed; the thread-local
 * holds a reference). */
const pn_labelset *labels_for_handler(void);

/* log_bridge.c */
void log_init(VALUE mNative);
void log_drain(void);                   /* GVL: hand queued lines to the proc */
uint64_t log_dropped(void);
void log_fork_prepare(void);            /* fork path (forking thread) */
void log_fork_parent(void);
void log_fork_child(void);

/* report_binding.c: Pyroscope::Native.report (the core's report library). */
void report_init(VALUE mNative);
/* sender.c: uploads through Net::HTTP when libcurl cannot be loaded. */
void sender_init(VALUE mNative);

/* Raise the right error for a pn_error (ConfigError for EINVAL). */
void raise_pn_error(const pn_error *e) __attribute__((noreturn));

#endif
