/*
 * line.c - waiting in line for devices: first come, first served, with no
 * daemon.
 *
 * Each request that waits has two files in the lease directory, named by
 * its ticket (microseconds since the epoch at arrival, made unique and
 * increasing under the allocation lock):
 *
 *   wait.TICKET.json  its record: one JSON line saying what it asked and
 *                     which devices it may use at all. The waiter keeps it
 *                     flock'ed, so a record is live exactly while its
 *                     waiter is: one killed leaves the line at once.
 *   wait.TICKET.fifo  its bell: anyone who works out that it now fits
 *                     writes a byte, which wakes it.
 *
 * Whoever takes the allocation lock reads the line and plans it (pure:
 * vd_line_plan): in order of arrival, each request that fits gets the
 * devices it would choose; one that does not holds the devices that fit it
 * on their own, up to what it asked. What an earlier request holds, no
 * later one may take. Waking: the first in line watches the directory for
 * leases that end and waiters that leave; every other waiter watches only
 * the record of the one before it, and its bell. So a lease that ends
 * wakes the first in line, who rings the bell of whoever the plan says is
 * next.
 *
 * Records are believed as far as the system vouches for them: the owner is
 * the file's, a record not flock'ed is stale, and a ticket older than the
 * file itself (a place in line claimed, not taken) is refused and named.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "internal.h"

#define WAIT_PREFIX   "wait."
#define WAIT_RECORD   ".json"
#define WAIT_BELL     ".fifo"
#define RECORD_MAX    65536
#define TICKET_SLACK  2000000 /* us: how much older than its file a ticket may be */
#define MAX_REQUEST_N 4096

struct vd_waiter {
	char *dir;
	uint64_t ticket; /* 0: not in line */
	int record_fd, bell_fd, notify_fd, epoll_fd;
	int dir_wd, prev_wd; /* -1: not watched */
	uint64_t prev;	     /* the ticket of the one before, 0: first */
	int wake;	     /* try again at once */
	int left_fd;	     /* the record of a place just left, to close (-1: none) */
	unsigned place, of;
	struct vd_device_ref *holds;
	size_t nholds;
	char user[32]; /* looked up before the allocation lock is held */
};

/* Reads TICKET from "wait.TICKET<suffix>"; 0 when the name is not of that form. */
static uint64_t name_ticket(const char *name, const char *suffix)
{
	size_t pl = strlen(WAIT_PREFIX), sl = strlen(suffix), len = strlen(name);
	uint64_t t = 0;

	/* one name a ticket: no leading zeros */
	if (len <= pl + sl || strncmp(name, WAIT_PREFIX, pl) || strcmp(name + len - sl, suffix) ||
	    name[pl] == '0')
		return 0;
	for (size_t i = pl; i < len - sl; i++) {
		if (name[i] < '0' || name[i] > '9' || t > (UINT64_MAX - 9) / 10)
			return 0;
		t = t * 10 + (uint64_t)(name[i] - '0');
	}
	return t;
}

int line_is_name(const char *name)
{
	return name_ticket(name, WAIT_RECORD) || name_ticket(name, WAIT_BELL);
}

int line_is_record(const char *name)
{
	return name_ticket(name, WAIT_RECORD) != 0;
}

static void file_name(char *out, size_t n, uint64_t ticket, const char *suffix)
{
	snprintf(out, n, WAIT_PREFIX "%llu%s", (unsigned long long)ticket, suffix);
}

static uint64_t now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

/* ---- reading the line ---------------------------------------------------- */

void line_waiting_clear(struct vd_waiting *w)
{
	vd_strings_free(w->within, w->nwithin);
	free(w->holds);
}

void vd_line_free(struct vd_line *line)
{
	if (!line)
		return;
	for (size_t i = 0; i < line->n; i++)
		line_waiting_clear(&line->waiting[i]);
	free(line->waiting);
	vd_strings_free(line->ignored, line->nignored);
	free(line);
}

static int json_int_in(json_t *o, const char *key, long long lo, long long hi, long long *out)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return 0;
	*out = json_integer_value(v);
	return 1;
}

