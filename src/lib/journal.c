/*
 * journal.c - a queue's journal: one record a line, appended as jobs start
 * and end, durable in batches, read back up to its last whole record.
 *
 *   visdev-queue-journal 1 <TAB> jobs=N <TAB> digest=HEX <TAB> pid=P
 *   start <TAB> JOB <TAB> TIME_MS <TAB> PID <TAB> DEVICES <TAB> COMMAND [<TAB> NODE]
 *   end <TAB> JOB <TAB> TIME_MS <TAB> STATUS
 *
 * COMMAND and NODE (the host a Slurm task ran on) have their backslashes,
 * tabs, newlines and carriage returns written as \\, \t, \n and \r. A header may come again (a
 * resumed queue): from there on it names the job list.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define MAGIC "visdev-queue-journal 1"

/* The largest journal read: 100,000 jobs take some 10 MB. */
#define JOURNAL_MAX ((size_t)1 << 30)

struct vd_journal_writer {
	int fd;
	off_t size; /* where the last whole record ends */
	int dirty;  /* written since the last sync */
	char *buf;  /* one record, grown as needed */
	size_t cap;
};

const char *vd_job_state_name(enum vd_job_state state)
{
	static const char *const names[] = { "pending", "running", "done", "failed" };

	if ((unsigned)state >= ARRAY_SIZE(names))
		return NULL;
	return names[state];
}

static void job_clear(struct vd_journal_job *j)
{
	free(j->devices);
	free(j->command);
	free(j->node);
	memset(j, 0, sizeof(*j));
}

void vd_journal_free(struct vd_journal *journal)
{
	if (!journal)
		return;
	for (size_t i = 0; i < journal->njobs; i++)
		job_clear(&journal->jobs[i]);
	free(journal->jobs);
	free(journal);
}

/* The fields of a line, split on tabs in place: at most max, the last taking the rest. */
static size_t split(char **fields, size_t max, char *line)
{
	size_t n = 0;

	while (n + 1 < max) {
		char *tab = strchr(line, '\t');

		fields[n++] = line;
		if (!tab)
			return n;
		*tab = '\0';
		line = tab + 1;
	}
	fields[n++] = line;
	return n;
}

/* A whole decimal number from text, no sign, no junk, at most max: 0, or -1. */
static int read_number(uint64_t *out, const char *text, uint64_t max)
{
	char *end;

	if (*text < '0' || *text > '9')
		return -1;
	errno = 0;
	*out = strtoull(text, &end, 10);
	return *end || errno || *out > max ? -1 : 0;
}

/* "key=value" with the key expected: the value, or NULL. */
static const char *value_of(const char *field, const char *key)
{
	size_t len = strlen(key);

	return !strncmp(field, key, len) && field[len] == '=' ? field + len + 1 : NULL;
}

/* Undoes the escapes of a command, in place. */
static void unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (*s == '\\' && s[1]) {
			s++;
			*w++ = *s == 't' ? '\t' : *s == 'n' ? '\n' : *s == 'r' ? '\r' : *s;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
}

/* A header: the job list changes to its count (states of jobs kept kept). */
static int parse_header(struct vd_journal *j, char **f, size_t nf)
{
	const char *jobs = nf >= 4 ? value_of(f[1], "jobs") : NULL;
	const char *digest = nf >= 4 ? value_of(f[2], "digest") : NULL;
	const char *pid = nf >= 4 ? value_of(f[3], "pid") : NULL;
	uint64_t n, p;
	char *end;

	if (!jobs || !digest || !pid || read_number(&n, jobs, VD_JOBS_MAX) ||
	    read_number(&p, pid, INT32_MAX))
		return -1;
	errno = 0;
	j->digest = strtoull(digest, &end, 16);
	if (*end || errno || !*digest)
		return -1;
	if (n != j->njobs) {
		struct vd_journal_job *more;

		for (size_t i = n; i < j->njobs; i++)
			job_clear(&j->jobs[i]);
		more = realloc(j->jobs, (n ? n : 1) * sizeof(*more));
		if (!more)
			return -2;
		for (size_t i = j->njobs; i < n; i++)
			memset(&more[i], 0, sizeof(more[i]));
		j->jobs = more;
		j->njobs = n;
	}
	j->pid = (int32_t)p;
	return 0;
}

