/*
 * lease.c - leases: no two jobs on one GPU by accident, with no daemon.
 *
 * The lease directory holds one lock file per device (named by UUID,
 * created once, never deleted), an allocation lock, and one holder record
 * per lease. An exclusive lease is flock(LOCK_EX) on the device's lock
 * file, a shared one LOCK_SH; the holder keeps the record flock'ed too, so
 * a record is live exactly while its lease is. Choosing and locking happen
 * under the allocation lock. Locks live in open file descriptions, which a
 * job inherits: the lease lasts as long as any process of the job does.
 * The last close of a record (an inotify event) is the end of its lease.
 * Requests that wait stand in line (line.c): every choice leaves alone the
 * devices held for requests waiting before it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "internal.h"

#define ALLOC_LOCK    ".alloc.lock"
#define RECORD_PREFIX "lease."
#define RECORD_SUFFIX ".json"

struct vd_lease {
	struct vd_device_ref *devices;
	size_t ndevices;
	int *lock_fds;
	int record_fd;
	int dir_fd;
	char *dir;
	char *record_name;
	char *record_path;
	json_t *record;
};

const char *vd_lease_dir(void)
{
	const char *d = getenv("VISDEV_LEASE_DIR");

	return d && *d ? d : VD_LEASE_DIR_DEFAULT;
}

/* flock that retries when a signal interrupts it. */
static int flock_retry(int fd, int op)
{
	int r;

	do
		r = flock(fd, op);
	while (r < 0 && errno == EINTR);
	return r;
}

/* Whether a record's name is one of ours: lease.*.json */
int lease_is_record(const char *name)
{
	size_t len = strlen(name), pl = strlen(RECORD_PREFIX), sl = strlen(RECORD_SUFFIX);

	return len > pl + sl && !strncmp(name, RECORD_PREFIX, pl) &&
	       !strcmp(name + len - sl, RECORD_SUFFIX);
}

/* Refuses a directory others could tamper with: writable by them without the sticky bit. */
static int check_dir(int fd, const char *dir)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return error_set(VD_EIO, "cannot stat lease directory '%s': %s", dir,
				 strerror(errno));
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
		return error_set(VD_EPERM,
				 "lease directory '%s' is writable by others without the sticky "
				 "bit, so anyone could replace its lock files; fix it with "
				 "'chmod +t %s'",
				 dir, dir);
	return 0;
}

/* Whether a name in the lease directory is one visdev puts there. */
static int is_own_name(const char *name)
{
	size_t len = strlen(name);

	return !strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, ALLOC_LOCK) ||
	       (len > 5 && !strcmp(name + len - 5, ".lock")) || lease_is_record(name) ||
	       line_is_name(name);
}

int lease_dir_scan(DIR **out, int dfd, const char *dir)
{
	int scan = dup(dfd);

	*out = scan >= 0 ? fdopendir(scan) : NULL;
	if (!*out) {
		if (scan >= 0)
			close(scan);
		return error_set(VD_EIO, "cannot read lease directory%s%s%s: %s", dir ? " '" : "",
				 dir ? dir : "", dir ? "'" : "", strerror(errno));
	}
	rewinddir(*out);
	return 0;
}

/*
 * Refuses a directory that holds files visdev did not put there
 * (VISDEV_LEASE_DIR=/, say): lock files would be created among them.
 */
static int check_contents(int fd, const char *dir)
{
	struct dirent *e;
	DIR *d;
	int err = lease_dir_scan(&d, fd, dir);

	if (err)
		return err;
	while (!err && (e = readdir(d)))
		if (!is_own_name(e->d_name))
			err = error_set(VD_EPERM,
					"lease directory '%s' holds '%s', which is not visdev's: "
					"refusing to put lock files among other files; set "
					"VISDEV_LEASE_DIR to a directory of its own",
					dir, e->d_name);
	closedir(d);
	return err;
}

