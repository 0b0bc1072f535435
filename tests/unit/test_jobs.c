/*
 * test_jobs.c - a queue's jobs: the lines of a job file, a template over a grid.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "internal.h"

static struct vd_jobs *parse(const char *text)
{
	struct vd_jobs *j = NULL;

	assert_int_equal(vd_jobs_parse(&j, text, strlen(text)), 0);
	return j;
}

/* Blank lines and comments are skipped, "\r\n" ends a line, each job knows its line. */
static void test_file(void **state)
{
	struct vd_jobs *j = parse("# a sweep\n"
				  "python train.py --lr 1\n"
				  "\n"
				  "   \t\n"
				  "  # indented comment\n"
				  "python train.py --lr 2 # kept: the shell's comment\r\n"
				  "  echo 'x'  \n"
				  "last without newline");

	(void)state;
	assert_int_equal(j->n, 4);
	assert_string_equal(j->commands[0], "python train.py --lr 1");
	assert_string_equal(j->commands[1], "python train.py --lr 2 # kept: the shell's comment");
	assert_string_equal(j->commands[2], "  echo 'x'  ");
	assert_string_equal(j->commands[3], "last without newline");
	assert_int_equal(j->lines[0], 2);
	assert_int_equal(j->lines[1], 6);
	assert_int_equal(j->lines[3], 8);
	vd_jobs_free(j);
	j = parse("");
	assert_int_equal(j->n, 0);
	vd_jobs_free(j);
	assert_int_equal(vd_jobs_parse(&j, "a\nb\0c\n", 6), VD_EPARSE);
	assert_null(j);
	assert_string_equal(vd_error_last(), "line 2: a NUL byte: this is not a text file");
}

/* A job file holds at most VD_JOBS_MAX jobs; comments do not count. */
static void test_file_too_many(void **state)
{
	size_t len = 2 * (VD_JOBS_MAX + 1) + 4;
	char *text = malloc(len);
	struct vd_jobs *j = NULL;

	(void)state;
	assert_non_null(text);
	memcpy(text, "#\n#\n", 4);
	for (size_t i = 4; i < len; i += 2)
		memcpy(text + i, "a\n", 2);
	assert_int_equal(vd_jobs_parse(&j, text, len), VD_EINVAL);
	assert_null(j);
	assert_string_equal(vd_error_last(), "more than 1000000 jobs: split the job file");
	assert_int_equal(vd_jobs_parse(&j, text, len - 2), 0);
	assert_int_equal(j->n, VD_JOBS_MAX);
	vd_jobs_free(j);
	free(text);
}

/* The digest changes with any job, its order, or where one ends. */
static void test_digest(void **state)
{
	const char *texts[] = { "a\nb\n", "b\na\n", "a b\n", "ab\n", "a\nb\nc\n", "a\nc\n" };
	uint64_t d[6];

	(void)state;
	for (size_t i = 0; i < 6; i++) {
		struct vd_jobs *j = parse(texts[i]);

		d[i] = j->digest;
		vd_jobs_free(j);
		for (size_t k = 0; k < i; k++)
			assert_true(d[k] != d[i]);
	}
	/* comments and blank lines are no part of the list */
	{
		struct vd_jobs *j = parse("# x\na\n\nb");

		assert_true(j->digest == d[0]);
		vd_jobs_free(j);
	}
}

static struct vd_jobs *grid(const char *templ, const char *g1, const char *g2)
{
	const char *grids[] = { g1, g2 };
	struct vd_jobs *j = NULL;

	assert_int_equal(vd_jobs_grid(&j, templ, grids, g2 ? 2 : g1 ? 1 : 0), 0);
	return j;
}

