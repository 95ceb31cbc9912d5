/* Grace periods: when may memory that a recording thread could still read
 * be freed?
 *
 * Readers are the recording sides of the pipeline (a sampler tick, a batch
 * being recorded, captures waiting in rendezvous slots). Each reader has a
 * slot in a fixed table where it announces the oldest generation whose
 * pointers it may still hold (0: none). Writers that unpublish a pointer
 * (a label set leaving its last slot, a store period being swapped out)
 * take a tag from the global generation counter after unpublishing; the
 * memory may be freed once every reader announces 0 or a generation newer
 * than the tag. Every operation is one atomic access (sequentially
 * consistent, so "unpublish, then tag" orders against "announce, then
 * load"); none locks or allocates, and enter/exit/now/hold are
 * async-signal-safe.
 *
 * Per reader, not process-wide: a store waits only for its own reader at a
 * swap, so several drivers can feed the pipeline side by side. */
#ifndef PN_GRACE_H
#define PN_GRACE_H

#include <stdint.h>

#include "pyroscope_native.h"

#define PN_GRACE_READERS 64

typedef struct pn_grace_reader pn_grace_reader;

/* Claim / release a reader slot. Control threads. NULL when all
 * PN_GRACE_READERS are taken. */
pn_grace_reader *pn_grace_reader_new(pn_error *e);
void pn_grace_reader_free(pn_grace_reader *r);

/* The reader's own thread(s), one at a time: enter announces the current
 * generation (pointers loaded from now on are covered); exit announces
 * none. hold announces an older generation `gen` (a value of pn_grace_now
 * read when a deferred capture loaded its pointers). */
void pn_grace_enter(pn_grace_reader *r);
void pn_grace_exit(pn_grace_reader *r);
void pn_grace_hold(pn_grace_reader *r, uint64_t gen);
uint64_t pn_grace_now(void);

/* Unpublishing side, after the pointer is no longer reachable: a tag for
 * it. Any thread. */
uint64_t pn_grace_tag(void);
/* 1 when no reader (or, for _reader, r alone) can still hold a pointer
 * unpublished before `tag`. Any thread. */
int pn_grace_passed(uint64_t tag);
int pn_grace_reader_passed(const pn_grace_reader *r, uint64_t tag);
/* Sleep in 50 us steps until pn_grace_reader_passed(r, tag). */
void pn_grace_reader_wait(const pn_grace_reader *r, uint64_t tag);

/* In a forked child: readers of threads that did not survive hold nothing
 * now. The forking thread, before any other thread exists. */
void pn_grace_after_fork(void);

#endif
