/*
 * queue-throughput.c - `visdev queue` against xargs, GNU parallel and
 * task-spooler, in the same run.
 *
 * usage: queue-throughput VISDEV FIXTURE [JOBS [SCALE]]
 *
 * 1. Throughput: JOBS (2000) `true` jobs, as many at once as the fixture
 *    has GPUs, through `visdev queue -q`, `xargs -P N -d '\n' -n 1 sh -c`,
 *    `parallel -j N` and task-spooler (`tsp -S N`, one `tsp -n sh -c true`
 *    per job, then waiting until its list shows every job finished); three
 *    rounds of each, interleaved; medians, each as a ratio to xargs.
 *    Every tool runs each job as `sh -c LINE` (PARALLEL_SHELL=/bin/sh).
 * 2. Latency: 200 jobs one at a time (`--max-parallel 1`, `xargs -P 1`),
 *    twice each, interleaved; the job is this program in job mode, which
 *    appends its start and end (CLOCK_MONOTONIC, system-wide) to a file.
 *    The gap is the next job's start less this one's end; xargs's gap is
 *    the floor.
 * 3. Scale: SCALE (100,000) jobs through `visdev queue --max-parallel 8
 *    -q`, all `true` but the last, which fails (`test -e MARKER && ...`).
 *    Visdev's own peak resident memory is VmHWM from /proc/PID/status,
 *    polled every 10 ms (the last value read: growth in its last 10 ms
 *    would be missed). wait4's ru_maxrss is printed beside it: at exit
 *    the kernel gives the larger of the process's own peak and that of
 *    any child it reaped (a job: small beside visdev), from counters that
 *    may differ from VmHWM's by a few pages.
 * 4. Resume: MARKER made, `visdev queue --resume` over the scale run's
 *    journal (every job done but the last) runs the last job alone: the
 *    time from starting visdev to the job's start, three times with the
 *    journal put back each time, against the floor of starting the same
 *    line with `sh -c` directly.
 *
 * Every file (jobs, journals, lease directories, one per visdev run) is
 * under a directory of its own in /dev/shm: no disk is measured, and the
 * journal's fdatasync costs nothing there.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "visdev.h"

#define ROUNDS	       3	/* of each throughput run, and of the resume */
#define LAT_JOBS       200	/* jobs of a latency run */
#define LAT_ROUNDS     2	/* latency runs of each tool */
#define POLL_NS	       10000000 /* how often the scale run's VmHWM is read */
#define JOB	       "true"
#define SCALE_PARALLEL "8"

/* execv's argv is char *const[] for history's sake: it never writes the strings. */
#define ARGV(...) ((char *const *)(uintptr_t)(const char *const[]){ __VA_ARGS__, NULL })

#define PATH_SIZE (sizeof(workdir) + 32) /* a file in workdir */

static char self[4096], workdir[] = "/dev/shm/visdev-bench-XXXXXX", errlog[PATH_SIZE];
static const char *visdev, *fixture;
static char slots[16];	/* the fixture's GPUs: how many jobs at once */
static unsigned serial; /* numbers the files of each run */

static int64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Job mode: appends this process's start and end, in ns, to path. */
static int stamp(const char *path)
{
	int64_t start = now_ns();
	char line[64];
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600), n, ok;

	if (fd < 0)
		return 1;
	n = snprintf(line, sizeof(line), "%" PRId64 " %" PRId64 "\n", start, now_ns());
	ok = write(fd, line, (size_t)n) == n;
	close(fd);
	return !ok;
}

/* The path of program name (searched in PATH unless it has a '/') in out; -1 if none. */
static int which(char *out, size_t size, const char *name)
{
	const char *p = getenv("PATH");

	if (strchr(name, '/')) {
		if (access(name, X_OK) < 0 || (size_t)snprintf(out, size, "%s", name) >= size)
			return -1;
		return 0;
	}
	for (p = p ? p : "/usr/bin:/bin"; *p; p += *p == ':') {
		size_t len = strcspn(p, ":");

		if (len && (size_t)snprintf(out, size, "%.*s/%s", (int)len, p, name) < size &&
		    access(out, X_OK) == 0)
			return 0;
		p += len;
	}
	return -1;
}

/*
 * Starts argv (argv[0] searched in PATH) with stdin from in (NULL:
 * /dev/null), stdout to out (-1: /dev/null) and stderr to errlog; returns
 * its pid or -1.
 */
