/*
 * cmd_queue.c - `visdev queue`: many jobs over the GPUs as they free, each
 * on a lease of its own, standing in the same line as every `visdev run`;
 * a journal makes the sweep resumable after a crash or a stop.
 *
 * One process, one event loop: a job's end (SIGCHLD through a signalfd)
 * starts the next at once; the line's wake-ups, the jobs' output and the
 * signals that stop the queue are all polled together.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "queue_slurm.h"

extern char **environ;

static const char usage[] =
	"usage: visdev queue [options] FILE|-\n"
	"       visdev queue [options] --template CMD --grid NAME=V1,V2 [--grid ...]\n"
	"       visdev queue --status STATE [--json]\n"
	"       visdev queue --slurm [slurm options] FILE|- | --template CMD --grid ...\n"
	"       visdev queue --resume|--status|--cancel DIR   (a sweep given to Slurm)\n"
	"\n"
	"Runs each job (one shell command a line of FILE, '-' for standard input;\n"
	"blank lines and # comments skipped) as soon as GPUs that fit it are free,\n"
	"each on a lease of its own and in the same line as 'visdev run --wait', in\n"
	"file order. A journal records every start and end, so that --resume runs\n"
	"only the jobs that did not finish. Exit 0 when every job succeeded, 1 when\n"
	"any failed, 3 when a job can never fit here, 130 when stopped.\n"
	"\n" CLI_SELECT_USAGE
	"  --template CMD     a job per combination of the --grid values, {NAME}\n"
	"                     replaced by each (the first --grid varies slowest)\n"
	"  --grid NAME=V1,V2  the values of {NAME}; repeat for more\n"
	"  --max-parallel K   at most K jobs at once\n"
	"  --state FILE       the journal (default FILE.journal beside the job file,\n"
	"                     or visdev-queue.journal here for '-' and a grid)\n"
	"  --resume           run only the jobs the journal does not show succeeded\n"
	"  --force            resume a changed job file, or start over a cut-short run\n"
	"  --retries R        run a failed job again, up to R more times\n"
	"  --log-dir DIR      each job's output in DIR/N.out and DIR/N.err, not here\n"
	"  --grace SECONDS    on Ctrl-C, how long jobs have after SIGTERM (default 10)\n"
	"  -q, --quiet        no progress line, no word about waiting\n"
	"  --status STATE     show the queue of that journal, running or finished\n"
	"\nOn a cluster, --slurm hands the jobs to Slurm as job arrays (one sbatch call\n"
	"each), each task run by 'visdev queue --task ID DIR' on the GPUs Slurm gives\n"
	"it, with CUDA_DEVICE_ORDER=PCI_BUS_ID; then follows them (Ctrl-C detaches):\n"
	"  --slurm            submit to Slurm; -n G is GPUs per job (default 1),\n"
	"                     --max-parallel K at most K at once, --state DIR the\n"
	"                     state folder (default FILE.slurm, shared with the nodes)\n"
	"  --partition P, --time T, --account A   passed to sbatch\n"
	"  --sbatch-arg ARG   another sbatch option, as given; repeat for more\n"
	"  --detach           submit, and do not follow\n"
	"  --resume DIR       submit again what did not finish successfully\n"
	"  --status DIR, --cancel DIR   where the sweep stands; scancel it\n"
	"\nJob N gets CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, VISDEV_LEASE and\n"
	"VISDEV_JOB_INDEX=N (from 0). Leases live in VISDEV_LEASE_DIR (default\n" VD_LEASE_DIR_DEFAULT
	").\n" CLI_GLOBAL_USAGE;

#define GRACE_DEFAULT_S	   10
#define PROGRESS_EVERY_S   0.2
#define SNAPSHOT_MAX_AGE_S 1.0
#define SYNC_EVERY_S	   1.0
#define LINE_MAX_BYTES	   8192
#define SUMMARY_ROWS	   100

struct queue_options {
	struct cli_globals g;
	struct cli_select sel;
	const char *file;
	const char *templ;
	const char **grids;
	size_t ngrids;
	char *state;
	const char *log_dir;
	const char *status;
	long max_parallel; /* 0: as many as fit */
	long retries;
	double grace;
	int resume, force, quiet;
	/* --slurm and its options */
	int slurm, detach, local_only;
	const char *partition, *time_limit, *account, *task, *cancel;
	const char **sbatch_args;
	size_t nargs;
	const char *local_option; /* an option that means nothing to Slurm, given with --slurm */
	const char *state_given;  /* --state as given, for the Slurm state folder */
	char local_name[64];
};

/* Output of a running job, cut into whole lines. */
struct lines {
	int fd; /* the pipe's read end; -1 closed */
	size_t len;
	char buf[LINE_MAX_BYTES];
};

struct running {
	size_t job;
	pid_t pid;
	struct vd_lease *lease;
	struct lines out[2]; /* stdout, stderr */
	double start;
	char gpus[128]; /* "GPU 0, GPU 3" */
};

struct queue {
	struct queue_options *o;
	struct vd_jobs *jobs;
	struct vd_queue *state; /* which job is next, how each went */
	struct running **run;	/* nrun of them, room for caprun */
	size_t nrun, caprun;
	struct vd_journal_writer *journal;
	struct vd_waiter *waiter;
	struct vd_lease **spare; /* leases of jobs that ended, for the next: nobody else waits */
	size_t nspare, capspare;
	struct vd_backend *backend;
	struct vd_system *sys;
	struct vd_resolution *parent;
	double sys_at;
	const char *dir;
	char private_dir[64];	 /* inside an allocation: a lease directory of the queue's own */
	char name[64];		 /* the queue, for the lease records: "jobs.txt" */
	char journal_path[4096]; /* the journal's absolute path, for the lease records */
	int sigfd, null_fd;
	int progress, progress_shown;
	double t0, drawn_at, synced_at;
	int waiting, turn, said_waiting, retry_soon;
	int full; /* our jobs hold what fits: try again at an end, or after a second */
	double full_at;
	int stopping, stop_signal, never, broken;
	double kill_at;
	/*
	 * Jobs whose leader ended while others of their group live on, or hold
	 * its output: their output is still passed on (a background process
	 * that writes to a closed pipe would die of SIGPIPE), and a stop
	 * signals them too. Not waited for, but when stopping.
	 */
	struct running **ended;
	size_t nended, capended;
};

/* The counts of the queue now. */
static struct vd_queue_counts counts(const struct queue *q)
{
	struct vd_queue_counts c;

	vd_queue_counts(q->state, &c);
	return c;
}

static int parse_grace(double *out, const char *arg)
{
	char *end;

	*out = strtod(arg, &end);
	if (end == arg || *end || !(*out >= 0) || *out > 86400) {
		cli_usage("queue", "--grace takes a number of seconds, not '%s'", arg);
		return -1;
	}
	return 0;
}

