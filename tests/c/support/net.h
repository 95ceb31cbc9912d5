/* Socket helpers shared by the test server, proxy and TLS pump. */
#ifndef PN_TEST_NET_H
#define PN_TEST_NET_H

#include <stddef.h>

/* Sends all n bytes on a (blocking) socket, without SIGPIPE: 0, or -1 once
 * the peer is gone. */
int test_send_all(int fd, const void *p, size_t n);

#endif
