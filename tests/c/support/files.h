/* Temporary folders and whole-file reads for tests that check what the
 * profiler wrote. */
#ifndef PN_TEST_FILES_H
#define PN_TEST_FILES_H

#include <stddef.h>
#include <stdint.h>

/* A fresh folder /tmp/pn-<tag>-XXXXXX in buf; buf[0] == 0 when that fails. */
void pn_test_tmpdir(const char *tag, char *buf, size_t cap);
/* Remove dir and the files in it (one level: what an exporter writes). */
void pn_test_rm_dir(const char *dir);
/* The whole file, malloc'ed; NULL when it cannot be opened. */
uint8_t *pn_test_read_file(const char *path, size_t *len);
/* A one-sample profile (1 ms of `type` in function fn of app.py) written
 * as dir/name. */
void pn_test_write_profile(const char *dir, const char *name, const char *type,
                           const char *fn);

#endif