/* Reads the command line into o. Returns -1 to go on, or the exit code. */
static int parse_options(struct queue_options *o, int argc, char **argv)
{
	enum {
		OPT_TEMPLATE = 256,
		OPT_GRID,
		OPT_MAX_PARALLEL,
		OPT_STATE,
		OPT_RESUME,
		OPT_FORCE,
		OPT_RETRIES,
		OPT_LOG_DIR,
		OPT_GRACE,
		OPT_STATUS,
		OPT_SLURM,
		OPT_PARTITION,
		OPT_TIME,
		OPT_ACCOUNT,
		OPT_SBATCH_ARG,
		OPT_DETACH,
		OPT_TASK,
		OPT_CANCEL,
	};
	static const struct option options[] = {
		{ "template", required_argument, NULL, OPT_TEMPLATE },
		{ "grid", required_argument, NULL, OPT_GRID },
		{ "max-parallel", required_argument, NULL, OPT_MAX_PARALLEL },
		{ "state", required_argument, NULL, OPT_STATE },
		{ "resume", no_argument, NULL, OPT_RESUME },
		{ "force", no_argument, NULL, OPT_FORCE },
		{ "retries", required_argument, NULL, OPT_RETRIES },
		{ "log-dir", required_argument, NULL, OPT_LOG_DIR },
		{ "grace", required_argument, NULL, OPT_GRACE },
		{ "status", required_argument, NULL, OPT_STATUS },
		{ "slurm", no_argument, NULL, OPT_SLURM },
		{ "partition", required_argument, NULL, OPT_PARTITION },
		{ "time", required_argument, NULL, OPT_TIME },
		{ "account", required_argument, NULL, OPT_ACCOUNT },
		{ "sbatch-arg", required_argument, NULL, OPT_SBATCH_ARG },
		{ "detach", no_argument, NULL, OPT_DETACH },
		{ "task", required_argument, NULL, OPT_TASK },
		{ "cancel", required_argument, NULL, OPT_CANCEL },
		{ "quiet", no_argument, NULL, 'q' },
		CLI_SELECT_OPTIONS,
		CLI_GLOBAL_OPTIONS,
	};
	int opt;

	o->grids = calloc((size_t)argc, sizeof(*o->grids));
	o->sbatch_args = calloc((size_t)argc, sizeof(*o->sbatch_args));
	if (!o->grids || !o->sbatch_args) {
		cli_error("out of memory");
		return EXIT_FAIL;
	}
	while ((opt = cli_getopt(argc, argv, "hqn:", options)) != -1) {
		int r = cli_select_option(&o->sel, opt, optarg), bad = 0;

		if (r < 0)
			return EXIT_USAGE;
		/* what Slurm's GRES cannot ask: a model, memory, utilisation, a policy */
		if (r > 0 && opt != 'n' && !o->local_option) {
			/* "--mem 10G" or "--mem=10G": the option's name */
			const char *w = optarg && argv[optind - 1] == optarg ? argv[optind - 2] :
									       argv[optind - 1];

			snprintf(o->local_name, sizeof(o->local_name), "%.*s", (int)strcspn(w, "="),
				 w);
			o->local_option = o->local_name;
		}
		if (r > 0)
			continue;
		switch (opt) {
		case OPT_TEMPLATE:
			o->templ = optarg;
			break;
		case OPT_GRID:
			o->grids[o->ngrids++] = optarg;
			break;
		case OPT_MAX_PARALLEL:
			bad = cli_parse_count(&o->max_parallel, "--max-parallel", optarg, 1,
					      1000000);
			break;
		case OPT_STATE:
			free(o->state);
			o->state = strdup(optarg);
			o->state_given = optarg;
			break;
		case OPT_RESUME:
			o->resume = 1;
			break;
		case OPT_FORCE:
			o->force = 1;
			break;
		case OPT_RETRIES:
			bad = cli_parse_count(&o->retries, "--retries", optarg, 0, 100);
			break;
		case OPT_LOG_DIR:
			o->log_dir = optarg;
			o->local_option = o->local_option ? o->local_option : "--log-dir";
			break;
		case OPT_GRACE:
			bad = parse_grace(&o->grace, optarg);
			o->local_option = o->local_option ? o->local_option : "--grace";
			break;
		case OPT_STATUS:
			o->status = optarg;
			break;
		case OPT_SLURM:
			o->slurm = 1;
			break;
		case OPT_PARTITION:
			o->partition = optarg;
			break;
		case OPT_TIME:
			o->time_limit = optarg;
			break;
		case OPT_ACCOUNT:
			o->account = optarg;
			break;
		case OPT_SBATCH_ARG:
			o->sbatch_args[o->nargs++] = optarg;
			break;
		case OPT_DETACH:
			o->detach = 1;
			break;
		case OPT_TASK:
			o->task = optarg;
			break;
		case OPT_CANCEL:
			o->cancel = optarg;
			break;
		case 'q':
			o->quiet = 1;
			break;
		default:
			if (!cli_global_option(&o->g, opt, optarg))
				return EXIT_USAGE;
		}
		if (bad)
			return EXIT_USAGE;
	}
	if (cli_wants_help(&o->g, usage))
		return EXIT_OK;
	if (o->task)
		return optind + 1 == argc ?
			       -1 :
			       cli_usage("queue", "--task ID takes the sweep's folder, "
						  "as its batch script gives it");
	if (o->cancel)
		return optind < argc ? cli_usage("queue", "--cancel takes no job file ('%s' given)",
						 argv[optind]) :
				       -1;
	if (o->status && slurm_is_dir(o->status))
		return optind < argc ? cli_usage("queue", "--status takes no job file ('%s' given)",
						 argv[optind]) :
				       -1;
	if (o->resume && optind + 1 == argc && slurm_is_dir(argv[optind])) {
		o->slurm = 1;
		o->file = argv[optind];
		return o->local_option ?
			       cli_usage("queue", "%s is for a local queue, not a sweep on Slurm",
					 o->local_option) :
			       -1;
	}
	if (!o->slurm && (o->partition || o->time_limit || o->account || o->nargs || o->detach))
		return cli_usage("queue", "%s is for a sweep on Slurm: add --slurm",
				 o->partition  ? "--partition" :
				 o->time_limit ? "--time" :
				 o->account    ? "--account" :
				 o->nargs      ? "--sbatch-arg" :
						 "--detach");
	if (o->slurm && o->local_option)
		return cli_usage("queue",
				 "%s is for a local queue: on Slurm a job asks for GPUs by "
				 "count (-n), and Slurm chooses them",
				 o->local_option);
	if (o->status)
		return optind < argc ? cli_usage("queue", "--status takes no job file ('%s' given)",
						 argv[optind]) :
				       -1;
	if (o->sel.or_cpu)
		return cli_usage("queue",
				 "--or-cpu is not for a queue: its jobs wait for GPUs "
				 "(run them on the CPU with 'CUDA_VISIBLE_DEVICES= sh FILE')");
	if (o->ngrids && !o->templ)
		return cli_usage("queue", "--grid needs --template: the command its values go in");
	if (o->templ && optind < argc)
		return cli_usage("queue",
				 "give jobs either as a file or as --template, not both "
				 "('%s' given with --template)",
				 argv[optind]);
	if (!o->templ && optind == argc)
		return cli_usage("queue", "queue needs jobs: a file (one command a line, '-' for "
					  "standard input) or --template CMD --grid NAME=V1,V2");
	if (optind + 1 < argc)
		return cli_usage("queue", "queue takes one job file ('%s' and '%s' given)",
				 argv[optind], argv[optind + 1]);
	o->file = o->templ ? NULL : argv[optind];
	if (!o->state && o->file && strcmp(o->file, "-") &&
	    asprintf(&o->state, "%s.journal", o->file) < 0)
		o->state = NULL;
	if (!o->state)
		o->state = strdup("visdev-queue.journal");
	if (!o->state) {
		cli_error("out of memory");
		return EXIT_FAIL;
	}
	return -1;
}

