/*
 * parse.c - the words and numbers users give: memory sizes, policy names,
 * and the defaults of a selection.
 *
 * Sizes. A size is a number and its unit:
 *
 *   M, MiB, MB    MiB
 *   G, GiB, GB    GiB (1024 MiB)
 *   T, TiB, TB    TiB (1024 * 1024 MiB)
 *
 * Units are read without regard to case ("8g", "8gib"). G means GiB, and
 * GB is read as GiB too: nvidia-smi counts memory in MiB, so a user who
 * writes "80GB" after reading "81559MiB" there means binary units. The
 * number is digits, optionally with a decimal point and at least one digit
 * after it ("1.5G" is 1536 MiB; ".5G" and "5.G" are refused); at most 9
 * decimals that are not trailing zeros. One blank may stand between the
 * number and its unit, as nvidia-smi writes "81559 MiB"; no other blank is
 * accepted anywhere. A size that is not a whole number of MiB is rounded up
 * ("0.1G" is 103 MiB): sizes ask for memory, and asking for a little more
 * is the safe side. Refused: a bare number ("40" could mean MiB or GiB:
 * the message gives the forms to write), the empty string, signs, "0x"
 * and other bases, exponents, "inf" and "nan", any other unit or trailing
 * text, and sizes above INT64_MAX MiB.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

#define MAX_DECIMALS 9
#define TEN_TO_NINE  1000000000ull
#define SIZE_MAX_MIB ((uint64_t)INT64_MAX)
#define QUOTE_MAX    48

/* The text as it can stand in a one-line message: cut, controls escaped. */
static void quote_text(char *buf, size_t size, const char *text)
{
	size_t n = 0, i;

	for (i = 0; text[i] && i < QUOTE_MAX && n + 5 < size; i++) {
		unsigned char c = (unsigned char)text[i];

		if (c < 0x20 || c == 0x7f)
			n += (size_t)snprintf(buf + n, size - n, "\\x%02x", c);
		else
			buf[n++] = (char)c;
	}
	if (text[i] && n + 4 < size) {
		memcpy(buf + n, "...", 3);
		n += 3;
	}
	buf[n] = '\0';
}

static int invalid_size(const char *text)
{
	char q[QUOTE_MAX * 4 + 8];

	quote_text(q, sizeof(q), text);
	return error_set(VD_EINVAL,
			 "invalid size '%s': use a number and a unit, such as 8G, 8GiB, 8192M", q);
}

static int too_large(const char *text)
{
	char q[QUOTE_MAX * 4 + 8];

	quote_text(q, sizeof(q), text);
	return error_set(VD_EINVAL, "invalid size '%s': too large (at most %llu MiB)", q,
			 (unsigned long long)SIZE_MAX_MIB);
}

/* A bare number: the forms it may have meant, as 40G, 40GiB or 40960M. */
static int no_unit(const char *text, uint64_t whole, size_t ndecimals)
{
	char q[QUOTE_MAX * 4 + 8], mib[32] = "";

	quote_text(q, sizeof(q), text);
	if (!ndecimals && whole && whole <= SIZE_MAX_MIB / 1024)
		snprintf(mib, sizeof(mib), ", %lluM", (unsigned long long)whole * 1024);
	return error_set(VD_EINVAL,
			 "invalid size '%s': a size needs its unit, such as %sG, %sGiB%s or %sM", q,
			 q, q, mib, q);
}

/* The MiB in one unit ("GiB" is 1024), or 0 for a word that is no unit. */
static uint64_t unit_mib(const char *unit)
{
	static const struct {
		const char *name;
		uint64_t mib;
	} units[] = {
		{ "m", 1 },	      { "mib", 1 },	      { "mb", 1 },
		{ "g", 1024 },	      { "gib", 1024 },	      { "gb", 1024 },
		{ "t", 1024 * 1024 }, { "tib", 1024 * 1024 }, { "tb", 1024 * 1024 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(units); i++)
		if (strcasecmp(unit, units[i].name) == 0)
			return units[i].mib;
	return 0;
}

int vd_parse_size_mib(uint64_t *out, const char *text)
{
	const char *p = text;
	uint64_t whole = 0, frac = 0, scale = 1, mult, mib, part;
	size_t ndecimals = 0, zeros = 0;
	int overflow = 0;

	*out = 0;
	if (!text || !isdigit((unsigned char)*p))
		return invalid_size(text ? text : "");
	for (; isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');

		if (whole > (UINT64_MAX - d) / 10)
			overflow = 1;
		else
			whole = whole * 10 + d;
	}
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return invalid_size(text);
		/* Trailing zeros are kept aside: they count only if a digit follows. */
		for (; isdigit((unsigned char)*p); p++) {
			if (*p == '0') {
				zeros++;
				continue;
			}
			ndecimals += zeros + 1;
			if (ndecimals > MAX_DECIMALS)
				return invalid_size(text);
			for (; zeros; zeros--) {
				frac *= 10;
				scale *= 10;
			}
			frac = frac * 10 + (uint64_t)(*p - '0');
			scale *= 10;
		}
	}
	if (!*p)
		return no_unit(text, whole, ndecimals + zeros);
	if (*p == ' ' && p[1] != '\0')
		p++;
	mult = unit_mib(p);
	if (!mult)
		return invalid_size(text);
	if (overflow || whole > SIZE_MAX_MIB / mult)
		return too_large(text);
	mib = whole * mult;
	/* frac < 10^9 and mult <= 2^20: the product fits easily */
	part = (frac * mult + scale - 1) / scale;
	if (mib > SIZE_MAX_MIB - part)
		return too_large(text);
	*out = mib + part;
	return 0;
}

const char *vd_policy_name(enum vd_policy policy)
{
	static const char *const names[] = { "most-free", "least-used", "pack" };

	if ((unsigned)policy >= ARRAY_SIZE(names))
		return NULL;
	return names[policy];
}

int vd_policy_parse(enum vd_policy *out, const char *name)
{
	char q[QUOTE_MAX * 4 + 8];

	*out = VD_POLICY_MOST_FREE;
	for (unsigned i = 0; name && vd_policy_name((enum vd_policy)i); i++) {
		if (strcmp(name, vd_policy_name((enum vd_policy)i)) == 0) {
			*out = (enum vd_policy)i;
			return 0;
		}
	}
	quote_text(q, sizeof(q), name ? name : "");
	return error_set(VD_EINVAL, "unknown policy '%s': use most-free, least-used or pack", q);
}

void vd_select_options_init(struct vd_select_options *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->n = 1;
	opts->min_free_mib = 0;
	opts->max_util = -1;
	opts->model = NULL;
	opts->exclude = NULL;
	opts->nexclude = 0;
	opts->policy = VD_POLICY_MOST_FREE;
	opts->mem_mib = 0;
}
