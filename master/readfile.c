/* Reading a whole file (see readfile.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "master/readfile.h"

char *
readfile(const char *path, size_t *lenp)
{
	FILE *fp;
	char *buf = NULL, *nbuf;
	size_t len = 0, size = 0, n;
	int saved;

	if ((fp = fopen(path, "rb")) == NULL)
		return NULL;
	for (;;) {
		if (len == size) {
			size = size ? size * 2 : 8192;
			if ((nbuf = realloc(buf, size)) == NULL)
				goto fail;
			buf = nbuf;
		}
		if ((n = fread(buf + len, 1, size - len, fp)) == 0)
			break;
		len += n;
	}
	if (ferror(fp))
		goto fail;
	fclose(fp);
	*lenp = len;
	return buf;
fail:
	saved = errno;
	free(buf);
	fclose(fp);
	errno = saved;
	return NULL;
}
