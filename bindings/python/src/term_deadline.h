#ifndef PN_PY_TERM_DEADLINE_H
#define PN_PY_TERM_DEADLINE_H

/* See term_deadline.c. Main thread, GIL held, right after the Python
 * SIGTERM handler was installed. 0, or -1 with errno set. */
int py_term_deadline_arm(double grace_s);

#endif
