/*
 * lease-contention.c - many `visdev run --wait` at once over one server.
 *
 * usage: lease-contention VISDEV FIXTURE [WORKERS [JOBS_EACH [PEER]]]
 *
 * Phase 1, overhead: runs the job alone, then through `visdev run -n 1`,
 * RUNS times each, interleaved, one at a time; the overhead per job is the
 * difference of the medians. Phase 2, contention: WORKERS processes (64)
 * each start JOBS_EACH jobs (8) through `visdev run -n 1 --wait`, all at
 * once, and it prints acquisitions per second, the p50 and p99 time from
 * starting visdev to its exit, and the number of overlaps: jobs that found
 * their GPU already in use (must be 0), and the spread: p99 over p50.
 * Its reference, in the same run: as many workers as the server has GPUs,
 * the same number of runs in all, so that nobody waits in line: the
 * acquisitions per second of the machine itself, which the contention run
 * is given as a ratio of. With PEER (another visdev: the one before the
 * line, say), the contention run is made with it as well, right after,
 * and the two rates are compared.
 * Phase 3, starvation (issue 14's case): ten loops of `visdev run -n 1
 * --wait -- sleep 0.3` over the server, and once they are going, one
 * `visdev run -n 4 --wait -- true`: how long it waits, against a floor of
 * one 0.3-s job (the soonest four GPUs can all be free).
 *
 * The job is this program again, in job mode: it marks its GPU in use
 * (mkdir, which fails if another job holds it), stays 200 us, and unmarks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "visdev.h"

#define OVERHEAD_RUNS 200

static char self[4096], workdir[] = "/dev/shm/visdev-bench-XXXXXX";

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Job mode: hold the GPU named by CUDA_VISIBLE_DEVICES for 200 us. */
static int job(const char *dir)
{
	const char *gpu = getenv("CUDA_VISIBLE_DEVICES");
	char path[4200];
	struct timespec hold = { 0, 200000 };

	snprintf(path, sizeof(path), "%s/held-%s", dir, gpu ? gpu : "none");
	if (mkdir(path, 0700) < 0) {
		char o[4200];
		int fd;

		snprintf(o, sizeof(o), "%s/overlaps", dir);
		fd = open(o, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd >= 0) {
			(void)!write(fd, "x", 1);
			close(fd);
		}
		return 0;
	}
	nanosleep(&hold, NULL);
	rmdir(path);
	return 0;
}