/* Fills w from a record's JSON; 0 when it is not a whole, sane record. */
static int waiting_from_json(struct vd_waiting *w, json_t *rec, uint64_t ticket)
{
	json_t *within = json_object_get(rec, "within"), *model = json_object_get(rec, "model");
	const char *policy = json_string_value(json_object_get(rec, "policy"));
	const char *command = json_string_value(json_object_get(rec, "command"));
	long long t, pid, since, n, mem, min_free, util;
	json_t *u;
	size_t i;

	if (!json_int_in(rec, "ticket", 1, INT64_MAX, &t) || (uint64_t)t != ticket ||
	    !json_int_in(rec, "pid", 1, INT32_MAX, &pid) ||
	    !json_int_in(rec, "since", 0, INT64_MAX, &since) ||
	    !json_int_in(rec, "n", 1, MAX_REQUEST_N, &n) ||
	    !json_int_in(rec, "mem_mib", 0, INT64_MAX, &mem) ||
	    !json_int_in(rec, "min_free_mib", 0, INT64_MAX, &min_free) ||
	    !json_int_in(rec, "max_util", -1, 100, &util) || !policy ||
	    vd_policy_parse(&w->policy, policy) ||
	    !(json_is_null(within) || (json_is_array(within) && json_array_size(within))) ||
	    !(json_is_null(model) || json_is_string(model)) || !command)
		return 0;
	w->ticket = ticket;
	w->pid = (int32_t)pid;
	w->since = since;
	w->n = (unsigned)n;
	w->mem_mib = (uint64_t)mem;
	w->min_free_mib = (uint64_t)min_free;
	w->max_util = (int)util;
	vd_utf8_copy(w->model, json_is_string(model) ? json_string_value(model) : "",
		     sizeof(w->model));
	vd_utf8_copy(w->command, command, sizeof(w->command));
	json_array_foreach(within, i, u)
	{
		if (!json_is_string(u) || strlen(json_string_value(u)) >= VD_UUID_MAX)
			return 0;
		if (strings_push(&w->within, &w->nwithin, "%s", json_string_value(u)))
			return -1;
	}
	return 1;
}

int line_record_parse(struct vd_waiting *w, const char *text, size_t len, uint64_t ticket)
{
	json_t *rec = record_last_line(text, len);
	int ok = rec ? waiting_from_json(w, rec, ticket) : 0;

	json_decref(rec);
	return ok;
}

/* Reads a record file of size bytes into w: as line_record_parse(). */
static int record_load(struct vd_waiting *w, int fd, off_t size, uint64_t ticket)
{
	size_t cap = size > 0 && size < RECORD_MAX ? (size_t)size : RECORD_MAX, len = 0;
	char *buf = malloc(cap);
	ssize_t n;
	int ok;

	if (!buf)
		return -1;
	while (len < cap && (n = pread(fd, buf + len, cap - len, (off_t)len)) > 0)
		len += (size_t)n;
	ok = line_record_parse(w, buf, len, ticket);
	free(buf);
	return ok;
}

static int ignore(struct vd_line *l, const char *dir, const char *name, uid_t owner,
		  const char *why)
{
	char who[48];

	user_name(who, sizeof(who), owner);
	return strings_push(&l->ignored, &l->nignored, "%s/%s (%s): %s: ignored", dir, name, who,
			    why);
}

/* Removes the files of a request that left the line: its own, or, under the allocation lock, a dead
 * one's. */
static void tidy_away(int dfd, uint64_t ticket)
{
	char name[48];

	file_name(name, sizeof(name), ticket, WAIT_RECORD);
	unlinkat(dfd, name, 0);
	file_name(name, sizeof(name), ticket, WAIT_BELL);
	unlinkat(dfd, name, 0);
}

