/* The agent's part of the fork path (agent.c), called by fork.c in order. */
#ifndef PN_FORK_H
#define PN_FORK_H

void pn_agent_fork_prepare(void);
void pn_agent_fork_parent(void);
void pn_agent_fork_child(void);
/* The HTTP relay's lock (export/http_relay.c), a leaf: taken last. */
void pn_http_relay_fork_prepare(void);
void pn_http_relay_fork_parent(void);
void pn_http_relay_fork_child(void);

#endif
