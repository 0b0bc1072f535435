/*
 * queue_slurm.c - `visdev queue --slurm`: the same sweep on a cluster. The
 * jobs are frozen in a state directory (queue.json), handed to Slurm as few
 * job arrays as MaxArraySize allows (one sbatch call each), and each array
 * task runs `visdev queue --task ID DIR`, which runs the job under the GPUs
 * Slurm gave it and writes its start and end into a journal of its own
 * (DIR/journal/ID: no two tasks ever write one file, whatever the shared
 * file system). Following, status, resume and cancel read those journals
 * and squeue.
 *
 *   DIR/queue.json      the jobs, the sbatch options, every array submitted
 *   DIR/batch.sh        what sbatch runs
 *   DIR/journal/N       job N's starts and ends (the local queue's format)
 *   DIR/out/N.out, .err job N's output; DIR/out/slurm-A_I.log, visdev's own
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "queue_slurm.h"

/* Where a job stands, from its journal and squeue. */
enum job_state {
	JOB_NOT_RUN = 0, /* never started, and Slurm holds no task for it */
	JOB_QUEUED,	 /* a task for it waits in Slurm */
	JOB_RUNNING,	 /* its task runs */
	JOB_DONE,	 /* ended with status 0 */
	JOB_FAILED,	 /* ended with another status */
	JOB_LOST,	 /* started, no end, and Slurm holds no task: a time limit, a
			    cancel, a node that failed */
	JOB_STATES
};

static const char *const state_names[JOB_STATES] = { "not-run", "queued", "running",
						     "done",	"failed", "lost" };

struct job {
	enum job_state state;
	int status;	 /* when ended */
	unsigned starts; /* how many times it started */
	int64_t start_ms, end_ms;
	char *node, *devices; /* of its last start (the journal's; owned there) */
};

/* A sweep and where each of its jobs stands. */
struct sweep {
	struct vd_slurm_queue *q;
	struct vd_journal **journals; /* per job; NULL where none */
	struct job *jobs;
	size_t count[JOB_STATES];
	size_t njobs;	  /* of jobs and journals: queue.json's count when read */
	size_t unknown;	  /* tasks squeue lists under the sweep's name in no recorded array */
	int slurm_failed; /* squeue could not be asked */
	char job_name[96];
};

/* ---- Running Slurm's commands ---------------------------------------------- */

/* Whether a program is on PATH. */
static int on_path(const char *name)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
		size_t len = strcspn(p, ":");

		if (len &&
		    (size_t)snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, p, name) <
			    sizeof(buf) &&
		    access(buf, X_OK) == 0)
			return 1;
		p += len + (p[len] == ':');
	}
	return 0;
}

/* The last line of a command's error output, for a message of one line. */
static const char *last_line(char *text)
{
	size_t len = strlen(text);
	char *nl;

	while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
		text[--len] = '\0';
	nl = strrchr(text, '\n');
	return nl ? nl + 1 : text;
}

/* Says that a Slurm command is missing, with what to do. */
static int missing(const char *name)
{
	cli_error("%s is not on PATH: --slurm needs Slurm's commands (run it where sbatch "
		  "works, such as a login node)",
		  name);
	return EXIT_FAIL;
}

/* ---- The sweep's files ------------------------------------------------------ */

/* The name of the sweep's jobs in Slurm: unique to its directory, so squeue finds them all. */
static void job_name(char *buf, size_t n, const struct vd_slurm_queue *q)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (const char *c = q->dir; *c; c++) {
		h ^= (unsigned char)*c;
		h *= 0x100000001b3ULL;
	}
	snprintf(buf, n, "visdev-%08llx-%.40s", (unsigned long long)(h & 0xffffffffu), q->name);
	/* squeue --name= and scancel --name= split on commas: letters, digits, . _ - only */
	for (char *c = buf; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '.' && *c != '_' && *c != '-')
			*c = '_';
}

static void file_in(char *buf, size_t n, const char *dir, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
}

/* s in single quotes for sh, each ' as '\''. */
static void sh_quote(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++)
		if (*s == '\'')
			fputs("'\\''", f);
		else
			fputc(*s, f);
	fputc('\'', f);
}

