/*
 * test_topview.c - what `visdev top` shows, read as text: a look at a
 * machine in (fixtures, leases, the line and the audit made by hand), lines
 * out, at terminal sizes from 80x24 to 200x60, with 1 to 16 GPUs and MIG;
 * and what each key does.
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
#include "topview.h"

/* A machine of n GPUs, GPU i with i GiB in use of 80 and (i * 7) % 101 % utilisation. */
static struct vd_system *machine(unsigned n)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct vd_system *sys = NULL;

	fprintf(f, "{\"driver_version\": \"550.54.15\", \"gpus\": [");
	for (unsigned i = 0; i < n; i++)
		fprintf(f,
			"%s{\"uuid\": \"GPU-%u\", \"name\": \"NVIDIA H100 80GB HBM3\", "
			"\"pci_bus_id\": \"%u\", \"memory_total_mib\": 81920, \"memory_used_mib\": "
			"%u, \"utilization_gpu\": %u, \"temperature_c\": 40, \"power_w\": 300, "
			"\"processes\": [{\"pid\": %u, \"used_mib\": %u, \"name\": \"python\"}]}",
			i ? ", " : "", i, i, i * 1024, (i * 7) % 101, 1000 + i, i * 1024);
	fprintf(f, "]}");
	fclose(f);
	assert_int_equal(fixture_parse(&sys, text, len, "machine"), 0);
	free(text);
	return sys;
}

static struct vd_system *fixture(const char *name)
{
	char path[512];
	struct vd_system *sys = NULL;

	snprintf(path, sizeof(path), "tests/fixtures/%s", name);
	assert_int_equal(fixture_load(&sys, path), 0);
	return sys;
}

/* Every line within cols, no more lines than rows, spans inside their line. */
static void assert_fits(const struct top_screen *s, int rows, int cols)
{
	assert_true(s->n <= (size_t)rows);
	for (size_t i = 0; i < s->n; i++) {
		size_t len = strlen(s->lines[i].text);

		if ((int)len > cols)
			fail_msg("line %zu is %zu wide at %d: %s", i, len, cols, s->lines[i].text);
		for (unsigned k = 0; k < s->lines[i].nspans; k++)
			assert_true(s->lines[i].spans[k].start + s->lines[i].spans[k].len <= len);
	}
}

/* The line that starts with prefix, or -1. */
static long find(const struct top_screen *s, const char *prefix)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strncmp(s->lines[i].text, prefix, strlen(prefix)))
			return (long)i;
	return -1;
}

/* The line that holds needle anywhere, or -1. */
static long find_in(const struct top_screen *s, const char *needle)
{
	for (size_t i = 0; i < s->n; i++)
		if (strstr(s->lines[i].text, needle))
			return (long)i;
	return -1;
}

static void render(struct top_screen *s, const struct vd_system *sys, const struct top_state *st,
		   int rows, int cols)
{
	struct top_look look = { .sys = sys, .now = 1796618400, .taken = 1796618400, .idle = 30 };

	assert_int_equal(top_render(s, &look, st, rows, cols), 0);
	assert_fits(s, rows, cols);
}

/* At every size, with 1 to 16 GPUs: within the screen, title and header on top. */
static void test_sizes(void **state)
{
	static const int sizes[][2] = {
		{ 24, 80 }, { 30, 100 }, { 40, 120 }, { 50, 160 }, { 60, 200 }
	};
	static const unsigned counts[] = { 1, 2, 4, 8, 16 };
	struct top_state st;

	(void)state;
	top_state_init(&st, 1);
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		struct vd_system *sys = machine(counts[c]);

		for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
			struct top_screen s;
			char row[32];
			size_t shown = 0;

			render(&s, sys, &st, sizes[z][0], sizes[z][1]);
			assert_int_equal(find(&s, "visdev top  "), 0);
			assert_int_equal(find(&s, "GPU NAME"), 1);
			assert_non_null(strstr(s.lines[0].text, "GPU"));
			for (unsigned i = 0; i < counts[c]; i++) {
				snprintf(row, sizeof(row), "%3u NVIDIA H100", i);
				shown += find(&s, row) >= 0;
			}
			/* all, or as many as the screen holds: each GPU takes two lines */
			assert_true(shown == counts[c] ||
				    shown >= (size_t)(sizes[z][0] - 2) / 2 - 1);
			if (sizes[z][0] >= 2 * (int)counts[c] + 2)
				assert_int_equal(shown, counts[c]);
			top_screen_release(&s);
		}
		vd_system_free(sys);
	}
}

