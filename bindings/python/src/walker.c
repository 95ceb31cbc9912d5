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
#include "context_labels.h"
#include "pthread_tid.h"

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
#if PY_VERSION_HEX >= PNW_TOO_NEW_HEX
    /* Names both versions: the one running, and the newest tested. */
    pn_fail(e, PN_EINVAL,
            "pyroscope: CPython %s is newer than CPython " PNW_NEWEST_TESTED ", the newest "
            "version this release of pyroscope-native is tested on (supported: " PNW_VERSIONS ")",
            PY_VERSION);
#elif defined(Py_GIL_DISABLED)
    pn_fail(e, PN_EINVAL,
            "pyroscope: the free-threaded CPython build %s is not supported "
            "(supported: 3.13t, or a regular build of " PNW_VERSIONS ")", PY_VERSION);
#else
    pn_fail(e, PN_EINVAL, "pyroscope: CPython %s is not supported (supported: " PNW_VERSIONS ")",
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

/* Instructions remembered per code object. */
#define LINE_WAYS 8
#define ADDR_EMPTY INT32_MIN
#define ADDR_ANY (INT32_MIN + 1) /* the key when lines do not depend on it */

/* What we know about one code object in one symbol table. */
typedef struct {
    const void *code;           /* key: the code object's address; NULL = empty */
    /* Ids belong to one period's table in one generation. The table pointer
     * is part of the key because the two periods' tables count their
     * generations independently. */
    const pn_symbols *syms;
    uint64_t gen;
    /* Addresses are reused: the copied code object must still have these. */
    const void *name, *filename, *linetable;
    int firstlineno;
    uint32_t name_sid, file_sid;
    /* Frame ids of recent instructions (byte offsets; ADDR_EMPTY: none),
     * so a stack that moves between lines needs no line-table decoding
     * or frame interning for instructions seen before. */
    int32_t addr[LINE_WAYS];
    pn_frame_id fid[LINE_WAYS];
    uint32_t next_way;          /* the way to replace next (round robin) */
} code_ent;

/* One frame of a chain read in pass one (see read_chain). */
typedef struct {
    const void *code;
    uintptr_t instr;            /* instruction pointer, or 3.10's f_lasti */
    int owner;                  /* -1: frames have no owner (3.10) */
} chain_frame;

struct py_walker {
    /* Set by py_walker_new (GIL held), read-only afterwards. */
    PyInterpreterState *interp;
    pnw_layout L;
    size_t pthread_tid_off;     /* 3.10: see pthread_tid.h */
    int gil_only;
    /* Set before the sampler starts (py_walker_set_line_mode). */
    int line_mode;
    /* Sampler thread only; py_walker_after_fork clears them in a forked
     * child before its sampler thread starts. Allocated up front: the
     * sampler thread must not allocate. */
    code_ent *cache;
    pn_frame_id *frames;        /* PY_WALKER_MAX_FRAMES, leaf first */
    chain_frame *chain;         /* PY_WALKER_MAX_FRAMES, leaf first */
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
 * PyCompactUnicodeObject, and non-compact ones behind data.any (sizes and
 * offsets from the layout; the state bits mean what the headers say). */
static long read_unicode(py_walker *w, const void *addr, int exact_type)
{
    const pnw_layout *L = &w->L;
    _Alignas(8) uint8_t h[PNW_SPAN_MAX];
    if (addr == NULL || pn_safe_read(h, addr, L->str_ascii_size) != 0)
        return -1;
    if (exact_type && pnw_ptr(h, L->co_type) != (const void *)&PyUnicode_Type)
        return -1;
    PyASCIIObject a; /* only its state bit-field is used */
    memcpy(&a.state, h + L->str_state, sizeof a.state);
    int64_t length = pnw_i64(h, L->str_length);
    unsigned kind = a.state.kind;
    if (!PNW_STR_READY(&a) || length < 0 || (kind != 1 && kind != 2 && kind != 4) ||
        (a.state.ascii && kind != 1))
        return -1;
    const char *data;
    if (a.state.compact) {
        data = (const char *)addr + (a.state.ascii ? L->str_ascii_size : L->str_compact_size);
    } else {
        const void *any;
        if (pn_safe_read(&any, (const char *)addr + L->str_data, sizeof any) != 0 ||
            any == NULL)
            return -1;
        data = any;
    }
    size_t n = (size_t)length < STR_CHARS ? (size_t)length : STR_CHARS;
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

/* Where a decoder stands: the line so far, and the entry just read (its
 * end as a byte offset, its line or -1 for none). */
typedef struct {
    int64_t computed, end, line;
} lt_pos;

/* One entry of the 3.11+ location table: a first byte (1, code:4,
 * units-1:3) and varints; codes 15 = no line, 14 = long form and 13 = no
 * columns carry a signed line delta, 10..12 a delta of code-10, 0..9 the
 * same line. 1 = read, 0 = end of table, -1 = unreadable. */
static int lt_entry_311(lt_reader *r, lt_pos *p)
{
    uint8_t b;
    int rc = lt_next(r, &b);
    if (rc <= 0)
        return rc;
    if (!(b & 0x80))
        return -1;
    int code = (b >> 3) & 15;
    int64_t delta = 0;
    if (code == 13 || code == 14) {
        if (lt_svarint(r, &delta) != 0)
            return -1;
    } else if (code >= 10 && code <= 12) {
        delta = code - 10;
    }
    p->computed += delta;
    p->line = code == 15 ? -1 : p->computed;
    p->end += ((b & 7) + 1) * (int64_t)sizeof(_Py_CODEUNIT);
    /* Skip the rest of this entry (columns) up to the next start byte. */
    for (;;) {
        rc = lt_peek(r, &b);
        if (rc < 0)
            return -1;
        if (rc == 0 || (b & 0x80))
            return 1;
        r->pos++;
    }
}

/* One entry of the 3.10 line table: (byte delta, signed line delta), a
 * line delta of -128 meaning "no line" (Objects/lnotab_notes.txt). */
static int lt_entry_310(lt_reader *r, lt_pos *p)
{
    uint8_t sdelta, ldelta;
    int rc = lt_next(r, &sdelta);
    if (rc <= 0)
        return rc;
    if (lt_next(r, &ldelta) != 1)
        return -1;
    p->end += sdelta;
    if ((int8_t)ldelta == -128) {
        p->line = -1;
    } else {
        p->computed += (int8_t)ldelta;
        p->line = p->computed;
    }
    return 1;
}

/* The line of the instruction at byte offset addr of a code object whose
 * line table and first line are given, as PyCode_Addr2Line computes it.
 * Returns 0 when the instruction has no line, -1 when the table cannot be
 * read. */
static int64_t lt_line(py_walker *w, const void *table, int64_t firstlineno, int addr)
{
    if (addr < 0)
        return firstlineno;
    const pnw_layout *L = &w->L;
    _Alignas(8) uint8_t hdr[PNW_SPAN_MAX];
    if (table == NULL || pn_safe_read(hdr, table, L->bytes_sval) != 0)
        return -1;
    int64_t size = pnw_i64(hdr, L->bytes_size);
    if (pnw_ptr(hdr, L->co_type) != (const void *)&PyBytes_Type || size < 0 ||
        (uint64_t)size > LT_MAX_BYTES)
        return -1;
    lt_reader r = {w->lt_buf, (const char *)table + L->bytes_sval, (size_t)size, 0, 0, 0};
    int (*entry)(lt_reader *, lt_pos *) =
        w->L.linetable_format == PNW_LINETABLE_310 ? lt_entry_310 : lt_entry_311;
    lt_pos p = {firstlineno, 0, -1};
    while (p.end <= addr) {
        int rc = entry(&r, &p);
        if (rc == 0)
            return 0; /* past the table: CPython answers "no line" too */
        if (rc < 0)
            return -1;
    }
    return p.line < 0 || p.line > UINT32_MAX ? 0 : p.line;
}

/* -------------------------------------------------------------- frames */

/* Cache counters of one stack, added to the shared ones once per stack
 * (an atomic add per frame costs more than the rest of a cache hit). */
typedef struct {
    uint64_t hits, misses;
} walk_counts;

/* The fields of a copied code object that name it. */
typedef struct {
    const void *name, *filename, *linetable;
    int firstlineno;
} code_ref;

static code_ent *cache_slot(py_walker *w, const void *code, uint32_t i)
{
    uint64_t x = ((uintptr_t)code >> 4) * 0x9E3779B97F4A7C15ull;
    return &w->cache[((uint32_t)(x >> 32) + i) & (CACHE_SLOTS - 1)];
}

static int ent_matches(const code_ent *e, const void *code, const code_ref *c,
                       const pn_symbols *syms, uint64_t gen)
{
    return e->code == code && e->syms == syms && e->gen == gen && e->name == c->name &&
           e->filename == c->filename && e->linetable == c->linetable &&
           e->firstlineno == c->firstlineno;
}

/* The cache entry of a code object: found, or filled now by reading and
 * interning its names. NULL when they cannot be read. */
static code_ent *code_entry(py_walker *w, const void *code, const code_ref *c,
                            pn_symbols *syms, uint64_t gen, walk_counts *cnt)
{
    code_ent *victim = NULL;
    for (uint32_t i = 0; i < CACHE_PROBE; i++) {
        code_ent *e = cache_slot(w, code, i);
        if (ent_matches(e, code, c, syms, gen)) {
            cnt->hits++;
            return e;
        }
        if (!victim && (e->code == NULL || e->syms != syms || e->gen != gen))
            victim = e;
    }
    cnt->misses++;
    long n = read_unicode(w, c->name, 1);
    if (n < 0)
        return NULL;
    uint32_t name = pn_symbols_string(syms, w->str_utf8, (size_t)n);
    n = read_unicode(w, c->filename, 1);
    if (n < 0)
        return NULL;
    uint32_t file = pn_symbols_string(syms, w->str_utf8, (size_t)n);
    code_ent *e = victim ? victim : cache_slot(w, code, 0);
    *e = (code_ent){.code = code, .syms = syms, .gen = gen, .name = c->name,
                    .filename = c->filename, .linetable = c->linetable,
                    .firstlineno = c->firstlineno, .name_sid = name, .file_sid = file};
    for (int i = 0; i < LINE_WAYS; i++)
        e->addr[i] = ADDR_EMPTY;
    return e;
}

/* The frame id of (code, addr): from the code object's remembered
 * instructions when there, else its line is decoded and the frame
 * interned now. */
static int frame_id(py_walker *w, const void *code, const uint8_t *co, int addr,
                    pn_symbols *syms, uint64_t gen, walk_counts *n, pn_frame_id *out)
{
    const pnw_layout *L = &w->L;
    code_ref c = {pnw_ptr(co, L->co_name), pnw_ptr(co, L->co_filename),
                  pnw_ptr(co, L->co_linetable), pnw_i32(co, L->co_firstlineno)};
    code_ent *e = code_entry(w, code, &c, syms, gen, n);
    if (!e)
        return -1;
    /* Only the current-line mode tells instructions apart. */
    int32_t key = w->line_mode == PY_WALKER_LINE_CURRENT ? addr : ADDR_ANY;
    for (uint32_t i = 0; i < LINE_WAYS; i++) {
        if (e->addr[i] == key) {
            *out = e->fid[i];
            return 0;
        }
    }
    uint32_t way = e->next_way++ % LINE_WAYS;
    uint32_t line = 0;
    if (w->line_mode == PY_WALKER_LINE_CURRENT) {
        int64_t l = lt_line(w, c.linetable, c.firstlineno, addr);
        if (l < 0)
            return -1;
        line = (uint32_t)l;
    } else if (w->line_mode == PY_WALKER_LINE_FIRST && c.firstlineno > 0) {
        line = (uint32_t)c.firstlineno;
    }
    e->fid[way] = *out = pn_symbols_frame(syms, e->name_sid, e->file_sid, line);
    e->addr[way] = key;
    return 0;
}

/* The byte offset of the instruction a frame is at (-1: not started), as
 * CPython computes it for line numbers, from copies of the frame and its
 * code (integer math: the pointers come from another thread and may be
 * garbage). 0 = *addr set, 1 = an incomplete frame to skip, -1 = torn. */
static int frame_addr(const pnw_layout *L, const chain_frame *c, const uint8_t *co, int *addr)
{
    int64_t units;
    if (L->instr_kind == PNW_INSTR_INDEX) {
        units = (int64_t)(intptr_t)c->instr;
        if (units < -1 || units > INT_MAX / 2)
            return -1;
    } else {
        intptr_t off = (intptr_t)(c->instr - ((uintptr_t)c->code + L->co_code));
        units = off / (intptr_t)sizeof(_Py_CODEUNIT);
        /* Still running its prologue: skipped, as _PyFrame_IsIncomplete
         * decides, but on our copy. */
        if (c->owner != L->owner_generator && units < pnw_i32(co, L->co_firsttraceable))
            return 1;
        if (units >= pnw_i64(co, L->co_units) || units < -1)
            return -1;
    }
    *addr = units < 0 ? -1 : (int)(units * (int64_t)sizeof(_Py_CODEUNIT));
    return 0;
}

/* Frames ahead whose code object and cache entry are prefetched. */
#define PREFETCH_AHEAD 4

/* Pass one: follow the frame chain from fp, keeping each frame's code
 * object, instruction and owner in w->chain (leaf first). Each read
 * depends on the one before, so this pass only chases pointers; returns
 * the frames kept. *torn as for walk_frames. */
static size_t read_chain(py_walker *w, const void *fp, int *torn)
{
    const pnw_layout *L = &w->L;
    _Alignas(8) uint8_t fr[PNW_SPAN_MAX];
    size_t n = 0;
    for (int steps = 0; fp && n < PY_WALKER_MAX_FRAMES; steps++) {
        if (steps == MAX_STEPS || pn_safe_read(fr, fp, L->fr_span) != 0 ||
            (L->fr_type != PNW_NONE && pnw_ptr(fr, L->fr_type) != (const void *)&PyFrame_Type)) {
            *torn = 1;
            break;
        }
        fp = pnw_ptr(fr, L->fr_back);
        int owner = L->fr_owner == PNW_NONE ? -1 : (int)(int8_t)fr[L->fr_owner];
        if (L->owner_cstack >= 0 && owner >= L->owner_cstack)
            continue; /* a shim (C stack, interpreter entry): no Python code */
        /* 3.14+: a _PyStackRef, whose low bits tag the reference. */
        const void *code =
            (const void *)((uintptr_t)pnw_ptr(fr, L->fr_code) & ~L->fr_code_tag);
        if (code == (const void *)Py_None)
            continue; /* 3.13+: a frame without a code object */
        chain_frame *c = &w->chain[n++];
        c->code = code;
        c->instr = L->instr_kind == PNW_INSTR_INDEX ? (uintptr_t)(intptr_t)pnw_i32(fr, L->fr_instr)
                                                    : (uintptr_t)pnw_ptr(fr, L->fr_instr);
        c->owner = owner;
        /* The code objects are read in pass two, while these lines come. */
        __builtin_prefetch(code);
        __builtin_prefetch(cache_slot(w, code, 0));
    }
    return n;
}

/* Walk the frame chain from fp into w->frames, leaf first; returns the
 * depth. *torn is set when a read failed or what was read is inconsistent.
 * Two passes, so that the code objects and cache entries of all frames
 * (scattered, and cold after the application ran) are fetched from
 * memory in parallel rather than one chain step at a time. */
static size_t walk_frames(py_walker *w, const void *fp, pn_symbols *syms, uint64_t gen,
                          int *torn)
{
    const pnw_layout *L = &w->L;
    size_t n = read_chain(w, fp, torn);
    walk_counts cnt = {0, 0};
    _Alignas(8) uint8_t co[PNW_SPAN_MAX];
    const void *copied = NULL; /* the code object co holds a copy of */
    size_t depth = 0;
    for (size_t i = 0; i < n; i++) {
        const chain_frame *c = &w->chain[i];
        if (i + PREFETCH_AHEAD < n) {
            const void *ahead = w->chain[i + PREFETCH_AHEAD].code;
            /* The rest of the fields copied (co_span: up to 3 lines) and
             * of the entry (2 lines). */
            __builtin_prefetch((const char *)ahead + 64);
            __builtin_prefetch((const char *)ahead + 128);
            __builtin_prefetch((const char *)cache_slot(w, ahead, 0) + 64);
        }
        /* Recursion: a frame of the code object the frame before ran
         * uses the copy this walk just took and checked. */
        if (c->code != copied) {
            if (c->code == NULL || pn_safe_read(co, c->code, L->co_span) != 0 ||
                pnw_ptr(co, L->co_type) != (const void *)&PyCode_Type) {
                *torn = 1;
                break;
            }
            copied = c->code;
        }
        int addr, rc = frame_addr(L, c, co, &addr);
        if (rc > 0)
            continue;
        if (rc < 0 || frame_id(w, c->code, co, addr, syms, gen, &cnt, &w->frames[depth]) != 0) {
            *torn = 1;
            break;
        }
        depth++;
    }
    bump(&w->cache_hits, cnt.hits);
    bump(&w->cache_misses, cnt.misses);
    return depth;
}

/* ------------------------------------------------------------- threads */

/* The innermost frame of the thread state at ts, read now (after the
 * context stamp, see py_walker_walk). In 3.11/3.12 it is in the _PyCFrame
 * the thread currently runs in (on its C stack or inside the thread
 * state): one more read. -1 when a read fails. */
static int current_frame(const pnw_layout *L, const void *ts, const void **out)
{
    const void *p;
    if (pn_safe_read(&p, (const char *)ts + L->ts_frame, sizeof p) != 0)
        return -1;
    if (L->cframe_frame == PNW_NONE || p == NULL) {
        *out = p;
        return 0;
    }
    return pn_safe_read(out, (const char *)p + L->cframe_frame, sizeof *out);
}

/* The kernel tid of a copied thread state; 0 until the thread has started
 * running (or after it ended), and for a torn value that is no pid_t. */
static pid_t thread_tid(const py_walker *w, const uint8_t *ts)
{
    const pnw_layout *L = &w->L;
    if (L->ts_native_tid == PNW_NONE)
        return pthread_tid_of((unsigned long)(uintptr_t)pnw_ptr(ts, L->ts_pthread),
                              w->pthread_tid_off);
    uint64_t tid = (uint64_t)pnw_i64(ts, L->ts_native_tid);
    return tid > INT_MAX ? 0 : (pid_t)tid;
}

/* The thread state holding the GIL, NULL when nobody does (or -1 when it
 * cannot be read). take_gil() sets last_holder together with locked=1 and
 * drop_gil() clears locked, so last_holder only counts while locked. */
static int gil_holder(const pnw_layout *L, const void **out)
{
    _Alignas(8) uint8_t g[PNW_SPAN_MAX];
    if (pn_safe_read(g, L->gil, L->gil_span) != 0)
        return -1;
    *out = pnw_i32(g, L->gil_locked) ? pnw_ptr(g, L->gil_holder) : NULL;
    return 0;
}

/* -------------------------------------------------------------- public */

int py_walker_supported(pn_error *e)
{
    /* The layouts are those of the headers we were compiled with. */
    unsigned long run = pnw_runtime_version();
    if (run != ((unsigned long)PY_VERSION_HEX & 0xFFFF0000ul))
        return pn_fail(e, PN_EINVAL,
                       "pyroscope: built for CPython %d.%d but running on %lu.%lu; "
                       "rebuild the extension for this interpreter",
                       PY_MAJOR_VERSION, PY_MINOR_VERSION, run >> 24, (run >> 16) & 0xFF);
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
    pnw_layout L;
    if (pnw_layout_init(&L, interp, e) != 0)
        return NULL;
#if PNW_FREE_THREADED
    /* No GIL: every thread may run Python at once, so all are sampled. */
    static atomic_int told;
    if (gil_only && !atomic_exchange(&told, 1))
        pn_log(PN_LOG_WARN, "pyroscope: gil_only has no meaning on a free-threaded CPython "
               "(no GIL): it is treated as False, every thread that runs Python is sampled");
    gil_only = 0;
#endif
    if (gil_only && L.gil == NULL)
        return pn_fail(e, PN_ESTATE, "gil_only: the interpreter has no GIL state yet"), NULL;
    size_t tid_off = 0;
    if (L.ts_native_tid == PNW_NONE && pthread_tid_offset(&tid_off, e) != 0)
        return NULL;
    py_walker *w = calloc(1, sizeof *w);
    if (!w)
        return pn_fail(e, PN_ENOMEM, "py_walker_new: out of memory"), NULL;
    w->interp = interp;
    w->L = L;
    w->pthread_tid_off = tid_off;
    w->gil_only = gil_only != 0;
    /* Page-backed: only the slots in use cost RAM, and a forked child
     * hands them back instead of writing all of them. */
    w->cache = pn_pages_new(CACHE_SLOTS * sizeof *w->cache);
    w->frames = calloc(PY_WALKER_MAX_FRAMES, sizeof *w->frames);
    w->chain = calloc(PY_WALKER_MAX_FRAMES, sizeof *w->chain);
    w->str_raw = malloc((size_t)STR_CHARS * 4);
    w->str_utf8 = malloc(STR_UTF8);
    w->lt_buf = malloc(LT_CHUNK);
    if (!w->cache || !w->frames || !w->chain || !w->str_raw || !w->str_utf8 || !w->lt_buf) {
        py_walker_free(w);
        return pn_fail(e, PN_ENOMEM, "py_walker_new: out of memory"), NULL;
    }
    return w;
}

const char *py_walker_layout_source(const py_walker *w)
{
    return w->L.source;
}

void py_walker_free(py_walker *w)
{
    if (!w)
        return;
    pn_pages_free(w->cache, CACHE_SLOTS * sizeof *w->cache);
    free(w->frames);
    free(w->chain);
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
    const pnw_layout *L = &w->L;
    pn_symbols *syms = pn_tick_symbols(t);
    uint64_t gen = pn_symbols_generation(syms);
    const void *holder = NULL;
    /* gil_only on-CPU: the holder's one sample carries the CPU of every
     * thread of the interpreter (the core's pool), so every thread is
     * visited to read its clock, even when nobody holds the GIL. */
    int pool = w->gil_only && pn_tick_opts(t)->oncpu;
    if (w->gil_only) {
        if (gil_holder(L, &holder) != 0) {
            bump(&w->walk_errors, 1);
            return;
        }
        if (holder == NULL && !pool)
            return; /* nobody runs Python right now */
    }
    /* The interpreter state is large; only the list head is needed. */
    const void *ts;
    if (pn_safe_read(&ts, (const char *)w->interp + L->interp_threads, sizeof ts) != 0) {
        bump(&w->walk_errors, 1);
        return;
    }
    _Alignas(8) uint8_t tc[PNW_SPAN_MAX];
    for (int n = 0; ts; n++) {
        if (n == MAX_THREADS || pn_safe_read(tc, ts, L->ts_span) != 0) {
            bump(&w->walk_errors, 1);
            break;
        }
        const void *self = ts;
        ts = pnw_ptr(tc, L->ts_next);
        if (w->gil_only && self != holder && !pool)
            continue;
        pid_t tid = thread_tid(w, tc);
        if (tid == 0)
            continue;
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
            /* The context is stamped before the stack is read and checked
             * after: labels only for a stack that ran in it throughout. A
             * task switch in between is rare: one more try, then the
             * sample goes unlabelled (counted). */
            const pn_labelset *labels = NULL;
            for (int tries = 2; tries > 0; tries--) {
                ctx_stamp stamp;
                int stamped = ctx_stamp_read(self, &stamp) == 0;
                torn = 0;
                depth = 0;
                if (!stamped || current_frame(L, self, &fp) != 0)
                    torn = 1;
                else
                    depth = walk_frames(w, fp, syms, gen, &torn);
                if (!stamped || ctx_labels_if_unchanged(self, &stamp, tries == 1, &labels) == 0)
                    break;
            }
            /* Wall mode did not read the thread's clock before the walk: a
             * stack that could not be read may be that of a thread that
             * exited, which is no sample (on-CPU mode skipped it already). */
            int gone = torn && !pn_tick_opts(t)->oncpu && pn_tick_cpu_delta(t, tid) < 0;
            if (torn && !gone)
                bump(&w->walk_errors, 1);
            /* No Python frame and nothing failed: the thread runs no Python
             * code now, so there is nothing to attribute. A torn stack with
             * no frame is still recorded (as [unknown]). */
            if (!gone && (depth > 0 || torn)) {
                const char *name = NULL;
                if (pn_tick_opts(t)->report_thread_name &&
                    pn_thread_name_get(tid, w->thread_name, sizeof w->thread_name))
                    name = w->thread_name;
                /* Labels: the thread's slot under the running context's. */
                pn_tick_sample_context(t, tid, w->frames, depth, value, name,
                                       labels);
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