/* Writes the batch script: job OFFSET + the task's index, by this very program. */
static int write_batch(const char *dir)
{
	char self[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	FILE *f;
	int fd;

	if (n <= 0)
		return -1;
	self[n] = '\0';
	file_in(path, sizeof(path), dir, "batch.sh");
	/* a new file, never through a link someone planted: the state folder is fresh */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0755);
	f = fd < 0 ? NULL : fdopen(fd, "w");
	if (!f) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	fputs("#!/bin/sh\n"
	      "# Written by visdev queue --slurm: each array task runs its job of the sweep\n"
	      "# in this folder. $1, given by sbatch, is the job number of index 0.\n"
	      "exec ",
	      f);
	sh_quote(f, self);
	fputs(" queue --task \"$((${1:-0} + SLURM_ARRAY_TASK_ID))\" ", f);
	sh_quote(f, dir);
	fputc('\n', f);
	return fclose(f) ? -1 : 0;
}

/* Reads the sweep in dir and, unless slurm is 0, asks squeue where its tasks are. */
static int sweep_read(struct sweep *s, const char *dir, int ask_slurm)
{
	struct vd_slurm_task *tasks = NULL;
	size_t ntasks = 0;
	int err;

	memset(s, 0, sizeof(*s));
	err = vd_slurm_queue_read(&s->q, dir);
	if (err)
		return cli_library_error(err);
	snprintf(s->job_name, sizeof(s->job_name), "%s", s->q->job_name);
	s->njobs = s->q->njobs;
	s->journals = calloc(s->q->njobs + 1, sizeof(*s->journals));
	s->jobs = calloc(s->q->njobs + 1, sizeof(*s->jobs));
	if (!s->journals || !s->jobs) {
		cli_error("out of memory");
		return EXIT_FAIL;
	}
	/* squeue before the journals: a task that ends in between shows as ended */
	if (ask_slurm) {
		char *out = NULL, *errs = NULL;
		char name_opt[128];
		const char *argv[] = { "squeue", "-h", "-r", "-o", "%i %t", name_opt, NULL };
		int rc;

		snprintf(name_opt, sizeof(name_opt), "--name=%s", s->job_name);
		rc = cli_capture(&out, &errs, argv);
		if (rc != 0) {
			static int said; /* a follower asks again and again: once is enough */

			s->slurm_failed = 1;
			if (!said++)
				cli_error("squeue %s: %s", rc < 0 ? "could not be run" : "failed",
					  errs ? last_line(errs) : "");
		} else if (vd_slurm_tasks_parse(&tasks, &ntasks, out)) {
			s->slurm_failed = 1;
		}
		free(out);
		free(errs);
	}
	for (size_t i = 0; i < s->q->njobs; i++) {
		char path[PATH_MAX];
		struct job *j = &s->jobs[i];

		snprintf(path, sizeof(path), "%s/journal/%zu", dir, i);
		if (vd_journal_read(&s->journals[i], path) == 0 && i < s->journals[i]->njobs) {
			const struct vd_journal_job *jj = &s->journals[i]->jobs[i];

			j->state = jj->state == VD_JOB_DONE    ? JOB_DONE :
				   jj->state == VD_JOB_FAILED  ? JOB_FAILED :
				   jj->state == VD_JOB_RUNNING ? JOB_LOST :
								 JOB_NOT_RUN;
			j->status = jj->status;
			j->starts = jj->starts;
			j->start_ms = jj->start_ms;
			j->end_ms = jj->end_ms;
			j->node = jj->node;
			j->devices = jj->devices;
		}
	}
	for (size_t t = 0; t < ntasks; t++) {
		int known = 0;

		for (size_t a = 0; a < s->q->narrays; a++) {
			const struct vd_slurm_array *x = &s->q->arrays[a];
			size_t job = x->offset + tasks[t].task;

			if (!x->id || strcmp(x->id, tasks[t].array) || job >= s->q->njobs)
				continue;
			known = 1;
			s->jobs[job].state =
				!strcmp(tasks[t].state, "R") || !strcmp(tasks[t].state, "CG") ?
					JOB_RUNNING :
					JOB_QUEUED;
		}
		/* an array Slurm took that the sweep could not record: it is still Slurm's */
		s->unknown += !known;
	}
	free(tasks);
	for (size_t i = 0; i < s->q->njobs; i++)
		s->count[s->jobs[i].state]++;
	return 0;
}

