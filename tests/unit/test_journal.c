/*
 * test_journal.c - a queue's journal: records written, read back up to the
 * last whole one, a torn tail cut off, one writer at a time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static struct vd_journal *parse(const char *text)
{
	struct vd_journal *j = NULL;

	assert_int_equal(vd_journal_parse(&j, text, strlen(text)), 0);
	return j;
}

#define HEADER "visdev-queue-journal 1\tjobs=3\tdigest=00000000000000ab\tpid=42\n"

/* Starts and ends make each job's state; the last start names it. */
static void test_parse(void **state)
{
	struct vd_journal *j =
		parse(HEADER "start\t0\t1000\t77\tGPU-a,GPU-b\tpython x.py\n"
			     "start\t1\t1001\t78\t\ta\\tb\\\\c\\n\n"
			     "end\t0\t2000\t0\n"
			     "end\t1\t2500\t1\n"
			     "start\t1\t3000\t79\tGPU-c\tretry\n"
			     "start\t9\t3000\t79\tGPU-c\tbeyond the list: ignored\n");

	(void)state;
	assert_int_equal(j->njobs, 3);
	assert_true(j->digest == 0xab);
	assert_int_equal(j->pid, 42);
	assert_int_equal(j->jobs[0].state, VD_JOB_DONE);
	assert_int_equal(j->jobs[0].status, 0);
	assert_int_equal(j->jobs[0].start_ms, 1000);
	assert_int_equal(j->jobs[0].end_ms, 2000);
	assert_string_equal(j->jobs[0].devices, "GPU-a,GPU-b");
	assert_string_equal(j->jobs[0].command, "python x.py");
	assert_int_equal(j->jobs[1].state, VD_JOB_RUNNING);
	assert_int_equal(j->jobs[1].starts, 2);
	assert_int_equal(j->jobs[1].status, 1);
	assert_int_equal(j->jobs[1].pid, 79);
	assert_string_equal(j->jobs[1].command, "retry");
	assert_int_equal(j->jobs[2].state, VD_JOB_PENDING);
	assert_null(j->jobs[2].command);
	assert_false(j->torn);
	vd_journal_free(j);
	/* the escapes of a command */
	j = parse(HEADER "start\t2\t1\t1\t\ta\\tb\\\\c\\nd\n");
	assert_string_equal(j->jobs[2].command, "a\tb\\c\nd");
	assert_string_equal(j->jobs[2].devices, "");
	assert_null(j->jobs[2].node);
	vd_journal_free(j);
	/* a Slurm task's: the node it ran on, after the command; a later start without one */
	j = parse(HEADER "start\t0\t1\t1\t0,1\tpython x.py\tnode\\t7\n"
			 "start\t1\t1\t1\t2\tb\tn2\n"
			 "start\t1\t2\t1\t2\tb\n");
	assert_string_equal(j->jobs[0].command, "python x.py");
	assert_string_equal(j->jobs[0].node, "node\t7");
	assert_string_equal(j->jobs[0].devices, "0,1");
	assert_null(j->jobs[1].node);
	vd_journal_free(j);
}

/* A crash mid-write leaves a torn last line: read up to the last whole record. */
static void test_torn(void **state)
{
	const char *text = HEADER "start\t0\t1000\t77\tGPU-a\ttrue\nend\t0\t20";
	struct vd_journal *j = parse(text);

	(void)state;
	assert_true(j->torn);
	assert_int_equal(j->whole, strlen(text) - strlen("end\t0\t20"));
	assert_int_equal(j->jobs[0].state, VD_JOB_RUNNING);
	vd_journal_free(j);
}

/* A later header is a new job list: states kept for the jobs it still has. */
static void test_headers(void **state)
{
	struct vd_journal *j = parse(HEADER "start\t2\t1\t1\tGPU-a\tx\nend\t2\t2\t0\n"
					    "visdev-queue-journal 1\tjobs=2\tdigest=ff\tpid=43\n"
					    "start\t0\t3\t5\tGPU-a\ty\n");

	(void)state;
	assert_int_equal(j->njobs, 2);
	assert_int_equal(j->pid, 43);
	assert_true(j->digest == 0xff);
	assert_int_equal(j->jobs[0].state, VD_JOB_RUNNING);
	assert_int_equal(j->jobs[1].state, VD_JOB_PENDING);
	vd_journal_free(j);
}

