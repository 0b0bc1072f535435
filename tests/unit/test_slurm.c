/*
 * test_slurm.c - the queue on Slurm, its pure parts: jobs into index lists
 * and arrays within MaxArraySize, what scontrol and squeue print, and the
 * state folder's queue.json written and read back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static void test_indices(void **state)
{
	static const size_t some[] = { 3, 7, 19, 20, 21, 40 }, run[] = { 0, 1, 2, 3 };
	char *s = NULL;

	(void)state;
	assert_int_equal(vd_slurm_indices(&s, some, 6, 0), 0);
	assert_string_equal(s, "3,7,19-21,40");
	free(s);
	assert_int_equal(vd_slurm_indices(&s, run, 4, 0), 0);
	assert_string_equal(s, "0-3");
	free(s);
	assert_int_equal(vd_slurm_indices(&s, some + 2, 3, 19), 0);
	assert_string_equal(s, "0-2");
	free(s);
	assert_int_equal(vd_slurm_indices(&s, NULL, 0, 0), 0);
	assert_string_equal(s, "");
	free(s);
}

/* Indices stay below MaxArraySize: windows of it, each counted from its start. */
static void test_split(void **state)
{
	size_t jobs[2500];
	struct vd_slurm_array *a = NULL;
	size_t n = 0;

	(void)state;
	for (size_t i = 0; i < 2500; i++)
		jobs[i] = i;
	assert_int_equal(vd_slurm_split(&a, &n, jobs, 2500, 1001), 0);
	assert_int_equal(n, 3);
	assert_int_equal(a[0].offset, 0);
	assert_int_equal(a[0].njobs, 1001);
	assert_string_equal(a[0].indices, "0-1000");
	assert_int_equal(a[1].offset, 1001);
	assert_string_equal(a[1].indices, "0-1000");
	assert_int_equal(a[2].offset, 2002);
	assert_int_equal(a[2].njobs, 498);
	assert_string_equal(a[2].indices, "0-497");
	assert_null(a[2].id);
	vd_slurm_arrays_free(a, n);
	/* a resume: a few jobs, far apart */
	jobs[0] = 5;
	jobs[1] = 1500;
	jobs[2] = 1502;
	assert_int_equal(vd_slurm_split(&a, &n, jobs, 3, 1001), 0);
	assert_int_equal(n, 2);
	assert_string_equal(a[0].indices, "5");
	assert_int_equal(a[1].offset, 1001);
	assert_string_equal(a[1].indices, "499,501");
	vd_slurm_arrays_free(a, n);
	assert_int_equal(vd_slurm_split(&a, &n, jobs, 3, 0), VD_EINVAL);
}

static void test_slurm_text(void **state)
{
	struct vd_slurm_task *t = NULL;
	size_t max = 0, n = 0;

	(void)state;
	assert_int_equal(vd_slurm_max_array(&max, "Configuration data as of ...\n"
						  "MaxArraySize            = 1001\n"
						  "MaxJobCount             = 10000\n"),
			 0);
	assert_int_equal(max, 1001);
	/* a key that only ends in the name is not it */
	assert_int_equal(vd_slurm_max_array(&max, "NotMaxArraySize = 5\n"), VD_EPARSE);
	assert_int_equal(vd_slurm_max_array(&max, "MaxArraySize = lots\n"), VD_EPARSE);
	assert_int_equal(vd_slurm_tasks_parse(&t, &n, "123_4 R\n123_5 PD\njunk\n99 R\n124_0 CG"),
			 0);
	assert_int_equal(n, 3);
	assert_string_equal(t[0].array, "123");
	assert_int_equal(t[0].task, 4);
	assert_string_equal(t[0].state, "R");
	assert_string_equal(t[1].state, "PD");
	assert_string_equal(t[2].array, "124");
	assert_string_equal(t[2].state, "CG");
	free(t);
}