/* The product, the first grid slowest; ${...} is the shell's; {{ and }} are braces. */
static void test_grid(void **state)
{
	struct vd_jobs *j = grid("train --lr {lr} --bs {bs} # {lr}", "lr=1e-3,1e-4", "bs=32,64");

	(void)state;
	assert_int_equal(j->n, 4);
	assert_null(j->lines);
	assert_string_equal(j->commands[0], "train --lr 1e-3 --bs 32 # 1e-3");
	assert_string_equal(j->commands[1], "train --lr 1e-3 --bs 64 # 1e-3");
	assert_string_equal(j->commands[2], "train --lr 1e-4 --bs 32 # 1e-4");
	assert_string_equal(j->commands[3], "train --lr 1e-4 --bs 64 # 1e-4");
	vd_jobs_free(j);
	j = grid("echo ${HOME} {{x}} {seed}${seed:-0}", "seed=1,2,3", NULL);
	assert_int_equal(j->n, 3);
	assert_string_equal(j->commands[2], "echo ${HOME} {x} 3${seed:-0}");
	vd_jobs_free(j);
	/* no grid: the template once */
	j = grid("true", NULL, NULL);
	assert_int_equal(j->n, 1);
	assert_string_equal(j->commands[0], "true");
	vd_jobs_free(j);
}

/* Each mistake is refused with what is wrong, before anything runs. */
static void test_grid_errors(void **state)
{
	static const struct {
		const char *templ, *g1, *g2, *message;
	} cases[] = {
		{ "run {lr} {bs}", "lr=1", NULL,
		  "the template uses {bs}, which no --grid gives: add --grid bs=VALUE,... (or write "
		  "{{ for a brace)" },
		{ "run {lr}", "lr=1", "bs=2", "--grid bs is not used: the template has no {bs}" },
		{ "run {lr}", "lr=1", "lr=2", "--grid lr is given twice" },
		{ "run {lr}", "lr=", NULL, "--grid lr= has no values: give them as lr=A,B" },
		{ "run {lr}", "lr=1,,2", NULL, "--grid lr: value 2 is empty" },
		{ "run {lr}", "lr", NULL, "--grid 'lr': write it as NAME=VALUE,VALUE,..." },
		{ "run {lr}", "=1", NULL, "--grid '=1': write it as NAME=VALUE,VALUE,..." },
		{ "run {l-r}", "l-r=1", NULL,
		  "--grid 'l-r=1': a name is letters, digits and '_' only" },
		{ "run {lr", "lr=1", NULL,
		  "the template has a '{' without its '}': write {{ for a brace itself" },
		{ "run lr}", "lr=1", NULL,
		  "the template has a '}' without its '{': write }} for a brace itself" },
		{ "run {}", NULL, NULL,
		  "the template uses {}, which no --grid gives: add --grid =VALUE,... (or write {{ "
		  "for a brace)" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const char *grids[] = { cases[i].g1, cases[i].g2 };
		struct vd_jobs *j = NULL;

		assert_int_equal(vd_jobs_grid(&j, cases[i].templ, grids,
					      cases[i].g2 ? 2 :
					      cases[i].g1 ? 1 :
							    0),
				 VD_EINVAL);
		assert_null(j);
		assert_string_equal(vd_error_last(), cases[i].message);
	}
}

/* Too many combinations are refused before any is made. */
static void test_grid_too_many(void **state)
{
	const char *grids[8];
	char g[8][64];
	struct vd_jobs *j = NULL;

	(void)state;
	for (int i = 0; i < 8; i++) {
		snprintf(g[i], sizeof(g[i]), "a%d=0,1,2,3,4,5,6,7,8,9", i);
		grids[i] = g[i];
	}
	assert_int_equal(vd_jobs_grid(&j, "{a0}{a1}{a2}{a3}{a4}{a5}{a6}{a7}", grids, 8), VD_EINVAL);
	assert_string_equal(vd_error_last(), "the grid makes more than 1000000 jobs");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file),	    cmocka_unit_test(test_file_too_many),
		cmocka_unit_test(test_digest),	    cmocka_unit_test(test_grid),
		cmocka_unit_test(test_grid_errors), cmocka_unit_test(test_grid_too_many),
	};

	return cmocka_run_group_tests_name("jobs", tests, NULL, NULL);
}