/* Reads one record of the line into l; stale ones are removed when tidy is set. */
static int read_one(struct vd_line *l, int dfd, const char *dir, const char *name, uint64_t ticket,
		    int tidy)
{
	struct vd_waiting *grown, w = { 0 };
	struct stat st;
	int fd, ok;

	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		int e = errno, exists = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;

		if (e == ELOOP || (exists && S_ISLNK(st.st_mode)))
			return ignore(l, dir, name, exists ? st.st_uid : 0, "a symbolic link");
		return ignore(l, dir, name, exists ? st.st_uid : 0, strerror(e));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return ignore(l, dir, name, st.st_uid, "not a regular file");
	}
	if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
		/* nobody holds it: that waiter has left */
		if (tidy)
			tidy_away(dfd, ticket);
		close(fd);
		return 0;
	}
	ok = record_load(&w, fd, st.st_size, ticket);
	close(fd);
	if (ok < 0) {
		line_waiting_clear(&w);
		return error_set(VD_ENOMEM, "out of memory");
	}
	if (!ok) {
		line_waiting_clear(&w);
		return ignore(l, dir, name, st.st_uid, "not a line record");
	}
	if (ticket + TICKET_SLACK <
	    (uint64_t)st.st_ctim.tv_sec * 1000000u + (uint64_t)st.st_ctim.tv_nsec / 1000u) {
		line_waiting_clear(&w);
		return ignore(l, dir, name, st.st_uid, "it claims a place older than its file");
	}
	w.uid = (uint32_t)st.st_uid;
	user_name(w.user, sizeof(w.user), st.st_uid);
	grown = realloc(l->waiting, (l->n + 1) * sizeof(*grown));
	if (!grown) {
		line_waiting_clear(&w);
		return error_set(VD_ENOMEM, "out of memory");
	}
	l->waiting = grown;
	l->waiting[l->n++] = w;
	return 0;
}

/* ---- the plan -------------------------------------------------------------- */

/* Adds a VD_LEASE_HELD holder to leases for each device held for w. */
static int add_holds(struct vd_leases *leases, const struct vd_waiting *w,
		     const struct vd_system *sys)
{
	struct vd_lease_holder *grown;

	if (!w->nholds)
		return 0;
	grown = realloc(leases->holders, (leases->n + w->nholds) * sizeof(*grown));
	if (!grown)
		return error_set(VD_ENOMEM, "out of memory");
	leases->holders = grown;
	for (size_t i = 0; i < w->nholds; i++) {
		struct vd_lease_holder *h = &grown[leases->n++];

		memset(h, 0, sizeof(*h));
		str_copy(h->uuid, system_device_uuid(sys, w->holds[i]), sizeof(h->uuid));
		h->mode = VD_LEASE_HELD;
		h->uid = w->uid;
		str_copy(h->user, w->user, sizeof(h->user));
		h->pid = w->pid;
		str_copy(h->command, w->command, sizeof(h->command));
		h->since = w->since;
	}
	return 0;
}

/* What w holds given the leases and the holds before it. */
static int plan_one(struct vd_waiting *w, const struct vd_system *sys, const struct vd_leases *work)
{
	struct vd_select_options opts;
	struct vd_choice *c = NULL;
	size_t take;
	int err;

	vd_select_options_init(&opts);
	opts.n = w->n;
	opts.mem_mib = w->mem_mib;
	opts.min_free_mib = w->min_free_mib;
	opts.max_util = w->max_util;
	opts.policy = w->policy;
	opts.within = (const char *const *)w->within;
	opts.nwithin = w->nwithin;
	free(w->holds);
	w->holds = NULL;
	w->nholds = 0;
	w->ready = 0;
	err = vd_select(&c, sys, work, NULL, &opts);
	if (err && err != VD_ENOFIT) {
		vd_choice_free(c);
		return err;
	}
	w->ready = !err;
	take = !err ? c->ndevices : c->nfitting < w->n ? c->nfitting : w->n;
	if (take) {
		w->holds = malloc(take * sizeof(*w->holds));
		if (!w->holds) {
			vd_choice_free(c);
			return error_set(VD_ENOMEM, "out of memory");
		}
		memcpy(w->holds, !err ? c->devices : c->fitting, take * sizeof(*w->holds));
		w->nholds = take;
	}
	vd_choice_free(c);
	return 0;
}

static int same_request(const struct vd_waiting *a, const struct vd_waiting *b)
{
	if (a->n != b->n || a->mem_mib != b->mem_mib || a->min_free_mib != b->min_free_mib ||
	    a->max_util != b->max_util || a->policy != b->policy || a->nwithin != b->nwithin)
		return 0;
	for (size_t i = 0; i < a->nwithin; i++)
		if (strcmp(a->within[i], b->within[i]))
			return 0;
	return 1;
}