/* Opens (creating it, shared by all users, if missing) and checks the lease directory. */
int lease_dir_open(int *out, const char *dir)
{
	int fd, err;

	*out = -1;
	if (dir[0] != '/')
		return error_set(VD_EPERM,
				 "lease directory '%s' is not an absolute path: jobs started from "
				 "other folders would not see each other's leases; set "
				 "VISDEV_LEASE_DIR to an absolute path",
				 dir);
	if (mkdir(dir, 01777) == 0)
		chmod(dir, 01777); /* not narrowed by the umask: every user shares it */
	else if (errno != EEXIST)
		return error_set(errno == EACCES ? VD_EPERM : VD_EIO,
				 "cannot create lease directory '%s': %s; set VISDEV_LEASE_DIR to "
				 "a directory you can write, or ask an administrator to run "
				 "'install -d -m 1777 %s'",
				 dir, strerror(errno), dir);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		struct stat st;

		if (errno == ELOOP ||
		    (errno == ENOTDIR && lstat(dir, &st) == 0 && S_ISLNK(st.st_mode)))
			return error_set(
				VD_EPERM,
				"lease directory '%s' is a symbolic link: refusing it; point "
				"VISDEV_LEASE_DIR at the real directory",
				dir);
		if (errno == ENOTDIR)
			return error_set(VD_EPERM,
					 "lease directory '%s' is not a directory; set "
					 "VISDEV_LEASE_DIR to a directory",
					 dir);
		return error_set(errno == EACCES ? VD_EPERM : VD_EIO,
				 "cannot open lease directory '%s': %s; ask an administrator to "
				 "make it shared ('chmod 1777 %s')",
				 dir, strerror(errno), dir);
	}
	err = check_dir(fd, dir);
	if (!err)
		err = check_contents(fd, dir);
	if (err) {
		close(fd);
		return err;
	}
	*out = fd;
	return 0;
}

/*
 * Opens a lock file in the directory: never through a link, never blocking
 * (a FIFO planted under its name is refused, not waited on), and only a
 * regular file. The message names the file and the fix.
 */
static int lock_open(int *out, int dfd, const char *dir, const char *name)
{
	struct stat st;
	char owner[48];
	int fd;

	*out = -1;
	fd = openat(dfd, name, O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno, known = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;

		/* what is there says more than errno: kernels differ on links in sticky folders */
		user_name(owner, sizeof(owner), known ? st.st_uid : geteuid());
		if (e == ELOOP || (known && S_ISLNK(st.st_mode)))
			return error_set(VD_EPERM,
					 "lock file '%s/%s' is a symbolic link: refusing it; "
					 "'%s' or an administrator should remove it",
					 dir, name, owner);
		if (e == EISDIR || (known && S_ISDIR(st.st_mode)))
			return error_set(VD_EPERM,
					 "lock file '%s/%s' is a directory: '%s' or an "
					 "administrator should remove it",
					 dir, name, owner);
		if (known && !S_ISREG(st.st_mode))
			return error_set(VD_EPERM,
					 "lock file '%s/%s' is not a regular file: refusing it; "
					 "'%s' or an administrator should remove it",
					 dir, name, owner);
		if (!known && (e == EACCES || e == EROFS))
			/* nothing there to fix: the directory refuses a new file */
			return error_set(
				VD_EPERM,
				"cannot create files in the lease directory '%s': %s; it "
				"must be writable by every user of visdev (an administrator: "
				"'chmod 1777 %s'), or set VISDEV_LEASE_DIR to one that is",
				dir, strerror(e), dir);
		return error_set(e == EACCES ? VD_EPERM : VD_EIO,
				 "cannot open lock file '%s/%s': %s; '%s' or an administrator "
				 "should make it readable by all (chmod 644 on it)",
				 dir, name, strerror(e), owner);
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		user_name(owner, sizeof(owner), st.st_uid);
		close(fd);
		return error_set(VD_EPERM,
				 "lock file '%s/%s' is not a regular file: refusing it; '%s' or an "
				 "administrator should remove it",
				 dir, name, owner);
	}
	if (st.st_uid == geteuid() && (st.st_mode & 0444) != 0444)
		fchmod(fd, 0644); /* flock needs only read access: let every user open it */
	*out = fd;
	return 0;
}

/*
 * Whether fd is still the file the directory has under name: one removed
 * or replaced between opening and locking is not the lock others see.
 */