static void sweep_release(struct sweep *s)
{
	for (size_t i = 0; s->journals && i < s->njobs; i++)
		vd_journal_free(s->journals[i]);
	free(s->journals);
	free(s->jobs);
	vd_slurm_queue_free(s->q);
	memset(s, 0, sizeof(*s));
}

/* ---- Submitting --------------------------------------------------------------- */

/* MaxArraySize, from scontrol. Returns 0, or an exit code after saying why. */
static int max_array(size_t *out)
{
	const char *argv[] = { "scontrol", "show", "config", NULL };
	char *text = NULL, *errs = NULL;
	int rc;

	if (!on_path("scontrol"))
		return missing("scontrol");
	rc = cli_capture(&text, &errs, argv);
	if (rc != 0) {
		cli_error("scontrol show config failed: %s", last_line(errs));
		rc = EXIT_FAIL;
	} else if (vd_slurm_max_array(out, text)) {
		cli_error("%s", vd_error_last());
		rc = EXIT_FAIL;
	}
	free(text);
	free(errs);
	return rc;
}

/*
 * Submits jobs (ascending numbers) as arrays recorded in q, queue.json
 * written before each sbatch and after it answers, so that nothing
 * submitted goes unrecorded. Returns 0, or an exit code after saying why.
 */
static int submit(struct vd_slurm_queue *q, const size_t *jobs, size_t n, long max_parallel,
		  int quiet)
{
	struct vd_slurm_array *arrays = NULL, *all;
	size_t narrays = 0, limit = 0, first = q->narrays;
	char name[96], offset[32], gres[32], out_opt[PATH_MAX + 32], batch[PATH_MAX];
	int rc = max_array(&limit);

	if (rc)
		return rc;
	if (!on_path("sbatch"))
		return missing("sbatch");
	if (vd_slurm_split(&arrays, &narrays, jobs, n, limit))
		return cli_library_error(VD_ENOMEM);
	all = realloc(q->arrays, (q->narrays + narrays + 1) * sizeof(*all));
	if (!all) {
		vd_slurm_arrays_free(arrays, narrays);
		cli_error("out of memory");
		return EXIT_FAIL;
	}
	q->arrays = all;
	memcpy(q->arrays + q->narrays, arrays, narrays * sizeof(*arrays));
	q->narrays += narrays;
	free(arrays);
	if (narrays > 1)
		cli_error("%zu jobs go to Slurm as %zu arrays: its MaxArraySize is %zu", n, narrays,
			  limit);
	if (vd_slurm_queue_write(q))
		return cli_library_error(VD_EIO);
	snprintf(name, sizeof(name), "%s", q->job_name);
	file_in(batch, sizeof(batch), q->dir, "batch.sh");
	snprintf(gres, sizeof(gres), "--gres=gpu:%u", q->gpus);
	snprintf(out_opt, sizeof(out_opt), "--output=%s/out/slurm-%%A_%%a.log", q->dir);
	for (size_t a = first; a < q->narrays; a++) {
		struct vd_slurm_array *x = &q->arrays[a];
		const char **argv = calloc(q->nargs + 16, sizeof(*argv));
		char job_name_opt[128], *out = NULL, *errs = NULL, *array_opt = NULL;
		size_t k = 0;
		int st;

		if (!argv) {
			cli_error("out of memory");
			return EXIT_FAIL;
		}
		snprintf(offset, sizeof(offset), "%zu", x->offset);
		snprintf(job_name_opt, sizeof(job_name_opt), "--job-name=%s", name);
		/* the whole index list, however long, and %K */
		if ((max_parallel > 0 ?
			     asprintf(&array_opt, "--array=%s%%%ld", x->indices, max_parallel) :
			     asprintf(&array_opt, "--array=%s", x->indices)) < 0) {
			free(argv);
			cli_error("out of memory");
			return EXIT_FAIL;
		}
		argv[k++] = "sbatch";
		/* the user's options first: where one names the same as visdev's, sbatch takes
		   the last, visdev's, which the sweep depends on */
		for (size_t i = 0; i < q->nargs; i++)
			argv[k++] = q->sbatch_args[i];
		argv[k++] = "--parsable";
		argv[k++] = job_name_opt;
		argv[k++] = out_opt;
		if (q->gpus)
			argv[k++] = gres;
		argv[k++] = array_opt;
		argv[k++] = batch;
		argv[k++] = offset; /* batch.sh's $1 */
		st = cli_capture(&out, &errs, argv);
		free(array_opt);
		free(argv);
		if (st != 0) {
			cli_error("sbatch failed: %s", st < 0 ? strerror(errno) : last_line(errs));
			if (a > first)
				cli_error("the arrays submitted before it are recorded in %s: "
					  "'visdev queue --cancel %s' cancels them",
					  q->dir, q->dir);
			free(out);
			free(errs);
			/* the array Slurm refused is no array of the sweep */
			free(x->indices);
			q->narrays = a;
			vd_slurm_queue_write(q);
			return EXIT_FAIL;
		}
		/* --parsable: "ID" or "ID;cluster" */
		out[strcspn(out, ";\n")] = '\0';
		x->id = strdup(out);
		free(out);
		free(errs);
		if (!x->id || vd_slurm_queue_write(q)) {
			cli_error("Slurm took array %s, but %s could not record it: %s",
				  x->id ? x->id : "?", q->dir, vd_error_last());
			return EXIT_FAIL;
		}
		if (!quiet)
			cli_error("submitted %zu job%s as Slurm array %s", x->njobs,
				  x->njobs == 1 ? "" : "s", x->id);
	}
	return 0;
}