/* Whether an earlier request like the i-th, planned already, found nothing to hold. */
static int nothing_left_for(const struct vd_line *line, size_t i)
{
	for (size_t j = i; j-- > 0;)
		if (!line->waiting[j].nholds && same_request(&line->waiting[j], &line->waiting[i]))
			return 1;
	return 0;
}

/* A copy of leases, to which the plan adds its holds. */
static int work_init(struct vd_leases *work, const struct vd_leases *leases)
{
	memset(work, 0, sizeof(*work));
	if (!leases || !leases->n)
		return 0;
	work->holders = malloc(leases->n * sizeof(*work->holders));
	if (!work->holders)
		return error_set(VD_ENOMEM, "out of memory");
	memcpy(work->holders, leases->holders, leases->n * sizeof(*work->holders));
	work->n = leases->n;
	return 0;
}

/* Plans the i-th request of the line, those before it planned already, and adds its holds. */
static int plan_entry(struct vd_line *line, size_t i, const struct vd_system *sys,
		      struct vd_leases *work)
{
	struct vd_waiting *w = &line->waiting[i];
	int err;

	/*
	 * Holds only grow along the line: a request that asks what an earlier
	 * one asked, which found nothing to hold, finds nothing either (a long
	 * line of alike requests is planned in one step).
	 */
	if (nothing_left_for(line, i)) {
		free(w->holds);
		w->holds = NULL;
		w->nholds = 0;
		w->ready = 0;
		return 0;
	}
	err = plan_one(w, sys, work);
	return err ? err : add_holds(work, w, sys);
}

int vd_line_plan(struct vd_line *line, const struct vd_system *sys, const struct vd_leases *leases)
{
	struct vd_leases work;
	int err = work_init(&work, leases);

	for (size_t i = 0; !err && i < line->n; i++)
		err = plan_entry(line, i, sys, &work);
	free(work.holders);
	return err;
}

int line_holds_before(struct vd_leases *leases, const struct vd_line *line,
		      const struct vd_system *sys, uint64_t ticket)
{
	int err = 0;

	for (size_t i = 0; !err && i < line->n && line->waiting[i].ticket < ticket; i++)
		err = add_holds(leases, &line->waiting[i], sys);
	return err;
}

int vd_line_holds(struct vd_leases *leases, const struct vd_line *line, const struct vd_system *sys)
{
	return line_holds_before(leases, line, sys, UINT64_MAX);
}

/* ---- reading the line ---------------------------------------------------- */

static int ticket_cmp(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;

	return (a > b) - (a < b);
}

int line_tickets_add(struct line_tickets *t, const char *name)
{
	uint64_t ticket = name_ticket(name, WAIT_RECORD);

	if (!ticket)
		return 0;
	if (array_grow(&t->tickets, &t->cap, t->n, sizeof(*t->tickets), 64))
		return VD_ENOMEM;
	t->tickets[t->n++] = ticket;
	return 0;
}

/* The tickets of the line's record files. */
static int record_tickets(struct line_tickets *t, int dfd, const char *dir)
{
	struct dirent *e;
	DIR *d;
	int err = lease_dir_scan(&d, dfd, dir);

	while (!err && (e = readdir(d)))
		err = line_tickets_add(t, e->d_name);
	if (d)
		closedir(d);
	return err;
}

