/*
 * cmd_run.c - `visdev run`: choose GPUs, lease them, and run a command on
 * them. The lease lasts as long as the command and its children do.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"

extern char **environ;

static const char usage[] =
	"usage: visdev run [-n N] [selection options] [--wait[=SECONDS]] [--mem SIZE] [--] CMD "
	"[ARGS...]\n"
	"\n"
	"Chooses GPUs that fit, leases them so that no other visdev job can take them,\n"
	"and runs CMD with CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER=PCI_BUS_ID and\n"
	"VISDEV_LEASE set. The lease lasts as long as CMD and its children, even if\n"
	"visdev itself is killed. The exit status is CMD's (126/127 when it cannot be\n"
	"run, 128+N when it died of signal N); 3 when no GPU fits.\n"
	"\n" CLI_SELECT_USAGE
	"  --wait[=SECONDS]   wait in line (for ever, or SECONDS) until GPUs fit, instead\n"
	"                     of exit 3: first come, first served across users\n"
	"  -q, --quiet        no lines about the wait in line\n"
	"\nLeases live in VISDEV_LEASE_DIR (default " VD_LEASE_DIR_DEFAULT ").\n" CLI_GLOBAL_USAGE;

/* The job's process group, for the signal handler; 0 while there is none. */
static volatile sig_atomic_t job_pgid;
static volatile sig_atomic_t got_signal;

/*
 * The signal visdev dies of once it has cleaned up, as shells expect: SIGINT
 * or SIGQUIT when the job died of it, SIGINT when it stopped visdev before
 * the job started; else 0.
 */
static int die_signal;

/*
 * Passes a signal on to every process of the job. After SIGTERM or SIGHUP
 * a stopped job is continued, as shells do, or the signal would wait in it.
 */
static void forward(int sig)
{
	int saved = errno;

	got_signal = sig;
	if (job_pgid > 0) {
		kill(-(pid_t)job_pgid, sig);
		if (sig != SIGINT)
			kill(-(pid_t)job_pgid, SIGCONT);
	}
	errno = saved;
}

/* The signals passed on to the job, and those that were ignored when visdev started. */
static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP };
static sigset_t forwarded_set;

/*
 * Passes SIGINT, SIGTERM and SIGHUP on to the job, except any that was
 * ignored when visdev started (nohup): that stays ignored, for the job too.
 */
