/*
 * Core log messages into Python's logging module.
 *
 * The core logs from its own threads (exporter, flusher), which hold no
 * thread state and must never wait for the GIL: a thread inside
 * pn_agent_stop() may hold it. So the core's handler only copies the
 * message and the time into a bounded ring (full: the oldest is dropped,
 * counted and reported) and wakes our delivery thread, which takes the GIL
 * and hands the message to logging, with the time the core logged it, even
 * while the main thread sits in join(). API calls drain the ring too, so
 * messages caused by a call are logged before the call returns.
 */
#ifndef PYROSCOPE_PY_LOG_BRIDGE_H
#define PYROSCOPE_PY_LOG_BRIDGE_H

#include <Python.h>

/* GIL held, main interpreter. sink: callable(level: int, message: str,
 * created: float, the time.time() when the core logged), or None to write
 * messages to stderr. Installs the core handler, starts the delivery thread. */
int log_bridge_set_sink(PyObject *sink);
/* GIL held: hand queued messages to the sink. */
void log_bridge_drain(void);
/* GIL held, in a forked child after the interpreter's own fork handling:
 * a new delivery thread (the parent's does not exist here). */
void log_bridge_after_fork(void);
/* GIL held, at interpreter exit (atexit, before finalization) after the
 * agent stopped: ends the delivery thread; later messages go to stderr. */
void log_bridge_close(void);
/* Messages dropped because the ring was full. Any thread. */
uint64_t log_bridge_dropped(void);

#endif