static int still_there(int fd, int dfd, const char *name)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && fstatat(dfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/*
 * Locks name in the directory (op: LOCK_EX or LOCK_SH, with LOCK_NB):
 * opened, locked, and opened again if the file was replaced meanwhile.
 * While the lock is held by another, the same open file tries again every
 * step_us, for up to patience_us (0: not at all). Returns 0, VD_EBUSY when
 * still held, VD_EINTR when a signal ended the wait, or lock_open's error.
 */
static int lock_take(int *out, int dfd, const char *dir, const char *name, int op, long step_us,
		     long patience_us)
{
	const struct timespec step = { 0, step_us * 1000 };
	long waited_us = 0;
	int err, replaced = 0;

	err = lock_open(out, dfd, dir, name);
	while (!err) {
		if (flock_retry(*out, op) == 0) {
			if (still_there(*out, dfd, name))
				return 0;
			close(*out);
			if (++replaced > 8)
				return error_set(
					VD_EIO,
					"'%s/%s' was removed or replaced each time visdev locked "
					"it: someone keeps removing lock files there",
					dir, name);
			err = lock_open(out, dfd, dir, name);
			continue;
		}
		if (errno != EWOULDBLOCK)
			err = error_set(VD_EIO, "cannot lock '%s/%s': %s", dir, name,
					strerror(errno));
		else if (waited_us >= patience_us)
			err = VD_EBUSY;
		else if (nanosleep(&step, NULL) < 0 && errno == EINTR)
			err = error_set(VD_EINTR, "interrupted while waiting for the lock '%s/%s'",
					dir, name);
		waited_us += step_us;
	}
	if (*out >= 0)
		close(*out);
	*out = -1;
	return err;
}

/*
 * Who holds the lock on fd, from /proc/locks: "pid 4242 (bob, flock)", or
 * "a process this system does not name" when the kernel does not say.
 */
static void lock_holder(char *out, size_t n, int fd)
{
	char line[256], path[64], comm[64] = "?", owner[48] = "?";
	unsigned maj, min;
	unsigned long ino;
	struct stat st;
	long pid = -1;
	FILE *f;

	snprintf(out, n, "a process this system does not name");
	if (fstat(fd, &st) < 0 || !(f = fopen("/proc/locks", "re")))
		return;
	while (pid < 0 && fgets(line, sizeof(line), f)) {
		long p;

		/* "1: FLOCK  ADVISORY  WRITE 4242 08:02:131074 0 EOF" */
		if (sscanf(line, "%*s FLOCK %*s %*s %ld %x:%x:%lu", &p, &maj, &min, &ino) == 4 &&
		    ino == st.st_ino && maj == major(st.st_dev) && min == minor(st.st_dev))
			pid = p;
	}
	fclose(f);
	if (pid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	if ((f = fopen(path, "re"))) {
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%ld", pid);
	if (stat(path, &st) == 0)
		user_name(owner, sizeof(owner), st.st_uid);
	snprintf(out, n, "pid %ld (%s, %s)", pid, owner, comm);
}

/* How long to wait for the allocation lock before saying who holds it; visdev holds it for
 * milliseconds. */
#define ALLOC_PATIENCE_MS 250

/*
 * How often a try for a held allocation lock is repeated (it is held for a
 * fraction of a millisecond): often by a waiter in line, whose try may be
 * the one a GPU that came free waits for; less by others, whose tries wake
 * the machine's CPUs, and so slow down whoever holds the lock, for little.
 */
#define ALLOC_STEP_IN_LINE_US 100
#define ALLOC_STEP_US	      1000

/*
 * Takes the allocation lock, under which devices are chosen and locked and
 * records made. Never blocks for long: while another holds it, tries again
 * (in_line: a waiter's try, more often) for ALLOC_PATIENCE_MS, then gives
 * up with VD_EBUSY naming the holder; a signal ends the wait at once
 * (VD_EINTR).
 */
static int alloc_lock(int *out, int dfd, const char *dir, int in_line)
{
	char who[160];
	int err = lock_take(out, dfd, dir, ALLOC_LOCK, LOCK_EX | LOCK_NB,
			    in_line ? ALLOC_STEP_IN_LINE_US : ALLOC_STEP_US,
			    ALLOC_PATIENCE_MS * 1000L);

	if (err != VD_EBUSY)
		return err;
	err = lock_open(out, dfd, dir, ALLOC_LOCK);
	lock_holder(who, sizeof(who), *out);
	if (!err)
		close(*out);
	*out = -1;
	return error_set(VD_EBUSY,
			 "the allocation lock '%s/" ALLOC_LOCK
			 "' has been held for more than %d ms "
			 "by %s",
			 dir, ALLOC_PATIENCE_MS, who);
}

/* The lock file's name for a device UUID ('/' of old MIG names made harmless). */
static void lock_name(char *out, size_t n, const char *uuid)
{
	snprintf(out, n, "%s.lock", uuid);
	for (char *p = out; *p; p++)
		if (*p == '/')
			*p = '_';
}

/* A string member of a record, or def when missing. */
static const char *record_string(json_t *rec, const char *key, const char *def)
{
	const char *v = json_string_value(json_object_get(rec, key));

	return v ? v : def;
}

/* Adds one holder per UUID of a parsed record to the list. */
static int holders_from_record(struct vd_leases *l, json_t *rec)
{
	json_t *uuids = json_object_get(rec, "uuids"), *u;
	const char *mode = json_string_value(json_object_get(rec, "mode"));
	size_t i;

	if (!json_is_array(uuids) || !mode ||
	    json_integer_value(json_object_get(rec, "mem_mib")) < 0 ||
	    json_integer_value(json_object_get(rec, "since")) < 0)
		return 0; /* not a whole record: its lock still counts, as a holder unknown */
	json_array_foreach(uuids, i, u)
	{
		struct vd_lease_holder *grown, *h;

		if (!json_is_string(u))
			continue;
		grown = realloc(l->holders, (l->n + 1) * sizeof(*grown));
		if (!grown)
			return error_set(VD_ENOMEM, "out of memory");
		l->holders = grown;
		h = &l->holders[l->n++];
		memset(h, 0, sizeof(*h));
		/* cut on characters: what is read back must still be UTF-8 */
		vd_utf8_copy(h->uuid, json_string_value(u), sizeof(h->uuid));
		h->mode = strcmp(mode, "shared") ? VD_LEASE_EXCLUSIVE : VD_LEASE_SHARED;
		h->mem_mib = (uint64_t)json_integer_value(json_object_get(rec, "mem_mib"));
		h->mem_unused_mib = h->mem_mib;
		h->uid = (uint32_t)json_integer_value(json_object_get(rec, "uid"));
		vd_utf8_copy(h->user, record_string(rec, "user", "?"), sizeof(h->user));
		h->pid = (int32_t)json_integer_value(json_object_get(rec, "pid"));
		h->pgid = (int32_t)json_integer_value(json_object_get(rec, "pgid"));
		vd_utf8_copy(h->command, record_string(rec, "command", ""), sizeof(h->command));
		h->since = (int64_t)json_integer_value(json_object_get(rec, "since"));
		vd_utf8_copy(h->journal, record_string(rec, "journal", ""), sizeof(h->journal));
		h->job = (int64_t)json_integer_value(json_object_get(rec, "job"));
	}
	return 0;
}

json_t *record_last_line(const char *text, size_t len)
{
	const char *end = len ? memrchr(text, '\n', len) : NULL, *start;
	json_t *rec;

	if (!end)
		return NULL; /* no whole line yet */
	start = end;
	while (start > text && start[-1] != '\n')
		start--;
	rec = json_loadb(start, (size_t)(end - start), 0, NULL);
	if (!json_is_object(rec)) {
		json_decref(rec);
		return NULL;
	}
	return rec;
}

int record_append(int fd, const json_t *rec)
{
	char *text = json_dumps(rec, JSON_COMPACT);
	struct stat st;
	size_t len;
	int ok;

	if (!text) {
		errno = ENOMEM;
		return -1;
	}
	len = strlen(text);
	text[len++] = '\n'; /* the NUL becomes the newline: written by length */
	ok = fstat(fd, &st) == 0 && pwrite(fd, text, len, st.st_size) == (ssize_t)len;
	free(text);
	return ok ? 0 : -1;
}

int lease_record_parse(struct vd_leases *l, const char *text, size_t len)
{
	json_t *rec = record_last_line(text, len);
	int err;

	if (!rec)
		return 0;
	err = holders_from_record(l, rec);
	json_decref(rec);
	return err;
}

/* Reads a record file (its first 16 KiB: a record line is far shorter) into l. */
static int record_read(struct vd_leases *l, int fd)
{
	char buf[16384];
	size_t len = 0;
	ssize_t n;

	while (len < sizeof(buf) && (n = pread(fd, buf + len, sizeof(buf) - len, (off_t)len)) > 0)
		len += (size_t)n;
	return lease_record_parse(l, buf, len);
}

/*
 * Whether the lock of the holder's device is held as the holder says: a
 * record is believed only as far as the locks vouch for it. The probe is
 * a new open file description, so it conflicts with every holder's lock,
 * this process's own included.
 */
static int lock_vouches(int dfd, const struct vd_lease_holder *h)
{
	char name[VD_UUID_MAX + 8];
	struct stat st;
	int fd, held;

	lock_name(name, sizeof(name), h->uuid);
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	/* an exclusive lease blocks a shared probe; a shared one, an exclusive probe */
	held = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	       flock(fd, (h->mode == VD_LEASE_SHARED ? LOCK_EX : LOCK_SH) | LOCK_NB) < 0 &&
	       errno == EWOULDBLOCK;
	close(fd); /* lets go of the probe's lock, if it got one */
	return held;
}

/*
 * Makes the holders from first on what the system vouches for: the owner
 * is the record file's, whatever the record says, and a holder counts only
 * while its device's lock is held.
 */
static void holders_vouch(struct vd_leases *l, size_t first, int dfd, uid_t owner)
{
	char name[48];
	size_t kept = first;

	user_name(name, sizeof(name), owner);
	for (size_t i = first; i < l->n; i++) {
		struct vd_lease_holder *h = &l->holders[i];

		if (!lock_vouches(dfd, h))
			continue;
		h->uid = (uint32_t)owner;
		vd_utf8_copy(h->user, name, sizeof(h->user));
		l->holders[kept++] = *h;
	}
	l->n = kept;
}

/*
 * Reads the live records of the directory. A record whose lock nobody
 * holds is stale: removed when tidy is set (under the allocation lock).
 */
static int records_read(struct vd_leases *l, int dfd, int tidy, struct line_tickets *line)
{
	struct dirent *e;
	DIR *d;
	int err = lease_dir_scan(&d, dfd, NULL);

	if (err)
		return err;
	while (!err && (e = readdir(d))) {
		struct stat st;
		size_t first;
		int fd;

		if (line && (err = line_tickets_add(line, e->d_name)))
			break;
		if (!lease_is_record(e->d_name))
			continue;
		/* not blocking: a FIFO planted under a record's name must not hang us */
		fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			close(fd);
			continue;
		}
		if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
			/* nobody holds it: the lease ended */
			if (tidy)
				unlinkat(dfd, e->d_name, 0);
			close(fd);
			continue;
		}
		first = l->n;
		err = record_read(l, fd);
		if (!err)
			holders_vouch(l, first, dfd, st.st_uid);
		close(fd);
	}
	closedir(d);
	return err;
}

int vd_lease_dir_stale(size_t *out, const char *dir)
{
	struct dirent *e;
	DIR *d = NULL;
	int dfd = -1, err;

	*out = 0;
	err = lease_dir_open(&dfd, dir);
	if (!err)
		err = lease_dir_scan(&d, dfd, dir);
	while (!err && (e = readdir(d))) {
		int fd;

		if (!lease_is_record(e->d_name))
			continue;
		fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		/* nobody holds it: a lease that ended, its record not yet tidied away */
		if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) == 0)
			(*out)++;
		if (fd >= 0)
			close(fd);
	}
	if (d)
		closedir(d);
	if (dfd >= 0)
		close(dfd);
	return err;
}