/* ---- Following ------------------------------------------------------------------ */

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* "done 12/40, running 4, queued 24, failed 0, lost 0". */
static void progress_text(char *buf, size_t n, const struct sweep *s)
{
	int64_t ran_ms = 0;
	size_t ended = 0, len;

	len = (size_t)snprintf(buf, n, "done %zu/%zu, running %zu, queued %zu, failed %zu",
			       s->count[JOB_DONE], s->q->njobs, s->count[JOB_RUNNING],
			       s->count[JOB_QUEUED], s->count[JOB_FAILED]);
	if (s->count[JOB_LOST] && len < n)
		len += (size_t)snprintf(buf + len, n - len, ", lost %zu", s->count[JOB_LOST]);
	/* the time left: what waits and runs, as many at once as run now, at the mean so far */
	for (size_t i = 0; i < s->q->njobs; i++)
		if ((s->jobs[i].state == JOB_DONE || s->jobs[i].state == JOB_FAILED) &&
		    s->jobs[i].start_ms && s->jobs[i].end_ms >= s->jobs[i].start_ms) {
			ran_ms += s->jobs[i].end_ms - s->jobs[i].start_ms;
			ended++;
		}
	if (ended && s->count[JOB_RUNNING] && len < n) {
		char eta[32];
		double left = (double)(s->count[JOB_QUEUED] + s->count[JOB_RUNNING]) /
			      (double)s->count[JOB_RUNNING];

		cli_format_span(eta, sizeof(eta),
				(int64_t)(left * (double)ran_ms / (double)ended / 1000.0 + 0.5));
		snprintf(buf + len, n - len, ", ETA %s", eta);
	}
}

/*
 * The jobs to submit again for --retries: failed or lost, submitted no more
 * than retries times yet (counted in the arrays recorded, not in starts: a
 * task that fails before its start is recorded still counts), and none once
 * the sweep was cancelled.
 */
static size_t retry_list(size_t *out, const struct sweep *s, long retries)
{
	size_t n = 0;

	for (size_t i = 0; !s->q->cancelled && i < s->q->njobs; i++)
		if ((s->jobs[i].state == JOB_FAILED || s->jobs[i].state == JOB_LOST) &&
		    (long)vd_slurm_submissions(s->q, i) <= retries)
			out[n++] = i;
	return n;
}

static void print_summary(const struct sweep *s)
{
	size_t shown = 0;

	cli_printf("%zu job%s: %zu done, %zu failed, %zu lost, %zu not run\n", s->q->njobs,
		   s->q->njobs == 1 ? "" : "s", s->count[JOB_DONE], s->count[JOB_FAILED],
		   s->count[JOB_LOST], s->count[JOB_NOT_RUN]);
	for (size_t i = 0; i < s->q->njobs && shown < 20; i++) {
		const struct job *j = &s->jobs[i];

		if (j->state == JOB_FAILED)
			cli_printf("  job %zu failed with status %d on %s: %s/out/%zu.err\n", i,
				   j->status, j->node ? j->node : "?", s->q->dir, i);
		else if (j->state == JOB_LOST)
			cli_printf("  job %zu was ended by Slurm (a time limit, a cancel, a node "
				   "failure)\n",
				   i);
		else if (j->state == JOB_NOT_RUN)
			cli_printf("  job %zu did not run\n", i);
		else
			continue;
		shown++;
	}
	if (s->count[JOB_DONE] < s->q->njobs)
		cli_printf("'visdev queue --resume %s' submits the rest again\n", s->q->dir);
}

