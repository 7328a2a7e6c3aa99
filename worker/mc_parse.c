/*
 * memcached's text protocol parser (see mc_parse.h).  The rules follow
 * memcached 1.6's proto_text.c: tokens split on spaces only, at most 24
 * of them, the token count decides between a command and "ERROR", and
 * numbers are read the way strtoul/strtol read them.
 */
#include <ctype.h>
#include <string.h>

#include "worker/mc_parse.h"

#define MAX_TOKENS	24	/* memcached's, the command included */
#define META_MAX_TOKENS	19	/* meta: more is "options flags too long" */

#define E_ERROR		"ERROR"
#define E_FORMAT	"CLIENT_ERROR bad command line format"
#define E_DELETE	"CLIENT_ERROR bad command line format.  " \
			"Usage: delete <key> [noreply]"
#define E_DELTA		"CLIENT_ERROR invalid numeric delta argument"
#define E_EXPTIME	"CLIENT_ERROR invalid exptime argument"
#define E_TOKEN		"CLIENT_ERROR bad token in command line format"

const char *const mc_op_name[MC_NOPS] = {
#define MC_OP_NAME(id, name)	name,
	MC_COMMANDS(MC_OP_NAME)
#undef MC_OP_NAME
};

struct tok {
	const char *p;
	size_t n;
};

enum mc_line
mc_line(const char *buf, size_t n, size_t max, size_t *len, size_t *used)
{
	const char *nl, *p;

	if (n > 0 && (unsigned char)buf[0] == 0x80)
		return MC_LINE_CLOSE;	/* the binary protocol */
	nl = memchr(buf, '\n', n);
	if (nl == NULL) {
		if (n <= MC_LINE_MAX)
			return MC_LINE_MORE;
		/* Only a get of many keys may be that long. */
		for (p = buf; p < buf + 100 && *p == ' '; p++)
			;
		if (n >= max || (strncmp(p, "get ", 4) != 0 &&
		    strncmp(p, "gets ", 5) != 0))
			return MC_LINE_CLOSE;
		return MC_LINE_MORE;
	}
	*used = (size_t)(nl - buf) + 1;
	*len = (size_t)(nl - buf);
	if (*len > 1 && buf[*len - 1] == '\r')
		(*len)--;
	return MC_LINE_OK;
}

static size_t
tokenize(const char *s, size_t len, struct tok *t, size_t max,
    const char **rest)
{
	const char *end = s + len, *start;
	size_t n = 0;

	*rest = NULL;
	while (s < end) {
		while (s < end && *s == ' ')
			s++;
		if (s == end)
			break;
		if (n == max) {
			*rest = s;
			break;
		}
		start = s;
		while (s < end && *s != ' ')
			s++;
		t[n].p = start;
		t[n].n = (size_t)(s - start);
		n++;
	}
	return n;
}

/*
 * strtoull as memcached's safe_strtoull uses it: leading white space and
 * a sign allowed, digits, then the end or a white space character; a
 * negative number that wraps is refused.
 */
static bool
num_u64(const struct tok *t, size_t skip, uint64_t *out)
{
	const char *p = t->p + skip, *end = t->p + t->n;
	bool neg = false;
	uint64_t v = 0;
	const char *digits;

	while (p < end && isspace((unsigned char)*p))
		p++;
	if (p < end && (*p == '+' || *p == '-'))
		neg = *p++ == '-';
	digits = p;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return false;	/* ERANGE */
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p == digits || (p < end && !isspace((unsigned char)*p)))
		return false;
	if (neg) {
		v = (uint64_t)0 - v;
		if ((int64_t)v < 0)
			return false;
	}
	*out = v;
	return true;
}

