/*
 * test_util.c - the small helpers: UTF-8 copies and edit distances.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "internal.h"

/* Valid sequences are kept, each invalid byte becomes '?', and nothing is cut mid-character. */
static void test_utf8_copy(void **state)
{
	static const struct {
		const char *in;
		size_t size;
		const char *want;
	} cases[] = {
		{ "plain", 16, "plain" },
		{ "caf\xc3\xa9", 16, "caf\xc3\xa9" }, /* é kept */
		{ "caf\xe9.txt", 16, "caf?.txt" },    /* Latin-1 é replaced */
		{ "\xff\xfe", 16, "??" },
		{ "\xc0\xaf", 16, "??" },			  /* overlong '/' */
		{ "\xed\xa0\x80", 16, "???" },			  /* a surrogate */
		{ "\xf4\x90\x80\x80", 16, "????" },		  /* past U+10FFFF */
		{ "\xf0\x9f\x98\x80!", 16, "\xf0\x9f\x98\x80!" }, /* 4 bytes kept */
		{ "ab\xc3\xa9", 4, "ab" },			  /* é would not fit whole */
		{ "ab\xc3\xa9", 5, "ab\xc3\xa9" },
		{ "abcdef", 4, "abc" },
		{ "\xe2\x82", 16, "??" }, /* cut short */
		{ "", 1, "" },
	};
	char out[16];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		size_t len = vd_utf8_copy(out, cases[i].in, cases[i].size);

		assert_string_equal(out, cases[i].want);
		assert_int_equal(len, strlen(cases[i].want));
	}
}

static void test_distance(void **state)
{
	(void)state;
	assert_int_equal(str_distance("CUDA_VISBLE_DEVICES", "CUDA_VISIBLE_DEVICES", 0), 1);
	assert_int_equal(str_distance("cuda_visible_devices", "CUDA_VISIBLE_DEVICES", 1), 0);
	assert_int_equal(str_distance("cuda_visible_devices", "CUDA_VISIBLE_DEVICES", 0), 18);
	assert_int_equal(str_distance("", "abc", 0), 3);
	assert_int_equal(str_distance("kitten", "sitting", 0), 3);
	{
		char longer[80];

		memset(longer, 'a', sizeof(longer) - 1);
		longer[sizeof(longer) - 1] = '\0';
		assert_int_equal(str_distance(longer, "a", 0), SIZE_MAX);
	}
}

static void test_nearest_word(void **state)
{
	static const char *const words[] = { "min-free", "max-util", "model", "mem", "json", "n" };
	static const struct {
		const char *typed;
		long want;
	} cases[] = {
		{ "n", 5 },	   /* --n: the short -n, written as it is */
		{ "jsno", 4 },	   /* two edits, half its length */
		{ "mni-free", 0 }, /* a swap */
		{ "min", 0 },	   /* begins one word only */
		{ "m", -1 },	   /* begins several: no guess */
		{ "z", -1 },	   /* one letter from "n", but no more alike than any */
		{ "frobnicate", -1 }, { "", -1 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(vd_nearest_word(cases[i].typed, words, 6), cases[i].want);
	assert_int_equal(vd_nearest_word("n", words, 0), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_utf8_copy),
		cmocka_unit_test(test_distance),
		cmocka_unit_test(test_nearest_word),
	};

	return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
