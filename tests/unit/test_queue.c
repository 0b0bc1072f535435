/*
 * test_queue.c - a queue's state: the order jobs start in, retries first,
 * a resume from the journal, a stop, and what a journal may not lose.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "internal.h"

static struct vd_jobs *jobs_of(const char *text)
{
	struct vd_jobs *j = NULL;

	assert_int_equal(vd_jobs_parse(&j, text, strlen(text)), 0);
	return j;
}

static struct vd_journal *journal_of(const char *text)
{
	struct vd_journal *j = NULL;

	assert_int_equal(vd_journal_parse(&j, text, strlen(text)), 0);
	return j;
}

/* Starts and ends job i, which must be next. */
static void run_one(struct vd_queue *q, size_t i, int status)
{
	assert_int_equal(vd_queue_next(q), (long)i);
	assert_int_equal(vd_queue_started(q, i, "GPU-a"), 0);
	assert_int_equal(vd_queue_ended(q, i, status, 1.5), 0);
}

/* Jobs start in order; a failure runs again first, up to the retries; then it stays failed. */
static void test_order_and_retries(void **state)
{
	struct vd_queue *q = NULL;
	struct vd_queue_counts c;

	(void)state;
	assert_int_equal(vd_queue_new(&q, 3, NULL, 1), 0);
	assert_int_equal(vd_queue_started(q, 1, ""), VD_EINVAL); /* not next */
	run_one(q, 0, 0);
	assert_int_equal(vd_queue_next(q), 1);
	assert_int_equal(vd_queue_started(q, 1, "GPU-b"), 0);
	/* job 2 starts while 1 runs */
	assert_int_equal(vd_queue_started(q, 2, "GPU-c"), 0);
	assert_int_equal(vd_queue_ended(q, 1, 3, 0.5), 0);
	assert_int_equal(vd_queue_job(q, 1)->state, VD_JOB_PENDING);
	assert_int_equal(vd_queue_next(q), 1); /* its retry, before anything else */
	run_one(q, 1, 4);
	assert_int_equal(vd_queue_job(q, 1)->state, VD_JOB_FAILED);
	assert_int_equal(vd_queue_job(q, 1)->status, 4);
	assert_int_equal(vd_queue_job(q, 1)->starts, 2);
	assert_string_equal(vd_queue_job(q, 1)->uuids, "GPU-a");
	assert_int_equal(vd_queue_ended(q, 2, 0, 2.0), 0);
	assert_int_equal(vd_queue_ended(q, 2, 0, 2.0), VD_EINVAL); /* not running now */
	assert_int_equal(vd_queue_next(q), -1);
	vd_queue_counts(q, &c);
	assert_int_equal(c.to_run, 3);
	assert_int_equal(c.done, 2);
	assert_int_equal(c.failed, 1);
	assert_int_equal(c.pending + c.running, 0);
	assert_null(vd_queue_job(q, 3));
	vd_queue_free(q);
}

/* Stopped: nothing starts, nothing runs again. */
static void test_stop(void **state)
{
	struct vd_queue *q = NULL;

	(void)state;
	assert_int_equal(vd_queue_new(&q, 2, NULL, 5), 0);
	assert_int_equal(vd_queue_started(q, 0, "GPU-a"), 0);
	vd_queue_stop(q);
	assert_int_equal(vd_queue_next(q), -1);
	assert_int_equal(vd_queue_ended(q, 0, 143, 0.1), 0);
	assert_int_equal(vd_queue_job(q, 0)->state, VD_JOB_FAILED);
	assert_int_equal(vd_queue_job(q, 1)->state, VD_JOB_PENDING);
	vd_queue_free(q);
}

#define HEADER "visdev-queue-journal 1\tjobs=4\tdigest=%016llx\tpid=42\n"