int queue_read_job_file(struct vd_jobs **out, const char *file)
{
	char *text = NULL;
	size_t len = 0, cap = 0;
	FILE *f;
	int err;

	f = strcmp(file, "-") ? fopen(file, "re") : stdin;
	if (!f) {
		cli_error("cannot read the job file '%s': %s", file, strerror(errno));
		return errno == ENOENT ? EXIT_USAGE : EXIT_FAIL;
	}
	for (;;) {
		size_t n;

		if (len + 65536 > cap) {
			char *more = realloc(text, cap = 2 * cap + 65536);

			if (!more) {
				free(text);
				cli_error("out of memory");
				return EXIT_FAIL;
			}
			text = more;
		}
		n = fread(text + len, 1, cap - len, f);
		len += n;
		/* a NUL is no text: say so now, not after reading all of /dev/zero */
		if (n == 0 || memchr(text + len - n, '\0', n))
			break;
	}
	err = ferror(f);
	if (f != stdin)
		fclose(f);
	if (err) {
		free(text);
		cli_error("cannot read the job file '%s'", file);
		return EXIT_FAIL;
	}
	err = vd_jobs_parse(out, text ? text : "", len);
	free(text);
	if (err) {
		cli_error("%s: %s", file, vd_error_last());
		return EXIT_USAGE;
	}
	return 0;
}

/* The jobs the options name: the file's lines, or the template over the grid. */
static int read_jobs(struct vd_jobs **out, const struct queue_options *o)
{
	int err;

	if (!o->templ)
		return queue_read_job_file(out, o->file);
	err = vd_jobs_grid(out, o->templ, o->grids, o->ngrids);
	return err ? cli_library_error(err) : 0;
}

/* Whether the file at path begins as a journal does: one that --force may replace. */
static int is_journal(const char *path)
{
	static const char magic[] = "visdev-queue-journal 1\t";
	char head[sizeof(magic)] = "";
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	ssize_t n = fd >= 0 ? read(fd, head, sizeof(head) - 1) : -1;

	if (fd >= 0)
		close(fd);
	return n == (ssize_t)sizeof(magic) - 1 && !memcmp(head, magic, sizeof(magic) - 1);
}

/*
 * Decides what this run runs, from the journal: with --resume, the jobs it
 * does not show succeeded; without, every job, after making sure that no
 * cut-short run of the same jobs is thrown away unasked. Returns -1 to go
 * on, or an exit code.
 */
static int plan(struct queue *q)
{
	struct queue_options *o = q->o;
	struct vd_journal *j = NULL;
	int32_t pid = 0;
	int err, rc = -1;

	if (vd_journal_busy(o->state, &pid) == 1) {
		cli_error("a queue (pid %d) is running with the journal '%s' now: 'visdev queue "
			  "--status %s' shows it",
			  (int)pid, o->state, o->state);
		return EXIT_FAIL;
	}
	err = vd_journal_read(&j, o->state);
	if (err == VD_EPARSE && o->force && !o->resume && is_journal(o->state)) {
		/* a journal damaged past its last record: --force starts over */
		cli_error("note: %s: starting over with a new journal (--force)", vd_error_last());
		err = 0;
	} else if (err == VD_EPARSE) {
		cli_error("%s", vd_error_last());
		cli_error(is_journal(o->state) ?
				  "the journal is damaged: --force (without --resume) starts over "
				  "with a new one" :
				  "that file is no journal of visdev's: name another with --state");
		return EXIT_FAIL;
	}
	if (err && err != VD_ENOTFOUND)
		return cli_library_error(err);
	if (o->resume && !j) {
		cli_error("no journal '%s' to resume: run the queue without --resume (or name its "
			  "journal with --state)",
			  o->state);
		return EXIT_USAGE;
	}
	err = vd_queue_check(q->jobs, j, o->resume, o->force);
	if (err) {
		cli_error("'%s': %s", o->state, vd_error_last());
		cli_error(o->resume ? "to resume anyway, matching jobs by their number, add "
				      "--force; to start over, run without --resume" :
				      "--resume runs only those, --force starts over");
		rc = EXIT_USAGE;
	} else {
		err = vd_queue_new(&q->state, q->jobs->n, o->resume ? j : NULL,
				   (unsigned)o->retries);
		rc = err ? cli_library_error(err) : -1;
	}
	vd_journal_free(j);
	return rc;
}

/* ---- the jobs' output ---------------------------------------------------- */

/* Clears the progress line, so that other output takes its place. */
static void clear_progress(struct queue *q)
{
	if (q->progress_shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		q->progress_shown = 0;
	}
}

/* Writes all of buf to fd, or drops it when fd is gone (a closed pipe). */
static void write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

/* One whole line of job i's output, with its index in front, in one write. */
static void emit_line(struct queue *q, size_t i, int to, const char *s, size_t len)
{
	char line[LINE_MAX_BYTES + 32];
	int head = snprintf(line, sizeof(line), "[%zu] ", i);

	memcpy(line + head, s, len);
	line[head + (int)len] = '\n';
	clear_progress(q);
	write_all(to, line, (size_t)head + len + 1);
}

/* Reads what job r wrote on stream k and passes on its whole lines; at end of file, the rest. */
static void read_output(struct queue *q, struct running *r, int k)
{
	struct lines *l = &r->out[k];
	int to = k == 0 && !q->o->g.json ? STDOUT_FILENO : STDERR_FILENO;
	ssize_t n;

	while (l->fd >= 0) {
		char *nl;

		n = read(l->fd, l->buf + l->len, sizeof(l->buf) - l->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			if (l->len)
				emit_line(q, r->job, to, l->buf, l->len);
			l->len = 0;
			close(l->fd);
			l->fd = -1;
			return;
		}
		l->len += (size_t)n;
		while ((nl = memchr(l->buf, '\n', l->len))) {
			size_t used = (size_t)(nl - l->buf) + 1;

			emit_line(q, r->job, to, l->buf, used - 1);
			memmove(l->buf, l->buf + used, l->len - used);
			l->len -= used;
		}
		if (l->len == sizeof(l->buf)) {
			/* a line longer than the buffer: passed on in pieces */
			emit_line(q, r->job, to, l->buf, l->len);
			l->len = 0;
		}
	}
}

/* Closes a job's output pipes. */
static void close_output(struct running *r)
{
	for (int k = 0; k < 2; k++)
		if (r->out[k].fd >= 0) {
			close(r->out[k].fd);
			r->out[k].fd = -1;
		}
}

/* Keeps an ended job whose output or group lives on. Returns 0, or -1 out of memory. */
static int push_ended(struct queue *q, struct running *r)
{
	if (cli_grow(&q->ended, &q->capended, q->nended, sizeof(*q->ended), 8))
		return -1;
	q->ended[q->nended++] = r;
	return 0;
}

/*
 * A record the journal could not take: a resume could no longer be trusted
 * to run exactly what did not finish, so the queue starts nothing more.
 */
static void journal_lost(struct queue *q, size_t job)
{
	clear_progress(q);
	cli_error("job %zu: %s; starting no more jobs (those running finish)", job,
		  vd_error_last());
	q->broken = 1;
}

/* ---- starting a job ------------------------------------------------------ */

/* VISDEV_LEASE=..., filled in by each child before it execs (cli_receive_lease_env). */
static char lease_env[CLI_LEASE_ENV_SIZE];

static char order_env[] = "CUDA_DEVICE_ORDER=PCI_BUS_ID", sh[] = "sh", dash_c[] = "-c";

