/*
 * util.c - small string helpers shared by the modules.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void str_copy(char *dst, const char *src, size_t n)
{
	size_t len = strlen(src);

	if (len >= n)
		len = n - 1;
	memcpy(dst, src, len);
	dst[len] = '\0';
}

int strings_push(char ***list, size_t *n, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	char **grown;
	int len;

	va_start(ap, fmt);
	len = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (len < 0)
		return error_set(VD_ENOMEM, "out of memory");
	grown = realloc(*list, (*n + 2) * sizeof(*grown));
	if (!grown) {
		free(s);
		return error_set(VD_ENOMEM, "out of memory");
	}
	grown[(*n)++] = s;
	grown[*n] = NULL;
	*list = grown;
	return 0;
}

void vd_strings_free(char **strings, size_t n)
{
	if (!strings)
		return;
	for (size_t i = 0; i < n; i++)
		free(strings[i]);
	free(strings);
}
