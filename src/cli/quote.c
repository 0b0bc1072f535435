/*
 * quote.c - escaping others' text for terminals and text output.
 */
#include <stdlib.h>
#include <string.h>

#include "quote.h"

/*
 * The length of the valid UTF-8 character at s (2 to 4 bytes), or 0 when s
 * does not start one: a lone continuation byte, an overlong form, a
 * surrogate, past U+10FFFF, or cut short.
 */
static size_t utf8_length(const unsigned char *s, unsigned *cp)
{
	size_t len;
	unsigned c, min;

	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, c = s[0] & 0x1f, min = 0x80;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, c = s[0] & 0x0f, min = 0x800;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, c = s[0] & 0x07, min = 0x10000;
	else
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* The escape for the byte c alone, into e (5 bytes); its length, 0 to keep the byte. */
static size_t byte_escape(char e[5], unsigned char c)
{
	static const char named[] = "\a\b\t\n\v\f\r\033\\";
	static const char letter[] = "abtnvfre\\";
	const char *p = c ? strchr(named, c) : NULL;

	if (p) {
		e[0] = '\\';
		e[1] = letter[p - named];
		e[2] = '\0';
		return 2;
	}
	e[0] = '\\';
	e[1] = 'x';
	e[2] = "0123456789abcdef"[c >> 4];
	e[3] = "0123456789abcdef"[c & 15];
	e[4] = '\0';
	return 4;
}

/*
 * Calls put(piece, len, arg) for each piece of s escaped: a character kept
 * as it is, or one escape; stops early when put returns non-zero.
 */
static void escape_pieces(const char *s, int (*put)(const char *, size_t, void *), void *arg)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		unsigned cp = 0;
		size_t len = *p >= 0x80 ? utf8_length(p, &cp) : 0;
		char e[5];

		if (len && (cp < 0x80 || cp > 0x9f)) {
			if (put((const char *)p, len, arg))
				return;
			p += len;
			continue;
		}
		/* a C1 control in UTF-8 is escaped byte by byte, as is any invalid byte */
		for (size_t i = 0; i < (len ? len : 1); i++, p++) {
			if (*p >= 0x20 && *p < 0x7f && *p != '\\') {
				if (put((const char *)p, 1, arg))
					return;
			} else if (put(e, byte_escape(e, *p), arg)) {
				return;
			}
		}
	}
}

struct buffer {
	char *dst;
	size_t n, used;
};

static int put_buffer(const char *piece, size_t len, void *arg)
{
	struct buffer *b = arg;

	if (b->used + len >= b->n)
		return 1;
	memcpy(b->dst + b->used, piece, len);
	b->used += len;
	b->dst[b->used] = '\0';
	return 0;
}

const char *cli_escape(char *dst, size_t n, const char *src)
{
	struct buffer b = { dst, n, 0 };

	dst[0] = '\0';
	escape_pieces(src, put_buffer, &b);
	return dst;
}

static int put_file(const char *piece, size_t len, void *arg)
{
	return fwrite(piece, 1, len, arg) != len;
}

void cli_fputs_escaped(const char *s, FILE *f)
{
	escape_pieces(s, put_file, f);
}

void cli_vfprintf(FILE *f, const char *fmt, va_list ap)
{
	size_t flen = strlen(fmt);
	int newline = flen && fmt[flen - 1] == '\n';
	char *text;
	int n;

	n = vasprintf(&text, fmt, ap);
	if (n < 0) {
		fputs("(out of memory)\n", f);
		return;
	}
	if (newline)
		text[n - 1] = '\0';
	cli_fputs_escaped(text, f);
	if (newline)
		fputc('\n', f);
	free(text);
}

void cli_fprintf(FILE *f, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cli_vfprintf(f, fmt, ap);
	va_end(ap);
}