/*
 * Follows the sweep until Slurm holds no task of it: a progress line on a
 * terminal, then the summary. Ctrl-C detaches. Returns the exit code.
 */
static int follow(const char *dir, const struct slurm_options *o)
{
	struct sigaction sa = { .sa_handler = on_interrupt };
	int tty = isatty(STDERR_FILENO) && !o->quiet, rc = EXIT_FAIL;
	double last_drawn = 0;
	size_t *again = NULL;

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	for (;;) {
		struct sweep s;
		char line[160];
		size_t n;

		if (sweep_read(&s, dir, 1)) {
			sweep_release(&s);
			break;
		}
		if (interrupted) {
			if (tty)
				fputs("\r\033[K", stderr);
			cli_error(
				"detached: the jobs are Slurm's and go on. 'visdev queue --status "
				"%s' shows them, 'visdev queue --cancel %s' cancels them",
				dir, dir);
			sweep_release(&s);
			rc = 130;
			break;
		}
		again = realloc(again, (s.q->njobs + 1) * sizeof(*again));
		n = again && o->retries > 0 ? retry_list(again, &s, o->retries) : 0;
		if (n) {
			if (submit(s.q, again, n, o->max_parallel, o->quiet)) {
				sweep_release(&s);
				break;
			}
			sweep_release(&s);
			continue;
		}
		if (!s.slurm_failed && !s.count[JOB_RUNNING] && !s.count[JOB_QUEUED] &&
		    !s.unknown) {
			if (tty)
				fputs("\r\033[K", stderr);
			if (o->json)
				rc = slurm_status(dir, 1) ? EXIT_FAIL : 0;
			else
				print_summary(&s);
			rc = rc == EXIT_FAIL && !o->json ? rc : rc;
			rc = s.count[JOB_DONE] == s.q->njobs ? EXIT_OK : EXIT_FAIL;
			sweep_release(&s);
			break;
		}
		if (tty && cli_now() - last_drawn > 0.5) {
			progress_text(line, sizeof(line), &s);
			fprintf(stderr, "\r\033[K[slurm] %s", line);
			fflush(stderr);
			last_drawn = cli_now();
		}
		sweep_release(&s);
		/* twice a second: the summary soon after the last end, squeue not pressed */
		nanosleep(&(struct timespec){ 0, 500000000 }, NULL);
	}
	free(again);
	return rc;
}

/* ---- The commands ------------------------------------------------------------------ */

int slurm_is_dir(const char *dir)
{
	char path[PATH_MAX];
	struct stat st;

	file_in(path, sizeof(path), dir, "queue.json");
	return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && access(path, F_OK) == 0;
}

/*
 * Whether path is a folder of this user's that nobody else may write to:
 * the state folder's files are run (batch.sh) and written (out/) as the user.
 */
static int own_folder(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return 0;
	return S_ISDIR(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & 022);
}

/* Makes the state directory and its folders; its absolute path into abs. */
static int make_dir(char *abs, const char *dir)
{
	char sub[PATH_MAX + 32];

	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		cli_error("cannot make the state folder '%s': %s", dir, strerror(errno));
		return EXIT_FAIL;
	}
	if (!own_folder(dir) || !realpath(dir, abs)) {
		cli_error("the state folder '%s' must be a folder of yours that nobody else can "
			  "write to (or a new one)",
			  dir);
		return EXIT_FAIL;
	}
	for (const char *const *f = (const char *const[]){ "journal", "out", NULL }; *f; f++) {
		file_in(sub, sizeof(sub), abs, *f);
		if ((mkdir(sub, 0755) < 0 && errno != EEXIST) || !own_folder(sub)) {
			cli_error("cannot make '%s' a folder of yours: %s", sub,
				  errno == EEXIST ? "it is someone else's, or not a folder" :
						    strerror(errno));
			return EXIT_FAIL;
		}
	}
	return 0;
}