static void handle_signals(void)
{
	struct sigaction sa, old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward;
	sigemptyset(&sa.sa_mask);
	sigemptyset(&forwarded_set);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) {
		sigaddset(&forwarded_set, forwarded[i]);
		if (sigaction(forwarded[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		sigaction(forwarded[i], &sa, NULL);
	}
	/* an ignored SIGCHLD (inherited through exec) would leave no status to wait for */
	signal(SIGCHLD, SIG_DFL);
}

/* The program CMD names: itself when it has a '/', else found on PATH. NULL when not found. */
static char *find_program(const char *cmd)
{
	const char *path = getenv("PATH");
	char *copy, *rest, *found = NULL;

	if (strchr(cmd, '/'))
		return strdup(cmd);
	copy = strdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	rest = copy;
	/* strsep, not strtok: an empty element of PATH is the current folder */
	for (char *dir = rest ? strsep(&rest, ":") : NULL; dir && !found;
	     dir = rest ? strsep(&rest, ":") : NULL) {
		struct stat st;
		char *p;

		if (asprintf(&p, "%s/%s", *dir ? dir : ".", cmd) < 0)
			break;
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0)
			found = p;
		else
			free(p);
	}
	free(copy);
	return found;
}

/*
 * The arguments to run a script without "#!" with /bin/sh, as the shell and
 * execvp do: built before fork, so that the child only has to exec.
 */
static char **shell_args(char *program, char **argv)
{
	static char sh[] = "sh";
	size_t n = 0;
	char **a;

	while (argv[n])
		n++;
	a = calloc(n + 2, sizeof(*a));
	if (!a)
		return NULL;
	a[0] = sh;
	a[1] = program;
	for (size_t i = 1; i < n; i++)
		a[i + 1] = argv[i];
	return a;
}

/* Runs the program, or through /bin/sh when the kernel does not know its format. */
static void exec_program(const char *program, char **argv, char **sh_argv)
{
	execve(program, argv, environ);
	if (errno == ENOEXEC && sh_argv)
		execve("/bin/sh", sh_argv, environ);
}

/* The command line, for the lease record. */
static char *join_args(char **argv)
{
	size_t len = 1;
	char *s;

	for (char **a = argv; *a; a++)
		len += strlen(*a) + 1;
	s = calloc(1, len);
	for (char **a = argv; s && *a; a++) {
		if (a != argv)
			strcat(s, " ");
		strcat(s, *a);
	}
	return s;
}

/* Gives the terminal's foreground to process group pgid, when we have the terminal. */
static void give_terminal(pid_t pgid)
{
	struct sigaction ign, old;

	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigaction(SIGTTOU, &ign, &old);
	tcsetpgrp(STDIN_FILENO, pgid);
	sigaction(SIGTTOU, &old, NULL);
}

static void close_pair(int fds[2])
{
	close(fds[0]);
	close(fds[1]);
}

/*
 * Reads the state, process group and start time (in clock ticks since
 * boot) of process pid from /proc. Returns 0, or -1 when it is gone.
 */
static int proc_stat(const char *pid, char *state, int *pgrp, unsigned long long *start)
{
	char path[64], buf[1024], *close_paren;
	int ok = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	/* "pid (comm) state ppid pgrp ... starttime": comm may hold anything; read from the last
	 * ')' */
	if (fgets(buf, sizeof(buf), f) && (close_paren = strrchr(buf, ')')))
		ok = sscanf(close_paren + 1,
			    " %c %*d %d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d"
			    " %*d %llu",
			    state, pgrp, start) == 3;
	fclose(f);
	return ok ? 0 : -1;
}

/* The start time of process pid, 0 when unknown. */
static unsigned long long start_time(pid_t pid)
{
	unsigned long long start;
	char name[16], state;
	int pgrp;

	snprintf(name, sizeof(name), "%d", (int)pid);
	return proc_stat(name, &state, &pgrp, &start) ? 0 : start;
}

/*
 * Whether a process of the job's group pgid still lives; the group's
 * leader started at leader_start (0: unknown). A zombie does not count:
 * where no init reaps orphans (a container without one), they would last
 * for ever. A leader's number held by a process that started at another
 * time means the group is gone and its number was reused.
 */
static int group_alive(pid_t pgid, unsigned long long leader_start)
{
	unsigned long long start;
	struct dirent *e;
	char name[16], state;
	int alive = 0, pgrp;
	DIR *proc;

	if (kill(-pgid, 0) < 0 && errno != EPERM)
		return 0; /* not even a zombie: the cheap answer, and the usual one */
	snprintf(name, sizeof(name), "%d", (int)pgid);
	if (proc_stat(name, &state, &pgrp, &start) == 0) {
		if (leader_start && start != leader_start)
			return 0;
		if (pgrp == pgid && state != 'Z' && state != 'X')
			return 1; /* the leader itself */
	}
	proc = opendir("/proc");
	if (!proc)
		return 1;
	while (!alive && (e = readdir(proc)))
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9' &&
		    proc_stat(e->d_name, &state, &pgrp, &start) == 0)
			alive = pgrp == pgid && state != 'Z' && state != 'X';
	closedir(proc);
	return alive;
}

/*
 * Starts the keeper: a process in a session of its own that holds the
 * lease while any process of the job's group lives, so that the lease
 * outlives the command and visdev itself (kill -9), even when the job's
 * processes closed the descriptors they inherited (Python's subprocess
 * does). It lets go of the terminal, of visdev's output and of the pipes
 * to the job (close_fds), so that whoever waits for those is not kept
 * waiting. Returns its pid, or -1 when it could not start (the job's own
 * hold on the lease remains).
 */
