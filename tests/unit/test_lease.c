/*
 * test_lease.c - leases with real files, real flock and real processes.
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
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

static char base[64], dir[256];
static struct vd_system *one, *four;

static int setup(void **state)
{
	(void)state;
	snprintf(base, sizeof(base), "/tmp/visdev-test-lease-XXXXXX");
	if (!mkdtemp(base))
		return -1;
	snprintf(dir, sizeof(dir), "%s/leases", base);
	if (fixture_load(&one, "tests/fixtures/one.json") ||
	    fixture_load(&four, "tests/fixtures/four.json"))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	char cmd[300];

	(void)state;
	vd_system_free(one);
	vd_system_free(four);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	return system(cmd) ? -1 : 0;
}

static struct vd_select_options exclusive(unsigned n)
{
	struct vd_select_options o;

	vd_select_options_init(&o);
	o.n = n;
	return o;
}

/* A second exclusive lease on the only GPU does not fit, and says who holds it. */
static void test_exclusive_excludes(void **state)
{
	struct vd_select_options o = exclusive(1);
	struct vd_lease *a = NULL, *b = NULL;
	struct vd_choice *ca = NULL, *cb = NULL;
	size_t n;

	(void)state;
	assert_int_equal(vd_lease_acquire(&a, &ca, dir, one, NULL, &o, "first job"), 0);
	assert_non_null(vd_lease_devices(a, &n));
	assert_int_equal(n, 1);
	assert_int_equal(vd_lease_acquire(&b, &cb, dir, one, NULL, &o, "second"), VD_ENOFIT);
	assert_null(b);
	assert_non_null(cb);
	assert_true(cb->nreasons >= 1);
	assert_non_null(strstr(cb->reasons[0], "first job"));
	vd_choice_free(cb);
	vd_lease_free(a);
	vd_choice_free(ca);
	/* released: the GPU fits again, and the record is gone */
	assert_int_equal(vd_lease_acquire(&b, &cb, dir, one, NULL, &o, "third"), 0);
	vd_lease_free(b);
	vd_choice_free(cb);
	{
		struct vd_leases *l;

		assert_int_equal(vd_leases_read(&l, dir, one), 0);
		assert_int_equal(l->n, 0);
		vd_leases_free(l);
	}
}

/* The record names the job, its mode and memory; set_job changes the pid seen. */
static void test_record(void **state)
{
	struct vd_select_options o = exclusive(2);
	struct vd_lease *a = NULL;
	struct vd_choice *c = NULL;
	struct vd_leases *l = NULL;

	(void)state;
	o.mem_mib = 4096;
	assert_int_equal(vd_lease_acquire(&a, &c, dir, four, NULL, &o, "python train.py"), 0);
	assert_int_equal(vd_lease_set_job(a, 4242, 4242), 0);
	assert_int_equal(vd_leases_read(&l, dir, four), 0);
	assert_int_equal(l->n, 2);
	for (size_t i = 0; i < l->n; i++) {
		assert_int_equal(l->holders[i].mode, VD_LEASE_SHARED);
		assert_int_equal(l->holders[i].mem_mib, 4096);
		assert_int_equal(l->holders[i].pid, 4242);
		assert_string_equal(l->holders[i].command, "python train.py");
		assert_int_equal(l->holders[i].uid, geteuid());
	}
	vd_leases_free(l);
	vd_lease_free(a);
	vd_choice_free(c);
}

/* What a sharing job has allocated (by NVML's process list) no longer counts as reserved. */
static void test_reservation_counts_until_used(void **state)
{
	struct vd_select_options o = exclusive(1);
	struct vd_lease *a = NULL;
	struct vd_choice *c = NULL;
	struct vd_leases *l = NULL;
	struct vd_process me = { .pid = (uint32_t)getpid(), .used_known = 1, .used_mib = 3000 };

	(void)state;
	o.mem_mib = 10240;
	assert_int_equal(vd_lease_acquire(&a, &c, dir, one, NULL, &o, "job"), 0);
	assert_int_equal(vd_lease_set_job(a, getpid(), getpgrp()), 0);
	assert_int_equal(vd_leases_read(&l, dir, one), 0);
	assert_int_equal(l->holders[0].mem_unused_mib, 10240);
	vd_leases_free(l);
	one->gpus[0].processes = &me;
	one->gpus[0].nprocesses = 1;
	assert_int_equal(vd_leases_read(&l, dir, one), 0);
	one->gpus[0].processes = NULL;
	one->gpus[0].nprocesses = 0;
	assert_int_equal(l->holders[0].mem_unused_mib, 10240 - 3000);
	vd_leases_free(l);
	vd_lease_free(a);
	vd_choice_free(c);
}