/* Runs argv and waits; returns its exit status or -1. */
static int run(char *const argv[])
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		if (null >= 0)
			dup2(null, 2); /* visdev's "waiting" notes */
		execv(argv[0], argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A writable copy of a NULL-terminated argument list, for execv. */
static char **args_dup(const char *const *a)
{
	size_t n = 0;
	char **c;

	while (a[n])
		n++;
	c = calloc(n + 1, sizeof(*c));
	for (size_t i = 0; c && i < n; i++)
		c[i] = strdup(a[i]);
	return c;
}

/* `VISDEV --fixture FIXTURE run -n 1 --wait -- (the job)`, for execv. */
static char **waiting_args(const char *visdev, const char *fixture)
{
	return args_dup((const char *const[]){ visdev, "--fixture", fixture, "run", "-n", "1",
					       "--wait", "--", self, "--job", workdir, NULL });
}

/* The fixture's number of GPUs, or 0. */
static int fixture_gpus(const char *fixture)
{
	struct vd_backend_options o = { .fixture = fixture };
	struct vd_backend *b = NULL;
	struct vd_system *sys = NULL;
	int n = 0;

	if (vd_backend_open(&b, &o) == 0 && vd_backend_snapshot(&sys, b) == 0)
		n = (int)sys->ngpus;
	vd_system_free(sys);
	vd_backend_free(b);
	return n;
}

/*
 * Runs argv njobs times over workers processes at once, each its share in
 * turn; the time each took goes to lat (shared memory). Returns the time
 * all took, in ms.
 */
static double in_parallel(char **argv, int workers, int njobs, double *lat)
{
	double t0 = now_ms();

	for (int w = 0; w < workers; w++) {
		if (fork() == 0) {
			for (int j = w; j < njobs; j += workers) {
				double s = now_ms();

				lat[j] = run(argv) == 0 ? now_ms() - s : -1;
			}
			_exit(0);
		}
	}
	while (wait(NULL) > 0 || errno == EINTR)
		;
	return now_ms() - t0;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

#define LOOPS	  10
#define LOOP_JOB  "0.3"
#define LOOPS_FOR 1000.0 /* ms the loops run before the 4-GPU job asks */

/* Phase 3: how long `run -n 4 --wait` waits while LOOPS loops of 1-GPU jobs go on; -1 on failure.
 */
static double starvation(const char *visdev, const char *fixture)
{
	char **loop = args_dup((const char *const[]){ visdev, "--fixture", fixture, "run", "-q",
						      "-n", "1", "--wait", "--", "/bin/sleep",
						      LOOP_JOB, NULL });
	char **four = args_dup((const char *const[]){ visdev, "--fixture", fixture, "run", "-n",
						      "4", "--wait", "--", "/bin/true", NULL });
	volatile int *stop = mmap(NULL, sizeof(*stop), PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	double t0, waited;

	if (!loop || !four || stop == MAP_FAILED)
		return -1;
	*stop = 0;
	for (int i = 0; i < LOOPS; i++) {
		if (fork() == 0) {
			while (!*stop)
				run(loop);
			_exit(0);
		}
	}
	t0 = now_ms();
	while (now_ms() - t0 < LOOPS_FOR)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	t0 = now_ms();
	waited = run(four) == 0 ? now_ms() - t0 : -1;
	*stop = 1;
	while (wait(NULL) > 0 || errno == EINTR)
		;
	return waited;
}

int main(int argc, char **argv)
{
	char **direct, **leased, **waiting;
	double a[OVERHEAD_RUNS], b[OVERHEAD_RUNS], *lat, t0, total, alone, peer_total = 0;
	int workers = 64, each = 8, njobs, failures = 0, gpus;
	char leases[sizeof(workdir) + 16], overlaps[sizeof(workdir) + 16];
	double starved, p50, p99;
	char label[64];
	struct stat st;

	if (argc == 3 && !strcmp(argv[1], "--job"))
		return job(argv[2]);
	if (argc < 3 || argc > 6) {
		fprintf(stderr,
			"usage: lease-contention VISDEV FIXTURE [WORKERS [JOBS_EACH [PEER]]]\n");
		return 2;
	}
	if (argc > 3)
		workers = atoi(argv[3]);
	if (argc > 4)
		each = atoi(argv[4]);
	if (workers < 1 || each < 1 || !realpath("/proc/self/exe", self) || !mkdtemp(workdir))
		return 2;
	snprintf(leases, sizeof(leases), "%s/leases", workdir);
	setenv("VISDEV_LEASE_DIR", leases, 1);
	direct = args_dup((const char *const[]){ self, "--job", workdir, NULL });
	leased = args_dup((const char *const[]){ argv[1], "--fixture", argv[2], "run", "-n", "1",
						 "--", self, "--job", workdir, NULL });
	waiting = waiting_args(argv[1], argv[2]);
	if (!direct || !leased || !waiting)
		return 1;

	for (int i = 0; i < OVERHEAD_RUNS; i++) {
		t0 = now_ms();
		failures += run(direct) != 0;
		a[i] = now_ms() - t0;
		t0 = now_ms();
		failures += run(leased) != 0;
		b[i] = now_ms() - t0;
	}
	qsort(a, OVERHEAD_RUNS, sizeof(*a), by_value);
	qsort(b, OVERHEAD_RUNS, sizeof(*b), by_value);

	njobs = workers * each;
	lat = mmap(NULL, (size_t)njobs * sizeof(*lat), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (lat == MAP_FAILED)
		return 1;
	gpus = fixture_gpus(argv[2]);
	if (gpus < 1)
		return 2;
	alone = in_parallel(waiting, gpus, njobs, lat);
	for (int i = 0; i < njobs; i++)
		failures += lat[i] < 0;
	total = in_parallel(waiting, workers, njobs, lat);
	if (argc > 5) {
		/* of the peer's runs, only the total time is kept: its own times go apart */
		char **peer = waiting_args(argv[5], argv[2]);
		double *plat = mmap(NULL, (size_t)njobs * sizeof(*plat), PROT_READ | PROT_WRITE,
				    MAP_SHARED | MAP_ANONYMOUS, -1, 0);

		if (!peer || plat == MAP_FAILED)
			return 1;
		peer_total = in_parallel(peer, workers, njobs, plat);
	}

	for (int i = 0; i < njobs; i++)
		failures += lat[i] < 0;
	qsort(lat, (size_t)njobs, sizeof(*lat), by_value);
	p50 = lat[njobs / 2];
	p99 = lat[(njobs * 99) / 100];
	snprintf(overlaps, sizeof(overlaps), "%s/overlaps", workdir);
	starved = starvation(argv[1], argv[2]);
	failures += starved < 0;

	printf("lease-contention: %s, job = mark the GPU, hold 200 us, unmark\n", argv[2]);
	printf("  overhead, one at a time, %d runs each (medians):\n", OVERHEAD_RUNS);
	printf("    job alone                      %.3f ms\n", a[OVERHEAD_RUNS / 2]);
	printf("    visdev run -n 1 -- job         %.3f ms\n", b[OVERHEAD_RUNS / 2]);
	printf("    overhead per job               %.3f ms (goal: under 2 ms)\n",
	       b[OVERHEAD_RUNS / 2] - a[OVERHEAD_RUNS / 2]);
	printf("  contention: %d workers x %d jobs = %d runs with --wait, all at once:\n", workers,
	       each, njobs);
	printf("    acquisitions per second        %.0f\n", njobs / (total / 1e3));
	snprintf(label, sizeof(label), "the same runs, %d workers", gpus);
	printf("    %-30s %.0f a second (nobody waits in line)\n", label, njobs / (alone / 1e3));
	printf("    against them                   %.2fx\n", alone / total);
	if (peer_total > 0)
		printf("    the peer, the same runs        %.0f a second: %.2fx of it (goal: 1x or "
		       "more)\n",
		       njobs / (peer_total / 1e3), peer_total / total);
	printf("    time to run, p50               %.2f ms\n", p50);
	printf("    time to run, p99               %.2f ms\n", p99);
	printf("    spread, p99 / p50              %.2fx (goal: within 2x)\n", p99 / p50);
	printf("    overlaps                       %lld (must be 0)\n",
	       stat(overlaps, &st) == 0 ? (long long)st.st_size : 0LL);
	printf("  starvation: %d loops of 'run -n 1 --wait -- sleep %s', then 'run -n 4 --wait':\n",
	       LOOPS, LOOP_JOB);
	printf("    the 4-GPU job waited           %.3f s (goal: under 2 s; floor %s s)\n",
	       starved / 1e3, LOOP_JOB);
	printf("    against the floor              %.2fx\n", starved / 1e3 / atof(LOOP_JOB));
	printf("    failed runs                    %d\n", failures);
	return failures || stat(overlaps, &st) == 0;
}