/* A start or end record. Returns 0, -1 when it is not one, -2 out of memory. */
static int parse_event(struct vd_journal *j, char **f, size_t nf)
{
	uint64_t job, t, v;
	struct vd_journal_job *jj;

	if (nf < 4 || read_number(&job, f[1], UINT64_MAX) || read_number(&t, f[2], INT64_MAX))
		return -1;
	if (!strcmp(f[0], "start")) {
		char *devices, *command, *node = NULL;

		if ((nf != 6 && nf != 7) || read_number(&v, f[3], INT32_MAX))
			return -1;
		if (job >= j->njobs)
			return 0;
		devices = strdup(f[4]);
		command = strdup(f[5]);
		if (nf == 7)
			node = strdup(f[6]);
		if (!devices || !command || (nf == 7 && !node)) {
			free(devices);
			free(command);
			free(node);
			return -2;
		}
		unescape(command);
		if (node)
			unescape(node);
		jj = &j->jobs[job];
		free(jj->devices);
		free(jj->command);
		free(jj->node);
		jj->devices = devices;
		jj->command = command;
		jj->node = node;
		jj->pid = (int32_t)v;
		jj->start_ms = (int64_t)t;
		jj->end_ms = 0;
		jj->starts++;
		jj->state = VD_JOB_RUNNING;
		return 0;
	}
	if (!strcmp(f[0], "end")) {
		if (nf != 4 || read_number(&v, f[3], 255 + 128))
			return -1;
		if (job >= j->njobs)
			return 0;
		jj = &j->jobs[job];
		if (jj->state == VD_JOB_PENDING)
			return -1; /* an end that no start came before */
		jj->status = (int)v;
		jj->end_ms = (int64_t)t;
		jj->state = v == 0 ? VD_JOB_DONE : VD_JOB_FAILED;
		return 0;
	}
	return -1;
}

int vd_journal_parse(struct vd_journal **out, const char *text, size_t len)
{
	struct vd_journal *j = calloc(1, sizeof(*j));
	const char *last = len ? memrchr(text, '\n', len) : NULL;
	size_t whole = last ? (size_t)(last - text) + 1 : 0, lineno = 0;
	char *copy = NULL, *line, *rest;
	int err = 0;

	*out = NULL;
	if (!j || !(copy = malloc(whole + 1))) {
		free(j);
		return error_set(VD_ENOMEM, "out of memory");
	}
	memcpy(copy, text, whole);
	copy[whole] = '\0';
	rest = copy;
	while (!err && (line = strsep(&rest, "\n")) && (rest || *line)) {
		char *f[7];
		size_t nf;
		int r;

		lineno++;
		/* a NUL byte ends the line early: what is left of it is no record */
		if ((rest ? (size_t)(rest - line - 1) : whole - (size_t)(line - copy)) !=
		    strlen(line))
			r = -1;
		else if (nf = split(f, 7, line), !strcmp(f[0], MAGIC))
			r = parse_header(j, f, nf);
		else
			r = lineno == 1 ? -1 : parse_event(j, f, nf);
		if (r == -2)
			err = error_set(VD_ENOMEM, "out of memory");
		else if (r < 0)
			err = error_set(VD_EPARSE, "line %zu: %s", lineno,
					lineno == 1 ? "not a visdev queue journal" :
						      "not a journal record");
	}
	free(copy);
	if (!err && !lineno)
		err = len ? error_set(VD_EPARSE, "not a visdev queue journal: no whole record") :
			    error_set(VD_EPARSE, "an empty journal");
	if (err) {
		vd_journal_free(j);
		return err;
	}
	j->whole = whole;
	j->torn = whole < len;
	*out = j;
	return 0;
}