/*
 * A lease a child inherited outlives the parent's hold, ends with the child,
 * and a waiter first in line with no time-out wakes when it does (no
 * polling), then gets the GPU and leaves the line.
 */
static void test_inherited_lease_and_waiter(void **state)
{
	struct vd_select_options o = exclusive(1);
	struct vd_lease *a = NULL, *b = NULL;
	struct vd_waiter *w = NULL;
	struct vd_choice *c = NULL;
	int go[2], status;
	unsigned of;
	pid_t pid;

	(void)state;
	assert_int_equal(vd_waiter_new(&w, dir), 0);
	assert_int_equal(vd_lease_acquire(&a, &c, dir, one, NULL, &o, "sleeper"), 0);
	vd_choice_free(c);
	assert_int_equal(pipe(go), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char byte;

		vd_lease_inherit(a);
		close(go[1]);
		(void)!read(go[0], &byte, 1); /* hold the lease until told */
		_exit(0);
	}
	close(go[0]);
	vd_lease_free(a); /* the parent lets go; the child still holds it */
	assert_int_equal(vd_waiter_acquire(w, &b, &c, one, NULL, &o, "x"), VD_ENOFIT);
	vd_choice_free(c);
	assert_int_equal(vd_waiter_place(w, &of), 1);
	assert_int_equal(of, 1);
	close(go[1]); /* ends the child's lease */
	alarm(10);    /* a waiter that never wakes fails the test instead of hanging it */
	assert_int_equal(vd_waiter_wait(w, -1), 1);
	alarm(0);
	waitpid(pid, &status, 0);
	assert_int_equal(vd_waiter_acquire(w, &b, &c, one, NULL, &o, "x"), 0);
	assert_int_equal(vd_waiter_place(w, NULL), 0);
	vd_lease_free(b);
	vd_choice_free(c);
	vd_waiter_free(w);
}

/*
 * A waiter is not woken by its own failed tries (here on a lock held by
 * another program than visdev, which a try opens and closes), so it has
 * nothing to forget and misses no lease that ends meanwhile.
 */
static void test_waiter_ignores_own_tries(void **state)
{
	struct vd_select_options o = exclusive(1);
	struct vd_lease *a = NULL, *b = NULL;
	struct vd_waiter *w = NULL;
	struct vd_choice *c = NULL;
	char path[400];
	int held;

	(void)state;
	assert_int_equal(vd_waiter_new(&w, dir), 0);
	snprintf(path, sizeof(path), "%s/%s.lock", dir, one->gpus[0].uuid);
	held = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(held >= 0);
	assert_int_equal(flock(held, LOCK_EX), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(vd_waiter_acquire(w, &a, &c, one, NULL, &o, "x"), VD_ENOFIT);
		assert_int_equal(c->unknown_holders, 1); /* worth trying again soon */
		vd_choice_free(c);
	}
	assert_int_equal(vd_waiter_wait(w, 0), 0);
	close(held);
	/* the waiter gets it, and then watches nothing until its next try */
	assert_int_equal(vd_waiter_acquire(w, &a, &c, one, NULL, &o, "x"), 0);
	vd_choice_free(c);
	vd_lease_free(a);
	assert_int_equal(vd_waiter_wait(w, 0), 0);
	/* a try watches from its start: a lease that ends after it is not missed */
	assert_int_equal(vd_lease_acquire(&a, &c, dir, one, NULL, &o, "y"), 0);
	vd_choice_free(c);
	assert_int_equal(vd_waiter_acquire(w, &b, &c, one, NULL, &o, "x"), VD_ENOFIT);
	vd_choice_free(c);
	assert_int_equal(vd_waiter_wait(w, 0), 0);
	vd_lease_free(a);
	assert_int_equal(vd_waiter_wait(w, 0), 1);
	vd_waiter_free(w);
}

/*
 * On a full machine a try reads none of the line's records: a dead
 * waiter's record far back is found, and tidied away, only when a new
 * waiter takes its place behind it, which then counts only the live.
 */
