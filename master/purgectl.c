/*
 * corral -P URL: drops a URL, with all its variants, from the running
 * server's cache, without curl and without purge_allow; a URL ending in
 * "*" drops every URL of the host under that prefix.  It sends PURGE,
 * in plain HTTP, to the server's first listening address without tls over
 * loopback, with the server's purge token (read from stats_file, which
 * only root can read) in X-Corral-Purge, and says what the server
 * answered.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "master/config.h"
#include "master/master.h"
#include "shm/stats.h"

#define PURGE_TIMEOUT_S	10

/* "http://host[:port]/path?q" or "/path?q": the host and the target. */
static int
split_url(const char *url, const char *dflt_host, char *host, size_t hlen,
    const char **target)
{
	const char *p = url, *slash;
	size_t n;

	if (strncmp(p, "http://", 7) == 0)
		p += 7;
	else if (strncmp(p, "https://", 8) == 0)
		p += 8;
	else if (*p == '/') {
		snprintf(host, hlen, "%s", dflt_host);
		*target = p;
		return 0;
	} else {
		return -1;
	}
	slash = strchr(p, '/');
	n = slash ? (size_t)(slash - p) : strlen(p);
	if (n == 0 || n >= hlen)
		return -1;
	memcpy(host, p, n);
	host[n] = '\0';
	*target = slash ? slash : "/";
	return 0;
}

/* The first plain HTTP address (the request is not TLS), or NULL. */
static const struct config_listen *
plain_listen(const struct config *cf)
{
	for (size_t i = 0; i < cf->nlisten; i++)
		if (!cf->listen[i].tls)
			return &cf->listen[i];
	return NULL;
}

/* That address, with a wildcard made loopback. */
static int
dial(const struct config_listen *l)
{
	struct sockaddr_storage ss = l->addr;
	struct timeval tv = { PURGE_TIMEOUT_S, 0 };
	int fd;

	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		if (sin->sin_addr.s_addr == htonl(INADDR_ANY))
			sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		if (IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr))
			sin6->sin6_addr = in6addr_loopback;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&ss, l->addrlen) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

int
monitor_purge(const struct config *cf, const char *url)
{
	char host[256], token[STATS_TOKEN_LEN + 1], req[8192], resp[512];
	const struct config_listen *l = plain_listen(cf);
	const char *target, *body;
	struct stats *st;
	ssize_t n;
	size_t got = 0, count;
	int fd, len, status;

	if (split_url(url, cf->servers[0].names[0], host, sizeof(host),
	    &target) == -1 || strpbrk(url, " \r\n") != NULL) {
		fprintf(stderr, "corral: -P: \"%s\" is not a URL "
		    "(http://host/path or /path)\n", url);
		return 2;
	}
	if (l == NULL) {
		fprintf(stderr, "corral: %s: -P needs a listen address without "
		    "tls\n", cf->file);
		return 1;
	}
	if (cf->stats_file == NULL) {
		fprintf(stderr, "corral: %s: no stats_file (or pid_file): the "
		    "purge token cannot be read\n", cf->file);
		return 1;
	}
	if ((st = stats_open_file(cf->stats_file, resp, sizeof(resp))) ==
	    NULL) {
		fprintf(stderr, "corral: %s: %s\n", cf->stats_file, resp);
		return 1;
	}
	stats_purge_token(st, token);
	stats_destroy(st);
	len = snprintf(req, sizeof(req), "PURGE %s HTTP/1.1\r\nHost: %s\r\n"
	    "X-Corral-Purge: %s\r\nConnection: close\r\n\r\n", target, host,
	    token);
	if (len < 0 || (size_t)len >= sizeof(req)) {
		fprintf(stderr, "corral: -P: the URL is too long\n");
		return 2;
	}
	if ((fd = dial(l)) == -1) {
		fprintf(stderr, "corral: %s: %s\n", l->text,
		    strerror(errno));
		return 1;
	}
	if (write(fd, req, (size_t)len) != len) {
		fprintf(stderr, "corral: %s: %s\n", l->text,
		    strerror(errno));
		close(fd);
		return 1;
	}
	/* The status line, and a purge by prefix's count in the body. */
	while (got + 1 < sizeof(resp)) {
		n = read(fd, resp + got, sizeof(resp) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	resp[got] = '\0';
	if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1) {
		fprintf(stderr, "corral: %s: no answer\n", l->text);
		return 1;
	}
	if (status == 200 && (body = strstr(resp, "\r\n\r\n")) != NULL &&
	    sscanf(body + 4, "purged %zu", &count) == 1) {
		printf("purged %s%s (%zu objects)\n", host, target, count);
		return 0;
	}
	if (status == 200) {
		printf("purged %s%s\n", host, target);
		return 0;
	}
	if (status == 404) {
		printf("not in the cache: %s%s\n", host, target);
		return 0;
	}
	fprintf(stderr, "corral: %s%s: the server answered %d%s\n", host,
	    target, status, status == 405 || status == 200 ? "" :
	    " (is the URL under a location with cache = on?)");
	return 1;
}
