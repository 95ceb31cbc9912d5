/*
 * Labels that follow the execution context (contextvars) rather than the
 * OS thread: each asyncio task, greenlet (>= 1.0) and thread runs its own
 * context, so a label set stored in a ContextVar stays with the task that
 * set it across every await and never reaches a task that runs next on the
 * same thread.
 *
 * Application side (GIL held): one module-level ContextVar whose value is a
 * ContextLabels entry: a core label set (the merge of every block open in
 * that context), the entry it was merged onto, and the owner that opened
 * it. tag_wrapper and the span processor enter and exit entries; a shared
 * owner works in any number of contexts at once, because the entries live
 * in each context, not in the owner.
 *
 * Sampler side: ctx_labels_of() finds that entry in the context a thread
 * state runs, reading PyContext -> HAMT -> our value through pn_safe_read,
 * without the GIL, and hands the set to pn_tick_sample_context.
 */
#ifndef PYROSCOPE_CONTEXT_LABELS_H
#define PYROSCOPE_CONTEXT_LABELS_H

#include <Python.h>

#include "pyroscope_native.h"

/* Module init, GIL held: the ContextLabels type, the ContextVar, the
 * functions context_enter/context_exit/context_labels, and the layout
 * check (a failed check leaves context labels off and says so in stats;
 * thread labels keep working). 0, or -1 with a Python error. */
int ctx_labels_init(PyObject *module);

/* Sampler thread: the set of our ContextVar in the context `context` (the
 * address a thread state holds; NULL: none). Never allocates or locks; a
 * failed or inconsistent read is counted and gives NULL. The set stays
 * valid until the recording section (the tick) ends. */
const pn_labelset *ctx_labels_of(const void *context);

/* The calling thread's set (GIL held, with a thread state; NULL: none),
 * for the allocator hook: no allocation, no Python code, the application's
 * pending exception untouched. Borrowed: valid while its context holds it,
 * so at least until the hook returns. */
const pn_labelset *ctx_labels_current(void);

/* Sampler thread: which context a thread state runs, and its version
 * (tstate->context_ver, bumped by every context switch and ContextVar
 * set). A stamp taken before a thread's stack was read, and found
 * unchanged after it, says that the stack ran in that context throughout. */
typedef struct {
    const void *context;
    uint64_t ver;
} ctx_stamp;

/* Read the stamp of the thread state at ts; -1 when it cannot be read. */
int ctx_stamp_read(const void *ts, ctx_stamp *out);

/* *out: the labels of stamp->context; 0. Or 1 with *out NULL when the
 * thread state at ts no longer runs that context at that version: the
 * thread switched tasks (or set a ContextVar) while its stack was read, and
 * the labels might be another task's. `last`: the caller gives up on the
 * sample's labels then (counted as `switched`). */
int ctx_labels_if_unchanged(const void *ts, const ctx_stamp *stamp, int last,
                            const pn_labelset **out);

typedef struct {
    uint64_t enabled;         /* 1 when the layout check passed */
    uint64_t lookups;         /* contexts the sampler looked into */
    uint64_t labelled;        /* ... that held a non-empty set of ours */
    uint64_t read_errors;     /* failed, inconsistent or too deep reads */
    uint64_t exit_unmatched;  /* exits in a context with no entry of theirs */
    uint64_t label_drops;     /* blocks kept without their labels (limits) */
    uint64_t switched;        /* samples left unlabelled: context changed during the read */
} ctx_labels_stats;

/* Any thread. */
void ctx_labels_get_stats(ctx_labels_stats *out);

#endif
