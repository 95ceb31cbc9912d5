/*
 * The kernel thread id behind a pthread_t of this process, for CPython
 * 3.10, whose thread states carry only the pthread_t (thread_id): glibc
 * and musl keep the tid in the thread descriptor a pthread_t points to, at
 * an offset the C library does not publish. It is found once, by looking
 * for the tids of two live threads in their own descriptors.
 */
#ifndef PYROSCOPE_PTHREAD_TID_H
#define PYROSCOPE_PTHREAD_TID_H

#include <stddef.h>
#include <sys/types.h>

#include "pyroscope_native.h"

/* The offset of the tid in a thread descriptor, or -1 with a message when
 * it cannot be found. With the GIL held (the first call starts and joins
 * a thread); not from the sampler. */
int pthread_tid_offset(size_t *off, pn_error *e);

/* The tid of a pthread_t of this process read with pn_safe_read: > 0, or
 * 0 when the thread has exited (the kernel clears the field) or the read
 * failed. Sampler thread. */
pid_t pthread_tid_of(unsigned long pthread, size_t off);

#endif