/* How much of each shared reservation its job has not allocated yet, by NVML's process list. */
static void count_unused(struct vd_leases *l, const struct vd_system *sys)
{
	for (size_t i = 0; i < l->n; i++) {
		struct vd_lease_holder *h = &l->holders[i];
		uint64_t used = 0;

		if (h->mode != VD_LEASE_SHARED)
			continue;
		for (size_t g = 0; g < sys->ngpus; g++) {
			const struct vd_gpu *gpu = &sys->gpus[g];

			if (strcmp(gpu->uuid, h->uuid))
				continue;
			for (size_t p = 0; p < gpu->nprocesses; p++) {
				const struct vd_process *pr = &gpu->processes[p];
				pid_t pg = getpgid((pid_t)pr->pid);

				if (pr->used_known &&
				    ((int32_t)pr->pid == h->pid || (h->pgid > 0 && pg == h->pgid)))
					used += pr->used_mib;
			}
		}
		h->mem_unused_mib = used >= h->mem_mib ? 0 : h->mem_mib - used;
	}
}

/* A holder's device's place in the snapshot (GPU index, then MIG instance), for sorting. */
static long device_place(const struct vd_system *sys, const char *uuid)
{
	struct vd_device_ref d;

	if (!sys || vd_system_find(&d, sys, uuid))
		return -1;
	return (long)d.gpu * 256 + 1 + d.mig;
}

