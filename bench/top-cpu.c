/*
 * top-cpu.c - how much CPU `visdev top` takes while it watches: the CPU time
 * (user + system, from wait4) of `visdev top` in a pseudo-terminal over
 * SECONDS at its default 1 s interval, as a share of one core, on an 8-GPU
 * fixture and through the stand-in NVML serving the same fixture, with four
 * leases held so that the audit has jobs to look up.
 *
 *   top-cpu VISDEV FIXTURE MOCK_NVML_DIR [SECONDS]
 *
 * Goal: under 1 % of a core.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LEASES 4

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Starts `visdev [global...] run -q -- sleep 1000` holding one GPU; returns its pid. */
static pid_t hold(char *const *argv)
{
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		setpgid(0, 0);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/*
 * Runs argv (visdev ... top) in a pseudo-terminal of 120x40 for seconds, reading
 * all it draws, then types q. Returns its CPU seconds, -1 on failure.
 */
static double measure(char *const *argv, double seconds, double *wall, size_t *drawn)
{
	struct winsize ws = { .ws_row = 40, .ws_col = 120 };
	struct rusage ru;
	char buf[65536];
	double t0, end;
	int fd, status;
	pid_t pid = forkpty(&fd, NULL, NULL, &ws);

	if (pid < 0)
		return -1;
	if (pid == 0) {
		setenv("TERM", "xterm", 1);
		execv(argv[0], argv);
		_exit(127);
	}
	t0 = now_s();
	end = t0 + seconds;
	for (double t = t0; t < end; t = now_s()) {
		struct pollfd p = { fd, POLLIN, 0 };

		ssize_t n = poll(&p, 1, (int)((end - t) * 1000) + 1) > 0 ?
				    read(fd, buf, sizeof(buf)) :
				    1;

		if (n <= 0)
			break;
		*drawn += (size_t)n;
	}
	*wall = now_s() - t0;
	if (write(fd, "q", 1) != 1)
		kill(pid, SIGTERM);
	/* drain what it writes on the way out, or it could block on a full terminal: the
	   terminal reads as ended (EIO) once top has gone */
	for (double stop = now_s() + 5; now_s() < stop;) {
		struct pollfd p = { fd, POLLIN, 0 };

		if (poll(&p, 1, 100) > 0 && read(fd, buf, sizeof(buf)) <= 0)
			break;
	}
	if (wait4(pid, &status, 0, &ru) != pid && errno != ECHILD)
		return -1;
	close(fd);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/visdev-top-cpu.XXXXXX", leases[64], state[64], mock[4096], fixture[4096];
	double seconds = argc > 4 ? atof(argv[4]) : 30;
	pid_t holders[LEASES];
	int worst_ok = 1;

	if (argc < 4 || seconds <= 0) {
		fprintf(stderr, "usage: top-cpu VISDEV FIXTURE MOCK_NVML_DIR [SECONDS]\n");
		return 2;
	}
	if (!mkdtemp(dir) || !realpath(argv[2], fixture))
		return 1;
	snprintf(leases, sizeof(leases), "%s/leases", dir);
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(mock, sizeof(mock), "%s/libnvidia-ml.so.1", argv[3]);
	setenv("VISDEV_LEASE_DIR", leases, 1);
	setenv("XDG_STATE_HOME", state, 1);
	setenv("MOCK_NVML_FIXTURE", fixture, 1);
	unsetenv("CUDA_VISIBLE_DEVICES");
	for (int i = 0; i < LEASES; i++) {
		char *run[] = { argv[1], "--fixture", fixture, "run", "-q",
				"--",	 "sleep",     "1000",  NULL };

		holders[i] = hold(run);
	}
	sleep(1);
	{
		char count[4200];
		FILE *p;
		int n = -1;

		snprintf(count, sizeof(count), "%s --fixture %s leases --json | grep -c '\"pid\"'",
			 argv[1], fixture);
		p = popen(count, "r");
		if (!p || fscanf(p, "%d", &n) != 1 || n < LEASES)
			fprintf(stderr, "top-cpu: %d of the %d leases are held\n", n, LEASES);
		if (p)
			pclose(p);
	}
	printf("top-cpu: visdev top at its 1 s interval for %.0f s, 120x40, %d leases held\n",
	       seconds, LEASES);
	{
		char *fixture_top[] = { argv[1], "--fixture", fixture, "top", NULL };
		char *nvml_top[] = { argv[1], "--nvml-lib", mock, "top", NULL };
		struct {
			const char *what;
			char **argv;
		} runs[] = {
			{ "8-GPU fixture", fixture_top },
			{ "stand-in NVML (same 8 GPUs)", nvml_top },
		};

		for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
			size_t drawn = 0;
			double wall = 0, cpu = measure(runs[r].argv, seconds, &wall, &drawn);
			double share = cpu >= 0 && wall > 0 ? 100 * cpu / wall : -1;

			printf("  %-28s CPU %.3f s in %.1f s: %.2f %% of one core (goal: under 1 %%); "
			       "%zu KB drawn\n",
			       runs[r].what, cpu, wall, share, drawn / 1024);
			/* a top that drew nothing measured nothing */
			worst_ok &= share >= 0 && share < 1 && drawn > 1024;
		}
	}
	for (int i = 0; i < LEASES; i++) {
		kill(-holders[i], SIGTERM);
		waitpid(holders[i], NULL, 0);
	}
	{
		char rm[128];

		snprintf(rm, sizeof(rm), "rm -rf %s", dir);
		if (system(rm) != 0)
			fprintf(stderr, "top-cpu: could not remove %s\n", dir);
	}
	return worst_ok ? 0 : 1;
}