static pid_t start(char *const argv[], const char *in, int out)
{
	char path[4096];
	int fin = -1, fnull = -1, ferr = -1;
	pid_t pid = -1;

	if (which(path, sizeof(path), argv[0]) < 0)
		return -1;
	fin = open(in ? in : "/dev/null", O_RDONLY | O_CLOEXEC);
	fnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	ferr = open(errlog, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fin < 0 || fnull < 0 || ferr < 0)
		goto out;
	pid = fork();
	if (pid == 0) {
		if (dup2(fin, 0) < 0 || dup2(out >= 0 ? out : fnull, 1) < 0 || dup2(ferr, 2) < 0)
			_exit(126);
		execv(path, argv);
		_exit(127);
	}
out:
	if (fin >= 0)
		close(fin);
	if (fnull >= 0)
		close(fnull);
	if (ferr >= 0)
		close(ferr);
	return pid;
}

/* Waits for pid; returns its exit status (128+N for signal N) or -1, its rusage in ru. */
static int finish(pid_t pid, struct rusage *ru)
{
	struct rusage r;
	int status;

	if (pid < 0)
		return -1;
	while (wait4(pid, &status, 0, ru ? ru : &r) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Runs argv with stdin from in and waits; returns its exit status or -1. */
static int run(char *const argv[], const char *in)
{
	return finish(start(argv, in, -1), NULL);
}

/* Runs argv and returns its stdout (NUL-terminated, to free), or NULL if it failed. */
static char *capture(char *const argv[])
{
	size_t len = 0, size = 65536;
	char *buf = malloc(size);
	int fds[2];
	ssize_t n;
	pid_t pid;

	if (!buf || pipe2(fds, O_CLOEXEC) < 0) {
		free(buf);
		return NULL;
	}
	pid = start(argv, NULL, fds[1]);
	close(fds[1]);
	while (pid > 0 &&
	       ((n = read(fds[0], buf + len, size - len - 1)) > 0 || (n < 0 && errno == EINTR))) {
		len += n > 0 ? (size_t)n : 0;
		if (size - len < 4096) {
			char *more = realloc(buf, size * 2);

			if (!more)
				break;
			buf = more;
			size *= 2;
		}
	}
	close(fds[0]);
	buf[len] = '\0';
	if (finish(pid, NULL) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* Prints the first line of the last run's stderr, if any. */
static void show_error(void)
{
	char line[256];
	FILE *f = fopen(errlog, "r");

	if (f && fgets(line, sizeof(line), f))
		printf("      its stderr: %s%s", line, strchr(line, '\n') ? "" : "\n");
	if (f)
		fclose(f);
}

/* A new file name in workdir, in out (PATH_SIZE bytes). */
static void new_path(char *out, const char *what)
{
	snprintf(out, PATH_SIZE, "%s/%s-%u", workdir, what, ++serial);
}

/* Writes a new job file of n lines, each line but the last (last, if not NULL); its name in out. */
static int write_jobs(char *out, size_t n, const char *line, const char *last)
{
	FILE *f;

	new_path(out, "jobs");
	f = fopen(out, "w");
	if (!f)
		return -1;
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s\n", last && i == n - 1 ? last : line);
	return fclose(f) == 0 ? 0 : -1;
}

/* A job line: before, then this program in job mode stamping into stamps (both quoted). */
static void stamp_line(char *out, size_t size, const char *before, const char *stamps)
{
	char q[2][4200];
	const char *from[2] = { self, stamps };

	for (int k = 0; k < 2; k++) {
		size_t o = 0;

		q[k][o++] = '\'';
		for (const char *s = from[k]; *s && o + 6 < sizeof(q[k]); s++) {
			if (*s == '\'') {
				memcpy(q[k] + o, "'\\''", 4);
				o += 4;
			} else {
				q[k][o++] = *s;
			}
		}
		q[k][o++] = '\'';
		q[k][o] = '\0';
	}
	snprintf(out, size, "%s%s --stamp %s", before ? before : "", q[0], q[1]);
}

/* A fresh lease directory under workdir for the next visdev run. */
static int fresh_leases(void)
{
	char dir[PATH_SIZE];

	snprintf(dir, sizeof(dir), "%s/leases-XXXXXX", workdir);
	return mkdtemp(dir) ? setenv("VISDEV_LEASE_DIR", dir, 1) : -1;
}

/* The fixture's number of GPUs, or 0. */
static int fixture_gpus(void)
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

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Sorts v and returns its element at fraction q (0.5: the median). */
static double quantile(double *v, size_t n, double q)
{
	qsort(v, n, sizeof(*v), by_value);
	return v[(size_t)(n * q)];
}

/* ---- 1. Throughput ---------------------------------------------------- */

/* Each runs the job file of n lines, and returns how long it took in ms, or -1. */

static double by_xargs(const char *jobs, size_t n)
{
	int64_t t0 = now_ns();

	(void)n;
	if (run(ARGV("xargs", "-P", slots, "-d", "\n", "-n", "1", "sh", "-c"), jobs) != 0)
		return -1;
	return (now_ns() - t0) / 1e6;
}

static double by_visdev(const char *jobs, size_t n)
{
	char state[PATH_SIZE];
	int64_t t0;

	(void)n;
	new_path(state, "state");
	if (fresh_leases() < 0)
		return -1;
	t0 = now_ns();
	if (run(ARGV(visdev, "--fixture", fixture, "queue", "-q", "--state", state, jobs), NULL))
		return -1;
	return (now_ns() - t0) / 1e6;
}

static double by_parallel(const char *jobs, size_t n)
{
	int64_t t0 = now_ns();

	(void)n;
	if (run(ARGV("parallel", "--will-cite", "-j", slots), jobs) != 0)
		return -1;
	return (now_ns() - t0) / 1e6;
}

/* Counts tsp's jobs that finished with status 0 in *ok, and those not finished in *left. */
static int tsp_count(size_t *ok, size_t *left)
{
	char *list = capture(ARGV("tsp", "-l")), *line, *next;

	if (!list)
		return -1;
	*ok = *left = 0;
	/* "ID State Output E-Level Times Command", a line each after the title */
	for (line = strchr(list, '\n'); line && line[1]; line = next) {
		char state[16];
		int elevel = -1;

		line++;
		next = strchr(line, '\n');
		if (!next)
			break;
		*next = '\0';
		if (sscanf(line, "%*u %15s %*s %d", state, &elevel) < 1)
			continue;
		if (strcmp(state, "finished"))
			(*left)++;
		else
			*ok += elevel == 0;
	}
	free(list);
	return 0;
}

/*
 * A task-spooler server of its own with as many slots (started before the
 * clock), `tsp -n sh -c true` per job, then `tsp -w` (the last added) and
 * its list read until every job has finished; the server is killed after.
 */
static double by_tsp(const char *jobs, size_t n)
{
	char sock[PATH_SIZE], keep[32];
	size_t ok = 0, left = 0;
	double ms = -1;
	int64_t t0;

	(void)jobs;
	new_path(sock, "tsp");
	snprintf(keep, sizeof(keep), "%zu", n + 16);
	setenv("TS_SOCKET", sock, 1);
	setenv("TS_SLOTS", slots, 1);
	setenv("TS_MAXFINISHED", keep, 1); /* or the list forgets the first ones */
	if (run(ARGV("tsp", "-S", slots), NULL) != 0)
		goto out;
	t0 = now_ns();
	for (size_t i = 0; i < n; i++)
		if (run(ARGV("tsp", "-n", "sh", "-c", JOB), NULL) != 0)
			goto out;
	run(ARGV("tsp", "-w"), NULL);
	while (tsp_count(&ok, &left) == 0 && left)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	if (!left && ok == n)
		ms = (now_ns() - t0) / 1e6;
out:
	run(ARGV("tsp", "-K"), NULL);
	return ms;
}

struct tool {
	char label[64];
	const char *program, *package; /* program NULL: visdev */
	double (*run)(const char *jobs, size_t n);
	double ms[ROUNDS];
	int failed, missing;
};

/* Part 1; returns the number of failures. */
static int throughput(size_t njobs)
{
	struct tool tools[] = {
		{ "", "xargs", "findutils", by_xargs, { 0 }, 0, 0 },
		{ "visdev queue -q", NULL, NULL, by_visdev, { 0 }, 0, 0 },
		{ "", "parallel", "parallel", by_parallel, { 0 }, 0, 0 },
		{ "", "tsp", "task-spooler", by_tsp, { 0 }, 0, 0 },
	};
	size_t ntools = sizeof(tools) / sizeof(*tools);
	char jobs[PATH_SIZE], path[4096];
	double base, queue = -1;
	int failures = 0;

	snprintf(tools[0].label, sizeof(tools[0].label), "xargs -P %s -n 1 sh -c", slots);
	snprintf(tools[2].label, sizeof(tools[2].label), "parallel -j %s", slots);
	snprintf(tools[3].label, sizeof(tools[3].label), "tsp -S %s (task-spooler)", slots);
	printf("  throughput: %zu '%s' jobs, %s at a time, %d rounds interleaved (medians):\n",
	       njobs, JOB, slots, ROUNDS);
	if (write_jobs(jobs, njobs, JOB, NULL) < 0)
		return 1;
	for (size_t t = 0; t < ntools; t++)
		tools[t].missing = tools[t].program && which(path, sizeof(path), tools[t].program);
	for (int r = 0; r < ROUNDS; r++) {
		for (size_t t = 0; t < ntools; t++) {
			if (tools[t].missing || tools[t].failed)
				continue;
			tools[t].ms[r] = tools[t].run(jobs, njobs);
			if (tools[t].ms[r] < 0) {
				tools[t].failed = 1;
				printf("    %s failed\n", tools[t].label);
				show_error();
			}
		}
	}
	if (tools[0].missing || tools[0].failed) {
		printf("    no reference: xargs failed\n");
		return 1;
	}
	base = quantile(tools[0].ms, ROUNDS, 0.5);
	for (size_t t = 0; t < ntools; t++) {
		double ms;

		if (tools[t].missing) {
			printf("    %-30s skipped: not installed (apt-get install %s)\n",
			       tools[t].label, tools[t].package);
			continue;
		}
		if (tools[t].failed) {
			printf("    %-30s failed\n", tools[t].label);
			failures++;
			continue;
		}
		ms = quantile(tools[t].ms, ROUNDS, 0.5);
		printf("    %-30s %7.3f s %6.0f jobs/s  %5.2fx xargs%s\n", tools[t].label, ms / 1e3,
		       njobs / (ms / 1e3), ms / base,
		       tools[t].program ? "" : " (goal: within 1.1x)");
		if (!tools[t].program)
			queue = ms;
	}
	for (size_t t = 2; queue > 0 && t < ntools; t++)
		if (!tools[t].missing && !tools[t].failed)
			printf("    visdev queue against %-9s %5.2fx its time (goal: under 1x)\n",
			       tools[t].program, queue / quantile(tools[t].ms, ROUNDS, 0.5));
	return failures;
}

/* ---- 2. Latency ------------------------------------------------------- */

struct stamp {
	int64_t start, end; /* ns */
};

static int by_start(const void *a, const void *b)
{
	int64_t x = ((const struct stamp *)a)->start, y = ((const struct stamp *)b)->start;

	return (x > y) - (x < y);
}

/*
 * Reads the stamps at path, which must be n, into out (n + 1 of them);
 * sorted by start. -1 if there are not n.
 */
static int read_stamps(struct stamp *out, const char *path, size_t n)
{
	FILE *f = fopen(path, "r");
	size_t got = 0;

	if (!f)
		return -1;
	while (got <= n && fscanf(f, "%" SCNd64 " %" SCNd64, &out[got].start, &out[got].end) == 2)
		got++;
	fclose(f);
	qsort(out, got, sizeof(*out), by_start);
	return got == n ? 0 : -1;
}

/*
 * Runs LAT_JOBS stamp jobs one at a time, with visdev queue or else xargs,
 * and appends the gaps between one's end and the next one's start (ms) to
 * gaps at *n. -1 on failure.
 */
static int gaps_of(double *gaps, size_t *n, int queue)
{
	static struct stamp s[LAT_JOBS + 1];
	char jobs[PATH_SIZE], stamps[PATH_SIZE], state[PATH_SIZE], line[9000];
	int status;

	new_path(stamps, "stamps");
	new_path(state, "state");
	stamp_line(line, sizeof(line), NULL, stamps);
	if (write_jobs(jobs, LAT_JOBS, line, NULL) < 0 || fresh_leases() < 0)
		return -1;
	if (queue)
		status = run(ARGV(visdev, "--fixture", fixture, "queue", "-q", "--max-parallel",
				  "1", "--state", state, jobs),
			     NULL);
	else
		status = run(ARGV("xargs", "-P", "1", "-d", "\n", "-n", "1", "sh", "-c"), jobs);
	if (status != 0 || read_stamps(s, stamps, LAT_JOBS) < 0)
		return -1;
	for (size_t i = 0; i + 1 < LAT_JOBS; i++)
		gaps[(*n)++] = (s[i + 1].start - s[i].end) / 1e6;
	return 0;
}

/* Part 2; returns the number of failures. */
static int latency(void)
{
	static double gaps[2][LAT_ROUNDS * LAT_JOBS];
	const char *label[2] = { "xargs -P 1 (the floor)", "visdev queue --max-parallel 1" };
	size_t n[2] = { 0, 0 };
	int failed[2] = { 0, 0 };

	printf("  latency: a job's end to the next one's start, one job at a time, %d x %d jobs:\n",
	       LAT_ROUNDS, LAT_JOBS);
	for (int r = 0; r < LAT_ROUNDS; r++) {
		for (int k = 0; k < 2; k++) {
			if (failed[k] || gaps_of(gaps[k], &n[k], k) == 0)
				continue;
			failed[k] = 1;
			printf("    %s failed\n", label[k]);
			show_error();
		}
	}
	for (int k = 0; k < 2; k++) {
		if (failed[k]) {
			printf("    %-30s failed\n", label[k]);
			continue;
		}
		printf("    %-30s median %6.3f ms  p99 %7.3f ms%s\n", label[k],
		       quantile(gaps[k], n[k], 0.5), quantile(gaps[k], n[k], 0.99),
		       k ? " (goal: median under 5 ms)" : "");
	}
	if (!failed[0] && !failed[1])
		printf("    over the floor                 median %+6.3f ms\n",
		       gaps[1][n[1] / 2] - gaps[0][n[0] / 2]);
	return failed[0] + failed[1];
}

/* ---- 3. Scale, 4. Resume ---------------------------------------------- */

/* Visdev's own peak resident memory so far (VmHWM), in KiB, or -1. */
static long vm_hwm(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

/* Copies the file from into to (a new file, or one cut to nothing first). */
static int copy_file(const char *to, const char *from)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out = -1, ret = -1;
	ssize_t n;

	if (in < 0)
		return -1;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	while (out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			goto out;
	ret = out >= 0 && n == 0 ? 0 : -1;
out:
	close(in);
	if (out >= 0 && close(out) < 0)
		ret = -1;
	return ret;
}

/* Part 3 and 4; returns the number of failures. */
static int scale_and_resume(size_t njobs)
{
	char jobs[PATH_SIZE], state[PATH_SIZE], saved[PATH_SIZE], stamps[PATH_SIZE];
	char marker[PATH_SIZE], before[PATH_SIZE + 32], last[9000];
	double first[ROUNDS], floor[ROUNDS], total[ROUNDS], secs;
	long hwm = -1, rss = 0, kib;
	int64_t t0;
	struct rusage ru;
	struct stamp s[2];
	int status = -1, failures = 0, fd;
	pid_t pid;

	new_path(marker, "marker");
	new_path(stamps, "stamps");
	new_path(state, "state");
	new_path(saved, "saved");
	snprintf(before, sizeof(before), "test -e '%s' && ", marker);
	stamp_line(last, sizeof(last), before, stamps);
	printf("  scale: %zu jobs, '%s' but the last (which fails), --max-parallel %s -q:\n", njobs,
	       JOB, SCALE_PARALLEL);
	fflush(stdout);
	if (write_jobs(jobs, njobs, JOB, last) < 0 || fresh_leases() < 0)
		return 1;
	t0 = now_ns();
	pid = start(ARGV(visdev, "--fixture", fixture, "queue", "-q", "--max-parallel",
			 SCALE_PARALLEL, "--state", state, jobs),
		    NULL, -1);
	while (pid > 0) {
		int w = wait4(pid, &status, WNOHANG, &ru);

		if (w == pid || (w < 0 && errno != EINTR))
			break;
		if ((kib = vm_hwm(pid)) > hwm)
			hwm = kib;
		nanosleep(&(struct timespec){ 0, POLL_NS }, NULL);
	}
	secs = (now_ns() - t0) / 1e9;
	/* the last job failed, the others did not: the queue says so, and nothing was stamped */
	if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 2 ||
	    WEXITSTATUS(status) > 125 || access(stamps, F_OK) == 0) {
		printf("    visdev queue failed (status %d; expected 1: one job failed)\n",
		       pid < 0		 ? -1 :
		       WIFEXITED(status) ? WEXITSTATUS(status) :
					   128 + WTERMSIG(status));
		show_error();
		return 1;
	}
	printf("    ran in                         %.1f s, %.0f jobs/s (exit %d: the last failed)\n",
	       secs, njobs / secs, WEXITSTATUS(status));
	printf("    visdev's peak resident memory  %.2f MB (VmHWM polled; goal: under 64 MB)\n",
	       hwm / 1024.0);
	printf("    wait4's ru_maxrss              %.2f MB (its peak or a reaped job's, the larger)\n",
	       ru.ru_maxrss / 1024.0);

	printf("  resume: the same file and journal, MARKER made, --resume runs the last job alone,\n"
	       "  %d times (the journal put back each time):\n",
	       ROUNDS);
	fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || close(fd) < 0 || copy_file(saved, state) < 0)
		return 1;
	for (int r = 0; r < ROUNDS; r++) {
		/* the floor: the same line started by sh directly */
		unlink(stamps);
		t0 = now_ns();
		if (run(ARGV("sh", "-c", last), NULL) != 0 || read_stamps(s, stamps, 1) < 0) {
			printf("    sh -c LINE failed\n");
			return failures + 1;
		}
		floor[r] = (s[0].start - t0) / 1e6;

		unlink(stamps);
		if (copy_file(state, saved) < 0 || fresh_leases() < 0)
			return failures + 1;
		t0 = now_ns();
		status = finish(start(ARGV(visdev, "--fixture", fixture, "queue", "-q", "--resume",
					   "--state", state, jobs),
				      NULL, -1),
				&ru);
		total[r] = (now_ns() - t0) / 1e6;
		if (status != 0 || read_stamps(s, stamps, 1) < 0) {
			printf("    visdev queue --resume failed (status %d, or not one job)\n",
			       status);
			show_error();
			return failures + 1;
		}
		first[r] = (s[0].start - t0) / 1e6;
		if (ru.ru_maxrss > rss)
			rss = ru.ru_maxrss;
	}
	printf("    start to the job's start       median %7.3f ms (goal: under 200 ms)\n",
	       quantile(first, ROUNDS, 0.5));
	printf("    the floor: sh -c LINE itself   median %7.3f ms\n",
	       quantile(floor, ROUNDS, 0.5));
	printf("    start to visdev's exit         median %7.3f ms\n",
	       quantile(total, ROUNDS, 0.5));
	printf("    wait4's ru_maxrss, the largest %.2f MB\n", rss / 1024.0);
	return failures;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path); /* and go on: leave behind what cannot go */
	return 0;
}

/* Removes workdir and all in it (killed midway, the bench leaves it: /dev/shm/visdev-bench-*). */
static void cleanup(void)
{
	nftw(workdir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A count from the command line, or 0 for junk. */
static size_t count(const char *s)
{
	char *end;
	unsigned long long n;

	errno = 0;
	n = strtoull(s, &end, 10);
	return errno || end == s || *end || *s == '-' || n > 100000000 ? 0 : (size_t)n;
}

int main(int argc, char **argv)
{
	size_t njobs = 2000, nscale = 100000;
	int gpus, failures = 0;

	if (argc == 3 && !strcmp(argv[1], "--stamp"))
		return stamp(argv[2]);
	if (argc < 3 || argc > 5 || (argc > 3 && !(njobs = count(argv[3]))) ||
	    (argc > 4 && (nscale = count(argv[4])) < 2)) {
		fprintf(stderr, "usage: queue-throughput VISDEV FIXTURE [JOBS [SCALE]]\n");
		return 2;
	}
	visdev = argv[1];
	fixture = argv[2];
	gpus = fixture_gpus();
	if (gpus < 1) {
		fprintf(stderr, "queue-throughput: no GPU in '%s'\n", fixture);
		return 2;
	}
	snprintf(slots, sizeof(slots), "%d", gpus);
	if (!realpath("/proc/self/exe", self) || !mkdtemp(workdir))
		return 2;
	atexit(cleanup);
	snprintf(errlog, sizeof(errlog), "%s/stderr", workdir);
	setenv("PARALLEL_SHELL", "/bin/sh", 1);

	printf("queue-throughput: %s, %d GPUs, work files in /dev/shm\n", fixture, gpus);
	fflush(stdout);
	failures += throughput(njobs);
	fflush(stdout);
	failures += latency();
	fflush(stdout);
	failures += scale_and_resume(nscale);
	return failures != 0;
}
