/*
 * CPython stack walker (see walker.h).
 *
 * Everything that runs on the sampler thread reads interpreter memory only
 * through pn_safe_read, into local copies, and never calls the interpreter:
 * the threads it reads keep running, so any pointer may be stale by the time
 * it is followed. A failed or inconsistent read ends that stack (what was
 * read so far is kept) and counts a walk error.
 */
#define Py_BUILD_CORE 1
#include "cpython_layout.h"

#include "walker.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if !PNW_SUPPORTED

/* Built for an interpreter whose layout we do not know: say so at start. */
struct py_walker {
    int unused;
};

int py_walker_supported(pn_error *e)
{
#ifdef Py_GIL_DISABLED
    pn_fail(e, PN_EINVAL,
            "pyroscope: the free-threaded CPython build %s is not supported "
            "(use a regular 3.11, 3.12 or 3.13 build)", PY_VERSION);
#else
    pn_fail(e, PN_EINVAL,
            "pyroscope: CPython %s is not supported (supported: 3.11, 3.12, 3.13)",
            PY_VERSION);
#endif
    return -1;
}

py_walker *py_walker_new(PyInterpreterState *interp, int gil_only, pn_error *e)
{
    (void)interp;
    (void)gil_only;
    py_walker_supported(e);
    return NULL;
}

void py_walker_free(py_walker *w) { free(w); }

void py_walker_walk(void *w, pn_tick *t)
{
    (void)w;
    (void)t;
}

void py_walker_after_fork(void *w) { (void)w; }

void py_walker_set_line_mode(py_walker *w, int mode)
{
    (void)w;
    (void)mode;
}

void py_walker_get_stats(const py_walker *w, py_walker_stats *out)
{
    (void)w;
    memset(out, 0, sizeof *out);
}

#else

#define MAX_THREADS 65536           /* thread-list links per tick: a torn list cannot loop */
#define MAX_STEPS (4 * PY_WALKER_MAX_FRAMES) /* frames visited per stack, skipped included */
#define CACHE_SLOTS 4096u           /* code objects remembered (power of two) */
#define CACHE_PROBE 4
/* One code point more than the symbol table keeps, so it still sees (and
 * marks) the cut of an over-long name. */
#define STR_CHARS (PN_MAX_STRING + 1)
#define STR_UTF8 (STR_CHARS * 4)
#define LT_CHUNK 512                /* line-table bytes copied per read */
#define LT_MAX_BYTES (64u << 20)    /* a larger "line table" is a torn read */

/* What we know about one code object in one symbol table. */
typedef struct {
    const void *code;           /* key: the code object's address; NULL = empty */
    /* Ids belong to one period's table in one generation. The table pointer
     * is part of the key because the two periods' tables count their
     * generations independently. */
    const pn_symbols *syms;
    uint64_t gen;
    /* Addresses are reused: the copied code object must still have these. */
    const void *qualname, *filename, *linetable;
    int firstlineno;
    uint32_t name_sid, file_sid;
    int last_addr;              /* last line lookup (byte offset; INT_MIN: none) */
    uint32_t last_line;
} code_ent;

struct py_walker {
    /* Set by py_walker_new (GIL held), read-only afterwards. */
    PyInterpreterState *interp;
    const pnw_gil *gil;
    int gil_only;
    /* Set before the sampler starts (py_walker_set_line_mode). */
    int line_mode;
    /* Sampler thread only; py_walker_after_fork clears them in a forked
     * child before its sampler thread starts. Allocated up front: the
     * sampler thread must not allocate. */
    code_ent *cache;
    pn_frame_id *frames;        /* PY_WALKER_MAX_FRAMES, leaf first */
    uint8_t *str_raw;           /* STR_CHARS code points of up to 4 bytes */
    char *str_utf8;             /* STR_UTF8 */
    uint8_t *lt_buf;            /* LT_CHUNK */
    char thread_name[PN_THREAD_NAME_MAX];
    /* Written by the sampler thread, read by any thread. */
    _Atomic uint64_t threads_seen, stacks_walked, nframes, walk_errors, cache_hits,
        cache_misses;
};

