/*
 * harness.h - the table-driven harness of test_select.c and test_visible.c.
 *
 * A table is a .jsonl file: one JSON object a line, '#' lines and blank
 * lines skipped; each line becomes one cmocka test, named "file:line ..."
 * so that a failure says where the case is. A case names a fixture
 * (tests/fixtures/NAME.json), loaded once and freed when the run ends. A
 * test's check adds every failure to a report, and the test fails once,
 * with the case and all that went wrong.
 *
 * An includer fills a struct table (its checks, its names, its variables)
 * and calls table_run() from main(). Functions that not every includer
 * needs are static inline.
 */
#ifndef VISDEV_TESTS_HARNESS_H
#define VISDEV_TESTS_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices.h"
#include "internal.h"

/* ---- fixtures, each loaded once ---------------------------------------- */

struct fixture {
	char name[64];
	struct vd_system *sys;
	char error[1024];
};

static struct fixture fixtures[16];
static size_t nfixtures;
static const char *fixtures_dir; /* the table's FIXTURES variable; NULL: tests/fixtures */

/* The named fixture (tests/fixtures/<name>.json), or NULL with *why set. */
static const struct vd_system *fixture_get(const char *name, const char **why)
{
	char path[512];
	struct fixture *f;
	int rc;

	for (size_t i = 0; i < nfixtures; i++) {
		f = &fixtures[i];
		if (strcmp(f->name, name) == 0)
			goto found;
	}
	if (nfixtures == ARRAY_SIZE(fixtures) || strlen(name) >= sizeof(f->name) ||
	    strchr(name, '/')) {
		*why = "bad fixture name (a plain name under tests/fixtures, without .json)";
		return NULL;
	}
	f = &fixtures[nfixtures++];
	str_copy(f->name, name, sizeof(f->name));
	snprintf(path, sizeof(path), "%s/%s.json", fixtures_dir ? fixtures_dir : "tests/fixtures",
		 name);
	rc = fixture_load(&f->sys, path);
	if (rc)
		snprintf(f->error, sizeof(f->error), "cannot load fixture '%s': %s: %s", path,
			 vd_error_name(rc), vd_error_last());
found:
	if (!f->sys) {
		*why = f->error[0] ? f->error : "fixture loaded as NULL";
		return NULL;
	}
	return f->sys;
}

/* The named fixture; a test that cannot have it fails. */
static inline const struct vd_system *need_fixture(const char *name)
{
	const char *why = NULL;
	const struct vd_system *sys = fixture_get(name, &why);

	if (!sys)
		fail_msg("%s", why);
	return sys;
}

static void fixtures_free(void)
{
	for (size_t i = 0; i < nfixtures; i++)
		vd_system_free(fixtures[i].sys);
	nfixtures = 0;
}

/* ---- messages ---------------------------------------------------------- */

struct report {
	char text[8192];
	size_t len;
	int nerrors;
};

/* Counts a failure and appends its line to r->text while there is room. */
static void __attribute__((format(printf, 2, 3))) report_add(struct report *r, const char *fmt, ...)
{
	va_list ap;

	r->nerrors++;
	if (r->len + 4 >= sizeof(r->text))
		return;
	r->text[r->len++] = '\n';
	r->text[r->len++] = ' ';
	r->text[r->len++] = ' ';
	va_start(ap, fmt);
	vsnprintf(r->text + r->len, sizeof(r->text) - r->len, fmt, ap);
	va_end(ap);
	r->len += strlen(r->text + r->len);
}

/* Writes s into buf as a C string literal body: blanks and oddities visible. */
static inline void quote(char *buf, size_t size, const char *s)
{
	size_t n = 0;

	if (!s) {
		snprintf(buf, size, "(unset)");
		return;
	}
	if (size < 8)
		return;
	buf[n++] = '"';
	for (; *s && n + 6 < size; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\t')
			n += (size_t)snprintf(buf + n, size - n, "\\t");
		else if (c == '\n')
			n += (size_t)snprintf(buf + n, size - n, "\\n");
		else if (c == '"' || c == '\\')
			n += (size_t)snprintf(buf + n, size - n, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f || c == '#') /* '#' would start a TAP directive */
			n += (size_t)snprintf(buf + n, size - n, "\\x%02x", c);
		else
			buf[n++] = (char)c;
	}
	buf[n++] = '"';
	buf[n] = '\0';
}

/* With a table's "warning_contains" (want, NULL when absent): some warning contains it, case
 * ignored. */
static inline void check_warning_contains(struct report *r, const json_t *want,
					  char *const *warnings, size_t n)
{
	size_t i;

	if (!want)
		return;
	for (i = 0; i < n; i++)
		if (warnings[i] && strcasestr(warnings[i], json_string_value(want)))
			break;
	if (i == n)
		report_add(r, "warnings: none contains '%s' (%zu warnings%s%s)",
			   json_string_value(want), n, n ? ": " : "", n ? warnings[0] : "");
}

/* ---- devices in the tables' notation ------------------------------------ */

