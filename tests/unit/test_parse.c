/*
 * test_parse.c - sizes (vd_parse_size_mib), policy names and the defaults
 * of a selection. One cmocka test per size, named after its line here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define BAD UINT64_MAX /* expected: VD_EINVAL */

struct size_case {
	int line;
	const char *text;
	uint64_t mib;
};

#define C(text, mib)  \
 {                    \
  __LINE__, text, mib \
 }

static const struct size_case sizes[] = {
	/* bare numbers are refused: MiB or GiB? */
	C("0", BAD),
	C("1", BAD),
	C("8192", BAD),
	C("40", BAD),
	C("1.5", BAD),
	C("0M", 0),
	C("007M", 7),
	/* M, MiB, MB */
	C("8192M", 8192),
	C("8192MiB", 8192),
	C("8192MB", 8192),
	C("8192m", 8192),
	C("8192mib", 8192),
	C("8192MIB", 8192),
	/* G, GiB, GB: all 1024 MiB */
	C("8G", 8192),
	C("8GiB", 8192),
	C("8GB", 8192),
	C("8g", 8192),
	C("8gb", 8192),
	C("80G", 81920),
	/* T, TiB, TB */
	C("1T", 1048576),
	C("1TiB", 1048576),
	C("1TB", 1048576),
	C("2t", 2097152),
	/* decimals, rounded up to whole MiB */
	C("1.5G", 1536),
	C("0.5G", 512),
	C("1.25GiB", 1280),
	C("0.1G", 103),
	C("1.5M", 2),
	C("1.0M", 1),
	C("2.50M", 3),
	C("0.000000001T", 1),
	C("1.500000000000000000000000G", 1536),
	C("0.5T", 524288),
	/* one blank between number and unit, as nvidia-smi writes */
	C("81559 MiB", 81559),
	C("8 G", 8192),
	/* the largest size, and one more */
	C("9223372036854775807M", 9223372036854775807ull),
	C("9223372036854775808M", BAD),
	C("8796093022207G", 9007199254739968ull),
	C("8796093022207T", 9223372036853727232ull),
	C("8796093022207.999999T", 9223372036854775807ull),
	C("8796093022207.9999999T", BAD),
	C("8796093022208T", BAD),
	C("99999999999999999999999", BAD),
	C("18446744073709551616", BAD),
	/* refused */
	C("", BAD),
	C(" 8G", BAD),
	C("8G ", BAD),
	C("8  G", BAD),
	C("8 ", BAD),
	C("8\tG", BAD),
	C("-1", BAD),
	C("+8G", BAD),
	C("-0", BAD),
	C("8X", BAD),
	C("8GiBs", BAD),
	C("8Gi", BAD),
	C("8K", BAD),
	C("8KiB", BAD),
	C("8B", BAD),
	C("G", BAD),
	C("GiB", BAD),
	C(".5G", BAD),
	C("5.G", BAD),
	C("5.", BAD),
	C("1.2.3", BAD),
	C("1,5G", BAD),
	C("0x10", BAD),
	C("0x10G", BAD),
	C("1e3", BAD),
	C("1e3M", BAD),
	C("inf", BAD),
	C("nan", BAD),
	C("NaN", BAD),
	C("infinity", BAD),
	C("8G8", BAD),
	C("8 8", BAD),
	C("1.0000000001G", BAD), /* more than 9 decimals that count */
	C("eight", BAD),
};

static void test_size(void **state)
{
	const struct size_case *c = *state;
	uint64_t got = 12345;
	int rc = vd_parse_size_mib(&got, c->text);

	if (c->mib == BAD) {
		if (rc != VD_EINVAL)
			fail_msg("'%s': expected EINVAL, got %s and %llu MiB", c->text,
				 vd_error_name(rc), (unsigned long long)got);
		if (got != 0)
			fail_msg("'%s': *out is %llu after a failure, not 0", c->text,
				 (unsigned long long)got);
		if (!strstr(vd_error_last(), "invalid size '") || strchr(vd_error_last(), '\n'))
			fail_msg("'%s': message: %s", c->text, vd_error_last());
		return;
	}
	if (rc != 0)
		fail_msg("'%s': expected %llu MiB, got %s (%s)", c->text,
			 (unsigned long long)c->mib, vd_error_name(rc), vd_error_last());
	if (got != c->mib)
		fail_msg("'%s': expected %llu MiB, got %llu", c->text, (unsigned long long)c->mib,
			 (unsigned long long)got);
}

