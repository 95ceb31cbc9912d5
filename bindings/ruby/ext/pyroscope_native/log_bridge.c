/* Core log lines into a Ruby proc (Pyroscope::Native.log_handler=).
 *
 * The core logs from its own threads, which are not Ruby threads and must
 * never wait for the GVL (a Ruby thread inside stop holds it... and waits
 * for them). So the core's handler copies each line into a bounded ring
 * (full: the oldest goes, counted); Ruby threads hand the lines to the
 * proc under the GVL: every API call and every sampling job drains the
 * ring. With no proc, the core writes to stderr itself.
 *
 * The ring's mutex is taken by any thread for a copy only, and joins the
 * core's fork path so a child never inherits it locked. */
#include "native.h"

#include <pthread.h>
#include <string.h>

#define RING 64
#define LINE 512

typedef struct {
    int level;
    char msg[LINE];
} line;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static line ring[RING];         /* under lock */
static unsigned head, count;    /* under lock */
static uint64_t dropped;        /* under lock */
static VALUE handler = Qnil;    /* GVL; registered with the GC */
static atomic_int draining;     /* GVL: no reentry from the proc */

static void on_log(void *ud, int level, const char *msg)
{
    (void)ud;
    pthread_mutex_lock(&lock);
    if (count == RING) {
        head = (head + 1) % RING;
        count--;
        dropped++;
    }
    line *l = &ring[(head + count) % RING];
    l->level = level;
    snprintf(l->msg, sizeof l->msg, "%s", msg);
    count++;
    pthread_mutex_unlock(&lock);
}

static int pop(line *out)
{
    pthread_mutex_lock(&lock);
    int ok = count > 0;
    if (ok) {
        *out = ring[head];
        head = (head + 1) % RING;
        count--;
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

static VALUE call_handler(VALUE arg)
{
    line *l = (line *)arg;
    return rb_funcall(handler, rb_intern("call"), 2, INT2NUM(l->level), rb_str_new_cstr(l->msg));
}

void log_drain(void)
{
    if (NIL_P(handler) || atomic_exchange(&draining, 1))
        return;
    line l;
    while (pop(&l)) {
        int state = 0;
        rb_protect(call_handler, (VALUE)&l, &state);
        if (state) { /* a failing proc must not break sampling */
            rb_set_errinfo(Qnil);
            fprintf(stderr, "pyroscope: log handler raised; message was: %s\n", l.msg);
        }
    }
    atomic_store(&draining, 0);
}

static VALUE m_set_log_handler(VALUE self, VALUE proc)
{
    (void)self;
    if (!NIL_P(proc) && !rb_respond_to(proc, rb_intern("call")))
        rb_raise(rb_eTypeError, "log_handler must respond to call(level, message), or be nil");
    log_drain();
    handler = proc;
    pn_log_set_handler(NIL_P(proc) ? NULL : on_log, NULL);
    return proc;
}

static VALUE m_log_handler(VALUE self)
{
    (void)self;
    return handler;
}

void log_fork_prepare(void) { pthread_mutex_lock(&lock); }
void log_fork_parent(void) { pthread_mutex_unlock(&lock); }
void log_fork_child(void) { pthread_mutex_init(&lock, NULL); }

uint64_t log_dropped(void)
{
    pthread_mutex_lock(&lock);
    uint64_t n = dropped;
    pthread_mutex_unlock(&lock);
    return n;
}

void log_init(VALUE mNative)
{
    rb_gc_register_address(&handler);
    rb_define_module_function(mNative, "log_handler=", m_set_log_handler, 1);
    rb_define_module_function(mNative, "log_handler", m_log_handler, 0);
}