/* What is not a journal, or not a record, is refused with its line. */
static void test_malformed(void **state)
{
	static const struct {
		const char *text, *message;
	} cases[] = {
		{ "", "an empty journal" },
		{ "visdev-queue-journal 1\tjobs=3", "not a visdev queue journal: no whole record" },
		{ "start\t0\t1\t1\tGPU-a\tx\n", "line 1: not a visdev queue journal" },
		{ "visdev-queue-journal 1\tjobs=x\tdigest=1\tpid=1\n",
		  "line 1: not a visdev queue journal" },
		/* more jobs than a queue holds: a damaged count, not a reason to allocate */
		{ "visdev-queue-journal 1\tjobs=1000001\tdigest=1\tpid=1\n",
		  "line 1: not a visdev queue journal" },
		{ HEADER "start\t0\t1\t1\tGPU-a\n", "line 2: not a journal record" },
		{ HEADER "end\t0\t1\t999\n", "line 2: not a journal record" },
		{ HEADER "end\t-1\t1\t0\n", "line 2: not a journal record" },
		{ HEADER "end\t0\t1\t0\textra\n", "line 2: not a journal record" },
		{ HEADER "\nend\t0\t1\t0\n", "line 2: not a journal record" },
		{ HEADER "stop\t0\t1\t0\n", "line 2: not a journal record" },
		{ HEADER "end\t1\t1\t0\n", "line 2: not a journal record" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct vd_journal *j = NULL;

		assert_int_equal(vd_journal_parse(&j, cases[i].text, strlen(cases[i].text)),
				 VD_EPARSE);
		assert_null(j);
		assert_string_equal(vd_error_last(), cases[i].message);
	}
	/* a NUL byte inside a whole line */
	{
		static const char text[] = HEADER "end\t0\t1\0\t0\n";
		struct vd_journal *j = NULL;

		assert_int_equal(vd_journal_parse(&j, text, sizeof(text) - 1), VD_EPARSE);
	}
	{
		static const char text[] =
			"visdev-queue-journal 1\tjobs=1000000\tdigest=1\tpid=1\n";
		struct vd_journal *j = NULL;

		assert_int_equal(vd_journal_parse(&j, text, sizeof(text) - 1), 0);
		assert_int_equal(j->njobs, VD_JOBS_MAX);
		vd_journal_free(j);
	}
}

/* Written, read back; reopened to append, a torn tail goes; one writer at a time. */
static void test_write(void **state)
{
	char dir[] = "/tmp/visdev-journal-XXXXXX", path[64];
	struct vd_journal_writer *w = NULL, *other = NULL;
	struct vd_journal *j = NULL;
	struct vd_jobs *jobs = NULL;
	int32_t pid;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/q.journal", dir);
	assert_int_equal(vd_jobs_parse(&jobs, "a\nb\nc\n", 6), 0);
	assert_int_equal(vd_journal_read(&j, path), VD_ENOTFOUND);
	assert_int_equal(vd_journal_open(&w, path, jobs, 0), 0);
	assert_int_equal(vd_journal_busy(path, &pid), 1);
	assert_int_equal(pid, getpid());
	assert_int_equal(vd_journal_open(&other, path, jobs, 1), VD_EBUSY);
	assert_null(other);
	assert_int_equal(vd_journal_start(w, 0, 100, "GPU-a", "a\twith tab"), 0);
	assert_int_equal(vd_journal_start(w, 1, 101, "", "b"), 0);
	assert_int_equal(vd_journal_end(w, 0, 0), 0);
	assert_int_equal(vd_journal_end(w, 1, 130), 0);
	assert_int_equal(vd_journal_sync(w), 0);
	vd_journal_close(w);
	assert_int_equal(vd_journal_busy(path, NULL), 0);
	assert_int_equal(vd_journal_read(&j, path), 0);
	assert_int_equal(j->njobs, 3);
	assert_true(j->digest == jobs->digest);
	assert_int_equal(j->jobs[0].state, VD_JOB_DONE);
	assert_string_equal(j->jobs[0].command, "a\twith tab");
	assert_int_equal(j->jobs[1].state, VD_JOB_FAILED);
	assert_int_equal(j->jobs[1].status, 130);
	assert_int_equal(j->jobs[2].state, VD_JOB_PENDING);
	vd_journal_free(j);
	/* a crash mid-record: the half line is cut off when the journal is appended to */
	fd = open(path, O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "start\t2\t5", 9), 9);
	close(fd);
	assert_int_equal(vd_journal_read(&j, path), 0);
	assert_true(j->torn);
	vd_journal_free(j);
	assert_int_equal(vd_journal_open(&w, path, jobs, 1), 0);
	assert_int_equal(vd_journal_start_on(w, 2, 102, "GPU-b", "c", "node\t1"), 0);
	vd_journal_close(w);
	assert_int_equal(vd_journal_read(&j, path), 0);
	assert_false(j->torn);
	assert_int_equal(j->jobs[0].state, VD_JOB_DONE);
	assert_int_equal(j->jobs[2].state, VD_JOB_RUNNING);
	/* the node written escaped, read back as it was */
	assert_string_equal(j->jobs[2].node, "node\t1");
	vd_journal_free(j);
	/* not appending: a new journal */
	assert_int_equal(vd_journal_open(&w, path, jobs, 0), 0);
	vd_journal_close(w);
	assert_int_equal(vd_journal_read(&j, path), 0);
	assert_int_equal(j->jobs[0].state, VD_JOB_PENDING);
	vd_journal_free(j);
	/* a symbolic link is not followed */
	{
		char link[80];

		snprintf(link, sizeof(link), "%s/link", dir);
		assert_int_equal(symlink(path, link), 0);
		assert_int_equal(vd_journal_open(&w, link, jobs, 1), VD_EPERM);
		assert_int_equal(vd_journal_read(&j, link), VD_EPERM);
		unlink(link);
	}
	unlink(path);
	rmdir(dir);
	vd_jobs_free(jobs);
}