static pid_t start_keeper(struct vd_lease *lease, pid_t pgid, unsigned long long leader_start,
			  int close_fds[2])
{
	/* the leader's end wakes the keeper at once; the others' is seen within 200 ms */
	int leader_fd = (int)syscall(SYS_pidfd_open, pgid, 0);
	pid_t keeper;
	int null;

	keeper = fork();
	if (keeper != 0) {
		if (leader_fd >= 0)
			close(leader_fd);
		return keeper;
	}
	setsid();
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		signal(forwarded[i], SIG_DFL);
	sigprocmask(SIG_UNBLOCK, &forwarded_set, NULL);
	close_pair(close_fds);
	null = open("/dev/null", O_RDWR);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		if (null > STDERR_FILENO)
			close(null);
	}
	while (group_alive(pgid, leader_start)) {
		struct pollfd leader = { leader_fd, POLLIN, 0 };

		/* without a pidfd (before Linux 5.3), poll() only sleeps */
		if (poll(&leader, 1, 200) > 0 && leader_fd >= 0) {
			close(leader_fd);
			leader_fd = -1;
			/*
			 * visdev reaps the leader and ends the keeper in a moment; a
			 * look through /proc for the rest of the group (the leader a
			 * zombie until reaped) is for when visdev is gone
			 */
			poll(NULL, 0, 100);
		}
	}
	vd_lease_free(lease); /* and the record goes, if visdev is no longer there to see to it */
	_exit(0);
}

/*
 * Once the command has exited: when its group is gone too (a group that is
 * dying, a signal on its way to each member, is given 100 ms), ends the
 * keeper, so that the lease is free when visdev returns. Otherwise the
 * keeper stays, holding the lease for the processes that live on.
 */
static void end_keeper(pid_t keeper, pid_t pgid, unsigned long long leader_start)
{
	struct timespec tick = { 0, 5000000 }; /* 5 ms */

	for (int i = 0; i < 20; i++) {
		if (!group_alive(pgid, leader_start)) {
			kill(keeper, SIGKILL);
			while (waitpid(keeper, NULL, 0) < 0 && errno == EINTR)
				;
			return;
		}
		nanosleep(&tick, NULL);
	}
}

/*
 * Starts the job in a process group of its own, holding the lease, and
 * waits for it. Returns its exit status the way a shell reports it.
 */
/*
 * VISDEV_LEASE=, in the environment from before the job's fork: the child
 * reads the lease's JSON into it, since it may not allocate between fork and exec.
 */
static char lease_env[CLI_LEASE_ENV_SIZE];