int slurm_submit(const struct slurm_options *o, const struct vd_jobs *jobs)
{
	struct vd_slurm_queue q = { 0 };
	char abs[PATH_MAX], *def = NULL, source[PATH_MAX], slurm_name[96];
	const char *dir = o->dir, *slash;
	size_t *all = calloc(jobs->n + 1, sizeof(*all));
	int rc = EXIT_FAIL;

	if (!all) {
		cli_error("out of memory");
		return EXIT_FAIL;
	}
	/* Slurm's commands first: nothing is written on a machine without them */
	if (!on_path("sbatch") || !on_path("scontrol")) {
		free(all);
		return missing(on_path("sbatch") ? "scontrol" : "sbatch");
	}
	if (!dir) {
		if (asprintf(&def, "%s.slurm",
			     o->file && strcmp(o->file, "-") ? o->file : "visdev-queue") < 0) {
			free(all);
			return EXIT_FAIL;
		}
		dir = def;
	}
	if (slurm_is_dir(dir)) {
		cli_error("'%s' already holds a sweep: 'visdev queue --resume %s' goes on with it, "
			  "--state DIR starts another",
			  dir, dir);
		goto out;
	}
	for (size_t i = 0; i < jobs->n; i++)
		if (strchr(jobs->commands[i], '\n')) {
			cli_error("job %zu holds a line end: a Slurm job is one line", i);
			goto out;
		}
	if (make_dir(abs, dir))
		goto out;
	if (write_batch(abs)) {
		cli_error("cannot write '%s/batch.sh': %s", abs, strerror(errno));
		goto out;
	}
	q.dir = abs;
	q.commands = jobs->commands;
	q.njobs = jobs->n;
	q.digest = jobs->digest;
	q.gpus = o->gpus;
	q.sbatch_args = calloc(o->nargs + 1, sizeof(*q.sbatch_args));
	for (size_t i = 0; q.sbatch_args && i < o->nargs; i++)
		if ((q.sbatch_args[i] = strdup(o->sbatch_args[i])))
			q.nargs = i + 1;
	slash = o->file ? strrchr(o->file, '/') : NULL;
	q.name = strdup(o->file ? (strcmp(o->file, "-") ? (slash ? slash + 1 : o->file) : "stdin") :
				  "grid");
	if (!q.sbatch_args || q.nargs != o->nargs || !q.name) {
		cli_error("out of memory");
		goto out;
	}
	q.source = o->file && strcmp(o->file, "-") && realpath(o->file, source) ? source : NULL;
	job_name(slurm_name, sizeof(slurm_name), &q);
	q.job_name = slurm_name;
	for (size_t i = 0; i < jobs->n; i++)
		all[i] = i;
	rc = submit(&q, all, jobs->n, o->max_parallel, o->quiet);
	vd_slurm_arrays_free(q.arrays, q.narrays);
	if (rc)
		goto out;
	if (o->detach) {
		cli_printf("submitted %zu jobs to Slurm; 'visdev queue --status %s' shows them, "
			   "'visdev queue --cancel %s' cancels them\n",
			   jobs->n, abs, abs);
		goto out;
	}
	rc = follow(abs, o);
out:
	vd_strings_free(q.sbatch_args, q.nargs);
	free(q.name);
	free(def);
	free(all);
	return rc;
}