/* The environment of job i: this one's, less what visdev sets, plus those. */
static char **job_env(const char *value, size_t i)
{
	static const char *const ours[] = { "CUDA_VISIBLE_DEVICES=", "CUDA_DEVICE_ORDER=",
					    "VISDEV_LEASE=", "VISDEV_JOB_INDEX=" };
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 5, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t e = 0; e < n; e++) {
		int skip = 0;

		for (size_t o = 0; o < sizeof(ours) / sizeof(ours[0]); o++)
			skip |= !strncmp(environ[e], ours[o], strlen(ours[o]));
		if (!skip)
			env[k++] = environ[e];
	}
	if (asprintf(&env[k++], "CUDA_VISIBLE_DEVICES=%s", value) < 0 ||
	    asprintf(&env[k++], "VISDEV_JOB_INDEX=%zu", i) < 0) {
		free(env);
		return NULL;
	}
	env[k++] = order_env;
	env[k++] = lease_env;
	return env;
}

/* Frees what job_env() allocated: its two formatted entries, and the array. */
static void job_env_free(char **env)
{
	size_t n = 0;

	if (!env)
		return;
	while (env[n])
		n++;
	free(env[n - 4]);
	free(env[n - 3]);
	free(env);
}

/* The output files of job i under --log-dir, or pipes; -1 on failure, after saying why. */
static int open_output(struct queue *q, size_t i, int write_fd[2], struct running *r)
{
	for (int k = 0; k < 2; k++) {
		int fds[2];

		r->out[k].fd = write_fd[k] = -1;
		if (q->o->log_dir) {
			char path[PATH_MAX];

			snprintf(path, sizeof(path), "%s/%zu.%s", q->o->log_dir, i,
				 k ? "err" : "out");
			write_fd[k] = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
			if (write_fd[k] < 0) {
				cli_error("cannot write '%s': %s", path, strerror(errno));
				return -1;
			}
		} else {
			if (pipe2(fds, O_CLOEXEC) < 0) {
				cli_error("cannot start job %zu: %s", i, strerror(errno));
				return -1;
			}
			fcntl(fds[0], F_SETFL, O_NONBLOCK);
			r->out[k].fd = fds[0];
			write_fd[k] = fds[1];
		}
	}
	return 0;
}

/* Resets what the queue set up for itself, in the child, before exec. */
static void child_signals(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE };
	sigset_t none;

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* The UUIDs of the devices of a lease, comma-separated, for the journal. */
static char *lease_uuids(const struct vd_system *sys, const struct vd_device_ref *d, size_t n)
{
	size_t len = 1;
	char *s;

	for (size_t i = 0; i < n; i++)
		len += VD_UUID_MAX + 1;
	s = calloc(1, len);
	for (size_t i = 0; s && i < n; i++) {
		const struct vd_gpu *g = &sys->gpus[d[i].gpu];

		if (i)
			strcat(s, ",");
		strcat(s, d[i].mig >= 0 ? g->mig[d[i].mig].uuid : g->uuid);
	}
	return s;
}

/* Starts job i on lease, which it then owns. Returns 0, or -1 (the job failed to start). */
static int start_job(struct queue *q, size_t i, struct vd_lease *lease)
{
	struct running *r;
	const struct vd_device_ref *devs;
	char *value = NULL, **env = NULL, *uuids = NULL;
	char *argv[] = { sh, dash_c, q->jobs->commands[i], NULL };
	int out[2] = { -1, -1 }, go[2] = { -1, -1 }, rc = -1;
	size_t ndevs;
	pid_t pid;

	if (cli_grow(&q->run, &q->caprun, q->nrun, sizeof(*q->run), 16)) {
		cli_error("out of memory");
		vd_lease_free(lease);
		return -1;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		cli_error("out of memory");
		vd_lease_free(lease);
		return -1;
	}
	r->out[0].fd = r->out[1].fd = -1;
	devs = vd_lease_devices(lease, &ndevs);
	if (cli_child_value(&value, q->sys, q->parent, devs, ndevs, q->o->sel.format))
		goto out;
	env = job_env(value, i);
	uuids = lease_uuids(q->sys, devs, ndevs);
	if (!env || !uuids) {
		cli_error("out of memory");
		goto out;
	}
	if (open_output(q, i, out, r) ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) < 0) {
		if (go[0] < 0)
			cli_error("cannot start job %zu: %s", i, strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		cli_error("cannot start job %zu: %s", i, strerror(errno));
		goto out;
	}
	if (pid == 0) {
		/* the child: async-signal-safe calls only */
		setpgid(0, 0);
		child_signals();
		dup2(q->null_fd, STDIN_FILENO);
		dup2(out[0], STDOUT_FILENO);
		dup2(out[1], STDERR_FILENO);
		close(go[1]);
		cli_receive_lease_env(go[0], lease_env); /* once the record names the job */
		if (vd_lease_inherit(lease) == 0)
			execve("/bin/sh", argv, env);
		{
			static const char why[] = "visdev queue: cannot start /bin/sh for this job "
						  "(a command line over 128 KiB is too long)\n";

			(void)!write(STDERR_FILENO, why, sizeof(why) - 1);
		}
		_exit(126);
	}
	setpgid(pid, pid);
	close(go[0]);
	go[0] = -1;
	/* which queue (for top): a path too long to record leaves it unnamed, nothing worse */
	if (q->journal_path[0])
		vd_lease_set_queue(lease, q->journal_path, i);
	if (vd_lease_set_job(lease, pid, pid))
		cli_error("note: the lease record of job %zu still names visdev, not the job: %s",
			  i, vd_error_last());
	cli_send_lease_env(go[1], lease, q->sys);
	if (vd_journal_start(q->journal, i, pid, uuids, q->jobs->commands[i]))
		journal_lost(q, i);
	r->job = i;
	r->pid = pid;
	r->lease = lease;
	r->start = cli_now();
	cli_devices_text(r->gpus, sizeof(r->gpus), q->sys, devs, ndevs);
	if (!ndevs)
		snprintf(r->gpus, sizeof(r->gpus), "-");
	if (vd_queue_started(q->state, i, uuids))
		cli_error("note: job %zu: %s", i, vd_error_last());
	q->run[q->nrun++] = r;
	lease = NULL;
	rc = 0;
out:
	for (int k = 0; k < 2; k++) {
		if (out[k] >= 0)
			close(out[k]);
		if (go[k] >= 0)
			close(go[k]);
		if (rc && r->out[k].fd >= 0)
			close(r->out[k].fd);
	}
	if (rc)
		free(r);
	vd_lease_free(lease);
	job_env_free(env);
	free(value);
	free(uuids);
	return rc;
}

/* Takes a new snapshot (and the parent's restriction on it) when the last is stale. */
static int refresh(struct queue *q, int force)
{
	int err;

	if (q->sys && !force && cli_now() - q->sys_at < SNAPSHOT_MAX_AGE_S)
		return 0;
	vd_resolution_free(q->parent);
	q->parent = NULL;
	vd_system_free(q->sys);
	q->sys = NULL;
	err = vd_backend_snapshot(&q->sys, q->backend);
	if (err)
		return cli_library_error(err);
	q->sys_at = cli_now();
	return cli_resolve_env(&q->parent, q->sys, 0);
}

/*
 * Starts jobs, in order, while their leases can be had. The first that
 * does not fit waits in line (the waiter keeps its place); its turn comes
 * with a wake-up from the line, or with one of our own jobs ending.
 */