/* A resume runs what is not done: failed, cut off and never started; retries count anew. */
static void test_resume(void **state)
{
	struct vd_jobs *jobs = jobs_of("a\nb\nc\nd\n");
	char text[512];
	struct vd_journal *j;
	struct vd_queue *q = NULL;

	(void)state;
	snprintf(text, sizeof(text),
		 HEADER "start\t0\t1000\t5\tGPU-a\ta\nend\t0\t3000\t0\n"
			"start\t1\t1000\t6\tGPU-b\tb\nend\t1\t1500\t2\n"
			"start\t2\t1000\t7\tGPU-c\tc\n",
		 (unsigned long long)jobs->digest);
	j = journal_of(text);
	assert_int_equal(vd_queue_check(jobs, j, 1, 0), 0);
	assert_int_equal(vd_queue_new(&q, jobs->n, j, 1), 0);
	assert_int_equal(vd_queue_job(q, 0)->state, VD_JOB_DONE);
	assert_true(vd_queue_job(q, 0)->seconds == 2.0);
	assert_int_equal(vd_queue_job(q, 1)->status, 2);
	run_one(q, 1, 1); /* fails: its one retry is this run's */
	assert_int_equal(vd_queue_job(q, 1)->state, VD_JOB_PENDING);
	run_one(q, 1, 0);
	run_one(q, 2, 0);
	run_one(q, 3, 0);
	assert_int_equal(vd_queue_next(q), -1);
	assert_int_equal(vd_queue_job(q, 1)->starts, 3);
	vd_queue_free(q);
	/* without --resume, the same jobs cut short are not thrown away unasked */
	assert_int_equal(vd_queue_check(jobs, j, 0, 0), VD_EINVAL);
	assert_string_equal(vd_error_last(),
			    "the journal shows a run of these jobs cut short, 2 of 4 not finished");
	assert_int_equal(vd_queue_check(jobs, j, 0, 1), 0);
	assert_int_equal(vd_queue_check(jobs, NULL, 0, 0), 0);
	assert_int_equal(vd_queue_check(jobs, NULL, 1, 0), VD_EINVAL);
	vd_journal_free(j);
	vd_jobs_free(jobs);
}

/* A changed job list: what changed, job by job. */
static void test_changed(void **state)
{
	struct vd_jobs *was = jobs_of("a\nb\nc\nd\n"), *now;
	struct vd_journal *j;
	char text[512];

	(void)state;
	snprintf(text, sizeof(text), HEADER "start\t1\t1\t6\tGPU-b\tb\nend\t1\t2\t2\n",
		 (unsigned long long)was->digest);
	j = journal_of(text);
	now = jobs_of("a\n\n# x\nB\nc\nd\n");
	assert_int_equal(vd_queue_check(now, j, 1, 0), VD_EINVAL);
	assert_string_equal(vd_error_last(), "the jobs changed since the journal was written: job "
					     "1 (line 4) was 'b' and is now 'B'");
	assert_int_equal(vd_queue_check(now, j, 1, 1), 0); /* forced */
	assert_int_equal(vd_queue_check(now, j, 0, 0), 0); /* other jobs: a new run */
	vd_jobs_free(now);
	now = jobs_of("a\n");
	assert_int_equal(vd_queue_check(now, j, 1, 0), VD_EINVAL);
	assert_string_equal(vd_error_last(), "the jobs changed since the journal was written: job "
					     "1 ('b') is gone: 1 jobs now, 4 then");
	vd_jobs_free(now);
	now = jobs_of("a\nb\nc\nd\ne\n");
	assert_int_equal(vd_queue_check(now, j, 1, 0), VD_EINVAL);
	assert_string_equal(vd_error_last(),
			    "the jobs changed since the journal was written: 5 "
			    "jobs now, 4 then, and every job that ran is unchanged");
	vd_jobs_free(now);
	vd_journal_free(j);
	vd_jobs_free(was);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_retries),
		cmocka_unit_test(test_stop),
		cmocka_unit_test(test_resume),
		cmocka_unit_test(test_changed),
	};

	return cmocka_run_group_tests_name("queue", tests, NULL, NULL);
}
