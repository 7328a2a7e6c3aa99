/*
 * The PROXY protocol (HAProxy's proxy-protocol.txt, versions 1 and 2),
 * with no I/O: the header a load balancer in front of corral sends first
 * on a connection, naming the client's address and port.  Only a listen
 * address marked for it reads one; there every connection must start
 * with one, or it is closed.
 *
 * Version 1 is one text line, "PROXY TCP4 192.0.2.1 198.51.100.1 56324
 * 443\r\n", at most 107 bytes.  Version 2 is a 16-byte binary header
 * (signature, version and command, family and transport, length) and an
 * address block, which TLVs may follow.  Both are parsed strictly:
 * whatever the specification does not allow is an error.
 */
#ifndef CORRAL_PROXY_PROTOCOL_H
#define CORRAL_PROXY_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#define PP_V1_MAX	107		/* the longest version 1 line */
#define PP_V2_MAX	4096		/* a version 2 header we accept, TLVs
					   included (the format allows 64 KB) */

struct pp_header {
	int version;			/* 1 or 2 */
	/*
	 * The addresses are not the sender's to tell: version 1 UNKNOWN,
	 * version 2 LOCAL (a health check), or a family with no address
	 * (UNSPEC, UNIX).  The connection's own addresses stand.
	 */
	bool local;
	struct sockaddr_storage src;	/* the client */
	struct sockaddr_storage dst;	/* the address it connected to */
	socklen_t srclen, dstlen;
};

#define PP_AGAIN	0

/*
 * Parses a header at the start of buf[0..len).  Returns its length (> 0),
 * PP_AGAIN when more bytes are needed (what came so far may still be a
 * header), or -1 with *why set when it is not a valid header.  The bytes
 * after the header are the client's first request.
 */
ssize_t proxy_protocol_parse(const char *buf, size_t len,
    struct pp_header *h, const char **why);

#endif