/* Orders holders by device (as the snapshot has them, else by UUID), then by age. */
static int holder_order(const void *pa, const void *pb, void *ctx)
{
	const struct vd_lease_holder *a = pa, *b = pb;
	long da = device_place(ctx, a->uuid), db = device_place(ctx, b->uuid);
	int c = da != db ? (da > db) - (da < db) : strcmp(a->uuid, b->uuid);

	if (c)
		return c;
	if (a->since != b->since)
		return (a->since > b->since) - (a->since < b->since);
	return (a->pid > b->pid) - (a->pid < b->pid);
}

/* Reads the leases; line, if not NULL, gets the tickets of the line's records from the same scan.
 */
static int leases_read_fd(struct vd_leases **out, int dfd, const struct vd_system *sys, int tidy,
			  struct line_tickets *line)
{
	struct vd_leases *l = calloc(1, sizeof(*l));
	int err;

	*out = NULL;
	if (!l)
		return error_set(VD_ENOMEM, "out of memory");
	err = records_read(l, dfd, tidy, line);
	if (err) {
		vd_leases_free(l);
		return err;
	}
	if (sys)
		count_unused(l, sys);
	/* the directory's order is no order: the same leases always read the same */
	if (l->n > 1)
		qsort_r(l->holders, l->n, sizeof(*l->holders), holder_order,
			(void *)(uintptr_t)sys);
	*out = l;
	return 0;
}