int line_read_fd(struct vd_line **out, struct line_tickets *rest, struct line_tickets *names,
		 int dfd, const char *dir, int tidy, const struct vd_system *sys,
		 const struct vd_leases *leases)
{
	struct vd_line *l = calloc(1, sizeof(*l));
	struct line_tickets found = { 0 };
	struct vd_leases work = { 0 };
	uint64_t *tickets;
	size_t n, i = 0;
	int err = 0, taken = 0;

	*out = NULL;
	if (rest)
		*rest = (struct line_tickets){ 0 };
	if (names) {
		found = *names;
		*names = (struct line_tickets){ 0 };
	} else {
		err = record_tickets(&found, dfd, dir);
	}
	tickets = found.tickets;
	n = found.n;
	if (!err && !l)
		err = error_set(VD_ENOMEM, "out of memory");
	if (!err && n > 1)
		qsort(tickets, n, sizeof(*tickets), ticket_cmp);
	if (!err && sys) {
		err = work_init(&work, leases);
		taken = !err && select_all_taken(sys, &work);
	}
	/* with sys, reading stops once nothing is left for anyone further back */
	for (; !err && !taken && i < n; i++) {
		char name[48];
		size_t had = l->n;

		file_name(name, sizeof(name), tickets[i], WAIT_RECORD);
		err = read_one(l, dfd, dir, name, tickets[i], tidy);
		if (err || !sys || l->n == had)
			continue;
		err = plan_entry(l, had, sys, &work);
		taken = !err && l->waiting[had].nholds && select_all_taken(sys, &work);
	}
	free(work.holders);
	if (err) {
		free(tickets);
		vd_line_free(l);
		return err;
	}
	for (size_t k = 0; k < l->n; k++)
		l->waiting[k].place = (unsigned)k + 1;
	if (rest && i < n) {
		memmove(tickets, tickets + i, (n - i) * sizeof(*tickets));
		rest->tickets = tickets;
		rest->n = n - i;
		rest->cap = found.cap;
	} else {
		free(tickets);
	}
	*out = l;
	return 0;
}

int vd_line_read(struct vd_line **out, const char *dir)
{
	int dfd, err;

	*out = NULL;
	err = lease_dir_open(&dfd, dir);
	if (err)
		return err;
	err = line_read_fd(out, NULL, NULL, dfd, dir, 0, NULL, NULL);
	close(dfd);
	return err;
}

/*
 * Writes a byte to a bell. A waiter that closes its bell meanwhile (it
 * left the line) would make that write raise SIGPIPE, which kills a
 * program that did not ask for it: the signal is held back, and taken
 * away if the write raised it.
 */
void line_bell_write(int fd)
{
	sigset_t pipe_set, old, pending;
	int was_pending;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	sigpending(&pending);
	was_pending = sigismember(&pending, SIGPIPE);
	if (write(fd, "!", 1) < 0 && errno == EPIPE && !was_pending)
		sigtimedwait(&pipe_set, NULL, &(struct timespec){ 0, 0 });
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Writes a byte to the bell of the request with this ticket, if it has one. */
static void ring(int dfd, const struct vd_waiting *w)
{
	char name[48];
	struct stat st;
	int fd;

	file_name(name, sizeof(name), w->ticket, WAIT_BELL);
	fd = openat(dfd, name, O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	/* only the waiter's own FIFO: never a byte into somebody's file */
	if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && st.st_uid == w->uid)
		line_bell_write(fd);
	close(fd);
}

void line_ring_ready(const struct vd_line *line, int dfd, uint64_t own)
{
	for (size_t i = 0; i < line->n; i++)
		if (line->waiting[i].ready && line->waiting[i].ticket != own)
			ring(dfd, &line->waiting[i]);
}

/* ---- a waiter of this process ------------------------------------------- */

int vd_waiter_new(struct vd_waiter **out, const char *dir)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct vd_waiter *w;
	int dfd, err;

	*out = NULL;
	err = lease_dir_open(&dfd, dir);
	if (err)
		return err;
	close(dfd);
	w = calloc(1, sizeof(*w));
	if (!w)
		return error_set(VD_ENOMEM, "out of memory");
	w->record_fd = w->bell_fd = w->dir_wd = w->prev_wd = w->left_fd = -1;
	w->dir = strdup(dir);
	user_name(w->user, sizeof(w->user), geteuid());
	w->notify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	w->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	ev.data.fd = w->notify_fd;
	/* watched before the first try, so that a lease ending meanwhile is not missed */
	if (!w->dir || w->notify_fd < 0 || w->epoll_fd < 0 ||
	    epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, w->notify_fd, &ev) < 0 ||
	    (w->dir_wd = inotify_add_watch(w->notify_fd, dir, IN_CLOSE_WRITE)) < 0) {
		err = error_set(VD_EIO, "cannot watch lease directory '%s': %s", dir,
				strerror(errno));
		vd_waiter_free(w);
		return err;
	}
	*out = w;
	return 0;
}

uint64_t waiter_ticket(const struct vd_waiter *w)
{
	return w ? w->ticket : 0;
}