/* strtol as safe_strtol uses it: a signed 64-bit number. */
static bool
num_i64(const struct tok *t, size_t skip, int64_t *out)
{
	const char *p = t->p + skip, *end = t->p + t->n;
	bool neg = false;
	uint64_t v = 0, lim;
	const char *digits;

	while (p < end && isspace((unsigned char)*p))
		p++;
	if (p < end && (*p == '+' || *p == '-'))
		neg = *p++ == '-';
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	digits = p;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		if (v > (lim - (uint64_t)(*p - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p == digits || (p < end && !isspace((unsigned char)*p)))
		return false;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return true;
}

static bool
is(const struct tok *t, const char *word)
{
	size_t n = strlen(word);

	return t->n == n && memcmp(t->p, word, n) == 0;
}

/* memcached's set_noreply_maybe(): the last token says noreply. */
static bool
noreply(const struct tok *t, size_t n)
{
	return is(&t[n - 1], "noreply");
}

static enum mc_op
lookup(const struct tok *t)
{
	for (int i = 0; i < MC_NOPS; i++)
		if (is(t, mc_op_name[i]))
			return (enum mc_op)i;
	return MC_NOPS;
}

/* get gets gat gats: every key checked before anything is answered. */
static const char *
parse_get(const struct tok *t, size_t n, const char *line, size_t len,
    struct mc_cmd *cmd)
{
	size_t first = 1;
	const char *p, *end = line + len, *key;
	size_t klen;

	if (cmd->op == MC_GAT || cmd->op == MC_GATS) {
		if (n < 2)
			return E_ERROR;
		if (!num_i64(&t[1], 0, &cmd->exptime))
			return E_EXPTIME;
		first = 2;
		if (n == 2)		/* no key: memcached says END */
			return NULL;
	} else if (n < 2)
		return E_ERROR;
	cmd->keys = t[first].p;
	cmd->keys_len = (size_t)(end - t[first].p);
	p = cmd->keys;
	while (mc_next_key(&p, end, &key, &klen))
		if (klen > MC_KEY_MAX)
			return E_FORMAT;
	cmd->key = t[first].p;
	cmd->klen = t[first].n;
	return NULL;
}

static const char *
parse_update(const struct tok *t, size_t n, struct mc_cmd *cmd)
{
	bool cas = cmd->op == MC_CAS;
	uint64_t flags;
	int64_t vlen;

	if (n != (cas ? 6u : 5u) && n != (cas ? 7u : 6u))
		return E_ERROR;
	cmd->noreply = noreply(t, n);
	if (t[1].n > MC_KEY_MAX)
		return E_FORMAT;
	if (!num_u64(&t[2], 0, &flags) || !num_i64(&t[3], 0, &cmd->exptime) ||
	    !num_i64(&t[4], 0, &vlen))
		return E_FORMAT;
	cmd->flags = (uint32_t)flags;	/* memcached keeps 32 bits */
	if (cas && !num_u64(&t[5], 0, &cmd->cas))
		return E_FORMAT;
	if (vlen < 0 || vlen > MC_VALUE_MAX)
		return E_FORMAT;
	cmd->vlen = (size_t)vlen;
	return NULL;
}

static const char *
parse_delete(const struct tok *t, size_t n, struct mc_cmd *cmd)
{
	bool zero;

	if (n < 2 || n > 4)
		return E_ERROR;
	if (n > 2) {
		zero = is(&t[2], "0");
		cmd->noreply = noreply(t, n);
		if (!((n == 3 && (zero || cmd->noreply)) ||
		    (n == 4 && zero && cmd->noreply)))
			return E_DELETE;
	}
	if (t[1].n > MC_KEY_MAX)
		return E_FORMAT;
	return NULL;
}

static const char *
parse_classic(const struct tok *t, size_t n, struct mc_cmd *cmd)
{
	switch (cmd->op) {
	case MC_SET: case MC_ADD: case MC_REPLACE: case MC_APPEND:
	case MC_PREPEND: case MC_CAS:
		return parse_update(t, n, cmd);
	case MC_DELETE:
		return parse_delete(t, n, cmd);
	case MC_INCR: case MC_DECR:
		if (n != 3 && n != 4)
			return E_ERROR;
		cmd->noreply = noreply(t, n);
		if (t[1].n > MC_KEY_MAX)
			return E_FORMAT;
		if (!num_u64(&t[2], 0, &cmd->delta))
			return E_DELTA;
		return NULL;
	case MC_TOUCH:
		if (n != 3 && n != 4)
			return E_ERROR;
		cmd->noreply = noreply(t, n);
		if (t[1].n > MC_KEY_MAX)
			return E_FORMAT;
		if (!num_i64(&t[2], 0, &cmd->exptime))
			return E_EXPTIME;
		return NULL;
	case MC_FLUSH_ALL:
		if (n > 3)
			return E_ERROR;
		cmd->noreply = noreply(t, n);
		if (n == (cmd->noreply ? 3u : 2u)) {
			if (!num_i64(&t[1], 0, &cmd->exptime))
				return E_EXPTIME;
			cmd->has_arg = true;
		}
		return NULL;
	case MC_VERBOSITY:
		if (n != 2 && n != 3)
			return E_ERROR;
		cmd->noreply = noreply(t, n);
		if (!num_u64(&t[1], 0, &cmd->arg))
			return E_FORMAT;
		cmd->has_arg = true;
		return NULL;
	case MC_STATS:
		if (n > 1) {
			cmd->sub = t[1].p;
			cmd->sub_len = t[1].n;
		}
		return NULL;
	default:
		return NULL;	/* version, quit: anything after is ignored */
	}
}

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int
b64_value(unsigned char c)
{
	const char *p;

	if (c == 0)
		return -1;
	p = strchr(b64_alphabet, c);
	return p == NULL ? -1 : (int)(p - b64_alphabet);
}

/* Decodes padded base64; 0 when it is not that (as memcached's). */
static size_t
b64_decode(const char *in, size_t n, char *out)
{
	size_t i, o = 0;
	int v[4], j;

	if (n == 0 || n % 4 != 0)
		return 0;
	for (i = 0; i < n; i += 4) {
		for (j = 0; j < 4; j++) {
			if (in[i + j] == '=' && i + 4 == n && j >= 2)
				v[j] = -2;
			else if ((v[j] = b64_value((unsigned char)in[i + j]))
			    < 0)
				return 0;
		}
		if (v[2] == -2 && v[3] != -2)
			return 0;
		out[o++] = (char)(v[0] << 2 | v[1] >> 4);
		if (v[2] != -2)
			out[o++] = (char)((v[1] & 15) << 4 | v[2] >> 2);
		if (v[3] != -2)
			out[o++] = (char)((v[2] & 3) << 6 | v[3]);
	}
	return o;
}

size_t
mc_base64_encode(const char *in, size_t n, char *out)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t i, o = 0;

	for (i = 0; i + 2 < n; i += 3) {
		out[o++] = b64_alphabet[s[i] >> 2];
		out[o++] = b64_alphabet[(s[i] & 3) << 4 | s[i + 1] >> 4];
		out[o++] = b64_alphabet[(s[i + 1] & 15) << 2 | s[i + 2] >> 6];
		out[o++] = b64_alphabet[s[i + 2] & 63];
	}
	if (i < n) {
		out[o++] = b64_alphabet[s[i] >> 2];
		if (i + 1 < n) {
			out[o++] = b64_alphabet[(s[i] & 3) << 4 |
			    s[i + 1] >> 4];
			out[o++] = b64_alphabet[(s[i + 1] & 15) << 2];
		} else {
			out[o++] = b64_alphabet[(s[i] & 3) << 4];
			out[o++] = '=';
		}
		out[o++] = '=';
	}
	return o;
}

/* One meta flag token; NULL or memcached's complaint. */
static const char *
meta_flag(const struct tok *t, struct mc_cmd *cmd)
{
	struct mc_meta *m = &cmd->meta;
	uint64_t u;

	switch (t->p[0]) {
	case 'b':
		cmd->klen = b64_decode(cmd->key, cmd->klen, cmd->keybuf);
		cmd->key = cmd->keybuf;
		m->base64 = true;
		return cmd->klen == 0 ? "CLIENT_ERROR error decoding key" :
		    NULL;
	case 'N':
		return num_i64(t, 1, &m->vivify) ? NULL : E_TOKEN;
	case 'T':
		return num_i64(t, 1, &m->ttl) ? NULL : E_TOKEN;
	case 'R':
		return num_i64(t, 1, &m->recache) ? NULL : E_TOKEN;
	case 'O':
		return t->n > MC_OPAQUE_MAX ?
		    "CLIENT_ERROR opaque token too long" : NULL;
	case 'P': case 'L': case 'k': case 's': case 't': case 'c':
	case 'f': case 'v': case 'h': case 'u': case 'l': case 'I':
		return NULL;
	case 'q':
		m->quiet = true;
		return NULL;
	case 'F':
		if (!num_u64(t, 1, &u))
			return E_FORMAT;
		m->client_flags = (uint32_t)u;
		return NULL;
	case 'C':
		return num_u64(t, 1, &m->cas) ? NULL : E_TOKEN;
	case 'E':
		return num_u64(t, 1, &m->new_cas) ? NULL : E_TOKEN;
	case 'M':
		if (t->n != 2)
			return "CLIENT_ERROR incorrect length for M token";
		m->mode = t->p[1];
		return NULL;
	case 'J':
		return num_u64(t, 1, &m->initial) ? NULL :
		    "CLIENT_ERROR invalid numeric initial value";
	case 'D':
		return num_u64(t, 1, &m->delta) ? NULL :
		    "CLIENT_ERROR invalid numeric delta value";
	default:
		return "CLIENT_ERROR invalid flag";
	}
}

/* The flags after the key (and ms's length), as memcached pre-parses. */
static const char *
meta_flags(const struct tok *t, size_t first, size_t n, struct mc_cmd *cmd)
{
	struct mc_meta *m = &cmd->meta;
	const char *why = NULL, *w;
	unsigned char c;
	size_t i;

	m->delta = 1;
	if (first < n) {
		m->flags = t[first].p;
		m->flags_len = (size_t)(t[n - 1].p + t[n - 1].n - t[first].p);
	}
	for (i = first; i < n; i++) {
		c = (unsigned char)t[i].p[0];
		if (!isalpha(c) || (m->has & MC_F(c)))
			return c >= 127 || (isalpha(c) && (m->has & MC_F(c))) ?
			    "CLIENT_ERROR duplicate flag" :
			    "CLIENT_ERROR invalid flag";
		m->has |= MC_F(c);
		if ((w = meta_flag(&t[i], cmd)) != NULL) {
			if (strcmp(w, "CLIENT_ERROR invalid flag") == 0)
				return w;
			if (why == NULL || t[i].p[0] != 'O')
				why = w;
		}
	}
	return why;
}

static const char *
parse_meta(const struct tok *t, size_t n, struct mc_cmd *cmd)
{
	const char *why;
	int64_t vlen;
	size_t first = 2;

	if (cmd->op == MC_MN)
		return NULL;
	if (cmd->op == MC_ME) {
		if (n < 2 || t[1].n > MC_KEY_MAX)
			return E_FORMAT;
		cmd->key = t[1].p;
		cmd->klen = t[1].n;
		return NULL;
	}
	if (n < 2)
		return E_ERROR;
	if (t[1].n > MC_KEY_MAX)
		return E_FORMAT;
	cmd->key = t[1].p;
	cmd->klen = t[1].n;
	if (cmd->op == MC_MS) {
		if (n == 2 || !num_i64(&t[2], 0, &vlen) || vlen < 0 ||
		    vlen > MC_VALUE_MAX)
			return E_FORMAT;
		cmd->vlen = (size_t)vlen;
		cmd->swallow = true;	/* on any error from here */
		first = 3;
	}
	if (n + 1 > META_MAX_TOKENS + 1)
		return "CLIENT_ERROR options flags are too long";
	why = meta_flags(t, first, n, cmd);
	if (why != NULL && (cmd->op == MC_MD || cmd->op == MC_MA))
		return "CLIENT_ERROR invalid or duplicate flag";
	if (why != NULL)
		return why;
	cmd->noreply = cmd->meta.quiet;
	if (cmd->op == MC_MS && cmd->meta.mode != 0 &&
	    strchr("EAPRS", cmd->meta.mode) == NULL)
		return "CLIENT_ERROR invalid mode for ms M token";
	if (cmd->op == MC_MA && cmd->meta.mode != 0 &&
	    strchr("I+D-", cmd->meta.mode) == NULL)
		return "CLIENT_ERROR invalid mode for ma M token";
	return NULL;
}

const char *
mc_parse(const char *line, size_t len, struct mc_cmd *cmd)
{
	struct tok t[MAX_TOKENS];
	const char *rest, *nul;
	size_t n;

	memset(cmd, 0, offsetof(struct mc_cmd, keybuf));
	/* memcached reads the line as a C string. */
	if ((nul = memchr(line, '\0', len)) != NULL)
		len = (size_t)(nul - line);
	n = tokenize(line, len, t, MAX_TOKENS - 1, &rest);
	if (n == 0 || (cmd->op = lookup(&t[0])) == MC_NOPS)
		return E_ERROR;
	switch (cmd->op) {
	case MC_GET: case MC_GETS: case MC_GAT: case MC_GATS:
		return parse_get(t, n, line, len, cmd);
	case MC_MG: case MC_MS: case MC_MD: case MC_MA: case MC_MN:
	case MC_ME:
		return parse_meta(t, n, cmd);
	default:
		if (rest != NULL && cmd->op != MC_VERSION &&
		    cmd->op != MC_QUIT && cmd->op != MC_STATS)
			return E_ERROR;	/* more tokens than any takes */
		if (n > 1) {
			cmd->key = t[1].p;
			cmd->klen = t[1].n;
		}
		return parse_classic(t, n, cmd);
	}
}

bool
mc_next_key(const char **p, const char *end, const char **key,
    size_t *klen)
{
	const char *s = *p;

	while (s < end && *s == ' ')
		s++;
	if (s == end)
		return false;
	*key = s;
	while (s < end && *s != ' ')
		s++;
	*klen = (size_t)(s - *key);
	*p = s;
	return true;
}