int slurm_resume(const struct slurm_options *o, const char *dir)
{
	struct sweep s;
	size_t *todo, n = 0;
	int rc = sweep_read(&s, dir, 1);

	if (rc) {
		sweep_release(&s);
		return rc;
	}
	if (s.slurm_failed || s.count[JOB_RUNNING] || s.count[JOB_QUEUED] || s.unknown) {
		cli_error(s.slurm_failed ?
				  "cannot tell whether Slurm still runs jobs of '%s'" :
				  "Slurm still holds jobs of '%s': follow them with 'visdev queue "
				  "--status %s', or cancel them first",
			  dir, dir);
		sweep_release(&s);
		return EXIT_FAIL;
	}
	/* the job file, changed since, is refused unless --force; gone, the frozen jobs run */
	if (s.q->source && access(s.q->source, F_OK) == 0) {
		struct vd_jobs *now = NULL;

		rc = queue_read_job_file(&now, s.q->source);
		if (!rc && now->digest != s.q->digest && !o->force) {
			cli_error(
				"'%s' changed since the sweep was submitted: --force resumes with "
				"the jobs as they are now, numbered as before",
				s.q->source);
			rc = EXIT_FAIL;
		}
		if (!rc && now->digest != s.q->digest) {
			vd_strings_free(s.q->commands, s.q->njobs);
			s.q->commands = now->commands;
			s.q->njobs = now->n;
			s.q->digest = now->digest;
			now->commands = NULL;
			now->n = 0;
		}
		vd_jobs_free(now);
		if (rc) {
			sweep_release(&s);
			return rc;
		}
	}
	todo = calloc(s.q->njobs + 1, sizeof(*todo));
	/* jobs past the count read (a job file that grew, with --force) never ran */
	for (size_t i = 0; todo && i < s.q->njobs; i++)
		if (i >= s.njobs || s.jobs[i].state != JOB_DONE)
			todo[n++] = i;
	s.q->cancelled = 0;
	if (!todo) {
		cli_error("out of memory");
		rc = EXIT_FAIL;
	} else if (!n) {
		cli_printf("every job of '%s' finished successfully: nothing to resume\n", dir);
	} else {
		if (!o->quiet)
			cli_error("resuming %zu of %zu jobs", n, s.q->njobs);
		rc = submit(s.q, todo, n, o->max_parallel, o->quiet);
	}
	free(todo);
	sweep_release(&s);
	if (rc || !n)
		return rc;
	if (o->detach)
		return EXIT_OK;
	return follow(dir, o);
}

int slurm_status(const char *dir, int json)
{
	struct sweep s;
	int rc = sweep_read(&s, dir, 1);

	if (rc) {
		sweep_release(&s);
		return rc;
	}
	if (json) {
		json_t *jobs = json_array(), *arrays = json_array(), *counts = json_object();

		for (size_t i = 0; i < s.q->narrays; i++)
			json_array_append_new(arrays, s.q->arrays[i].id ?
							      json_string(s.q->arrays[i].id) :
							      json_null());
		for (int k = 0; k < JOB_STATES; k++)
			json_object_set_new(counts, state_names[k],
					    json_integer((json_int_t)s.count[k]));
		for (size_t i = 0; i < s.q->njobs; i++) {
			const struct job *j = &s.jobs[i];
			int ended = j->state == JOB_DONE || j->state == JOB_FAILED;

			json_array_append_new(
				jobs,
				json_pack("{s:I, s:s, s:o, s:I, s:o, s:o, s:o}", "job",
					  (json_int_t)i, "state", state_names[j->state], "status",
					  ended ? json_integer(j->status) : json_null(), "starts",
					  (json_int_t)j->starts, "node",
					  j->node ? cli_json_str(j->node) : json_null(),
					  "cuda_visible_devices",
					  j->devices && j->starts ? cli_json_str(j->devices) :
								    json_null(),
					  "command", cli_json_str(s.q->commands[i])));
		}
		rc = cli_print_json(json_pack(
			"{s:s, s:s, s:I, s:o, s:b, s:o, s:o}", "state_dir", s.q->dir, "slurm_name",
			s.job_name, "jobs_total", (json_int_t)s.q->njobs, "arrays", arrays,
			"active", !s.slurm_failed && (s.count[JOB_RUNNING] || s.count[JOB_QUEUED]),
			"counts", counts, "jobs", jobs));
	} else {
		char line[160];

		progress_text(line, sizeof(line), &s);
		cli_printf("%s: %s%s\n", s.q->dir, line,
			   s.slurm_failed ? " (Slurm could not be asked)" :
			   s.count[JOB_RUNNING] || s.count[JOB_QUEUED] ? "" :
									 " (Slurm holds none)");
		if (!s.slurm_failed && !s.count[JOB_RUNNING] && !s.count[JOB_QUEUED])
			print_summary(&s);
	}
	sweep_release(&s);
	return rc;
}