/* A row's figures: bars, memory, utilisation, temperature, power, state, in their columns. */
static void test_row(void **state)
{
	struct vd_system *sys = machine(4);
	struct top_state st;
	struct top_screen s;
	const char *row, *head;

	(void)state;
	top_state_init(&st, 1);
	render(&s, sys, &st, 30, 100);
	head = s.lines[1].text;
	row = s.lines[find(&s, "  3 NVIDIA H100")].text;
	assert_non_null(strstr(row, " 3.0/80.0G "));
	assert_non_null(strstr(row, "  21%  40C  300W busy"));
	/* each figure under its header */
	assert_int_equal(strstr(row, "busy") - row, strstr(head, "STATE") - head);
	assert_int_equal(strstr(row, "300W") - row + 4, strstr(head, "POWER") - head + 5);
	assert_int_equal(strstr(row, "40C") - row + 3, strstr(head, "TEMP") - head + 4);
	/* the process under it: pid, memory, command */
	assert_non_null(strstr(s.lines[find(&s, "  3 NVIDIA H100") + 1].text, "1003"));
	assert_non_null(strstr(s.lines[find(&s, "  3 NVIDIA H100") + 1].text, "3.0G"));
	top_screen_release(&s);
	vd_system_free(sys);
}

/* MIG devices under their GPU, named by profile, gi and ci; a lost GPU says so. */
static void test_mig_and_lost(void **state)
{
	struct vd_system *sys = fixture("mig.json");
	struct top_state st;
	struct top_screen s;

	(void)state;
	top_state_init(&st, 1);
	render(&s, sys, &st, 30, 100);
	assert_true(find(&s, "      MIG 3g.20gb gi 1 ci 0 [") >= 0);
	assert_non_null(strstr(s.lines[find(&s, "  0 NVIDIA A100")].text, " mig"));
	top_screen_release(&s);
	vd_system_free(sys);
	sys = fixture("lost.json");
	render(&s, sys, &st, 30, 80);
	assert_true(find_in(&s, "fell off the bus") >= 0);
	assert_non_null(strstr(s.lines[find_in(&s, "fell off the bus")].text, "lost"));
	top_screen_release(&s);
	vd_system_free(sys);
}

/* Sorting, hiding processes, and the selected GPU kept in sight when the screen is short. */
static void test_sort_hide_select(void **state)
{
	struct vd_system *sys = machine(16);
	struct top_state st;
	struct top_screen s;
	long a, b;

	(void)state;
	top_state_init(&st, 1);
	assert_int_equal(top_key(&st, 's', 16), 1);
	assert_int_equal(st.sort, TOP_SORT_MEMORY);
	render(&s, sys, &st, 60, 120);
	/* most memory first: GPU 15 above GPU 14 above GPU 0 */
	a = find(&s, " 15 NVIDIA");
	b = find(&s, " 14 NVIDIA");
	assert_true(a >= 0 && b > a && find(&s, "  0 NVIDIA") > b);
	top_screen_release(&s);
	top_key(&st, 's', 16);
	assert_int_equal(st.sort, TOP_SORT_UTILIZATION);
	render(&s, sys, &st, 60, 120);
	/* (i * 7) % 101: GPU 14 (98%) is the busiest */
	assert_int_equal(find(&s, " 14 NVIDIA"), 2);
	top_screen_release(&s);
	top_key(&st, 's', 16);
	assert_int_equal(st.sort, TOP_SORT_INDEX);
	top_key(&st, 'p', 16);
	render(&s, sys, &st, 60, 120);
	assert_int_equal(find_in(&s, " python"), -1);
	assert_int_equal(find(&s, "  0 NVIDIA"), 2);
	assert_int_equal(find(&s, " 15 NVIDIA"), 17);
	top_screen_release(&s);
	top_key(&st, 'p', 16);
	/* 16 GPUs and their processes on 24 lines: moving down scrolls, the header stays */
	for (int i = 0; i < 20; i++)
		top_key(&st, 'j', 16);
	assert_int_equal(st.selected, 15);
	render(&s, sys, &st, 24, 80);
	a = find(&s, " 15 NVIDIA");
	assert_true(a >= 2);
	assert_true(s.lines[a].selected);
	assert_int_equal(find(&s, "GPU NAME"), 1);
	assert_int_equal(find(&s, "  0 NVIDIA"), -1);
	top_screen_release(&s);
	top_key(&st, 'k', 16);
	assert_int_equal(st.selected, 14);
	top_key(&st, TOP_KEY_HOME, 16);
	render(&s, sys, &st, 24, 80);
	assert_true(s.lines[find(&s, "  0 NVIDIA")].selected);
	top_screen_release(&s);
	vd_system_free(sys);
}

