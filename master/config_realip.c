/* real_ip_from and real_ip_header: whose address a proxy's header may set. */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <confuse.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "master/config_impl.h"

/* "ADDRESS" or "ADDRESS/BITS", IPv4 or IPv6; host bits are cleared. */
int
cb_cidr(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	struct config_cidr *c;
	char text[INET6_ADDRSTRLEN];
	const char *slash = strchr(value, '/');
	size_t n = slash != NULL ? (size_t)(slash - value) : strlen(value);
	unsigned long bits;
	char *end;
	unsigned i;

	(void)opt;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return -1;
	c->family = memchr(value, ':', n) != NULL ? AF_INET6 : AF_INET;
	bits = c->family == AF_INET ? 32 : 128;
	if (n < sizeof(text)) {
		memcpy(text, value, n);
		text[n] = '\0';
	}
	if (n >= sizeof(text) || inet_pton(c->family, text, c->addr) != 1 ||
	    (slash != NULL && (!isdigit((unsigned char)slash[1]) ||
	    (bits = strtoul(slash + 1, &end, 10), *end != '\0') ||
	    bits > (c->family == AF_INET ? 32u : 128u)))) {
		cfg_error(cfg, "real_ip_from \"%s\": expected an address or "
		    "ADDRESS/BITS, IPv4 or IPv6", value);
		free(c);
		return -1;
	}
	c->bits = (unsigned)bits;
	for (i = c->bits; i < (c->family == AF_INET ? 32u : 128u); i++)
		c->addr[i / 8] &= (unsigned char)~(0x80u >> (i % 8));
	*(void **)result = c;
	return 0;
}

int
cb_real_ip_header(cfg_t *cfg, cfg_opt_t *opt, const char *value,
    void *result)
{
	(void)opt;
	if (strcasecmp(value, "X-Forwarded-For") != 0 &&
	    strcasecmp(value, "X-Real-IP") != 0) {
		cfg_error(cfg, "real_ip_header \"%s\": X-Forwarded-For or "
		    "X-Real-IP", value);
		return -1;
	}
	*(const char **)result = value;
	return 0;
}

void
build_real_ip(cfg_t *cfg, struct config *cf)
{
	size_t i, n = cfg_size(cfg, "real_ip_from");

	if (n > 0 && (cf->real_ip_from = calloc(n,
	    sizeof(*cf->real_ip_from))) == NULL) {
		loading->oom = true;
		return;
	}
	cf->nreal_ip_from = n;
	for (i = 0; i < n; i++)
		cf->real_ip_from[i] = *(struct config_cidr *)
		    cfg_getnptr(cfg, "real_ip_from", i);
	cf->real_ip_header = strcasecmp(cfg_getstr(cfg, "real_ip_header"),
	    "X-Real-IP") == 0 ? REAL_IP_X_REAL_IP : REAL_IP_XFF;
	cf->real_ip_recursive = cfg_getbool(cfg, "real_ip_recursive");
}