static int run_job(struct vd_lease *lease, const struct vd_system *sys, const char *program,
		   char **argv, char **sh_argv)
{
	int fds[2], go[2], status = -1, child_errno = 0, own_tty, err;
	unsigned long long leader_start;
	sigset_t old_mask;
	pid_t pid, keeper;
	ssize_t n;

	own_tty = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
	/*
	 * fds: the child's exec error back to us. go: the child waits on it until
	 * the lease record names the job, so that the job never sees a record
	 * that still names visdev (a nested visdev would not know its own lease),
	 * and reads VISDEV_LEASE from it. A socket: a child gone is no SIGPIPE.
	 */
	if (pipe2(fds, O_CLOEXEC) < 0) {
		cli_error("cannot start '%s': %s", argv[0], strerror(errno));
		return EXIT_FAIL;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) < 0) {
		cli_error("cannot start '%s': %s", argv[0], strerror(errno));
		close_pair(fds);
		return EXIT_FAIL;
	}
	/* a signal that comes while the job starts waits until it can reach the job */
	sigprocmask(SIG_BLOCK, &forwarded_set, &old_mask);
	if (got_signal) {
		/* asked to stop after the lease was taken: the job is not started */
		sigprocmask(SIG_SETMASK, &old_mask, NULL);
		close_pair(fds);
		close_pair(go);
		die_signal = got_signal == SIGINT ? SIGINT : 0;
		return 128 + got_signal;
	}
	pid = fork();
	if (pid < 0) {
		sigprocmask(SIG_SETMASK, &old_mask, NULL);
		close_pair(fds);
		close_pair(go);
		cli_error("cannot start '%s': %s", argv[0], strerror(errno));
		return EXIT_FAIL;
	}
	if (pid == 0) {
		/* the child: async-signal-safe calls only */
		struct sigaction dfl;
		int e;

		close(fds[0]);
		close(go[1]);
		setpgid(0, 0);
		if (own_tty)
			give_terminal(getpid());
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) {
			struct sigaction cur;

			if (sigaction(forwarded[i], NULL, &cur) == 0 && cur.sa_handler == forward)
				sigaction(forwarded[i], &dfl, NULL);
		}
		cli_receive_lease_env(
			go[0], lease_env); /* up to end of file, once the record names the job */
		sigprocmask(SIG_SETMASK, &old_mask, NULL);
		if (vd_lease_inherit(lease) == 0)
			exec_program(program, argv, sh_argv);
		e = errno;
		(void)!write(fds[1], &e, sizeof(e));
		_exit(e == ENOENT ? 127 : 126);
	}
	close(fds[1]);
	close(go[0]);
	setpgid(pid, pid);
	job_pgid = pid;
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	if (own_tty)
		give_terminal(pid);
	err = vd_lease_set_job(lease, pid, pid);
	cli_send_lease_env(go[1], lease, sys);
	leader_start = start_time(pid);
	keeper = start_keeper(lease, pid, leader_start, (int[2]){ fds[0], go[1] });
	close(go[1]); /* the job may start, before any note (a background write may stop us) */
	if (err)
		cli_error("note: the lease record still names visdev, not the job: %s",
			  vd_error_last());
	/*
	 * Wait first, the exec error after: a Ctrl-Z may stop the child before
	 * it execs, and that stop must reach us here, not find us blocked on the pipe.
	 */
	for (;;) {
		if (waitpid(pid, &status, own_tty ? WUNTRACED : 0) < 0) {
			if (errno == EINTR)
				continue;
			cli_error("cannot wait for '%s': %s", argv[0], strerror(errno));
			status = -1;
			break;
		}
		if (!WIFSTOPPED(status))
			break;
		/* Ctrl-Z: stop with the job, as a shell's job would, and resume it with us */
		if (tcgetpgrp(STDIN_FILENO) == pid)
			give_terminal(getpgrp());
		kill(getpid(), SIGSTOP);
		if (tcgetpgrp(STDIN_FILENO) == getpgrp())
			give_terminal(pid);
		kill(-pid, SIGCONT);
	}
	job_pgid = 0;
	/* the child has ended: its exec error, if any, is in the pipe, else end of file */
	do
		n = read(fds[0], &child_errno, sizeof(child_errno));
	while (n < 0 && errno == EINTR);
	close(fds[0]);
	if (status != -1 && keeper > 0)
		end_keeper(keeper, pid, leader_start);
	/* take the terminal back only from the job: not when in the background (bg) */
	if (own_tty && tcgetpgrp(STDIN_FILENO) == pid)
		give_terminal(getpgrp());
	if (n == (ssize_t)sizeof(child_errno)) {
		cli_error("cannot run '%s': %s", argv[0], strerror(child_errno));
		return child_errno == ENOENT ? 127 : 126;
	}
	if (status == -1)
		return EXIT_FAIL;
	if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGQUIT))
		die_signal = WTERMSIG(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

/*
 * Dies of the signal the job died of, as shells expect of a program whose
 * child a Ctrl-C (or Ctrl-\) ended: a shell that sees visdev exit 130
 * instead goes on with its loop or script. No core for SIGQUIT: the job's
 * is the one that matters.
 */
static void die_of(int sig)
{
	struct rlimit no_core = { 0, 0 };
	sigset_t set;

	fflush(stdout);
	fflush(stderr);
	if (sig == SIGQUIT)
		setrlimit(RLIMIT_CORE, &no_core);
	signal(sig, SIG_DFL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
}

/* Whether a word is a number of seconds, as --wait takes. */
static int parse_number(const char *s)
{
	char *end;

	strtod(s, &end);
	return end != s && !*end;
}

/* Parses --wait's SECONDS; -1 for ever. Returns -2 (after saying why) when malformed. */
static double parse_wait(const char *arg)
{
	char *end;
	double v;

	if (!arg)
		return -1;
	v = strtod(arg, &end);
	if (end == arg || *end || !(v >= 0) || v > 1e7) {
		cli_error("--wait takes a number of seconds, not '%s'", arg);
		return -2;
	}
	return v;
}

/* How long a run without --wait tries while the allocation lock is held by another. */
#define BUSY_PATIENCE_S 2

/* Where the request stands: "place 2 of 3 in line, for 4 GPUs, holding GPU 1". */
static void place_text(char *buf, size_t n, const struct vd_waiter *w, const struct vd_system *sys,
		       unsigned want)
{
	unsigned place, of;
	const struct vd_device_ref *holds;
	size_t nholds, len;
	char held[256];

	place = vd_waiter_place(w, &of);
	holds = vd_waiter_holds(w, &nholds);
	len = (size_t)snprintf(buf, n, "place %u of %u in line, for %u GPU%s", place, of, want,
			       want == 1 ? "" : "s");
	cli_devices_text(held, sizeof(held), sys, holds, nholds);
	if (nholds && len < n)
		snprintf(buf + len, n - len, ", holding %s", held);
}

/*
 * Sleeps in line until a try is worth it (1), or the deadline (0), or
 * an error or a signal (< 0). On a terminal, keeps one status line up to
 * date meanwhile. The first in line looks again each second (NVML's view
 * changes without a lease ending); the others each few seconds, in case
 * the first in line is stopped; a lease held without a record, after ms.
 */
static int sleep_in_line(struct vd_waiter *w, const struct vd_system *sys, int ms, double deadline,
			 double start, unsigned want, int status)
{
	double until = cli_now() + ms / 1000.0;

	for (;;) {
		double now = cli_now(), end = until;
		char where[400];
		int r;

		if (deadline > 0 && deadline < end)
			end = deadline;
		if (status) {
			place_text(where, sizeof(where), w, sys, want);
			fprintf(stderr, "\r\033[Kvisdev: waiting: %s, %.0f s\r", where,
				now - start);
			fflush(stderr);
		}
		if (now >= end)
			return deadline > 0 && now >= deadline ? 0 : 1;
		r = vd_waiter_wait(w, (int)((status && end - now > 1 ? 1 : end - now) * 1000) + 1);
		if (r != 0 || got_signal)
			return r;
	}
}

/*
 * Leases GPUs, waiting in line for them with waiter, if not NULL. Returns
 * an exit code; on success *lease, *sys and *parent (the environment's
 * value, resolved on *sys) are set.
 */
static int lease_gpus(struct vd_lease **lease, struct vd_system **sys,
		      struct vd_resolution **parent, const struct cli_globals *g,
		      const struct cli_select *sel, struct vd_waiter *waiter, const char *dir,
		      double wait, int quiet, const char *cmdline)
{
	struct vd_choice *choice = NULL;
	struct vd_backend *backend = NULL;
	double start = cli_now(), deadline = wait >= 0 ? start + wait : 0;
	int rc, err, said = 0, said_busy = 0, settle_ms = 0;
	int status = !quiet && isatty(STDERR_FILENO);
	unsigned want = sel->opts.n ? sel->opts.n : 1;

	/* opened once: a wait reads the GPUs again and again */
	rc = cli_backend(&backend, g);
	while (!rc) {
		int unsettled;
		char where[400];

		/* the last try's snapshot named what the wait held; each try takes a new one */
		vd_system_free(*sys);
		*sys = NULL;
		err = vd_backend_snapshot(sys, backend);
		rc = err ? cli_library_error(err) : cli_resolve_env(parent, *sys, !said);
		if (rc)
			break;
		err = waiter ? vd_waiter_acquire(waiter, lease, &choice, *sys, *parent, &sel->opts,
						 cmdline) :
			       vd_lease_acquire(lease, &choice, dir, *sys, *parent, &sel->opts,
						cmdline);
		if (!err)
			break;
		vd_resolution_free(*parent);
		*parent = NULL;
		/*
		 * Locks found held without a live record: a lease ending this very
		 * moment (its record closed before its locks), or a program other
		 * than visdev holding one. Either way, look again soon.
		 */
		if (err == VD_EINTR && !got_signal)
			continue; /* another signal (a child's end): try again */
		if (err == VD_EINTR) {
			rc = 128 + got_signal;
			break;
		}
		unsettled = err == VD_EBUSY || (err == VD_ENOFIT && choice->unknown_holders);
		if (err == VD_EBUSY && !said_busy++)
			cli_error("waiting: %s", vd_error_last());
		if (err == VD_EBUSY && waiter)
			goto wait;
		if (err == VD_EBUSY) {
			/* without --wait, a held allocation lock is waited on for a moment only */
			if (cli_now() >= start + BUSY_PATIENCE_S) {
				cli_error("%s; giving up after %d s (to wait for it, use --wait)",
					  vd_error_last(), BUSY_PATIENCE_S);
				rc = EXIT_NONE;
				break;
			}
			poll(NULL, 0, 50);
			if (got_signal) {
				rc = 128 + got_signal;
				break;
			}
			vd_resolution_free(*parent);
			*parent = NULL;
			continue;
		}
		if (err != VD_ENOFIT) {
			rc = cli_library_error(err);
			break;
		}
		if (!waiter || choice->never || (wait >= 0 && cli_now() >= deadline)) {
			cli_error("%s%s", vd_error_last(),
				  choice->never ? ", and never will on this machine" :
				  waiter	? " (waited long enough)" :
						  "");
			cli_print_reasons(choice, *sys);
			if (!cli_note_own_leases(*sys) && !waiter && !choice->never)
				cli_error("to wait until GPUs fit, use --wait");
			rc = EXIT_NONE;
			break;
		}
		if (!said && cli_note_own_leases(*sys)) {
			/* the job would wait for its own leases to end: for ever */
			cli_error("%s, and waiting inside the job for its own GPUs would never end",
				  vd_error_last());
			cli_print_reasons(choice, *sys);
			rc = EXIT_NONE;
			break;
		}
		if (!said++ && !quiet) {
			cli_error("waiting: %s", vd_error_last());
			cli_print_reasons(choice, *sys);
			place_text(where, sizeof(where), waiter, *sys, want);
			cli_error("waiting: %s", where);
		}
wait:
		vd_choice_free(choice);
		choice = NULL;
		/*
		 * After finding locks held without a record, look again soon: 10 ms,
		 * then twice as long each time, up to the second.
		 */
		settle_ms = !unsettled	    ? 0 :
			    !settle_ms	    ? 10 :
			    settle_ms < 500 ? settle_ms * 2 :
					      1000;
		err = sleep_in_line(waiter, *sys,
				    settle_ms			       ? settle_ms :
				    vd_waiter_place(waiter, NULL) <= 1 ? 1000 :
									 5000,
				    deadline, start, want, status);
		if (err == VD_EINTR || got_signal) {
			rc = 128 + (got_signal ? got_signal : SIGINT);
			break;
		}
		if (err < 0) {
			rc = cli_library_error(err);
			break;
		}
		if (err == 0) {
			if (status)
				fprintf(stderr, "\r\033[K");
			cli_error("no GPU fits (waited long enough)");
			rc = EXIT_NONE;
			break;
		}
	}
	if (status && said)
		fprintf(stderr, "\r\033[K");
	if (!rc && said && !quiet) {
		const struct vd_device_ref *d;
		char got[256];
		size_t nd;

		d = vd_lease_devices(*lease, &nd);
		cli_devices_text(got, sizeof(got), *sys, d, nd);
		cli_error("got %s after %.1f s in line", got, cli_now() - start);
	}
	vd_choice_free(choice);
	vd_backend_free(backend);
	if (rc) {
		vd_resolution_free(*parent);
		*parent = NULL;
		vd_system_free(*sys);
		*sys = NULL;
	}
	return rc;
}

int cmd_run(int argc, char **argv)
{
	enum {
		OPT_WAIT = 256
	};
	static const struct option options[] = { { "wait", optional_argument, NULL, OPT_WAIT },
						 { "quiet", no_argument, NULL, 'q' },
						 CLI_SELECT_OPTIONS,
						 CLI_GLOBAL_OPTIONS };
	struct cli_globals g = { 0 };
	struct cli_select sel;
	struct vd_system *sys = NULL;
	struct vd_lease *lease = NULL;
	struct vd_resolution *parent = NULL;
	struct vd_waiter *waiter = NULL;
	const struct vd_device_ref *devs;
	char *value = NULL, *program = NULL, *cmdline = NULL, **sh_argv = NULL;
	const char *dir = cli_lease_dir();
	double wait = -3; /* -3: do not wait; -1: for ever */
	size_t ndevs;
	int opt, rc = -1, quiet = 0;

	cli_select_init(&sel, argv);
	while (rc < 0 && (opt = cli_getopt(argc, argv, "+hqn:", options)) != -1) {
		int r = cli_select_option(&sel, opt, optarg);

		if (r < 0)
			rc = EXIT_USAGE;
		else if (r == 0 && opt == 'q')
			quiet = 1;
		else if (r == 0 && opt == OPT_WAIT) {
			wait = parse_wait(optarg);
			if (wait == -2)
				rc = EXIT_USAGE;
		} else if (r == 0 && !cli_global_option(&g, opt, optarg))
			rc = EXIT_USAGE;
	}
	if (rc >= 0)
		goto out;
	if (cli_wants_help(&g, usage)) {
		rc = EXIT_OK;
		goto out;
	}
	if (g.json) {
		/* the command's output is the command's: nothing of run's to print as JSON */
		cli_error(
			"run has no output of its own for --json: to see the choice as JSON, use "
			"'visdev pick --json'; to see the lease while the job runs, 'visdev leases "
			"--json'; inside the job, VISDEV_LEASE is its lease as JSON");
		rc = EXIT_USAGE;
		goto out;
	}
	if (optind == argc) {
		rc = cli_usage("run", "run needs a command: visdev run [options] -- CMD [ARGS...]");
		goto out;
	}
	if (wait == -1 && optind + 1 < argc && parse_number(argv[optind])) {
		cli_error("--wait takes its seconds as --wait=%s; as written, '%s' would be run as "
			  "the command",
			  argv[optind], argv[optind]);
		rc = EXIT_USAGE;
		goto out;
	}
	program = find_program(argv[optind]);
	if (!program) {
		cli_error("cannot run '%s': command not found", argv[optind]);
		rc = 127;
		goto out;
	}
	{
		struct stat st;

		if (stat(program, &st) == 0 && S_ISDIR(st.st_mode)) {
			cli_error("cannot run '%s': Is a directory", argv[optind]);
			rc = 126;
			goto out;
		}
	}
	cmdline = join_args(argv + optind);
	handle_signals();
	if (wait != -3 && (rc = vd_waiter_new(&waiter, dir)) != 0) {
		rc = cli_library_error(rc);
		goto out;
	}
	rc = lease_gpus(&lease, &sys, &parent, &g, &sel, waiter, dir, wait, quiet, cmdline);
	if (got_signal) {
		/* asked to stop while leasing: the job is not started */
		rc = 128 + got_signal;
		die_signal = got_signal == SIGINT ? SIGINT : 0;
		goto out;
	}
	if (rc == EXIT_NONE && sel.or_cpu) {
		cli_error(
			"no GPU fits; running on the CPU (--or-cpu): CUDA_VISIBLE_DEVICES is empty");
		value = strdup("");
	} else if (rc) {
		goto out;
	} else {
		devs = vd_lease_devices(lease, &ndevs);
		rc = cli_child_value(&value, sys, parent, devs, ndevs, sel.format);
		if (rc)
			goto out;
	}
	if (!value || setenv("CUDA_VISIBLE_DEVICES", value, 1) ||
	    setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1) ||
	    (lease && putenv(strcpy(lease_env, CLI_LEASE_ENV_PREFIX)))) {
		cli_error("out of memory");
		rc = EXIT_FAIL;
		goto out;
	}
	if (!lease)
		unsetenv("VISDEV_LEASE");
	sh_argv = shell_args(program, argv + optind);
	if (lease) {
		rc = run_job(lease, sys, program, argv + optind, sh_argv);
	} else {
		exec_program(program, argv + optind, sh_argv);
		cli_error("cannot run '%s': %s", argv[optind], strerror(errno));
		rc = errno == ENOENT ? 127 : 126;
	}
out:
	vd_lease_free(lease);
	vd_waiter_free(waiter); /* after the job: see vd_waiter_free() */
	vd_resolution_free(parent);
	vd_system_free(sys);
	free(value);
	free(program);
	free(sh_argv);
	free(cmdline);
	cli_select_release(&sel);
	if (die_signal)
		die_of(die_signal);
	return rc < 0 ? EXIT_OK : rc;
}