/* Takes the last place in line: a bell first, then the record that makes the place. */
static int join(struct vd_waiter *w, int dfd, uint64_t last, const struct vd_system *sys,
		const struct vd_resolution *parent, const struct vd_select_options *opts,
		const char *command)
{
	struct epoll_event ev = { .events = EPOLLIN };
	uint64_t ticket = now_us();
	char name[48], bell[48], cut[VD_COMMAND_MAX], **within = NULL;
	size_t nwithin = 0;
	json_t *rec, *a;
	struct stat st;
	int err, fd = -1, all;

	if (last >= ticket)
		ticket = last + 1;
	err = select_within(&within, &nwithin, &all, sys, parent, opts);
	if (err)
		return err;
	a = all ? json_null() : json_array(); /* null: any device, and a short record to read */
	for (size_t i = 0; i < nwithin; i++)
		json_array_append_new(a, json_string(within[i]));
	vd_strings_free(within, nwithin);
	vd_utf8_copy(cut, command ? command : "", sizeof(cut));
	for (;; ticket++) {
		file_name(bell, sizeof(bell), ticket, WAIT_BELL);
		if (mkfifoat(dfd, bell, 0600) == 0)
			break;
		if (errno != EEXIST) {
			json_decref(a);
			return error_set(VD_EIO, "cannot make a place in line in '%s': %s", w->dir,
					 strerror(errno));
		}
	}
	file_name(name, sizeof(name), ticket, WAIT_RECORD);
	w->bell_fd = openat(dfd, bell, O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (w->bell_fd >= 0 && fstat(w->bell_fd, &st) == 0 && S_ISFIFO(st.st_mode))
		fchmod(w->bell_fd, 0622); /* anyone may ring it: a byte only wakes us */
	fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	rec = json_pack("{s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:i, s:s, s:o, s:o, s:s}", "ticket",
			(json_int_t)ticket, "user", w->user, "pid", (json_int_t)getpid(), "since",
			(json_int_t)time(NULL), "n", (json_int_t)(opts->n ? opts->n : 1), "mem_mib",
			(json_int_t)opts->mem_mib, "min_free_mib", (json_int_t)opts->min_free_mib,
			"max_util", opts->max_util, "policy", vd_policy_name(opts->policy), "model",
			opts->model ? json_string(opts->model) : json_null(), "within", a,
			"command", cut);
	ev.data.fd = w->bell_fd;
	if (w->bell_fd < 0 || fd < 0 || !rec || fchmod(fd, 0644) < 0 || flock(fd, LOCK_EX) < 0 ||
	    record_append(fd, rec) < 0 ||
	    epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, w->bell_fd, &ev) < 0) {
		err = error_set(VD_EIO, "cannot make a place in line in '%s': %s", w->dir,
				strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlinkat(dfd, name, 0);
		}
		if (w->bell_fd >= 0)
			close(w->bell_fd);
		w->bell_fd = -1;
		unlinkat(dfd, bell, 0);
		json_decref(rec);
		return err;
	}
	json_decref(rec);
	w->record_fd = fd;
	w->ticket = ticket;
	return 0;
}

/*
 * Leaves the line: closed first, so that watchers of the directory and of
 * the record see it; or, with later (a try that succeeded, under the
 * allocation lock), only unlinked, and closed by waiter_settle() once the
 * lock is let go, so that the waiter next in line, which that wakes, does
 * not wake to find the lock held.
 */
static void leave(struct vd_waiter *w, int dfd, int later)
{
	if (!w->ticket)
		return;
	if (later)
		w->left_fd = w->record_fd;
	else
		close(w->record_fd);
	if (w->bell_fd >= 0) {
		epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, w->bell_fd, NULL);
		close(w->bell_fd);
	}
	tidy_away(dfd, w->ticket);
	w->record_fd = w->bell_fd = -1;
	w->ticket = 0;
	w->place = w->of = 0;
}

void waiter_settle(struct vd_waiter *w)
{
	if (!w || w->left_fd < 0)
		return;
	close(w->left_fd);
	w->left_fd = -1;
}

/* Whether the record with this ticket is still flock'ed by its waiter. */
static int is_live(int dfd, uint64_t ticket)
{
	char name[48];
	int fd, live;

	file_name(name, sizeof(name), ticket, WAIT_RECORD);
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	live = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return live;
}

