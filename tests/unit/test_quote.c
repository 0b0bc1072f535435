/*
 * test_quote.c - others' text escaped for a terminal: known cases, and for
 * random bytes, output with no control that reads back as its source.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quote.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static void test_cases(void **state)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "python train.py --lr 3e-4", "python train.py --lr 3e-4" },
		{ "\033]0;owned\a", "\\e]0;owned\\a" }, /* retitles a terminal */
		{ "\033[2J\033[H", "\\e[2J\\e[H" },	/* clears it */
		{ "a\tb\nc\rd\be\vf\fg", "a\\tb\\nc\\rd\\be\\vf\\fg" },
		{ "back\\slash", "back\\\\slash" },
		{ "\x01\x1f\x7f", "\\x01\\x1f\\x7f" },
		{ "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80",
		  "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80" }, /* UTF-8 kept */
		{ "\xc2\x9b"
		  "2J",
		  "\\xc2\\x9b2J" }, /* C1 CSI in UTF-8 */
		{ "\x9b"
		  "2J",
		  "\\x9b2J" },			       /* 8-bit CSI */
		{ "\xc2\xa0", "\xc2\xa0" },	       /* U+00A0 is no control */
		{ "\xc0\xaf", "\\xc0\\xaf" },	       /* overlong */
		{ "\xed\xa0\x80", "\\xed\\xa0\\x80" }, /* a surrogate */
		{ "\xe2\x82", "\\xe2\\x82" },	       /* cut short */
		{ "", "" },
	};
	char out[256];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		assert_string_equal(cli_escape(out, sizeof(out), cases[i].in), cases[i].want);
}

/* A short buffer cuts before an escape or a character, never inside one. */
static void test_short_buffer(void **state)
{
	char out[8];

	(void)state;
	assert_string_equal(cli_escape(out, sizeof(out), "abcd\033[2J"), "abcd\\e[");
	assert_string_equal(cli_escape(out, 6, "abcd\033"), "abcd");
	assert_string_equal(cli_escape(out, 6, "abc\xc3\xa9z"), "abc\xc3\xa9");
	assert_string_equal(cli_escape(out, 5, "abc\xc3\xa9z"), "abc");
	assert_string_equal(cli_escape(out, 1, "abc"), "");
}

/* Reads escaped text back into bytes; the length, or -1 when it is not escaped text. */
static long unescape(char *dst, const char *s)
{
	static const char letters[] = "abtnvfre\\";
	static const char bytes[] = "\a\b\t\n\v\f\r\033\\";
	long n = 0;

	while (*s) {
		const char *p;

		if (*s != '\\') {
			dst[n++] = *s++;
			continue;
		}
		s++;
		if (*s == 'x') {
			unsigned v;

			if (sscanf(s + 1, "%2x", &v) != 1 || !s[1] || !s[2])
				return -1;
			dst[n++] = (char)v;
			s += 3;
		} else if (*s && (p = strchr(letters, *s))) {
			dst[n++] = bytes[p - letters];
			s++;
		} else {
			return -1;
		}
	}
	return n;
}

static void test_random_bytes(void **state)
{
	char in[64], out[CLI_ESCAPED_SIZE(sizeof(in))], back[sizeof(in)];

	(void)state;
	srand(12345);
	for (int round = 0; round < 20000; round++) {
		size_t len = (size_t)rand() % (sizeof(in) - 1);

		for (size_t i = 0; i < len; i++) {
			int r = rand();

			/* mostly bytes that matter: controls, high bytes, backslashes */
			in[i] = (char)(r % 3 ? (r >> 8) & 0xff :
					       "\\\033\x9b\xc2\x80"[(r >> 8) % 5]);
			if (!in[i])
				in[i] = '\n';
		}
		in[len] = '\0';
		cli_escape(out, sizeof(out), in);
		for (const unsigned char *p = (const unsigned char *)out; *p; p++)
			assert_true(*p >= 0x20 && *p != 0x7f);
		assert_int_equal(unescape(back, out), (long)len);
		assert_memory_equal(back, in, len);
	}
}

/* cli_fprintf keeps the format's own final newline, and escapes any other. */
static void test_fprintf(void **state)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);

	(void)state;
	assert_non_null(f);
	cli_fprintf(f, "held by %s (%s)\n", "mallory", "sh -c 'printf \"\\033[2J\"'\n");
	cli_fprintf(f, "%s", "no newline of its own\n");
	fclose(f);
	assert_string_equal(buf, "held by mallory (sh -c 'printf \"\\\\033[2J\"'\\n)\n"
				 "no newline of its own\\n");
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cases),
		cmocka_unit_test(test_short_buffer),
		cmocka_unit_test(test_random_bytes),
		cmocka_unit_test(test_fprintf),
	};

	return cmocka_run_group_tests_name("quote", tests, NULL, NULL);
}