static void bump(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* ------------------------------------------------------------- strings */

/* Code points to UTF-8. Lone surrogates are legal in a str but have no
 * UTF-8 form: they become U+FFFD, as does anything out of range. */
static size_t utf8_encode(const uint8_t *raw, size_t n, unsigned kind, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c;
        if (kind == 1) {
            c = raw[i];
        } else if (kind == 2) {
            uint16_t v;
            memcpy(&v, raw + 2 * i, 2);
            c = v;
        } else {
            memcpy(&c, raw + 4 * i, 4);
        }
        if ((c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF)
            c = 0xFFFD;
        if (c < 0x80) {
            out[o++] = (char)c;
        } else if (c < 0x800) {
            out[o++] = (char)(0xC0 | (c >> 6));
            out[o++] = (char)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            out[o++] = (char)(0xE0 | (c >> 12));
            out[o++] = (char)(0x80 | ((c >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (c & 0x3F));
        } else {
            out[o++] = (char)(0xF0 | (c >> 18));
            out[o++] = (char)(0x80 | ((c >> 12) & 0x3F));
            out[o++] = (char)(0x80 | ((c >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (c & 0x3F));
        }
    }
    return o;
}

/* Copy the str at addr into w->str_utf8 as UTF-8; returns its length in
 * bytes, or -1 when it cannot be read or is not a str. Compact ASCII keeps
 * its characters right after PyASCIIObject, other compact strings after
 * PyCompactUnicodeObject, and non-compact ones behind data.any. */
static long read_unicode(py_walker *w, const void *addr, int exact_type)
{
    PyASCIIObject a;
    if (addr == NULL || pn_safe_read(&a, addr, sizeof a) != 0)
        return -1;
    if (exact_type && ((PyObject *)&a)->ob_type != &PyUnicode_Type)
        return -1;
    unsigned kind = a.state.kind;
    if (!PNW_STR_READY(&a) || a.length < 0 || (kind != 1 && kind != 2 && kind != 4) ||
        (a.state.ascii && kind != 1))
        return -1;
    const char *data;
    if (a.state.compact) {
        data = (const char *)addr +
               (a.state.ascii ? sizeof(PyASCIIObject) : sizeof(PyCompactUnicodeObject));
    } else {
        PyUnicodeObject u;
        if (pn_safe_read(&u, addr, sizeof u) != 0 || u.data.any == NULL)
            return -1;
        data = u.data.any;
    }
    size_t n = (size_t)a.length < STR_CHARS ? (size_t)a.length : STR_CHARS;
    if (pn_safe_read(w->str_raw, data, n * kind) != 0)
        return -1;
    return (long)utf8_encode(w->str_raw, n, kind, w->str_utf8);
}

/* ---------------------------------------------------------- line table */

/* Reads a line table in chunks, so a table of any size is parsed from
 * copies held in one small preallocated buffer. */
typedef struct {
    uint8_t *buf;
    const char *src;
    size_t len;                 /* table size */
    size_t base;                /* table offset of buf[0] */
    size_t fill, pos;           /* bytes in buf, next byte in buf */
} lt_reader;

/* 1 with the next byte, 0 at the end of the table, -1 when unreadable. */
static int lt_peek(lt_reader *r, uint8_t *b)
{
    if (r->pos == r->fill) {
        size_t off = r->base + r->fill;
        if (off >= r->len)
            return 0;
        size_t n = r->len - off < LT_CHUNK ? r->len - off : LT_CHUNK;
        if (pn_safe_read(r->buf, r->src + off, n) != 0)
            return -1;
        r->base = off;
        r->fill = n;
        r->pos = 0;
    }
    *b = r->buf[r->pos];
    return 1;
}

static int lt_next(lt_reader *r, uint8_t *b)
{
    int rc = lt_peek(r, b);
    if (rc == 1)
        r->pos++;
    return rc;
}

/* 6 bits per byte, low bits first, 0x40 = more follows. */
static int lt_varint(lt_reader *r, uint32_t *out)
{
    uint32_t v = 0;
    unsigned shift = 0;
    uint8_t b;
    do {
        if (shift > 30 || lt_next(r, &b) != 1)
            return -1;
        v |= (uint32_t)(b & 63) << shift;
        shift += 6;
    } while (b & 64);
    *out = v;
    return 0;
}

static int lt_svarint(lt_reader *r, int64_t *out)
{
    uint32_t v;
    if (lt_varint(r, &v) != 0)
        return -1;
    *out = (v & 1) ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
    return 0;
}

/* The line of the instruction at byte offset addr of code object co (a
 * copy), as PyCode_Addr2Line computes it from the 3.11+ location table:
 * entries of (first byte: 1, code:4, units-1:3) followed by varints; codes
 * 15 = no line, 14 = long form and 13 = no columns carry a signed line
 * delta, 10..12 a delta of code-10, 0..9 the same line. Returns 0 when the
 * instruction has no line, -1 when the table cannot be read. */
static int64_t lt_line(py_walker *w, const PyCodeObject *co, int addr)
{
    if (addr < 0)
        return co->co_firstlineno;
    PyBytesObject hdr;
    if (co->co_linetable == NULL ||
        pn_safe_read(&hdr, co->co_linetable, offsetof(PyBytesObject, ob_sval)) != 0)
        return -1;
    Py_ssize_t size = ((PyVarObject *)&hdr)->ob_size;
    if (((PyObject *)&hdr)->ob_type != &PyBytes_Type || size < 0 ||
        (size_t)size > LT_MAX_BYTES)
        return -1;
    lt_reader r = {w->lt_buf, (const char *)co->co_linetable + offsetof(PyBytesObject, ob_sval),
                   (size_t)size, 0, 0, 0};
    int64_t computed = co->co_firstlineno, line = -1, end = 0;
    while (end <= addr) {
        uint8_t b;
        int rc = lt_next(&r, &b);
        if (rc == 0)
            return 0; /* past the table: CPython answers "no line" too */
        if (rc < 0 || !(b & 0x80))
            return -1;
        int code = (b >> 3) & 15;
        int64_t delta = 0;
        if (code == 13 || code == 14) {
            if (lt_svarint(&r, &delta) != 0)
                return -1;
        } else if (code >= 10 && code <= 12) {
            delta = code - 10;
        }
        computed += delta;
        line = code == 15 ? -1 : computed;
        end += ((b & 7) + 1) * (int64_t)sizeof(_Py_CODEUNIT);
        /* Skip the rest of this entry (columns) up to the next start byte. */
        for (;;) {
            rc = lt_peek(&r, &b);
            if (rc < 0)
                return -1;
            if (rc == 0 || (b & 0x80))
                break;
            r.pos++;
        }
    }
    return line < 0 || line > UINT32_MAX ? 0 : line;
}

/* -------------------------------------------------------------- frames */

static code_ent *cache_slot(py_walker *w, const void *code, uint32_t i)
{
    uint64_t x = ((uintptr_t)code >> 4) * 0x9E3779B97F4A7C15ull;
    return &w->cache[((uint32_t)(x >> 32) + i) & (CACHE_SLOTS - 1)];
}

static int ent_matches(const code_ent *e, const void *code, const PyCodeObject *co,
                       const pn_symbols *syms, uint64_t gen)
{
    return e->code == code && e->syms == syms && e->gen == gen &&
           e->qualname == co->co_qualname && e->filename == co->co_filename &&
           e->linetable == co->co_linetable && e->firstlineno == co->co_firstlineno;
}

/* The frame id of (code, addr): names from the cache when it still
 * matches the copied code object, else read and interned now. */
static int frame_id(py_walker *w, const void *code, const PyCodeObject *co, int addr,
                    pn_symbols *syms, uint64_t gen, pn_frame_id *out)
{
    code_ent *e = NULL, *victim = NULL;
    for (uint32_t i = 0; i < CACHE_PROBE && !e; i++) {
        code_ent *c = cache_slot(w, code, i);
        if (ent_matches(c, code, co, syms, gen))
            e = c;
        else if (!victim && (c->code == NULL || c->syms != syms || c->gen != gen))
            victim = c;
    }
    if (e) {
        bump(&w->cache_hits, 1);
    } else {
        bump(&w->cache_misses, 1);
        long n = read_unicode(w, co->co_qualname, 1);
        if (n < 0)
            return -1;
        uint32_t name = pn_symbols_string(syms, w->str_utf8, (size_t)n);
        n = read_unicode(w, co->co_filename, 1);
        if (n < 0)
            return -1;
        uint32_t file = pn_symbols_string(syms, w->str_utf8, (size_t)n);
        e = victim ? victim : cache_slot(w, code, 0);
        *e = (code_ent){code, syms, gen, co->co_qualname, co->co_filename, co->co_linetable,
                        co->co_firstlineno, name, file, INT_MIN, 0};
    }
    if (w->line_mode == PY_WALKER_LINE_CURRENT && e->last_addr != addr) {
        int64_t line = lt_line(w, co, addr);
        if (line < 0)
            return -1;
        e->last_addr = addr;
        e->last_line = (uint32_t)line;
    }
    uint32_t line = w->line_mode == PY_WALKER_LINE_CURRENT ? e->last_line
                    : w->line_mode == PY_WALKER_LINE_FIRST && e->firstlineno > 0
                        ? (uint32_t)e->firstlineno
                        : 0;
    *out = pn_symbols_frame(syms, e->name_sid, e->file_sid, line);
    return 0;
}

/* Walk the frame chain from fp into w->frames, leaf first; returns the
 * depth. *torn is set when a read failed or what was read is inconsistent. */
static size_t walk_frames(py_walker *w, const void *fp, pn_symbols *syms, uint64_t gen,
                          int *torn)
{
    size_t depth = 0;
    for (int steps = 0; fp && depth < PY_WALKER_MAX_FRAMES; steps++) {
        _PyInterpreterFrame f;
        if (steps == MAX_STEPS || pn_safe_read(&f, fp, PNW_FRAME_SIZE) != 0) {
            *torn = 1;
            break;
        }
        fp = f.previous;
        if (f.owner == PNW_OWNER_CSTACK)
            continue; /* C-stack shim: no Python code of its own */
        const void *code = PNW_FRAME_CODE(&f);
        if (PNW_CODE_IS_NONE(code))
            continue;
        PyCodeObject co;
        if (code == NULL || pn_safe_read(&co, code, PNW_CODE_SIZE) != 0 ||
            ((PyObject *)&co)->ob_type != &PyCode_Type) {
            *torn = 1;
            break;
        }
        /* Instruction index, as _PyInterpreterFrame_LASTI (integer math:
         * the pointers come from another thread and may be garbage). */
        intptr_t off = (intptr_t)((uintptr_t)PNW_FRAME_INSTR(&f) -
                                  ((uintptr_t)code + PNW_CODE_SIZE));
        intptr_t units = off / (intptr_t)sizeof(_Py_CODEUNIT);
        /* Incomplete frames (still running their prologue) are skipped, as
         * _PyFrame_IsIncomplete decides, but on our copy. */
        if (f.owner != PNW_OWNER_GENERATOR && units < co._co_firsttraceable)
            continue;
        if (units >= ((PyVarObject *)&co)->ob_size || units < -1) {
            *torn = 1;
            break;
        }
        int addr = units < 0 ? -1 : (int)(units * (intptr_t)sizeof(_Py_CODEUNIT));
        if (frame_id(w, code, &co, addr, syms, gen, &w->frames[depth]) != 0) {
            *torn = 1;
            break;
        }
        depth++;
    }
    return depth;
}

/* -------------------------------------------------------------- public */

int py_walker_supported(pn_error *e)
{
    /* The layouts are those of the headers we were compiled with. */
    if ((Py_Version >> 16) != ((unsigned long)PY_VERSION_HEX >> 16))
        return pn_fail(e, PN_EINVAL,
                       "pyroscope: built for CPython %d.%d but running on %lu.%lu; "
                       "rebuild the extension for this interpreter",
                       PY_MAJOR_VERSION, PY_MINOR_VERSION, Py_Version >> 24,
                       (Py_Version >> 16) & 0xFF);
    return 0;
}

py_walker *py_walker_new(PyInterpreterState *interp, int gil_only, pn_error *e)
{
    if (py_walker_supported(e) != 0)
        return NULL;
    if (interp == NULL)
        return pn_fail(e, PN_EINVAL, "py_walker_new: interp is NULL"), NULL;
    if (!PyGILState_Check())
        return pn_fail(e, PN_ESTATE, "py_walker_new: must be called with the GIL held"), NULL;
    const pnw_gil *gil = pnw_gil_address(interp);
    if (gil_only && gil == NULL)
        return pn_fail(e, PN_ESTATE, "gil_only: the interpreter has no GIL state yet"), NULL;
    py_walker *w = calloc(1, sizeof *w);
    if (!w)
        return pn_fail(e, PN_ENOMEM, "py_walker_new: out of memory"), NULL;
    w->interp = interp;
    w->gil = gil;
    w->gil_only = gil_only != 0;
    /* Page-backed: only the slots in use cost RAM, and a forked child
     * hands them back instead of writing all of them. */
    w->cache = pn_pages_new(CACHE_SLOTS * sizeof *w->cache);
    w->frames = calloc(PY_WALKER_MAX_FRAMES, sizeof *w->frames);
    w->str_raw = malloc((size_t)STR_CHARS * 4);
    w->str_utf8 = malloc(STR_UTF8);
    w->lt_buf = malloc(LT_CHUNK);
    if (!w->cache || !w->frames || !w->str_raw || !w->str_utf8 || !w->lt_buf) {
        py_walker_free(w);
        return pn_fail(e, PN_ENOMEM, "py_walker_new: out of memory"), NULL;
    }
    return w;
}

void py_walker_free(py_walker *w)
{
    if (!w)
        return;
    pn_pages_free(w->cache, CACHE_SLOTS * sizeof *w->cache);
    free(w->frames);
    free(w->str_raw);
    free(w->str_utf8);
    free(w->lt_buf);
    free(w);
}

void py_walker_set_line_mode(py_walker *w, int mode)
{
    w->line_mode = mode;
}

void py_walker_after_fork(void *ctx)
{
    py_walker *w = ctx;
    pn_pages_clear(w->cache, CACHE_SLOTS * sizeof *w->cache);
}

void py_walker_walk(void *ctx, pn_tick *t)
{
    py_walker *w = ctx;
    pn_symbols *syms = pn_tick_symbols(t);
    uint64_t gen = pn_symbols_generation(syms);
    const void *holder = NULL;
    /* gil_only on-CPU: the holder's one sample carries the CPU of every
     * thread of the interpreter (the core's pool), so every thread is
     * visited to read its clock, even when nobody holds the GIL. */
    int pool = w->gil_only && pn_tick_opts(t)->oncpu;
    if (w->gil_only) {
        pnw_gil g;
        if (pn_safe_read(&g, w->gil, sizeof g) != 0) {
            bump(&w->walk_errors, 1);
            return;
        }
        holder = pnw_gil_holder(&g);
        if (holder == NULL && !pool)
            return; /* nobody runs Python right now */
    }
    /* The interpreter state is large; only the list head is needed. */
    const PyThreadState *ts;
    if (pn_safe_read(&ts, (const char *)w->interp + offsetof(PyInterpreterState, threads.head),
                     sizeof ts) != 0) {
        bump(&w->walk_errors, 1);
        return;
    }
    for (int n = 0; ts; n++) {
        PyThreadState tc;
        if (n == MAX_THREADS || pn_safe_read(&tc, ts, sizeof tc) != 0) {
            bump(&w->walk_errors, 1);
            break;
        }
        const void *self = ts;
        ts = tc.next;
        if (w->gil_only && self != holder && !pool)
            continue;
        /* 0 until the thread has started running; a garbage value from a
         * torn read is no pid_t at all. */
        if (tc.native_thread_id == 0 || tc.native_thread_id > INT_MAX)
            continue;
        pid_t tid = (pid_t)tc.native_thread_id;
        if (w->gil_only && self != holder) {
            pn_tick_pool_thread(t, tid);
            continue;
        }
        bump(&w->threads_seen, 1);
        int64_t value;
        /* Only the holder is sampled, but every thread that ran Python
         * since the last tick held the GIL for part of it: the holder
         * stands for all of them, with the CPU they used (the core's pool;
         * its own alone would drop the others' share, the wall interval
         * would count time they waited for a core). CPU used without the
         * GIL (C code that releases it) is in that pool too, see README. */
        if (w->gil_only ? pn_tick_begin_pooled(t, tid, &value)
                        : pn_tick_begin_thread(t, tid, &value)) {
            const void *fp;
            int torn = 0;
            size_t depth = 0;
            if (pnw_current_frame(&tc, &fp) != 0)
                torn = 1;
            else
                depth = walk_frames(w, fp, syms, gen, &torn);
            if (torn)
                bump(&w->walk_errors, 1);
            /* No Python frame and nothing failed: the thread runs no Python
             * code now, so there is nothing to attribute. A torn stack with
             * no frame is still recorded (as [unknown]). */
            if (depth > 0 || torn) {
                const char *name = NULL;
                if (pn_tick_opts(t)->report_thread_name &&
                    pn_thread_name_get(tid, w->thread_name, sizeof w->thread_name))
                    name = w->thread_name;
                pn_tick_sample(t, tid, w->frames, depth, value, name);
                bump(&w->stacks_walked, 1);
                bump(&w->nframes, depth);
            }
        }
        if (w->gil_only && !pool)
            break; /* the holder was the one thread to sample */
    }
}

void py_walker_get_stats(const py_walker *w, py_walker_stats *out)
{
    py_walker *m = (py_walker *)w; /* atomics are read-only here */
    out->threads_seen = atomic_load_explicit(&m->threads_seen, memory_order_relaxed);
    out->stacks_walked = atomic_load_explicit(&m->stacks_walked, memory_order_relaxed);
    out->frames = atomic_load_explicit(&m->nframes, memory_order_relaxed);
    out->walk_errors = atomic_load_explicit(&m->walk_errors, memory_order_relaxed);
    out->cache_hits = atomic_load_explicit(&m->cache_hits, memory_order_relaxed);
    out->cache_misses = atomic_load_explicit(&m->cache_misses, memory_order_relaxed);
}

#endif /* PNW_SUPPORTED */
