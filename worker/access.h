/*
 * Who may make a request: allow/deny rules (access.c), HTTP Basic
 * authentication against an htpasswd file (auth.c), and rate and
 * connection limits kept in the shared store for all workers (limit.c).
 * Internal to worker/.
 */
#ifndef CORRAL_ACCESS_H
#define CORRAL_ACCESS_H

#include <stdbool.h>

struct config_location;
struct conn;

/* First matching rule wins; with none, l->acl_default_allow. */
bool acl_allows(const struct config_location *l, int family,
    const unsigned char *addr);

/* True when the request carries a user and password of l's file. */
bool auth_check(struct conn *c, const struct config_location *l);

/* The WWW-Authenticate line for a 401 of location l, and its length. */
const char *auth_challenge(const struct config_location *l, size_t *len);

/*
 * limit_req of l for the request of c: 0 to go on, a status (429, 503)
 * to refuse it, or -1 to delay it *delay_ms first.
 */
int limit_req(struct conn *c, const struct config_location *l,
    int *delay_ms);

/* limit_conn: 0 and the request counts until limit_conn_leave(), or the
 * status to refuse it. */
int limit_conn_enter(struct conn *c, const struct config_location *l);
void limit_conn_leave(struct conn *c);

/* Frees what the modules keep; at worker exit. */
void auth_free(void);

#endif