int slurm_cancel(const char *dir)
{
	struct sweep s;
	char name_opt[128], *out = NULL, *errs = NULL;
	const char *argv[] = { "scancel", name_opt, NULL };
	int rc = sweep_read(&s, dir, 0);

	if (rc) {
		sweep_release(&s);
		return rc;
	}
	if (!on_path("scancel")) {
		sweep_release(&s);
		return missing("scancel");
	}
	snprintf(name_opt, sizeof(name_opt), "--name=%s", s.job_name);
	/* recorded first: a follower elsewhere then submits nothing again */
	s.q->cancelled = 1;
	if (vd_slurm_queue_write(s.q))
		cli_error("%s", vd_error_last());
	rc = cli_capture(&out, &errs, argv);
	if (rc != 0)
		cli_error("scancel failed: %s", rc < 0 ? strerror(errno) : last_line(errs));
	else
		cli_printf("cancelled the Slurm jobs of %s; 'visdev queue --resume %s' submits "
			   "what did not finish\n",
			   s.q->dir, s.q->dir);
	free(out);
	free(errs);
	sweep_release(&s);
	return rc ? EXIT_FAIL : EXIT_OK;
}

/* ---- One task ---------------------------------------------------------------------- */

static volatile pid_t task_group;

static void pass_signal(int sig)
{
	if (task_group > 0)
		kill(-task_group, sig);
}

int slurm_task(const char *id, const char *dir)
{
	struct vd_slurm_queue *q = NULL;
	struct vd_journal_writer *w = NULL;
	struct vd_jobs view = { 0 };
	struct sigaction sa = { .sa_handler = pass_signal };
	char path[PATH_MAX], out_path[PATH_MAX], err_path[PATH_MAX], host[256] = "?", index[32];
	const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
	char *end;
	unsigned long job;
	int err, status, out_fd, err_fd;
	pid_t pid;

	errno = 0;
	job = strtoul(id, &end, 10);
	if (*id < '0' || *id > '9' || *end || errno) {
		cli_error("--task takes a job number, not '%s'", id);
		return EXIT_USAGE;
	}
	err = vd_slurm_queue_read(&q, dir);
	if (err)
		return cli_library_error(err);
	if (job >= q->njobs) {
		cli_error("'%s' has %zu jobs: there is no job %lu", dir, q->njobs, job);
		vd_slurm_queue_free(q);
		return EXIT_USAGE;
	}
	gethostname(host, sizeof(host) - 1);
	view.commands = q->commands;
	view.n = q->njobs;
	view.digest = q->digest;
	snprintf(path, sizeof(path), "%s/journal/%lu", dir, job);
	err = vd_journal_open(&w, path, &view, 1);
	if (err) {
		vd_slurm_queue_free(q);
		return cli_library_error(err);
	}
	snprintf(out_path, sizeof(out_path), "%s/out/%lu.out", dir, job);
	snprintf(err_path, sizeof(err_path), "%s/out/%lu.err", dir, job);
	out_fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	err_fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	snprintf(index, sizeof(index), "%lu", job);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		setpgid(0, 0);
		dup2(null, STDIN_FILENO);
		if (out_fd >= 0)
			dup2(out_fd, STDOUT_FILENO);
		if (err_fd >= 0)
			dup2(err_fd, STDERR_FILENO);
		/* Slurm numbers GPUs as the node lists them, by PCI bus: CUDA must as well */
		setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
		setenv("VISDEV_JOB_INDEX", index, 1);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGUSR1, SIG_DFL);
		signal(SIGUSR2, SIG_DFL);
		execl("/bin/sh", "sh", "-c", q->commands[job], (char *)NULL);
		_exit(126);
	}
	if (out_fd >= 0)
		close(out_fd);
	if (err_fd >= 0)
		close(err_fd);
	if (pid < 0) {
		cli_error("cannot start job %lu: %s", job, strerror(errno));
		vd_journal_close(w);
		vd_slurm_queue_free(q);
		return EXIT_FAIL;
	}
	setpgid(pid, pid);
	task_group = pid;
	if (vd_journal_start_on(w, job, pid, cvd ? cvd : "", q->commands[job], host) ||
	    vd_journal_sync(w))
		cli_error("job %lu's start is not in its journal: %s", job, vd_error_last());
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			status = 127 << 8;
			break;
		}
	status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	if (vd_journal_end(w, job, status) || vd_journal_sync(w))
		cli_error("job %lu's end is not in its journal: %s", job, vd_error_last());
	vd_journal_close(w);
	vd_slurm_queue_free(q);
	return status;
}