/* Reads a number N, or a string "N" or "N/migK", into *out; -1 when malformed. */
static int read_device(struct vd_device_ref *out, const json_t *v)
{
	unsigned gpu;
	int mig, end = 0;

	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		out->gpu = (unsigned)json_integer_value(v);
		out->mig = -1;
		return 0;
	}
	if (!json_is_string(v))
		return -1;
	if (sscanf(json_string_value(v), "%u/mig%d%n", &gpu, &mig, &end) == 2 &&
	    json_string_value(v)[end] == '\0' && mig >= 0) {
		out->gpu = gpu;
		out->mig = mig;
		return 0;
	}
	end = 0;
	if (sscanf(json_string_value(v), "%u%n", &gpu, &end) == 1 &&
	    json_string_value(v)[end] == '\0') {
		out->gpu = gpu;
		out->mig = -1;
		return 0;
	}
	return -1;
}

/* ---- the table --------------------------------------------------------- */

struct table;

/* One line of a table. */
struct table_case {
	const struct table *table;
	const char *file; /* base name, for messages */
	int line;
	json_t *obj;	 /* NULL when the line did not parse */
	char error[256]; /* why it did not */
	char name[512];
};

/* What a test file says of its table. */
struct table {
	const char *group;	  /* cmocka's group name */
	const char *cases_env;	  /* the variable naming the table when argv[1] does not */
	const char *cases_path;	  /* the table when neither does */
	const char *fixtures_env; /* the variable naming the fixtures' folder */
	/* Writes the test's name after "file:line " for a line that parsed. */
	void (*describe)(char *buf, size_t size, const json_t *obj);
	/* Runs the case, adding each failure to r. */
	void (*check)(struct report *r, const struct table_case *c);
};

static void test_case(void **state)
{
	const struct table_case *c = *state;
	struct report r = { .len = 0 };
	char *line = NULL;

	if (!c->obj) {
		fail_msg("%s:%d: %s", c->file, c->line, c->error);
		return;
	}
	c->table->check(&r, c);
	if (r.nerrors) {
		line = json_dumps(c->obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
		fail_msg("%s:%d: %s%s", c->file, c->line, line ? line : "", r.text);
	}
	free(line);
}

/* Reads the table: one case per line that is not blank or a comment. */
static struct table_case *cases_load(const struct table *t, const char *path, size_t *nout)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	struct table_case *cases = NULL;
	size_t n = 0, cap = 0, linecap = 0;
	char *linebuf = NULL;
	FILE *fp = fopen(path, "r");
	int lineno = 0;

	if (!fp) {
		cases = calloc(1, sizeof(*cases));
		assert_non_null(cases);
		cases->table = t;
		cases->file = base;
		snprintf(cases->error, sizeof(cases->error),
			 "cannot open '%s' (run from the repository root, or give the path)", path);
		snprintf(cases->name, sizeof(cases->name), "%s: cannot open", base);
		*nout = 1;
		return cases;
	}
	while (getline(&linebuf, &linecap, fp) >= 0) {
		const char *p = linebuf;
		struct table_case *c;
		json_error_t err;
		size_t len;

		lineno++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '#' || *p == '\n' || *p == '\0')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			cases = realloc(cases, cap * sizeof(*cases));
			assert_non_null(cases);
		}
		c = &cases[n++];
		memset(c, 0, sizeof(*c));
		c->table = t;
		c->file = base;
		c->line = lineno;
		c->obj = json_loads(p, JSON_REJECT_DUPLICATES, &err);
		if (!c->obj || !json_is_object(c->obj)) {
			snprintf(c->error, sizeof(c->error), "not a JSON object: %s (column %d)",
				 c->obj ? "other JSON" : err.text, err.column);
			json_decref(c->obj);
			c->obj = NULL;
			snprintf(c->name, sizeof(c->name), "%s:%d (malformed)", base, lineno);
			continue;
		}
		len = (size_t)snprintf(c->name, sizeof(c->name), "%s:%d ", base, lineno);
		if (len < sizeof(c->name))
			t->describe(c->name + len, sizeof(c->name) - len, c->obj);
		/* '#' would start a TAP directive */
		for (char *q = c->name; *q; q++)
			if (*q == '#')
				*q = '_';
	}
	free(linebuf);
	fclose(fp);
	*nout = n;
	return cases;
}

/*
 * Runs the fixed tests, then one test per case of the table (argv[1], else
 * the table's variable, else its file), as one group: cmocka's TAP output
 * has one plan per group, and prove wants one. Returns main()'s status.
 */
static int table_run(const struct table *t, const struct CMUnitTest *fixed, size_t nfixed, int argc,
		     char **argv)
{
	const char *path = argc > 1 ? argv[1] : getenv(t->cases_env);
	struct CMUnitTest *tests;
	struct table_case *cases;
	size_t ncases, n = 0;
	int rc;

	fixtures_dir = getenv(t->fixtures_env);
	if (!path || !*path)
		path = t->cases_path;
	cases = cases_load(t, path, &ncases);
	tests = calloc(nfixed + ncases, sizeof(*tests));
	if (!tests)
		return 1;
	for (size_t i = 0; i < nfixed; i++)
		tests[n++] = fixed[i];
	for (size_t i = 0; i < ncases; i++)
		tests[n++] = (struct CMUnitTest){
			.name = cases[i].name,
			.test_func = test_case,
			.initial_state = &cases[i],
		};
	rc = _cmocka_run_group_tests(t->group, tests, n, NULL, NULL);
	for (size_t i = 0; i < ncases; i++)
		json_decref(cases[i].obj);
	free(cases);
	free(tests);
	fixtures_free();
	return rc;
}

#endif