/* A full disk mid-record: the half record is cut off, and the records after it stay whole. */
static void test_full_disk(void **state)
{
	char dir[] = "/tmp/visdev-journal-XXXXXX", path[64];
	struct vd_journal_writer *w = NULL;
	struct vd_journal *j = NULL;
	struct vd_jobs *jobs = NULL;
	struct rlimit old, small;
	struct stat st;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/q.journal", dir);
	assert_int_equal(vd_jobs_parse(&jobs, "a\nb\n", 4), 0);
	assert_int_equal(vd_journal_open(&w, path, jobs, 0), 0);
	assert_int_equal(vd_journal_start(w, 0, 100, "GPU-a", "a"), 0);
	assert_int_equal(stat(path, &st), 0);
	/* room for some 20 bytes more: the next record is cut short, as on a full disk */
	signal(SIGXFSZ, SIG_IGN);
	getrlimit(RLIMIT_FSIZE, &old);
	small = old;
	small.rlim_cur = (rlim_t)st.st_size + 20;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
	assert_int_equal(
		vd_journal_start(w, 1, 101, "GPU-b", "a command longer than the room left"),
		VD_EIO);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	assert_int_equal(vd_journal_end(w, 0, 0), 0);
	vd_journal_close(w);
	assert_int_equal(vd_journal_read(&j, path), 0);
	assert_false(j->torn);
	assert_int_equal(j->jobs[0].state, VD_JOB_DONE);
	assert_int_equal(j->jobs[1].state, VD_JOB_PENDING);
	vd_journal_free(j);
	unlink(path);
	rmdir(dir);
	vd_jobs_free(jobs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),	cmocka_unit_test(test_torn),
		cmocka_unit_test(test_headers), cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_write),	cmocka_unit_test(test_full_disk),
	};

	return cmocka_run_group_tests_name("journal", tests, NULL, NULL);
}