int vd_lease_dir_owner(uint32_t *out, const char *dir)
{
	struct stat st;

	*out = 0;
	if (lstat(dir, &st) < 0)
		return error_set(errno == ENOENT ? VD_ENOTFOUND : VD_EIO,
				 "cannot stat lease directory '%s': %s", dir, strerror(errno));
	*out = (uint32_t)st.st_uid;
	return 0;
}

int vd_leases_read(struct vd_leases **out, const char *dir, const struct vd_system *sys)
{
	int dfd, err;

	*out = NULL;
	err = lease_dir_open(&dfd, dir);
	if (err)
		return err;
	err = leases_read_fd(out, dfd, sys, 0, NULL);
	close(dfd);
	return err;
}

void vd_leases_free(struct vd_leases *leases)
{
	if (!leases)
		return;
	free(leases->holders);
	free(leases);
}

/*
 * Counts a device as held without a lease record: its lock is held (a lease
 * being torn down, a program other than visdev), or its lock file cannot be
 * used (why says so, and the fix). Such a holder has no pid.
 */
static int add_unknown_holder(struct vd_leases *l, const char *uuid, int exclusive, const char *why)
{
	struct vd_lease_holder *grown = realloc(l->holders, (l->n + 1) * sizeof(*grown));

	if (!grown)
		return error_set(VD_ENOMEM, "out of memory");
	l->holders = grown;
	memset(&grown[l->n], 0, sizeof(*grown));
	str_copy(grown[l->n].uuid, uuid, sizeof(grown[l->n].uuid));
	grown[l->n].mode = exclusive ? VD_LEASE_EXCLUSIVE : VD_LEASE_SHARED;
	str_copy(grown[l->n].user, "?", sizeof(grown[l->n].user));
	vd_utf8_copy(grown[l->n].command, why, sizeof(grown[l->n].command));
	l->n++;
	return 0;
}

/* The record's JSON for this lease; the command is cut to what a holder keeps of it. */
static json_t *record_new(const struct vd_system *sys, const struct vd_lease *lease,
			  const struct vd_select_options *opts, const char *command)
{
	struct passwd *pw = getpwuid(geteuid());
	json_t *uuids = json_array();
	char cut[VD_COMMAND_MAX], user[32];

	/* JSON wants UTF-8: arguments and names may be any bytes */
	vd_utf8_copy(cut, command ? command : "", sizeof(cut));
	vd_utf8_copy(user, pw ? pw->pw_name : "?", sizeof(user));

	for (size_t i = 0; i < lease->ndevices; i++)
		json_array_append_new(uuids,
				      json_string(system_device_uuid(sys, lease->devices[i])));
	return json_pack("{s:o, s:s, s:I, s:I, s:s, s:I, s:I, s:s, s:I}", "uuids", uuids, "mode",
			 opts->mem_mib ? "shared" : "exclusive", "mem_mib",
			 (json_int_t)opts->mem_mib, "uid", (json_int_t)geteuid(), "user", user,
			 "pid", (json_int_t)getpid(), "pgid", (json_int_t)getpgrp(), "command", cut,
			 "since", (json_int_t)time(NULL));
}

/* Appends the record as a new last line of its file: readers take the last whole line. */
static int record_write(struct vd_lease *lease)
{
	if (record_append(lease->record_fd, lease->record) == 0)
		return 0;
	if (errno == ENOMEM)
		return error_set(VD_ENOMEM, "out of memory");
	return error_set(VD_EIO, "cannot write lease record '%s': %s", lease->record_path,
			 strerror(errno));
}

/* Creates and locks a new record file with a name no other lease has. */
static int record_create(struct vd_lease *lease)
{
	char name[96];

	for (unsigned seq = 0; seq < 1000; seq++) {
		int fd;

		snprintf(name, sizeof(name), RECORD_PREFIX "%ld.%u" RECORD_SUFFIX, (long)getpid(),
			 seq);
		fd = openat(lease->dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0644);
		if (fd < 0 && errno == EEXIST)
			continue;
		if (fd < 0)
			return error_set(VD_EIO, "cannot create lease record in '%s': %s",
					 lease->dir, strerror(errno));
		fchmod(fd, 0644); /* whatever the umask: every user must see every lease */
		if (flock_retry(fd, LOCK_EX) < 0) {
			close(fd);
			unlinkat(lease->dir_fd, name, 0);
			return error_set(VD_EIO, "cannot lock lease record: %s", strerror(errno));
		}
		lease->record_fd = fd;
		lease->record_name = strdup(name);
		if (asprintf(&lease->record_path, "%s/%s", lease->dir, name) < 0)
			lease->record_path = NULL;
		if (!lease->record_name || !lease->record_path)
			return error_set(VD_ENOMEM, "out of memory");
		return 0;
	}
	return error_set(VD_EIO, "cannot find a free lease record name in '%s'", lease->dir);
}