/* Leases with the audit's word, the line, the findings, and an error under the title. */
static void test_leases_line_audit(void **state)
{
	struct vd_system *sys = machine(4);
	struct vd_lease_holder hs[2] = {
		{ .uuid = "GPU-1",
		  .mode = VD_LEASE_EXCLUSIVE,
		  .user = "alice",
		  .pid = 4242,
		  .since = 1796618400 - 3720,
		  .command = "python train.py" },
		{ .uuid = "GPU-2", .mode = VD_LEASE_HELD, .user = "bob", .pid = 5000 },
	};
	struct vd_leases leases = { hs, 2 };
	struct vd_lease_audit la[2] = { { .use = VD_USE_ACTIVE, .quiet_s = -1, .nsquatters = 1 },
					{ .use = VD_USE_UNKNOWN, .quiet_s = -1 } };
	struct vd_audit_finding f = { .kind = VD_AUDIT_SQUATTER,
				      .lease = 0,
				      .uuid = "GPU-1",
				      .pid = 1001,
				      .user = "carol",
				      .command = "python steal.py",
				      .mib = 1024 };
	struct vd_audit audit = { la, 2, &f, 1 };
	struct vd_waiting w = { .place = 1,
				.user = "bob",
				.pid = 5000,
				.since = 1796618400 - 30,
				.n = 2,
				.command = "python big.py",
				.nholds = 1 };
	struct vd_line line = { &w, 1, NULL, 0 };
	struct top_look look = { .sys = sys,
				 .leases = &leases,
				 .line = &line,
				 .audit = &audit,
				 .error = "the GPUs could not be read: Unknown Error",
				 .note = "leases unknown: no\nthe audit of the leases failed: no",
				 .now = 1796618400,
				 .taken = 1796618400 - 5,
				 .idle = 30 };
	struct top_state st;
	struct top_screen s;
	long l;

	(void)state;
	top_state_init(&st, 1);
	assert_int_equal(top_render(&s, &look, &st, 60, 120), 0);
	assert_fits(&s, 60, 120);
	assert_non_null(strstr(s.lines[0].text, "4 GPUs, 1 lease, 1 waiting"));
	assert_int_equal(find(&s, "the GPUs could not be read: Unknown Error; retrying (what is "
				  "shown is 5s old)"),
			 1);
	/* the note, a line for each thing it says */
	assert_int_equal(find(&s, "leases unknown: no"), 2);
	assert_int_equal(find(&s, "the audit of the leases failed: no"), 3);
	l = find(&s, "LEASES");
	assert_true(l > 0);
	assert_non_null(strstr(s.lines[l + 1].text, "GPU 1"));
	assert_non_null(strstr(s.lines[l + 1].text, "alice"));
	assert_non_null(strstr(s.lines[l + 1].text, "1h02m"));
	assert_non_null(strstr(s.lines[l + 1].text, "squatted"));
	assert_non_null(strstr(s.lines[l + 1].text, "python train.py"));
	/* a hold of the line is no lease */
	assert_int_equal(find_in(&s, "GPU 2 "), -1);
	l = find(&s, "LINE");
	assert_true(l > 0);
	assert_non_null(strstr(s.lines[l + 1].text, "bob"));
	assert_non_null(strstr(s.lines[l + 1].text, "2 GPUs"));
	assert_non_null(strstr(s.lines[l + 1].text, "python big.py"));
	l = find(&s, "AUDIT");
	assert_true(l > 0);
	assert_non_null(strstr(s.lines[l + 1].text,
			       "squatter on GPU 1, leased to alice: pid 1001 of "
			       "carol (1.0 GiB), python steal.py"));
	assert_int_equal(s.lines[l + 1].spans[0].style, TOP_ALERT);
	top_screen_release(&s);
	vd_system_free(sys);
}