/*
 * Watches what can make it this request's turn: for the first in line, the
 * directory; for any other, the record of the one before it. A watch set
 * after the try read what it watches makes the next wait return at once,
 * so that nothing that happened in between is missed. (Each try watches the
 * directory from its start: the try that finds its waiter first in line
 * needs no other after it.)
 */
static void rewatch(struct vd_waiter *w, int dfd, uint64_t prev)
{
	char path[4200];

	if (!w->ticket || !prev) {
		if (w->prev_wd >= 0)
			inotify_rm_watch(w->notify_fd, w->prev_wd);
		w->prev_wd = -1;
		w->prev = 0;
		if (w->dir_wd < 0) {
			w->dir_wd = inotify_add_watch(w->notify_fd, w->dir, IN_CLOSE_WRITE);
			w->wake = 1;
		}
		return;
	}
	if (w->dir_wd >= 0)
		inotify_rm_watch(w->notify_fd, w->dir_wd);
	w->dir_wd = -1;
	if (prev == w->prev && w->prev_wd >= 0)
		return;
	if (w->prev_wd >= 0)
		inotify_rm_watch(w->notify_fd, w->prev_wd);
	snprintf(path, sizeof(path), "%s/" WAIT_PREFIX "%llu" WAIT_RECORD, w->dir,
		 (unsigned long long)prev);
	w->prev_wd = inotify_add_watch(w->notify_fd, path,
				       IN_CLOSE_WRITE | IN_DELETE_SELF | IN_DONT_FOLLOW);
	w->prev = prev;
	if (w->prev_wd < 0 || !is_live(dfd, prev))
		w->wake = 1;
}

/*
 * Stops watching, once the request has its devices: until its next try it
 * waits for nothing, and the watches' end, which the kernel completes in
 * its own time, is behind it when the waiter is freed (freeing the
 * descriptor of a watch just removed waits for that: milliseconds).
 */
static void unwatch(struct vd_waiter *w)
{
	if (w->dir_wd >= 0)
		inotify_rm_watch(w->notify_fd, w->dir_wd);
	if (w->prev_wd >= 0)
		inotify_rm_watch(w->notify_fd, w->prev_wd);
	w->dir_wd = w->prev_wd = -1;
	w->prev = 0;
	w->wake = 0;
}

/*
 * The ticket of the live request just before w among the rest of the line
 * (0: none there), counting those before it into *before. The rest was not
 * read, so the dead found among them are tidied away here, under the
 * allocation lock, and counted into *gone.
 */
static uint64_t rest_before(const struct vd_waiter *w, int dfd, const struct line_tickets *rest,
			    unsigned *before, unsigned *gone)
{
	uint64_t prev = 0;
	size_t i = 0;

	while (i < rest->n && rest->tickets[i] < w->ticket)
		i++;
	*before = (unsigned)i;
	*gone = 0;
	while (!prev && i-- > 0) {
		if (is_live(dfd, rest->tickets[i])) {
			prev = rest->tickets[i];
		} else {
			tidy_away(dfd, rest->tickets[i]);
			--*before;
			++*gone;
		}
	}
	return prev;
}

int waiter_after_try(struct vd_waiter *w, int dfd, const struct vd_line *line,
		     const struct line_tickets *rest, int fits, const struct vd_choice *choice,
		     const struct vd_system *sys, const struct vd_resolution *parent,
		     const struct vd_select_options *opts, const char *command)
{
	const struct vd_device_ref *holds = NULL;
	size_t nholds = 0, want = opts->n ? opts->n : 1;
	uint64_t prev, last = rest->n ? rest->tickets[rest->n - 1] :
			      line->n ? line->waiting[line->n - 1].ticket :
					0;
	unsigned before = 0, gone = 0;
	int err = 0, joined = 0;

	if (fits) {
		leave(w, dfd, 1);
		unwatch(w);
		return 0;
	}
	if (!w->ticket && !choice->never) {
		err = join(w, dfd, last, sys, parent, opts, command);
		if (err)
			return err;
		joined = 1;
	}
	prev = rest_before(w, dfd, rest, &before, &gone);
	for (size_t i = 0; i < line->n; i++) {
		const struct vd_waiting *o = &line->waiting[i];

		if (o->ticket < w->ticket) {
			before++;
			prev = prev > o->ticket ? prev : o->ticket;
		} else if (o->ticket == w->ticket) {
			holds = o->holds;
			nholds = o->nholds;
		}
	}
	if (joined) {
		/* last in line: what fits it now is what it holds */
		holds = choice->fitting;
		nholds = choice->nfitting < want ? choice->nfitting : want;
	}
	free(w->holds);
	w->holds = NULL;
	w->nholds = 0;
	if (nholds && (w->holds = malloc(nholds * sizeof(*holds)))) {
		memcpy(w->holds, holds, nholds * sizeof(*holds));
		w->nholds = nholds;
	}
	w->place = w->ticket ? before + 1 : 0;
	w->of = (unsigned)(line->n + rest->n) + (unsigned)joined - gone;
	if (w->ticket)
		rewatch(w, dfd, prev);
	return 0;
}