static void start_jobs(struct queue *q)
{
	while (!q->stopping && !q->never && !q->broken && vd_queue_next(q->state) >= 0 &&
	       (!q->o->max_parallel || q->nrun < (size_t)q->o->max_parallel)) {
		size_t i = (size_t)vd_queue_next(q->state);
		struct vd_lease *lease = NULL;
		struct vd_choice *choice = NULL;
		char cmdline[VD_COMMAND_MAX];
		int err;

		snprintf(cmdline, sizeof(cmdline), "queue %s[%zu]: %s", q->name, i,
			 q->jobs->commands[i]);
		if (q->nspare) {
			/* the lease of a job that just ended, passed on: no look at the GPUs */
			lease = q->spare[--q->nspare];
			err = vd_lease_pass(lease, cmdline);
			if (err) {
				vd_lease_free(lease);
				lease = NULL;
			}
		} else {
			if (q->waiting && !q->turn)
				return;
			if (q->full && !q->turn && cli_now() - q->full_at < 1.0)
				return;
			q->turn = 0;
			if (refresh(q, q->waiting)) {
				q->broken = 1;
				return;
			}
			err = vd_waiter_acquire(q->waiter, &lease, &choice, q->sys, q->parent,
						&q->o->sel.opts, cmdline);
		}
		if (err == 0 && choice) {
			/* room for one more beside it? if not, no doomed try in line */
			unsigned want = q->o->sel.opts.n ? q->o->sel.opts.n : 1;

			q->full = choice->nfitting < 2 * (size_t)want;
			q->full_at = cli_now();
		}
		if (err == 0) {
			q->waiting = 0;
			/* a job that cannot be started at all ends at once, as a shell's would */
			if (start_job(q, i, lease) && vd_queue_started(q->state, i, "") == 0)
				vd_queue_ended(q->state, i, 126, 0);
		} else if (err == VD_ENOFIT && choice->never) {
			clear_progress(q);
			cli_error("job %zu can never fit on this machine: %s", i, vd_error_last());
			cli_print_reasons(choice, q->sys);
			q->never = 1;
		} else if (err == VD_ENOFIT || err == VD_EBUSY) {
			/* locks without a record (a lease ending now): look again soon */
			q->retry_soon = err == VD_EBUSY || choice->unknown_holders;
			/* waiting for our own jobs to end is the queue at work: nothing to say */
			if (!q->waiting && !q->nrun && !q->said_waiting++ && !q->o->quiet) {
				clear_progress(q);
				cli_error("waiting: %s", vd_error_last());
				cli_print_reasons(choice, q->sys);
			}
			q->waiting = 1;
		} else {
			clear_progress(q);
			cli_library_error(err);
			q->broken = 1;
		}
		vd_choice_free(choice);
		if (q->waiting)
			return;
	}
}

/* ---- ends, stops and the progress line --------------------------------- */

/*
 * Whether the lease of job r, which has ended, may go straight to the next
 * job: one waits, nobody else is in line for GPUs (else the lease ends, to
 * wake them), and nothing of r lives on to use its GPUs still.
 */
static int passable(struct queue *q, const struct running *r)
{
	struct vd_line *line = NULL;
	int pass;

	if (q->nspare >= counts(q).pending || q->stopping || q->never || q->broken || q->waiting ||
	    kill(-r->pid, 0) == 0)
		return 0;
	if (cli_grow(&q->spare, &q->capspare, q->nspare, sizeof(*q->spare), 8))
		return 0;
	pass = vd_line_read(&line, q->dir) == 0 && line->n == 0;
	vd_line_free(line);
	return pass;
}

/* A job's end, once reaped: its output drained, its end journaled, its lease let go. */
static void end_job(struct queue *q, size_t slot, int status)
{
	struct running *r = q->run[slot];
	int code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);

	/* what the job wrote is passed on; what its children write, as it comes */
	for (int k = 0; k < 2; k++)
		read_output(q, r, k);
	if (vd_journal_end(q->journal, r->job, code))
		journal_lost(q, r->job);
	vd_queue_ended(q->state, r->job, code, cli_now() - r->start);
	if (passable(q, r)) {
		q->spare[q->nspare++] = r->lease;
	} else {
		vd_lease_free(r->lease);
		q->full = 0;
		q->turn = 1; /* a GPU of ours is free: worth a try now */
	}
	q->run[slot] = q->run[--q->nrun];
	r->lease = NULL;
	if ((r->out[0].fd >= 0 || r->out[1].fd >= 0 || kill(-r->pid, 0) == 0) &&
	    push_ended(q, r) == 0)
		return;
	close_output(r);
	free(r);
}

/* Reaps every job that has ended. */
static void reap(struct queue *q)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		for (size_t s = 0; s < q->nrun; s++)
			if (q->run[s]->pid == pid) {
				end_job(q, s, status);
				break;
			}
}

/* Sends sig to every running job's process group (continued, so that it can act on it). */
static void signal_jobs(struct queue *q, int sig)
{
	for (size_t s = 0; s < q->nrun; s++) {
		kill(-q->run[s]->pid, sig);
		kill(-q->run[s]->pid, SIGCONT);
	}
	for (size_t k = 0; k < q->nended; k++)
		kill(-q->ended[k]->pid, sig);
}

/*
 * Lets go of the ended jobs whose output is closed and whose group is gone;
 * returns whether any group of an ended job still lives.
 */
static int ended_alive(struct queue *q)
{
	size_t k = 0, alive = 0;

	while (k < q->nended) {
		struct running *r = q->ended[k];
		int lives = !(kill(-r->pid, 0) < 0 && errno == ESRCH);

		if (!lives && r->out[0].fd < 0 && r->out[1].fd < 0) {
			free(r);
			q->ended[k] = q->ended[--q->nended];
			continue;
		}
		alive += lives;
		k++;
	}
	return alive > 0;
}

/* The first stop: jobs get SIGTERM and the grace; a second Ctrl-C, or the grace's end, SIGKILL. */
static void stop(struct queue *q, int sig)
{
	clear_progress(q);
	if (q->stopping && sig == SIGINT) {
		signal_jobs(q, SIGKILL);
		return;
	}
	if (q->stopping)
		return;
	q->stopping = 1;
	q->stop_signal = sig;
	vd_queue_stop(q->state);
	q->kill_at = cli_now() + q->o->grace;
	vd_waiter_free(q->waiter); /* out of the line */
	q->waiter = NULL;
	q->waiting = q->turn = 0;
	while (q->nspare)
		vd_lease_free(q->spare[--q->nspare]);
	if (q->nrun)
		cli_error("stopping: %zu job%s sent SIGTERM, SIGKILL in %g s (Ctrl-C again: at "
			  "once)",
			  q->nrun, q->nrun == 1 ? "" : "s", q->o->grace);
	signal_jobs(q, SIGTERM);
}