/* The messages, exactly. */
static void test_size_messages(void **state)
{
	uint64_t got;

	(void)state;
	assert_int_equal(vd_parse_size_mib(&got, "8X"), VD_EINVAL);
	assert_string_equal(vd_error_last(),
			    "invalid size '8X': use a number and a unit, such as 8G, 8GiB, 8192M");
	assert_int_equal(vd_parse_size_mib(&got, ""), VD_EINVAL);
	assert_string_equal(vd_error_last(),
			    "invalid size '': use a number and a unit, such as 8G, 8GiB, 8192M");
	assert_int_equal(vd_parse_size_mib(&got, "40"), VD_EINVAL);
	assert_string_equal(
		vd_error_last(),
		"invalid size '40': a size needs its unit, such as 40G, 40GiB, 40960M or "
		"40M");
	assert_int_equal(vd_parse_size_mib(&got, "1.5"), VD_EINVAL);
	assert_string_equal(
		vd_error_last(),
		"invalid size '1.5': a size needs its unit, such as 1.5G, 1.5GiB or 1.5M");
	assert_int_equal(vd_parse_size_mib(&got, NULL), VD_EINVAL);
	assert_int_equal(vd_parse_size_mib(&got, "8\nG"), VD_EINVAL);
	assert_string_equal(vd_error_last(),
			    "invalid size '8\\x0aG': use a number and a unit, such as 8G, 8GiB, "
			    "8192M");
	assert_int_equal(vd_parse_size_mib(&got, "99999999999999999999T"), VD_EINVAL);
	assert_string_equal(vd_error_last(), "invalid size '99999999999999999999T': too large "
					     "(at most 9223372036854775807 MiB)");
	/* a long text is cut in the message */
	assert_int_equal(vd_parse_size_mib(&got, "1234567890123456789012345678901234567890"
						 "1234567890X"),
			 VD_EINVAL);
	assert_true(strlen(vd_error_last()) < 160);
	assert_non_null(strstr(vd_error_last(), "...'"));
}

static void test_policy(void **state)
{
	static const struct {
		const char *name;
		enum vd_policy policy;
	} names[] = {
		{ "most-free", VD_POLICY_MOST_FREE },
		{ "least-used", VD_POLICY_LEAST_USED },
		{ "pack", VD_POLICY_PACK },
	};
	static const char *const bad[] = { "",	    "Pack",  "most_free",      "mostfree",
					   "pack ", "least", "most-free-first" };
	enum vd_policy p;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		assert_string_equal(vd_policy_name(names[i].policy), names[i].name);
		p = VD_POLICY_PACK;
		assert_int_equal(vd_policy_parse(&p, names[i].name), 0);
		assert_int_equal(p, names[i].policy);
	}
	assert_null(vd_policy_name((enum vd_policy)3));
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		p = VD_POLICY_PACK;
		assert_int_equal(vd_policy_parse(&p, bad[i]), VD_EINVAL);
		assert_int_equal(p, VD_POLICY_MOST_FREE);
		assert_non_null(strstr(vd_error_last(), "use most-free, least-used or pack"));
	}
	assert_int_equal(vd_policy_parse(&p, "fastest"), VD_EINVAL);
	assert_string_equal(vd_error_last(),
			    "unknown policy 'fastest': use most-free, least-used or pack");
	assert_int_equal(vd_policy_parse(&p, NULL), VD_EINVAL);
}

static void test_options_init(void **state)
{
	struct vd_select_options opts;

	(void)state;
	memset(&opts, 0xa5, sizeof(opts));
	vd_select_options_init(&opts);
	assert_int_equal(opts.n, 1);
	assert_int_equal(opts.min_free_mib, 0);
	assert_int_equal(opts.max_util, -1);
	assert_null(opts.model);
	assert_null(opts.exclude);
	assert_int_equal(opts.nexclude, 0);
	assert_int_equal(opts.policy, VD_POLICY_MOST_FREE);
	assert_int_equal(opts.mem_mib, 0);
}

int main(void)
{
	static const struct CMUnitTest fixed[] = {
		cmocka_unit_test(test_size_messages),
		cmocka_unit_test(test_policy),
		cmocka_unit_test(test_options_init),
	};
	struct CMUnitTest *tests;
	char(*names)[96];
	size_t n = 0;
	int rc;

	tests = calloc(ARRAY_SIZE(fixed) + ARRAY_SIZE(sizes), sizeof(*tests));
	names = calloc(ARRAY_SIZE(sizes), sizeof(*names));
	if (!tests || !names)
		return 1;
	for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
		tests[n++] = fixed[i];
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		const struct size_case *c = &sizes[i];
		char *q;

		snprintf(names[i], sizeof(names[i]), "test_parse.c:%d size '%s'%s", c->line,
			 c->text, c->mib == BAD ? " refused" : "");
		for (q = names[i]; *q; q++)
			if (*q == '\n' || *q == '\t' || *q == '#')
				*q = '_';
		tests[n++] = (struct CMUnitTest){
			.name = names[i],
			.test_func = test_size,
			.initial_state = (void *)(uintptr_t)c,
		};
	}
	rc = _cmocka_run_group_tests("parse", tests, n, NULL, NULL);
	free(tests);
	free(names);
	return rc;
}