/* queue.json written, read back the same; what visdev did not write is refused. */
static void test_queue_file(void **state)
{
	char dir[] = "/tmp/test_slurm.XXXXXX", path[64];
	char *cmds[] = { "python a.py", "python \"b\".py" }, *args[] = { "--qos=low" };
	struct vd_slurm_array arr = { .id = "77", .offset = 0, .njobs = 2, .indices = "0-1" };
	struct vd_slurm_queue q = { .name = "jobs.txt",
				    .job_name = "visdev-1-jobs.txt",
				    .source = "/home/a/jobs.txt",
				    .digest = 0xabcdef,
				    .commands = cmds,
				    .njobs = 2,
				    .gpus = 2,
				    .sbatch_args = args,
				    .nargs = 1,
				    .arrays = &arr,
				    .narrays = 1 };
	struct vd_slurm_queue *r = NULL;

	(void)state;
	assert_non_null(mkdtemp(dir));
	q.dir = dir;
	assert_int_equal(vd_slurm_queue_write(&q), 0);
	assert_int_equal(vd_slurm_queue_read(&r, dir), 0);
	assert_string_equal(r->dir, dir);
	assert_string_equal(r->name, "jobs.txt");
	assert_string_equal(r->job_name, "visdev-1-jobs.txt");
	assert_string_equal(r->source, "/home/a/jobs.txt");
	assert_true(r->digest == 0xabcdef);
	assert_int_equal(r->njobs, 2);
	assert_string_equal(r->commands[1], "python \"b\".py");
	assert_int_equal(r->gpus, 2);
	assert_int_equal(r->nargs, 1);
	assert_string_equal(r->sbatch_args[0], "--qos=low");
	assert_int_equal(r->narrays, 1);
	assert_string_equal(r->arrays[0].id, "77");
	assert_false(r->cancelled);
	assert_string_equal(r->arrays[0].indices, "0-1");
	vd_slurm_queue_free(r);
	snprintf(path, sizeof(path), "%s/queue.json", dir);
	unlink(path);
	assert_int_equal(vd_slurm_queue_read(&r, dir), VD_ENOTFOUND);
	rmdir(dir);
	{
		static const char *const bad[] = {
			"",
			"[]",
			"{\"visdev_slurm_queue\": 2}",
			"{\"visdev_slurm_queue\": 1, \"name\": \"x\", \"slurm_name\": \"y\", \"digest\": "
			"\"1\", \"jobs\": [1], \"sbatch\": [], \"arrays\": []}",
			"{\"visdev_slurm_queue\": 1, \"name\": \"x\", \"slurm_name\": \"y\", \"digest\": "
			"\"1\", \"jobs\": [\"a\"], \"sbatch\": [], \"arrays\": [{\"indices\": \"0\", "
			"\"offset\": -1, \"jobs\": 1}]}",
			"{\"visdev_slurm_queue\": 1, \"name\": \"x\", \"slurm_name\": \"y\", \"digest\": "
			"\"1\", \"jobs\": [\"a\"], \"sbatch\": [], \"arrays\": [{\"indices\": \"0\", "
			"\"offset\": 0, \"jobs\": 5}]}",
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			r = NULL;
			assert_int_equal(vd_slurm_queue_parse(&r, bad[i], strlen(bad[i])),
					 VD_EPARSE);
			assert_null(r);
		}
	}
}

/* How many times a job was submitted: the recorded arrays whose list holds it. */
static void test_submissions(void **state)
{
	struct vd_slurm_array arrays[] = {
		{ .id = "1", .offset = 0, .indices = "0-9" },
		{ .id = "2", .offset = 0, .indices = "3,7,8-9" },
		{ .id = NULL, .offset = 0, .indices = "3" }, /* refused by sbatch: no submission */
		{ .id = "4", .offset = 1001, .indices = "0,5" },
	};
	struct vd_slurm_queue q = { .arrays = arrays, .narrays = 4 };

	(void)state;
	assert_int_equal(vd_slurm_submissions(&q, 0), 1);
	assert_int_equal(vd_slurm_submissions(&q, 3), 2);
	assert_int_equal(vd_slurm_submissions(&q, 9), 2);
	assert_int_equal(vd_slurm_submissions(&q, 10), 0);
	assert_int_equal(vd_slurm_submissions(&q, 1001), 1);
	assert_int_equal(vd_slurm_submissions(&q, 1006), 1);
	assert_int_equal(vd_slurm_submissions(&q, 1002), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_indices),	    cmocka_unit_test(test_split),
		cmocka_unit_test(test_slurm_text),  cmocka_unit_test(test_queue_file),
		cmocka_unit_test(test_submissions),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