static void test_line_read_as_far_as_needed(void **state)
{
	struct vd_select_options o = exclusive(1);
	struct vd_waiter *w1 = NULL, *w2 = NULL;
	struct vd_lease *a = NULL, *b = NULL;
	struct vd_choice *c = NULL;
	struct vd_line *line = NULL;
	char path[400];
	unsigned of;
	FILE *f;

	(void)state;
	assert_int_equal(vd_lease_acquire(&a, &c, dir, one, NULL, &o, "holder"), 0);
	vd_choice_free(c);
	assert_int_equal(vd_waiter_new(&w1, dir), 0);
	assert_int_equal(vd_waiter_acquire(w1, &b, &c, one, NULL, &o, "first"), VD_ENOFIT);
	vd_choice_free(c);
	assert_int_equal(vd_waiter_place(w1, &of), 1);
	assert_int_equal(of, 1);
	/* a record behind it that nobody holds: its waiter died */
	snprintf(path, sizeof(path), "%s/wait.%llu.json", dir,
		 (unsigned long long)waiter_ticket(w1) + 1);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("junk\n", f);
	fclose(f);
	assert_int_equal(vd_waiter_new(&w2, dir), 0);
	assert_int_equal(vd_waiter_acquire(w2, &b, &c, one, NULL, &o, "second"), VD_ENOFIT);
	vd_choice_free(c);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(vd_waiter_place(w2, &of), 2);
	assert_int_equal(of, 2);
	assert_int_equal(vd_line_read(&line, dir), 0);
	assert_int_equal(line->n, 2);
	assert_int_equal(line->nignored, 0);
	vd_line_free(line);
	/* the first in line is served first */
	vd_lease_free(a);
	assert_int_equal(vd_waiter_acquire(w2, &b, &c, one, NULL, &o, "second"), VD_ENOFIT);
	vd_choice_free(c);
	assert_int_equal(vd_waiter_acquire(w1, &b, &c, one, NULL, &o, "first"), 0);
	vd_choice_free(c);
	vd_lease_free(b);
	vd_waiter_free(w1);
	vd_waiter_free(w2);
}

/*
 * A bell whose waiter closed it as it was rung (it left the line) costs the
 * ringer nothing: no SIGPIPE, which by default would kill it, and none
 * left pending.
 */
static void test_bell_without_reader(void **state)
{
	sigset_t pending;
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	close(p[0]);
	signal(SIGPIPE, SIG_DFL);
	line_bell_write(p[1]);
	close(p[1]);
	assert_int_equal(sigpending(&pending), 0);
	assert_false(sigismember(&pending, SIGPIPE));
}

/* A record nobody holds (its job died) does not count and is tidied away. */
static void test_stale_record(void **state)
{
	struct vd_select_options o = exclusive(1);
	struct vd_lease *a = NULL;
	struct vd_choice *c = NULL;
	char path[400];
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/lease.999999.0.json", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "{\"uuids\": [\"%s\"], \"mode\": \"exclusive\", \"pid\": 999999}",
		one->gpus[0].uuid);
	fclose(f);
	assert_int_equal(vd_lease_acquire(&a, &c, dir, one, NULL, &o, "x"), 0);
	assert_int_equal(access(path, F_OK), -1);
	vd_lease_free(a);
	vd_choice_free(c);
}

/* An unsafe lease directory is refused: writable by all without the sticky bit. */
static void test_unsafe_dir(void **state)
{
	struct vd_leases *l = NULL;

	(void)state;
	assert_int_equal(chmod(dir, 0777), 0);
	assert_int_equal(vd_leases_read(&l, dir, NULL), VD_EPERM);
	assert_non_null(strstr(vd_error_last(), "sticky"));
	assert_int_equal(chmod(dir, 01777), 0);
	assert_int_equal(vd_leases_read(&l, dir, NULL), 0);
	vd_leases_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exclusive_excludes),
		cmocka_unit_test(test_record),
		cmocka_unit_test(test_reservation_counts_until_used),
		cmocka_unit_test(test_inherited_lease_and_waiter),
		cmocka_unit_test(test_waiter_ignores_own_tries),
		cmocka_unit_test(test_line_read_as_far_as_needed),
		cmocka_unit_test(test_bell_without_reader),
		cmocka_unit_test(test_stale_record),
		cmocka_unit_test(test_unsafe_dir),
	};

	return cmocka_run_group_tests_name("lease", tests, setup, teardown);
}