static void format_duration(char *buf, size_t n, double s)
{
	if (s < 60)
		snprintf(buf, n, "%.1fs", s);
	else if (s < 3600)
		snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
	else
		snprintf(buf, n, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

/* The progress line, on a terminal: counts, which GPU runs which job, and the time left. */
static void draw_progress(struct queue *q)
{
	struct winsize ws;
	struct vd_queue_counts c = counts(q);
	size_t width = 100, len, finished = c.done + c.failed;
	char line[1024], eta[32] = "";

	if (!q->progress || q->stopping)
		return;
	/* what the line reports is on disk first */
	vd_journal_sync(q->journal);
	q->synced_at = cli_now();
	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
		width = ws.ws_col;
	if (finished && c.to_run > finished) {
		double rate = finished / (cli_now() - q->t0);

		format_duration(eta, sizeof(eta), (c.to_run - finished) / rate);
	}
	len = (size_t)snprintf(line, sizeof(line),
			       "queue: %zu done, %zu failed, %zu running, %zu waiting%s%s", c.done,
			       c.failed, q->nrun, c.pending, eta[0] ? ", ETA " : "", eta);
	for (size_t s = 0; s < q->nrun && len < sizeof(line); s++)
		len += (size_t)snprintf(line + len, sizeof(line) - len, "%s%s #%zu",
					s ? ", " : "; ", q->run[s]->gpus, q->run[s]->job);
	if (len > sizeof(line) - 1)
		len = sizeof(line) - 1;
	if (len > width - 1)
		len = width - 1;
	line[len] = '\0';
	fprintf(stderr, "\r\033[K%s", line);
	fflush(stderr);
	q->progress_shown = 1;
	q->drawn_at = cli_now();
}

/* How long poll() may sleep: until the next redraw, retry, sync or SIGKILL. */
/*
 * When a request waiting in line looks again without a wake-up: soon after
 * locks held without a record, each second for the first in line (NVML's
 * view changes without a lease ending), else each few seconds.
 */
static double next_look(const struct queue *q)
{
	return q->sys_at + (q->retry_soon			  ? 0.01 :
			    vd_waiter_place(q->waiter, NULL) <= 1 ? 1.0 :
								    5.0);
}

static int poll_timeout(const struct queue *q)
{
	double now = cli_now(), until = -1;

	if (q->progress)
		until = q->drawn_at + PROGRESS_EVERY_S;
	if (q->full && counts(q).pending && !q->stopping && (until < 0 || q->full_at + 1.0 < until))
		until = q->full_at + 1.0;
	if (q->waiting && !q->stopping && (until < 0 || next_look(q) < until))
		until = next_look(q);
	/* after SIGKILL, a look every 10 ms until the groups are gone */
	if (q->stopping && (until < 0 || q->kill_at < until))
		until = q->kill_at > now ? q->kill_at : now + 0.01;
	if (until < 0 || q->synced_at + SYNC_EVERY_S < until)
		until = q->synced_at + SYNC_EVERY_S;
	return until <= now ? 0 : (int)((until - now) * 1000) + 1;
}

/* The event loop: until every job has run (or the queue stops), and every job has ended. */
static void loop(struct queue *q)
{
	struct pollfd *fds = NULL;
	size_t capfds = 0;

	struct running **owner = NULL; /* whose output each polled descriptor is */

	while (q->nrun || (vd_queue_next(q->state) >= 0 && !q->never && !q->broken) ||
	       (q->stopping && ended_alive(q))) {
		size_t nfds = 0, first_out, want = 2 + 2 * (q->nrun + q->nended);
		int timeout;

		start_jobs(q);
		if (!q->nrun && !(q->stopping && ended_alive(q)) &&
		    (vd_queue_next(q->state) < 0 || q->never || q->broken))
			break;
		if (want > capfds) {
			struct pollfd *more = realloc(fds, (capfds = 2 * want + 16) * sizeof(*fds));
			struct running **more_owner =
				more ? realloc(owner, capfds * sizeof(*owner)) : NULL;

			fds = more ? more : fds;
			owner = more_owner ? more_owner : owner;
			if (!more || !more_owner) {
				cli_error("out of memory");
				q->broken = 1;
				break;
			}
		}
		fds[nfds++] = (struct pollfd){ q->sigfd, POLLIN, 0 };
		if (q->waiter && q->waiting)
			fds[nfds++] = (struct pollfd){ vd_waiter_fd(q->waiter), POLLIN, 0 };
		first_out = nfds;
		for (size_t s = 0; s < q->nrun + q->nended; s++)
			for (int k = 0; k < 2; k++) {
				struct running *r = s < q->nrun ? q->run[s] : q->ended[s - q->nrun];

				owner[nfds] = r;
				fds[nfds++] = (struct pollfd){ r->out[k].fd, POLLIN, 0 };
			}
		timeout = poll_timeout(q);
		if (poll(fds, nfds, timeout) < 0 && errno != EINTR)
			break;
		if (fds[0].revents) {
			struct signalfd_siginfo si;

			while (read(q->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				if (si.ssi_signo != SIGCHLD)
					stop(q, (int)si.ssi_signo);
		}
		/* before any job is reaped: owner[] is as polled */
		for (size_t f = first_out; f < nfds; f++)
			if (fds[f].revents)
				read_output(q, owner[f], (int)((f - first_out) % 2));
		reap(q);
		ended_alive(q);
		if (first_out == 2 && fds[1].revents && q->waiter &&
		    vd_waiter_wait(q->waiter, 0) == 1)
			q->turn = 1;
		if (q->waiting && !q->turn && cli_now() >= next_look(q))
			q->turn = 1;
		if (q->stopping && (q->nrun || q->nended) && cli_now() >= q->kill_at)
			signal_jobs(q, SIGKILL);
		if (cli_now() >= q->synced_at + SYNC_EVERY_S) {
			vd_journal_sync(q->journal);
			q->synced_at = cli_now();
		}
		if (cli_now() >= q->drawn_at + PROGRESS_EVERY_S)
			draw_progress(q);
	}
	free(fds);
	free(owner);
	/* what ended jobs left running writes from now on goes nowhere: not waited for */
	while (q->nended) {
		close_output(q->ended[--q->nended]);
		free(q->ended[q->nended]);
	}
	clear_progress(q);
}

/* ---- the summary, and --status ------------------------------------------- */

/* "GPU 0, GPU 3" for a job's UUIDs, as sys knows them; the UUIDs themselves where it does not. */
static void gpus_of(char *buf, size_t n, const struct vd_system *sys, const char *uuids)
{
	char *copy = strdup(uuids ? uuids : ""), *rest = copy, *u;
	size_t len = 0;

	snprintf(buf, n, "%s", uuids ? (*uuids ? "" : "CPU") : "-");
	while (copy && (u = strsep(&rest, ",")) && *u && len + 1 < n) {
		struct vd_device_ref d;
		char one[VD_UUID_MAX];

		if (sys && vd_system_find(&d, sys, u) == 0)
			cli_device_short(one, sizeof(one), sys, d);
		else
			snprintf(one, sizeof(one), "%s", u);
		len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? ", " : "", one);
	}
	free(copy);
}

/* The order of the summary: failed first, then by index. */
static int failed_first(const void *pa, const void *pb, void *ctx)
{
	const struct vd_queue *q = ctx;
	size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
	int fa = vd_queue_job(q, a)->state == VD_JOB_FAILED;
	int fb = vd_queue_job(q, b)->state == VD_JOB_FAILED;

	return fa != fb ? fb - fa : (a > b) - (a < b);
}

/* The per-job table: failed jobs first; past SUMMARY_ROWS, a count of the rest. */
static void print_table(const struct vd_queue *q, size_t n, const char *const *commands,
			const struct vd_system *sys)
{
	static const struct cli_column columns[] = {
		{ "JOB", 7, 1 },   { "STATE", 7, 0 }, { "EXIT", 4, 1 },
		{ "GPUS", 16, 0 }, { "TIME", 8, 1 },  { "COMMAND", 0, 0 },
	};
	size_t *order = malloc((n ? n : 1) * sizeof(*order)), shown = 0, rest = 0;
	struct cli_table t;

	if (!order)
		return;
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), failed_first, (void *)(uintptr_t)q);
	cli_table_init(&t, columns, sizeof(columns) / sizeof(columns[0]));
	for (size_t k = 0; k < n; k++) {
		const struct vd_queue_job *j = vd_queue_job(q, order[k]);
		char index[24], exit_code[16] = "-", gpus[128], took[32] = "-";

		if (shown == SUMMARY_ROWS) {
			rest++;
			continue;
		}
		snprintf(index, sizeof(index), "%zu", order[k]);
		if (j->state == VD_JOB_DONE || j->state == VD_JOB_FAILED)
			snprintf(exit_code, sizeof(exit_code), "%d", j->status);
		gpus_of(gpus, sizeof(gpus), sys, j->uuids);
		if (j->seconds >= 0)
			format_duration(took, sizeof(took), j->seconds);
		cli_table_add(&t, index, vd_job_state_name(j->state), exit_code, gpus, took,
			      commands[order[k]] ? commands[order[k]] : "?");
		shown++;
	}
	cli_table_print(&t);
	cli_table_release(&t);
	if (rest)
		cli_printf("... and %zu more: --json lists every job\n", rest);
	free(order);
}

/* Seconds to the millisecond, as JSON: 0.014, not 0.0140000000001. */
static json_t *json_seconds(double s)
{
	return s >= 0 ? json_real((double)(long long)(s * 1000 + 0.5) / 1000) : json_null();
}

/* The summary as JSON: the counts, and every job. */
static int print_json(const struct vd_queue *q, size_t n, const char *const *commands,
		      const unsigned *lines, const char *state, int stopped, double seconds)
{
	json_t *results = json_array(), *root;
	size_t count[4] = { 0 };

	for (size_t i = 0; i < n; i++) {
		const struct vd_queue_job *j = vd_queue_job(q, i);
		json_t *uuids = json_array(), *o;
		char *copy = j->uuids ? strdup(j->uuids) : NULL, *rest = copy, *u;

		count[j->state]++;
		while (copy && (u = strsep(&rest, ",")) && *u)
			json_array_append_new(uuids, json_string(u));
		free(copy);
		o = json_pack("{s:I, s:o, s:o, s:s, s:o, s:I, s:o, s:o}", "index", (json_int_t)i,
			      "line", lines ? json_integer(lines[i]) : json_null(), "command",
			      commands[i] ? cli_json_str(commands[i]) : json_null(), "state",
			      vd_job_state_name(j->state), "status",
			      j->state >= VD_JOB_DONE ? json_integer(j->status) : json_null(),
			      "starts", (json_int_t)j->starts, "uuids",
			      j->uuids ? uuids : (json_decref(uuids), json_null()), "seconds",
			      json_seconds(j->seconds));
		json_array_append_new(results, o);
	}
	root = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:b, s:o, s:o}", "state_file", state,
			 "jobs", (json_int_t)n, "done", (json_int_t)count[VD_JOB_DONE], "failed",
			 (json_int_t)count[VD_JOB_FAILED], "running",
			 (json_int_t)count[VD_JOB_RUNNING], "pending",
			 (json_int_t)count[VD_JOB_PENDING], "stopped", stopped, "seconds",
			 json_seconds(seconds), "results", results);
	return cli_print_json(root);
}

