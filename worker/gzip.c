/*
 * gzip with zlib and brotli with libbrotlienc, for copies that are made once and served many times, so
 * the level can be high and a whole buffer is compressed in one call.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#include <brotli/encode.h>

#include "master/config.h"
#include "worker/gzip.h"

bool
gzip_type(const struct config *cf, const char *type, size_t len)
{
	size_t n = 0;

	while (n < len && type[n] != ';' && type[n] != ' ' && type[n] != '\t')
		n++;
	for (size_t i = 0; i < cf->ngzip_types; i++)
		if (strlen(cf->gzip_types[i]) == n &&
		    strncasecmp(cf->gzip_types[i], type, n) == 0)
			return true;
	return false;
}

char *
gzip_bytes(const struct config *cf, const char *p, size_t len,
    size_t *outlen)
{
	z_stream z;
	char *out;
	size_t room;

	if (len > UINT32_MAX)
		return NULL;
	memset(&z, 0, sizeof(z));
	/* 15 + 16: a 32 KB window with the gzip wrapper. */
	if (deflateInit2(&z, cf->gzip_comp_level, Z_DEFLATED, 15 + 16, 8,
	    Z_DEFAULT_STRATEGY) != Z_OK)
		return NULL;
	room = deflateBound(&z, (uLong)len);
	if ((out = malloc(room)) == NULL) {
		deflateEnd(&z);
		return NULL;
	}
	z.next_in = (Bytef *)(uintptr_t)p;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)out;
	z.avail_out = (uInt)room;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
		deflateEnd(&z);
		free(out);
		return NULL;
	}
	*outlen = z.total_out;
	deflateEnd(&z);
	return out;
}

char *
brotli_bytes(const struct config *cf, const char *p, size_t len,
    size_t *outlen)
{
	size_t room = BrotliEncoderMaxCompressedSize(len);
	char *out;

	if (room == 0 || (out = malloc(room)) == NULL)
		return NULL;
	if (!BrotliEncoderCompress(cf->brotli_comp_level, BROTLI_DEFAULT_WINDOW,
	    BROTLI_MODE_TEXT, len, (const uint8_t *)p, &room,
	    (uint8_t *)out)) {
		free(out);
		return NULL;
	}
	*outlen = room;
	return out;
}
