/*
 * startup.c - how long visdev takes to start, read a fixture and print
 * `list --json`, against starting /bin/true, in the same run; or, with
 * --python, how long `import visdev; visdev.devices()` takes against a
 * python that does nothing (bench/python-import runs it so).
 *
 * usage: startup RUNS VISDEV FIXTURE
 *        startup --python RUNS PYTHON LIBDIR FIXTURE
 *
 * Runs each command RUNS times, interleaved so that both see the same
 * machine, and prints the medians, the ratio, and the peak resident memory
 * of each (from wait4's rusage).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct sample {
	double ms;
	long maxrss_kib;
};

/* Runs argv once with stdout to /dev/null; returns its time and peak memory. */
static int run_once(struct sample *out, char *const argv[])
{
	struct timespec t0, t1;
	struct rusage ru;
	int status;
	pid_t pid;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		if (fd >= 0)
			dup2(fd, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) < 0)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "startup: '%s' failed (status %d)\n", argv[0], status);
		return -1;
	}
	out->ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
	out->maxrss_kib = ru.ru_maxrss;
	return 0;
}

static int by_ms(const void *a, const void *b)
{
	double x = ((const struct sample *)a)->ms, y = ((const struct sample *)b)->ms;

	return (x > y) - (x < y);
}

static long peak(const struct sample *s, int n)
{
	long m = 0;

	for (int i = 0; i < n; i++)
		if (s[i].maxrss_kib > m)
			m = s[i].maxrss_kib;
	return m;
}

int main(int argc, char **argv)
{
	static char true_[] = "/bin/true", fixture[] = "--fixture", list[] = "list",
		    json[] = "--json", dash_c[] = "-c", pass[] = "pass",
		    import[] = "import visdev; visdev.devices()";
	char *base[] = { true_, NULL, NULL, NULL };
	char *cmd[] = { NULL, fixture, NULL, list, json, NULL };
	char *py[] = { NULL, dash_c, import, NULL };
	char **measured = cmd;
	const char *what[2] = { "/bin/true", "visdev --fixture F list --json" };
	const char *goal = "under 3x";
	struct sample *a, *b;
	int runs, python = argc == 6 && !strcmp(argv[1], "--python");
	double ratio;

	if ((argc != 4 && !python) || (runs = atoi(argv[1 + python])) < 1) {
		fprintf(stderr, "usage: startup RUNS VISDEV FIXTURE\n"
				"       startup --python RUNS PYTHON LIBDIR FIXTURE\n");
		return 2;
	}
	if (python) {
		/* the floor: the same python, told to do nothing */
		base[0] = py[0] = argv[3];
		base[1] = dash_c;
		base[2] = pass;
		measured = py;
		setenv("PYTHONPATH", argv[4], 1);
		setenv("VISDEV_FIXTURE", argv[5], 1);
		what[0] = "python3 -c pass";
		what[1] = "import visdev; visdev.devices()";
		goal = "under 1.3x";
	} else {
		cmd[0] = argv[2];
		cmd[2] = argv[3];
	}
	a = calloc((size_t)runs, sizeof(*a));
	b = calloc((size_t)runs, sizeof(*b));
	if (!a || !b)
		return 1;
	for (int i = 0; i < runs; i++)
		if (run_once(&a[i], base) || run_once(&b[i], measured))
			return 1;
	qsort(a, (size_t)runs, sizeof(*a), by_ms);
	qsort(b, (size_t)runs, sizeof(*b), by_ms);
	ratio = b[runs / 2].ms / a[runs / 2].ms;
	printf("%s: %d runs each, interleaved\n", python ? "python-import" : "startup", runs);
	printf("  %-34s median %.3f ms  peak %.2f MB\n", what[0], a[runs / 2].ms,
	       peak(a, runs) / 1024.0);
	printf("  %-34s median %.3f ms  peak %.2f MB\n", what[1], b[runs / 2].ms,
	       peak(b, runs) / 1024.0);
	printf("  ratio %.2fx %s (goal: %s)", ratio, what[0], goal);
	if (!python)
		printf("; visdev peak %.2f MB (goal: under 3 MB)", peak(b, runs) / 1024.0);
	printf("\n");
	free(a);
	free(b);
	return 0;
}