/* `visdev queue --status STATE`: the journal, as the summary shows a queue. */
static int show_status(const struct queue_options *o)
{
	struct vd_journal *j = NULL;
	struct vd_system *sys = NULL;
	struct vd_queue *state = NULL;
	const char **commands = NULL;
	size_t count[4] = { 0 };
	int32_t pid = 0;
	int busy, err, rc = EXIT_OK;

	err = vd_journal_read(&j, o->status);
	if (err)
		return cli_library_error(err);
	busy = vd_journal_busy(o->status, &pid);
	err = vd_queue_new(&state, j->njobs, j, 0);
	commands = calloc(j->njobs ? j->njobs : 1, sizeof(*commands));
	if (err || !commands) {
		cli_error("out of memory");
		rc = EXIT_FAIL;
		goto out;
	}
	for (size_t i = 0; i < j->njobs; i++) {
		commands[i] = j->jobs[i].command;
		count[vd_queue_job(state, i)->state]++;
	}
	if (o->g.json) {
		rc = print_json(state, j->njobs, commands, NULL, o->status, busy != 1, -1) ?
			     EXIT_FAIL :
			     EXIT_OK;
		goto out;
	}
	if (busy == 1)
		cli_printf("queue '%s': running (pid %d): ", o->status, (int)pid);
	else
		cli_printf("queue '%s': not running: ", o->status);
	cli_printf("%zu done, %zu failed, %zu %s, %zu not started, of %zu\n", count[VD_JOB_DONE],
		   count[VD_JOB_FAILED], count[VD_JOB_RUNNING],
		   busy == 1 ? "running" : "cut off (no end recorded)", count[VD_JOB_PENDING],
		   j->njobs);
	/* GPU indices are a nicety here: without a backend, devices are shown by UUID */
	{
		struct vd_backend_options bopts = o->g.backend;
		struct vd_backend *b = NULL;

		bopts.use_env = 1;
		if (vd_backend_open(&b, &bopts) == 0)
			vd_backend_snapshot(&sys, b);
		vd_backend_free(b);
	}
	print_table(state, j->njobs, commands, sys);
out:
	vd_queue_free(state);
	free(commands);
	vd_system_free(sys);
	vd_journal_free(j);
	return rc;
}

/* ---- set-up -------------------------------------------------------------- */

/*
 * Inside a job that 'visdev run' started, the queue divides that job's GPUs
 * (CUDA_VISIBLE_DEVICES) among its own jobs: their leases go to a lease
 * directory of the queue's own, since the job's lease already holds every
 * one of those GPUs in the shared one.
 */
static int choose_lease_dir(struct queue *q)
{
	size_t own;

	q->dir = cli_lease_dir();
	if (refresh(q, 1))
		return -1;
	own = cli_own_leases(q->sys);
	if (!own)
		return 0;
	snprintf(q->private_dir, sizeof(q->private_dir), "/dev/shm/visdev-queue-XXXXXX");
	if (!mkdtemp(q->private_dir)) {
		snprintf(q->private_dir, sizeof(q->private_dir), "/tmp/visdev-queue-XXXXXX");
		if (!mkdtemp(q->private_dir)) {
			cli_error("cannot make a lease directory for the queue: %s",
				  strerror(errno));
			q->private_dir[0] = '\0';
			return -1;
		}
	}
	q->dir = q->private_dir;
	if (!q->o->quiet)
		cli_error("note: inside a visdev job that holds %zu device%s: the queue divides "
			  "them among its jobs",
			  own, own == 1 ? "" : "s");
	return 0;
}

/* Removes the queue's own lease directory and what is in it. */
static void remove_private_dir(struct queue *q)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d;

	if (!q->private_dir[0] || !(d = opendir(q->private_dir)))
		return;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(path, sizeof(path), "%s/%s", q->private_dir, e->d_name);
			unlink(path);
		}
	closedir(d);
	rmdir(q->private_dir);
}

/* The signals the loop reads from a signalfd; a job's own, reset before exec. */
static int watch_signals(struct queue *q)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 ||
	    (q->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		cli_error("cannot watch for signals: %s", strerror(errno));
		return -1;
	}
	/* a reader of our output that is gone is no reason to die with jobs running */
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