static struct vd_lease *lease_new(const char *dir, int dfd)
{
	struct vd_lease *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->record_fd = -1;
	l->dir_fd = dfd;
	l->dir = strdup(dir);
	if (!l->dir) {
		free(l);
		return NULL;
	}
	return l;
}

/* Lets go of every lock the lease holds (keeping the directory open). */
static void lease_unlock(struct vd_lease *l)
{
	for (size_t i = 0; i < l->ndevices; i++)
		if (l->lock_fds[i] >= 0)
			close(l->lock_fds[i]);
	l->ndevices = 0;
}

/*
 * Tries to lock the chosen devices. Returns 0 when all are locked, or 1
 * (after letting go of those taken) when one was held by someone without a
 * record, or its lock file could not be used: that device is then counted
 * as held in leases, so that one bad file costs one device, not the machine.
 */
static int lock_choice(struct vd_lease *l, struct vd_leases *leases, const struct vd_system *sys,
		       const struct vd_choice *choice, int exclusive)
{
	int err;

	free(l->devices);
	free(l->lock_fds);
	l->devices = calloc(choice->ndevices, sizeof(*l->devices));
	l->lock_fds = calloc(choice->ndevices, sizeof(*l->lock_fds));
	if (!l->devices || !l->lock_fds)
		return error_set(VD_ENOMEM, "out of memory");
	for (size_t i = 0; i < choice->ndevices; i++) {
		const char *uuid = system_device_uuid(sys, choice->devices[i]);
		char name[VD_UUID_MAX + 8];
		int fd;

		lock_name(name, sizeof(name), uuid);
		err = lock_take(&fd, l->dir_fd, l->dir, name,
				(exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB, 0, 0);
		if (err == VD_ENOMEM)
			return err;
		if (err) {
			/* held (a shared request finds it held exclusively), or unusable */
			lease_unlock(l);
			err = add_unknown_holder(leases, uuid, 1,
						 err == VD_EBUSY ?
							 "holder unknown: locked without a "
							 "lease record" :
							 vd_error_last());
			return err ? err : 1;
		}
		l->devices[l->ndevices] = choice->devices[i];
		l->lock_fds[l->ndevices++] = fd;
	}
	return 0;
}

int lease_acquire(struct vd_lease **out, struct vd_choice **choice, const char *dir,
		  const struct vd_system *sys, const struct vd_resolution *parent,
		  const struct vd_select_options *opts, const char *command, struct vd_waiter *w)
{
	struct vd_leases *leases = NULL;
	struct vd_line *line = NULL;
	struct line_tickets rest = { 0 }, names = { 0 };
	struct vd_lease *l = NULL;
	int dfd = -1, alloc_fd = -1, err;
	size_t tries, most = system_units(sys) + 1;
	uint64_t ticket = waiter_ticket(w);

	*out = NULL;
	*choice = NULL;
	err = lease_dir_open(&dfd, dir);
	if (err)
		return err;
	l = lease_new(dir, dfd);
	if (!l) {
		close(dfd);
		return error_set(VD_ENOMEM, "out of memory");
	}
	err = alloc_lock(&alloc_fd, dfd, dir, ticket != 0);
	if (err)
		goto out;
	err = leases_read_fd(&leases, dfd, sys, 1, &names);
	/*
	 * The line: what each request waiting before this one holds is not to
	 * be taken. It is read only as far as anything is left: on a busy
	 * server, a record or two.
	 */
	if (!err)
		err = line_read_fd(&line, &rest, &names, dfd, dir, 1, sys, leases);
	if (!err)
		err = line_holds_before(leases, line, sys, ticket ? ticket : UINT64_MAX);
	/*
	 * Each device found locked without a record is counted as held and the
	 * choice made again: one try per device at most, and one more.
	 */
	for (tries = 0; !err && tries < most; tries++) {
		vd_choice_free(*choice);
		*choice = NULL;
		err = vd_select(choice, sys, leases, parent, opts);
		if (err)
			break;
		err = lock_choice(l, leases, sys, *choice, opts->mem_mib == 0);
		if (err <= 0)
			break;
		err = 0;
	}
	if (!err && tries == most)
		err = error_set(VD_EBUSY, "devices kept changing hands: try again");
	if (*choice)
		(*choice)->unknown_holders = tries;
	if (!err) {
		err = record_create(l);
		if (!err) {
			l->record = record_new(sys, l, opts, command);
			err = l->record ? record_write(l) : error_set(VD_ENOMEM, "out of memory");
		}
	}
	if (w && (!err || err == VD_ENOFIT)) {
		int fits = !err;
		int werr = waiter_after_try(w, dfd, line, &rest, fits, *choice, sys, parent, opts,
					    command);

		/* a lease stands even if the line could not be left: its record is stale then */
		if (werr && !fits)
			err = werr;
	}
out:
	if (alloc_fd >= 0)
		close(alloc_fd); /* closing lets go of the allocation lock */
	/* who is woken now finds the lock free */
	waiter_settle(w);
	if (line)
		line_ring_ready(line, dfd, ticket);
	vd_leases_free(leases);
	vd_line_free(line);
	free(rest.tickets);
	free(names.tickets);
	if (err) {
		vd_lease_free(l);
		return err;
	}
	*out = l;
	return 0;
}

int vd_lease_acquire(struct vd_lease **out, struct vd_choice **choice, const char *dir,
		     const struct vd_system *sys, const struct vd_resolution *parent,
		     const struct vd_select_options *opts, const char *command)
{
	return lease_acquire(out, choice, dir, sys, parent, opts, command, NULL);
}

const struct vd_device_ref *vd_lease_devices(const struct vd_lease *lease, size_t *n)
{
	*n = lease->ndevices;
	return lease->devices;
}

void vd_lease_holder(const struct vd_lease *lease, struct vd_lease_holder *out)
{
	struct vd_leases one = { 0 };

	memset(out, 0, sizeof(*out));
	if (holders_from_record(&one, lease->record) == 0 && one.n)
		*out = one.holders[0];
	free(one.holders);
}

int vd_lease_set_job(struct vd_lease *lease, int32_t pid, int32_t pgid)
{
	json_object_set_new(lease->record, "pid", json_integer(pid));
	json_object_set_new(lease->record, "pgid", json_integer(pgid));
	return record_write(lease);
}

int vd_lease_set_queue(struct vd_lease *lease, const char *journal, size_t job)
{
	char cut[VD_COMMAND_MAX];

	/* a path cut short would name another file: none is better */
	if (vd_utf8_copy(cut, journal, sizeof(cut)) != strlen(journal))
		return error_set(VD_EINVAL, "the journal's path is too long to record");
	if (json_object_set_new(lease->record, "journal", json_string(cut)) ||
	    json_object_set_new(lease->record, "job", json_integer((json_int_t)job)))
		return error_set(VD_ENOMEM, "out of memory");
	return record_write(lease);
}

int vd_lease_pass(struct vd_lease *lease, const char *command)
{
	char cut[VD_COMMAND_MAX];

	vd_utf8_copy(cut, command ? command : "", sizeof(cut));
	if (json_object_set_new(lease->record, "command", json_string(cut)) ||
	    json_object_set_new(lease->record, "since", json_integer((json_int_t)time(NULL))) ||
	    json_object_set_new(lease->record, "pid", json_integer(getpid())) ||
	    json_object_set_new(lease->record, "pgid", json_integer(getpgrp())))
		return error_set(VD_ENOMEM, "out of memory");
	return record_write(lease);
}

int vd_lease_inherit(const struct vd_lease *lease)
{
	for (size_t i = 0; i < lease->ndevices; i++)
		if (fcntl(lease->lock_fds[i], F_SETFD, 0) < 0)
			return -1;
	return fcntl(lease->record_fd, F_SETFD, 0) < 0 ? -1 : 0;
}

void vd_lease_free(struct vd_lease *lease)
{
	if (!lease)
		return;
	/* the locks before the record: its close wakes the waiters, who must find them free */
	lease_unlock(lease);
	if (lease->record_fd >= 0) {
		int probe;

		close(lease->record_fd);
		/* the record goes once no inheriting child still holds the lease */
		probe = openat(lease->dir_fd, lease->record_name,
			       O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		/* shared, as readers probe: one probing now must not find it held */
		if (probe >= 0 && flock(probe, LOCK_SH | LOCK_NB) == 0)
			unlinkat(lease->dir_fd, lease->record_name, 0);
		if (probe >= 0)
			close(probe);
	}
	if (lease->dir_fd >= 0)
		close(lease->dir_fd);
	json_decref(lease->record);
	free(lease->devices);
	free(lease->lock_fds);
	free(lease->dir);
	free(lease->record_name);
	free(lease->record_path);
	free(lease);
}
