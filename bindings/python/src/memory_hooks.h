/*
 * The memory profile's allocator hooks: PyMem_SetAllocator on the object
 * and mem domains (both called with the GIL held), wrapping the allocators
 * that were installed, feeding the core's memory driver.
 *
 * The raw domain is not hooked: it runs without the GIL, so its hook could
 * not read the thread's frames or context, and uninstalling could race a
 * call in flight. Free-threaded builds are refused for the same reason.
 */
#ifndef PYROSCOPE_MEMORY_HOOKS_H
#define PYROSCOPE_MEMORY_HOOKS_H

#include <Python.h>

#include "pyroscope_native.h"
#include "walker.h"

/* GIL held: add a memory driver to a (its symbolizing walker: *walker_out,
 * freed by the caller after the agent stops) and install the hooks. 0, or
 * -1 with e filled (nothing installed). */
int py_mem_start(pn_agent *a, py_walker **walker_out, pn_error *e);
/* GIL held: uninstall the hooks (the previous allocators come back; blocks
 * allocated through ours are theirs anyway). Before the agent stops. */
void py_mem_stop(void);
/* The running memory driver, or NULL (GIL held). */
pn_driver *py_mem_driver(void);

#endif