/* A queue by its journal: counts, the time left at its pace, and its line on the screen. */
static void test_queue(void **state)
{
	static const char text[] = "visdev-queue-journal 1\tjobs=4\tdigest=ab\tpid=42\n"
				   "start\t0\t1000\t77\tGPU-0\ta\n"
				   "start\t1\t1000\t78\tGPU-1\tb\n"
				   "end\t0\t61000\t0\n"
				   "end\t1\t121000\t1\n"
				   "start\t2\t122000\t79\tGPU-1\tc\n";
	struct vd_journal *j = NULL;
	struct vd_system *sys = machine(2);
	struct top_queue q = { .journal = "/home/ana/sweep.txt.journal", .user = "ana" };
	struct top_look look = { .sys = sys, .now = 1796618400, .queues = &q, .nqueues = 1 };
	struct top_state st;
	struct top_screen s;
	long l;

	(void)state;
	assert_int_equal(vd_journal_parse(&j, text, strlen(text)), 0);
	top_queue_count(&q, j);
	vd_journal_free(j);
	assert_int_equal(q.jobs, 4);
	assert_int_equal(q.done, 1);
	assert_int_equal(q.failed, 1);
	assert_int_equal(q.running, 1);
	assert_int_equal(q.pending, 1);
	/* jobs of 60 s and 120 s: 90 s each, the two left one at a time */
	assert_int_equal(q.eta_s, 180);
	top_state_init(&st, 1);
	assert_int_equal(top_render(&s, &look, &st, 40, 100), 0);
	assert_fits(&s, 40, 100);
	l = find(&s, "QUEUES");
	assert_true(l > 0);
	assert_non_null(strstr(s.lines[l + 1].text, "ana"));
	assert_non_null(strstr(s.lines[l + 1].text, "] 2/4 "));
	assert_non_null(strstr(s.lines[l + 1].text, "3m      /home/ana/sweep.txt.journal"));
	top_screen_release(&s);
	/* a journal that could not be read: the queue, and why */
	snprintf(q.error, sizeof(q.error),
		 "cannot open '/home/ana/sweep.txt.journal': Permission denied");
	assert_int_equal(top_render(&s, &look, &st, 40, 100), 0);
	assert_non_null(strstr(s.lines[find(&s, "QUEUES") + 1].text, "Permission denied"));
	top_screen_release(&s);
	vd_system_free(sys);
}

/* What each key does, and what it does not. */
static void test_keys(void **state)
{
	struct top_state st;

	(void)state;
	top_state_init(&st, 1);
	assert_int_equal(top_key(&st, 'x', 4), 0);
	assert_int_equal(top_key(&st, 'k', 4), 1);
	assert_int_equal(st.selected, 0);
	top_key(&st, TOP_KEY_END, 4);
	assert_int_equal(st.selected, 3);
	top_key(&st, TOP_KEY_DOWN, 4);
	assert_int_equal(st.selected, 3);
	top_key(&st, TOP_KEY_UP, 4);
	assert_int_equal(st.selected, 2);
	for (int i = 0; i < 10; i++)
		top_key(&st, '+', 4);
	assert_true(st.interval == 60);
	for (int i = 0; i < 10; i++)
		top_key(&st, '-', 4);
	assert_true(st.interval == 0.5);
	top_key(&st, '?', 4);
	assert_true(st.help);
	{
		struct vd_system *sys = machine(1);
		struct top_screen s;

		render(&s, sys, &st, 24, 80);
		assert_int_equal(find(&s, "visdev top: keys"), 0);
		assert_true(find_in(&s, "q            quit") > 0);
		top_screen_release(&s);
		vd_system_free(sys);
	}
	assert_int_equal(top_key(&st, 27, 4), 1);
	assert_false(st.help);
	assert_int_equal(top_key(&st, 27, 4), 0);
	assert_false(st.quit);
	top_key(&st, 'q', 4);
	assert_true(st.quit);
}

/* Nothing seen yet, no GPU, a screen too small: still lines, never past the edge. */
static void test_edges(void **state)
{
	struct vd_system *none = machine(0), *sys = machine(3);
	struct top_look look = { .now = 1796618400 };
	struct top_state st;
	struct top_screen s;

	(void)state;
	top_state_init(&st, 1);
	assert_int_equal(top_render(&s, &look, &st, 24, 80), 0);
	assert_true(find(&s, "no look at the GPUs yet") >= 0);
	top_screen_release(&s);
	render(&s, none, &st, 24, 80);
	assert_true(find(&s, "no GPU found") >= 0);
	top_screen_release(&s);
	render(&s, sys, &st, 3, 20);
	assert_int_equal(s.n, 3);
	top_screen_release(&s);
	vd_system_free(none);
	vd_system_free(sys);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_row),
		cmocka_unit_test(test_mig_and_lost),
		cmocka_unit_test(test_sort_hide_select),
		cmocka_unit_test(test_leases_line_audit),
		cmocka_unit_test(test_keys),
		cmocka_unit_test(test_edges),
		cmocka_unit_test(test_queue),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
