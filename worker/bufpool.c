/*
 * Buffers of client connections, lent while a connection is busy and
 * returned when it goes idle, so that an idle keep-alive connection holds
 * no buffer at all (nginx frees them in ngx_http_set_keepalive).  The free
 * lists keep a few of each size, so a busy connection that goes idle and
 * busy again between requests costs no malloc() and no free().
 */
#include <stdlib.h>

#include "worker/conn_impl.h"

#define POOL_KEEP	64	/* free buffers kept per size */

static const size_t pool_size[BUF_KINDS] = {
	[BUF_IN] = IBUF_INIT,
	[BUF_OUT] = OBUF_INIT,
	[BUF_OUT_BIG] = OBUF_BIG,
	[BUF_SEGS] = OSEG_MAX * sizeof(struct oseg),
	[BUF_RQ] = sizeof(struct conn_rq),
};

static struct {
	void *free[POOL_KEEP];
	unsigned n;
} pools[BUF_KINDS];

void *
buf_get(enum buf_kind k)
{
	if (pools[k].n > 0)
		return pools[k].free[--pools[k].n];
	return malloc(pool_size[k]);
}

void
buf_put(enum buf_kind k, void *p)
{
	if (p == NULL)
		return;
	if (pools[k].n < POOL_KEEP)
		pools[k].free[pools[k].n++] = p;
	else
		free(p);
}

void
buf_free_all(void)
{
	for (unsigned k = 0; k < BUF_KINDS; k++)
		while (pools[k].n > 0)
			free(pools[k].free[--pools[k].n]);
}