/* Names the queue in lease records: the job file's name, "stdin" or "grid". */
static void name_queue(struct queue *q)
{
	const char *f = q->o->file, *slash;

	if (!f)
		f = "grid";
	else if (!strcmp(f, "-"))
		f = "stdin";
	else if ((slash = strrchr(f, '/')))
		f = slash + 1;
	snprintf(q->name, sizeof(q->name), "%s", f);
}

/* Runs the queue the options describe. Returns the exit code. */
static int run_queue(struct queue_options *o)
{
	struct queue q = { 0 };
	struct vd_queue_counts c;
	int rc, err;

	q.o = o;
	q.sigfd = q.null_fd = -1;
	rc = read_jobs(&q.jobs, o);
	if (rc)
		return rc;
	rc = plan(&q);
	if (rc >= 0)
		goto out;
	rc = EXIT_FAIL;
	if (o->log_dir && mkdir(o->log_dir, 0755) < 0 && errno != EEXIST) {
		cli_error("cannot make the log folder '%s': %s", o->log_dir, strerror(errno));
		goto out;
	}
	err = vd_journal_open(&q.journal, o->state, q.jobs, o->resume);
	if (err) {
		rc = cli_library_error(err);
		goto out;
	}
	name_queue(&q);
	/* the journal as others will find it from the lease records, wherever they are */
	if (!realpath(o->state, q.journal_path))
		q.journal_path[0] = '\0';
	rc = cli_backend(&q.backend, &o->g);
	if (rc)
		goto out;
	rc = EXIT_FAIL;
	if (choose_lease_dir(&q) || watch_signals(&q))
		goto out;
	q.null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	err = vd_waiter_new(&q.waiter, q.dir);
	if (err || q.null_fd < 0) {
		rc = err ? cli_library_error(err) : EXIT_FAIL;
		goto out;
	}
	q.progress = !o->quiet && isatty(STDERR_FILENO);
	q.t0 = q.synced_at = cli_now();
	if (!q.jobs->n)
		cli_error("note: no jobs in '%s' (one shell command a line; blank lines and # "
			  "comments are skipped)",
			  o->file ? o->file : "the grid");
	else if (!counts(&q).to_run && !o->quiet)
		cli_error("note: every job in '%s' has already succeeded: nothing to run",
			  o->state);
	loop(&q);
	vd_journal_sync(q.journal);
	c = counts(&q);
	if (o->g.json)
		rc = print_json(q.state, q.jobs->n, (const char *const *)q.jobs->commands,
				q.jobs->lines, o->state, q.stopping, cli_now() - q.t0) ?
			     EXIT_FAIL :
			     EXIT_OK;
	else if (q.jobs->n)
		print_table(q.state, q.jobs->n, (const char *const *)q.jobs->commands, q.sys);
	if (!o->g.json && !o->quiet)
		cli_error("%zu of %zu job%s ran: %zu succeeded, %zu failed%s", c.done + c.failed,
			  c.to_run, c.to_run == 1 ? "" : "s", c.done, c.failed,
			  q.stopping ? "; stopped: --resume runs the rest" : "");
	rc = q.stopping ? 130 : q.broken ? EXIT_FAIL : q.never ? EXIT_NONE : c.failed ? 1 : 0;
out:
	while (q.nspare)
		vd_lease_free(q.spare[--q.nspare]);
	free(q.spare);
	vd_journal_close(q.journal);
	vd_waiter_free(q.waiter);
	remove_private_dir(&q);
	vd_resolution_free(q.parent);
	vd_system_free(q.sys);
	vd_backend_free(q.backend);
	vd_queue_free(q.state);
	free(q.run);
	free(q.ended);
	vd_jobs_free(q.jobs);
	if (q.sigfd >= 0)
		close(q.sigfd);
	if (q.null_fd >= 0)
		close(q.null_fd);
	return rc;
}

/* The sweep on Slurm: submitted, or resumed (o->file is then its folder). */
static int run_slurm(struct queue_options *o)
{
	struct slurm_options so = {
		.dir = o->resume ? NULL : o->state_given,
		.file = o->file,
		.partition = o->partition,
		.time = o->time_limit,
		.account = o->account,
		.gpus = o->sel.opts.n ? o->sel.opts.n : 1,
		.max_parallel = o->max_parallel,
		.retries = o->retries,
		.detach = o->detach,
		.quiet = o->quiet,
		.json = o->g.json,
		.force = o->force,
	};
	static const char *const refused[] = { "-M", "--clusters", "--cluster", "-a", "--array" };
	const char **args = calloc(o->nargs + 7, sizeof(*args));
	char *passed[3] = { NULL, NULL, NULL };
	struct vd_jobs *jobs = NULL;
	size_t n = 0;
	int rc, bad = !args;

	/* what the follower could not follow: another cluster, another array */
	for (size_t i = 0; i < o->nargs; i++)
		for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++)
			if (!strncmp(o->sbatch_args[i], refused[k], strlen(refused[k])) &&
			    (!o->sbatch_args[i][strlen(refused[k])] ||
			     o->sbatch_args[i][strlen(refused[k])] == '=' ||
			     refused[k][1] != '-')) {
				free(args);
				return cli_usage("queue",
						 "--sbatch-arg %s: visdev makes the array itself, "
						 "on the cluster squeue answers for",
						 o->sbatch_args[i]);
			}
	/* --partition P, --time T, --account A: sbatch's own, as --name=value */
	if (o->partition)
		bad |= asprintf(&passed[0], "--partition=%s", o->partition) < 0;
	if (o->time_limit)
		bad |= asprintf(&passed[1], "--time=%s", o->time_limit) < 0;
	if (o->account)
		bad |= asprintf(&passed[2], "--account=%s", o->account) < 0;
	if (bad) {
		free(args);
		cli_error("out of memory");
		return EXIT_FAIL;
	}
	for (int k = 0; k < 3; k++)
		if (passed[k])
			args[n++] = passed[k];
	for (size_t i = 0; i < o->nargs; i++)
		args[n++] = o->sbatch_args[i];
	so.sbatch_args = args;
	so.nargs = n;
	if (o->resume) {
		rc = slurm_resume(&so, o->file);
	} else {
		rc = read_jobs(&jobs, o);
		if (!rc)
			rc = slurm_submit(&so, jobs);
		vd_jobs_free(jobs);
	}
	for (int k = 0; k < 3; k++)
		free(passed[k]);
	free(args);
	return rc;
}

int cmd_queue(int argc, char **argv)
{
	struct queue_options o = { 0 };
	int rc;

	/* a closed standard descriptor would be taken by the journal, and get job output */
	for (int fd = 0; fd <= 2; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd) {
			cli_error("cannot open /dev/null: %s", strerror(errno));
			return EXIT_FAIL;
		}
	cli_select_init(&o.sel, argv);
	o.grace = GRACE_DEFAULT_S;
	rc = parse_options(&o, argc, argv);
	if (rc < 0 && o.task)
		rc = slurm_task(o.task, argv[argc - 1]);
	else if (rc < 0 && o.cancel)
		rc = slurm_cancel(o.cancel);
	else if (rc < 0 && o.status && slurm_is_dir(o.status))
		rc = slurm_status(o.status, o.g.json);
	else if (rc < 0 && o.slurm)
		rc = run_slurm(&o);
	else if (rc < 0)
		rc = o.status ? show_status(&o) : run_queue(&o);
	cli_select_release(&o.sel);
	free(o.grids);
	free(o.sbatch_args);
	free(o.state);
	return rc;
}