/* Reads a whole regular file opened as fd into a new buffer. */
static int read_all(char **out, size_t *len, int fd, const char *path)
{
	struct stat st;
	size_t done = 0;
	char *buf;

	*out = NULL;
	if (fstat(fd, &st) < 0)
		return error_set(VD_EIO, "cannot read '%s': %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return error_set(VD_EPERM, "'%s' is not a regular file", path);
	if ((size_t)st.st_size > JOURNAL_MAX)
		return error_set(VD_EIO, "'%s' is too large to be a journal", path);
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return error_set(VD_ENOMEM, "out of memory");
	while (done < (size_t)st.st_size) {
		ssize_t n = pread(fd, buf + done, (size_t)st.st_size - done, (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(buf);
			return error_set(VD_EIO, "cannot read '%s': %s", path, strerror(errno));
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*out = buf;
	*len = done;
	return 0;
}

/* Opens an existing journal for reading: no links, nothing that blocks. */
static int open_existing(int *fd, const char *path)
{
	*fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (*fd >= 0)
		return 0;
	if (errno == ENOENT)
		return error_set(VD_ENOTFOUND, "no journal '%s'", path);
	if (errno == ELOOP)
		return error_set(VD_EPERM, "'%s' is a symbolic link: not followed", path);
	return error_set(VD_EIO, "cannot open '%s': %s", path, strerror(errno));
}

int vd_journal_read(struct vd_journal **out, const char *path)
{
	char *text = NULL;
	size_t len = 0;
	int fd, err;

	*out = NULL;
	err = open_existing(&fd, path);
	if (err)
		return err;
	err = read_all(&text, &len, fd, path);
	close(fd);
	if (!err) {
		err = vd_journal_parse(out, text, len);
		if (err == VD_EPARSE) {
			char why[256];

			/* the message is rewritten in the buffer it is read from */
			snprintf(why, sizeof(why), "%s", vd_error_last());
			err = error_set(VD_EPARSE, "'%s' %s", path, why);
		}
	}
	free(text);
	return err;
}

int vd_journal_busy(const char *path, int32_t *pid)
{
	struct vd_journal *j = NULL;
	int fd, err, busy;

	if (pid)
		*pid = 0;
	err = open_existing(&fd, path);
	if (err)
		return err;
	busy = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	if (busy && pid && vd_journal_read(&j, path) == 0)
		*pid = j->pid;
	vd_journal_free(j);
	return busy;
}

/*
 * Writes len bytes of a record at the end of the journal, whole or not at
 * all: a record cut short (a full disk) is cut off again, so that the
 * records after it are not glued to half a line.
 */
static int write_record(struct vd_journal_writer *w, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(w->fd, w->buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : ENOSPC;

			if (done && ftruncate(w->fd, w->size) == 0)
				lseek(w->fd, w->size, SEEK_SET);
			return error_set(VD_EIO, "cannot write the journal: %s", strerror(e));
		}
		done += (size_t)n;
	}
	w->size += (off_t)len;
	w->dirty = 1;
	return 0;
}

/* Formats a record into w->buf (grown as needed); its length, or -1 out of memory. */
static long format_record(struct vd_journal_writer *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static long format_record(struct vd_journal_writer *w, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(w->buf, w->cap, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n >= w->cap) {
		size_t cap = (size_t)n + 1;
		char *more = realloc(w->buf, cap);

		if (!more)
			return -1;
		w->buf = more;
		w->cap = cap;
		va_start(ap, fmt);
		n = vsnprintf(w->buf, w->cap, fmt, ap);
		va_end(ap);
	}
	return n;
}

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int vd_journal_open(struct vd_journal_writer **out, const char *path, const struct vd_jobs *jobs,
		    int append)
{
	struct vd_journal_writer *w = calloc(1, sizeof(*w));
	struct vd_journal *old = NULL;
	char *text = NULL;
	size_t len = 0;
	long n;
	int err = 0;

	*out = NULL;
	if (!w)
		return error_set(VD_ENOMEM, "out of memory");
	w->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
	if (w->fd < 0) {
		err = errno == ELOOP ?
			      error_set(VD_EPERM, "'%s' is a symbolic link: not followed", path) :
			      error_set(VD_EIO, "cannot open the journal '%s': %s", path,
					strerror(errno));
		free(w);
		return err;
	}
	if (flock(w->fd, LOCK_EX | LOCK_NB) < 0) {
		int busy = errno == EWOULDBLOCK, e = errno;
		int32_t pid = 0;

		if (busy && vd_journal_read(&old, path) == 0)
			pid = old->pid;
		errno = e;
		err = busy ? error_set(VD_EBUSY, "another queue (pid %d) is writing '%s'", (int)pid,
				       path) :
			     error_set(VD_EIO, "cannot lock '%s': %s", path, strerror(errno));
		goto out;
	}
	/* appended to, the journal loses only a torn last record: a crash's half line */
	if (append)
		err = read_all(&text, &len, w->fd, path);
	if (!err && append && len)
		err = vd_journal_parse(&old, text, len);
	if (!err && ftruncate(w->fd, old ? (off_t)old->whole : 0) < 0)
		err = error_set(VD_EIO, "cannot cut '%s' short: %s", path, strerror(errno));
	if (!err && (w->size = lseek(w->fd, 0, SEEK_END)) < 0)
		err = error_set(VD_EIO, "cannot write '%s': %s", path, strerror(errno));
	if (err)
		goto out;
	n = format_record(w, MAGIC "\tjobs=%zu\tdigest=%016llx\tpid=%d\n", jobs->n,
			  (unsigned long long)jobs->digest, (int)getpid());
	err = n < 0 ? error_set(VD_ENOMEM, "out of memory") : write_record(w, (size_t)n);
	if (!err)
		err = vd_journal_sync(w);
out:
	free(text);
	vd_journal_free(old);
	if (err) {
		vd_journal_close(w);
		return err;
	}
	*out = w;
	return 0;
}

/* s with backslashes, tabs, newlines and carriage returns escaped; NULL out of memory. */
static char *escape(const char *s)
{
	size_t len = strlen(s), k = 0;
	char *escaped = malloc(2 * len + 1);

	if (!escaped)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (c == '\\' || c == '\t' || c == '\n' || c == '\r') {
			escaped[k++] = '\\';
			c = c == '\t' ? 't' : c == '\n' ? 'n' : c == '\r' ? 'r' : c;
		}
		escaped[k++] = c;
	}
	escaped[k] = '\0';
	return escaped;
}

int vd_journal_start_on(struct vd_journal_writer *w, size_t job, int32_t pid, const char *devices,
			const char *command, const char *node)
{
	char *escaped = escape(command), *host = node ? escape(node) : NULL;
	long n = -1;

	if (escaped && (!node || host))
		n = format_record(w, "start\t%zu\t%lld\t%d\t%s\t%s%s%s\n", job, (long long)now_ms(),
				  (int)pid, devices, escaped, host ? "\t" : "", host ? host : "");
	free(escaped);
	free(host);
	return n < 0 ? error_set(VD_ENOMEM, "out of memory") : write_record(w, (size_t)n);
}

int vd_journal_start(struct vd_journal_writer *w, size_t job, int32_t pid, const char *devices,
		     const char *command)
{
	return vd_journal_start_on(w, job, pid, devices, command, NULL);
}

int vd_journal_end(struct vd_journal_writer *w, size_t job, int status)
{
	long n = format_record(w, "end\t%zu\t%lld\t%d\n", job, (long long)now_ms(), status);

	return n < 0 ? error_set(VD_ENOMEM, "out of memory") : write_record(w, (size_t)n);
}

int vd_journal_sync(struct vd_journal_writer *w)
{
	if (!w->dirty)
		return 0;
	if (fdatasync(w->fd) < 0)
		return error_set(VD_EIO, "cannot make the journal durable: %s", strerror(errno));
	w->dirty = 0;
	return 0;
}

void vd_journal_close(struct vd_journal_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0) {
		vd_journal_sync(w);
		close(w->fd);
	}
	free(w->buf);
	free(w);
}