int vd_waiter_acquire(struct vd_waiter *w, struct vd_lease **out, struct vd_choice **choice,
		      const struct vd_system *sys, const struct vd_resolution *parent,
		      const struct vd_select_options *opts, const char *command)
{
	/* from before the try reads anything: it may find this waiter first in line */
	if (w->dir_wd < 0)
		w->dir_wd = inotify_add_watch(w->notify_fd, w->dir, IN_CLOSE_WRITE);
	return lease_acquire(out, choice, w->dir, sys, parent, opts, command, w);
}

unsigned vd_waiter_place(const struct vd_waiter *w, unsigned *of)
{
	if (of)
		*of = w->of;
	return w->place;
}

const struct vd_device_ref *vd_waiter_holds(const struct vd_waiter *w, size_t *n)
{
	*n = w->nholds;
	return w->holds;
}

/* Whether what the inotify descriptor says may make it this request's turn. */
static int notified(struct vd_waiter *w)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	int turn = 0;
	ssize_t n;

	while ((n = read(w->notify_fd, buf, sizeof(buf))) > 0) {
		for (char *q = buf; q < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)q;

			if (ev->mask & IN_Q_OVERFLOW)
				turn = 1; /* an overflow may have lost one */
			else if (ev->wd >= 0 && ev->wd == w->prev_wd)
				turn = 1; /* the one before left the line */
			else if (ev->wd >= 0 && ev->wd == w->dir_wd && ev->len &&
				 (lease_is_record(ev->name) || line_is_record(ev->name)))
				turn = 1; /* a lease ended, or a waiter left */
			q += sizeof(*ev) + ev->len;
		}
	}
	return turn;
}

int vd_waiter_wait(struct vd_waiter *w, int timeout_ms)
{
	struct timespec start, now;

	if (w->wake) {
		w->wake = 0;
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct epoll_event evs[4];
		int left = timeout_ms, r, turn = 0;

		if (timeout_ms >= 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			left = timeout_ms - (int)((now.tv_sec - start.tv_sec) * 1000 +
						  (now.tv_nsec - start.tv_nsec) / 1000000);
			if (left < 0)
				left = 0;
		}
		r = epoll_wait(w->epoll_fd, evs, 4, left);
		if (r < 0)
			return errno == EINTR ?
				       error_set(VD_EINTR, "interrupted") :
				       error_set(VD_EIO, "cannot wait: %s", strerror(errno));
		if (r == 0)
			return 0;
		for (int i = 0; i < r; i++) {
			if (evs[i].data.fd == w->bell_fd) {
				char b[64];

				while (read(w->bell_fd, b, sizeof(b)) > 0)
					;
				turn = 1;
			} else if (notified(w)) {
				turn = 1;
			}
		}
		if (turn)
			return 1;
	}
}

int vd_waiter_fd(const struct vd_waiter *w)
{
	return w->epoll_fd;
}

void vd_waiter_free(struct vd_waiter *w)
{
	if (!w)
		return;
	if (w->ticket) {
		int dfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		leave(w, dfd, 0); /* without the directory, the files stay, unlocked: stale */
		if (dfd >= 0)
			close(dfd);
	}
	waiter_settle(w);
	if (w->notify_fd >= 0)
		close(w->notify_fd);
	if (w->epoll_fd >= 0)
		close(w->epoll_fd);
	free(w->holds);
	free(w->dir);
	free(w);
}
