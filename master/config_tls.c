/* TLS: protocols, where certificates and ciphers were set, their checks. */
#include <confuse.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "master/config_impl.h"

static const struct {
	const char *name;
	unsigned bit;
} tls_protocols[] = {
	{ "TLSv1.2", TLS_PROTO_12 },
	{ "TLSv1.3", TLS_PROTO_13 },
};

static unsigned
protocol_bit(const char *name)
{
	for (size_t i = 0; i < nitems(tls_protocols); i++)
		if (strcasecmp(tls_protocols[i].name, name) == 0)
			return tls_protocols[i].bit;
	return 0;
}

int
cb_tls_protocol(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	if (protocol_bit(value) != 0) {
		*(const char **)result = value;
		return 0;
	}
	if (strcasecmp(value, "SSLv2") == 0 ||
	    strcasecmp(value, "SSLv3") == 0 ||
	    strcasecmp(value, "TLSv1") == 0 ||
	    strcasecmp(value, "TLSv1.1") == 0)
		cfg_error(cfg, "protocol \"%s\" is obsolete and insecure "
		    "(RFC 8996); only TLSv1.2 and TLSv1.3 are offered", value);
	else
		cfg_error(cfg, "unknown protocol \"%s\" (TLSv1.2 or TLSv1.3)",
		    value);
	return -1;
}

/* Where a server's certificate or the tls section's ciphers were set. */
struct tls_lines *
tls_lines_of(cfg_t *sec, bool add)
{
	struct tls_lines *t;
	size_t i;

	for (i = 0; i < loading->ntls_lines; i++)
		if (loading->tls_lines[i].sec == sec)
			return &loading->tls_lines[i];
	if (!add)
		return NULL;
	t = realloc(loading->tls_lines, (i + 1) * sizeof(*t));
	if (t == NULL)
		return NULL;
	loading->tls_lines = t;
	loading->ntls_lines++;
	memset(&t[i], 0, sizeof(t[i]));
	t[i].sec = sec;
	return &t[i];
}

int
validate_tls_line(cfg_t *cfg, cfg_opt_t *opt)
{
	struct tls_lines *t;

	if (validate_nonempty(cfg, opt) == -1)
		return -1;
	if ((t = tls_lines_of(cfg, true)) == NULL) {
		cfg_error(cfg, "out of memory");
		return -1;
	}
	if (strcmp(opt->name, "tls_certificate") == 0 ||
	    strcmp(opt->name, "ciphers") == 0)
		t->cert = cfg->line;
	else
		t->key = cfg->line;
	return 0;
}

/*
 * A certificate needs its key and the other way round, and a TLS listener
 * needs some server with a certificate.  Whether the files hold what they
 * should is checked by the master when it loads them (master/tls_conf.c).
 */
void
check_tls(cfg_t *cfg)
{
	struct tls_lines *t;
	bool any = false;
	cfg_t *sec;
	unsigned i;

	for (i = 0; i < cfg_size(cfg, "server") && !loading->failed; i++) {
		sec = cfg_getnsec(cfg, "server", i);
		t = tls_lines_of(sec, false);
		if (t == NULL)
			continue;
		if (t->cert > 0 && t->key == 0)
			cf_fail(t->cert, "tls_certificate needs "
			    "tls_certificate_key in the same server");
		else if (t->key > 0 && t->cert == 0)
			cf_fail(t->key, "tls_certificate_key needs "
			    "tls_certificate in the same server");
		any = true;
	}
	if (!loading->failed && loading->tls_listen_line > 0 && !any)
		cf_fail(loading->tls_listen_line, "listen with \"tls\" needs a "
		    "server with tls_certificate and tls_certificate_key");
	if (!loading->failed && cfg_size(cfg_getsec(cfg, "tls"), "protocols") == 0)
		cf_fail(0, "tls protocols must name TLSv1.2, TLSv1.3 or both");
}

void
build_tls(cfg_t *sec, struct config_tls *t)
{
	struct tls_lines *lines = tls_lines_of(sec, false);

	for (unsigned i = 0; i < cfg_size(sec, "protocols"); i++)
		t->protocols |= protocol_bit(cfg_getnstr(sec, "protocols", i));
	t->ciphers = cf_copy(cfg_getstr(sec, "ciphers"));
	t->ciphersuites = cf_copy(cfg_getstr(sec, "ciphersuites"));
	t->ciphers_line = lines ? lines->cert : 0;
	t->ciphersuites_line = lines ? lines->key : 0;
	t->session_cache = cfg_getbool(sec, "session_cache");
	t->session_cache_size = cfg_getint(sec, "session_cache_size");
	t->session_timeout_ms = cfg_getint(sec, "session_timeout");
	t->session_tickets = cfg_getbool(sec, "session_tickets");
	t->ticket_key_rotate_ms = cfg_getint(sec, "ticket_key_rotate");
	t->handshake_timeout_ms = cfg_getint(sec, "handshake_timeout");
	t->ktls = cfg_getbool(sec, "ktls");
	t->listen_line = loading->tls_listen_line;
}
