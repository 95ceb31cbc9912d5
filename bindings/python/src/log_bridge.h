/*
 * Core log messages into Python's logging module.
 *
 * The core logs from its own threads (exporter, flusher), which hold no
 * thread state and must never wait for the GIL: a thread inside
 * pn_agent_stop() may hold it. So the core's handler only copies the
 * message into a bounded ring and asks the interpreter, through
 * Py_AddPendingCall (safe without the GIL), to drain the ring on the main
 * thread. API calls drain it too, so messages caused by a call are logged
 * before the call returns.
 */
#ifndef PYROSCOPE_PY_LOG_BRIDGE_H
#define PYROSCOPE_PY_LOG_BRIDGE_H

#include <Python.h>

/* GIL held. sink: callable(level: int, message: str), or None to write
 * messages to stderr. Installs the core handler. */
int log_bridge_set_sink(PyObject *sink);
/* GIL held: hand queued messages to the sink. */
void log_bridge_drain(void);
/* GIL held, at interpreter exit after the agent stopped: no more pending
 * calls; later messages go to stderr. */
void log_bridge_close(void);
/* Messages dropped because the ring was full. Any thread. */
uint64_t log_bridge_dropped(void);

#endif
