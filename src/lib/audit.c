/*
 * audit.c - the lease audit: processes on a leased GPU outside every job
 * that leases it (squatters), memory there that nothing listed explains,
 * and leases whose GPUs stay idle. The judgement is pure (a snapshot, the
 * leases, what /proc says of the processes, and what earlier looks saw);
 * reading /proc and keeping the looks in a file are the edges.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* How far up its parents a process is followed to find a job's first process. */
#define ANCESTORS_MAX 64

/* ---- What /proc says of a process ------------------------------------------------- */

static const struct vd_proc *proc_find(const struct vd_procs *procs, int32_t pid);

static int proc_cmp(const void *a, const void *b)
{
	const struct vd_proc *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

const struct vd_proc *vd_procs_find(const struct vd_procs *procs, uint32_t pid)
{
	return proc_find(procs, (int32_t)pid);
}

static const struct vd_proc *proc_find(const struct vd_procs *procs, int32_t pid)
{
	struct vd_proc key = { .pid = pid };

	if (!procs || !procs->n)
		return NULL;
	return bsearch(&key, procs->procs, procs->n, sizeof(key), proc_cmp);
}

/* When the machine booted, seconds since the epoch (0 unknown): /proc/stat's btime. */
static int64_t boot_time(void)
{
	static int64_t btime = -1;
	char line[256];
	FILE *f;

	if (btime >= 0)
		return btime;
	btime = 0;
	f = fopen("/proc/stat", "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "btime %" SCNd64, &btime) == 1)
			break;
	if (f)
		fclose(f);
	return btime;
}

/* Reads /proc/PID's stat, owner and command line into p: 0, or -1 when it is gone. */
static int proc_read(struct vd_proc *p, int32_t pid)
{
	char path[64], buf[1024], *open_paren, *close_paren;
	unsigned long long started = 0;
	long ticks = sysconf(_SC_CLK_TCK);
	struct stat st;
	ssize_t len;
	int fd, ppid, pgid;

	memset(p, 0, sizeof(*p));
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	len = fstat(fd, &st) ? -1 : read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -1;
	buf[len] = '\0';
	/* "pid (name) state ppid pgrp ...": the name may hold blanks and parentheses */
	open_paren = strchr(buf, '(');
	close_paren = strrchr(buf, ')');
	if (!open_paren || !close_paren || close_paren < open_paren ||
	    sscanf(close_paren + 1, " %*c %d %d", &ppid, &pgid) != 2)
		return -1;
	/* field 22, the start in clock ticks after boot; the name may not be counted in */
	if (sscanf(close_paren + 1,
		   " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
		   &started) == 1 &&
	    ticks > 0 && boot_time() > 0)
		p->start = boot_time() + (int64_t)(started / (unsigned long long)ticks);
	*close_paren = '\0';
	str_copy(p->name, open_paren + 1, sizeof(p->name));
	p->pid = pid;
	p->ppid = ppid;
	p->pgid = pgid;
	/* the real uid, from status: /proc/PID's owner is root for a process made undumpable */
	p->uid = (uint32_t)st.st_uid;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	len = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	if (len > 0) {
		char *uid;
		unsigned real;

		buf[len] = '\0';
		uid = strstr(buf, "\nUid:");
		if (uid && sscanf(uid + 5, "%u", &real) == 1)
			p->uid = real;
	}
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	len = fd < 0 ? -1 : read(fd, p->command, sizeof(p->command) - 1);
	if (fd >= 0)
		close(fd);
	if (len > 0) {
		p->command[len] = '\0';
		while (len > 0 && !p->command[len - 1])
			len--;
		for (ssize_t i = 0; i < len; i++)
			if (!p->command[i])
				p->command[i] = ' ';
	} else {
		/* a kernel thread, or a process that hides its command line */
		snprintf(p->command, sizeof(p->command), "[%s]", p->name);
	}
	return 0;
}

/* Adds pid (and, up to ANCESTORS_MAX of them, its parents) to procs unless there already. */
static int procs_add(struct vd_procs *procs, size_t *cap, int32_t pid)
{
	for (int depth = 0; pid > 1 && depth < ANCESTORS_MAX; depth++) {
		struct vd_proc p;

		for (size_t i = 0; i < procs->n; i++)
			if (procs->procs[i].pid == pid)
				return 0;
		if (proc_read(&p, pid))
			return 0;
		if (array_grow(&procs->procs, cap, procs->n, sizeof(p), 16))
			return VD_ENOMEM;
		procs->procs[procs->n++] = p;
		pid = p.ppid;
	}
	return 0;
}

int vd_procs_read(struct vd_procs **out, const struct vd_system *sys)
{
	struct vd_procs *procs = calloc(1, sizeof(*procs));
	size_t cap = 0;

	*out = NULL;
	if (!procs)
		return error_set(VD_ENOMEM, "out of memory");
	for (size_t g = 0; sys && g < sys->ngpus; g++)
		for (size_t i = 0; i < sys->gpus[g].nprocesses; i++)
			if (procs_add(procs, &cap, (int32_t)sys->gpus[g].processes[i].pid)) {
				vd_procs_free(procs);
				return error_set(VD_ENOMEM, "out of memory");
			}
	if (procs->n)
		qsort(procs->procs, procs->n, sizeof(*procs->procs), proc_cmp);
	*out = procs;
	return 0;
}

void vd_procs_free(struct vd_procs *procs)
{
	if (!procs)
		return;
	free(procs->procs);
	free(procs);
}

/* ---- What earlier looks saw: since when each lease has been quiet ---------------- */

struct quiet {
	char uuid[VD_UUID_MAX];
	int32_t pid;
	int64_t since; /* the lease's */
	int64_t quiet_since;
};

struct vd_audit_memory {
	struct quiet *quiet;
	size_t n, cap;
	int changed;
};

#define MEMORY_HEADER "visdev-audit 1\n"

int vd_audit_memory_new(struct vd_audit_memory **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : error_set(VD_ENOMEM, "out of memory");
}

/* A number of the memory's text, from p up to a tab or the line's end: 0, or -1. */
static int memory_number(int64_t *out, const char **p, const char *end, int64_t min)
{
	int64_t v = 0;
	const char *s = *p;

	if (s >= end || *s < '0' || *s > '9')
		return -1;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		if (v > (INT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (*s - '0');
	}
	if (v < min)
		return -1;
	*out = v;
	*p = s;
	return 0;
}

/* One line "UUID<TAB>PID<TAB>SINCE<TAB>QUIET_SINCE" into q: 0, or -1 when it is not one. */
static int memory_line(struct quiet *q, const char *s, const char *end)
{
	const char *tab = memchr(s, '\t', (size_t)(end - s));
	int64_t pid;

	if (!tab || tab == s || (size_t)(tab - s) >= sizeof(q->uuid))
		return -1;
	memset(q, 0, sizeof(*q));
	memcpy(q->uuid, s, (size_t)(tab - s));
	for (const char *c = q->uuid; *c; c++)
		if (*c <= ' ' || *c == 0x7f)
			return -1;
	s = tab + 1;
	if (memory_number(&pid, &s, end, 1) || pid > INT32_MAX || s >= end || *s++ != '\t' ||
	    memory_number(&q->since, &s, end, 0) || s >= end || *s++ != '\t' ||
	    memory_number(&q->quiet_since, &s, end, 0) || s != end)
		return -1;
	q->pid = (int32_t)pid;
	return 0;
}

int vd_audit_memory_parse(struct vd_audit_memory **out, const char *text, size_t len)
{
	struct vd_audit_memory *m = NULL;
	const char *end = text + len;
	size_t line = 2;
	int err;

	*out = NULL;
	if (len < strlen(MEMORY_HEADER) || memcmp(text, MEMORY_HEADER, strlen(MEMORY_HEADER)))
		return error_set(VD_EPARSE, "line 1: not what visdev's audit keeps");
	err = vd_audit_memory_new(&m);
	for (const char *p = text + strlen(MEMORY_HEADER); !err && p < end; line++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		struct quiet q;

		if (!nl || memory_line(&q, p, nl)) {
			err = error_set(VD_EPARSE, "line %zu: not a lease the audit keeps", line);
			break;
		}
		err = array_grow(&m->quiet, &m->cap, m->n, sizeof(q), 8);
		if (!err)
			m->quiet[m->n++] = q;
		p = nl + 1;
	}
	if (err) {
		vd_audit_memory_free(m);
		return err;
	}
	*out = m;
	return 0;
}

const char *vd_audit_memory_path(void)
{
	static _Thread_local char path[4200];

	return user_file(path, sizeof(path), "XDG_STATE_HOME", ".local/state", "audit", 0) ? NULL :
											     path;
}

/*
 * Whether the folder of path is this user's own and nobody else's to write:
 * root run with another's HOME must not read or write what that user could
 * have planted there. 0, or VD_EPERM with why.
 */
static int own_folder(const char *path)
{
	char dir[4200];
	struct stat st;
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		return 0;
	*slash = '\0';
	if (lstat(*dir ? dir : "/", &st) < 0)
		return errno == ENOENT ? 0 : error_set(VD_EIO, "%s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return error_set(VD_EPERM,
				 "%s is not a folder of this user's alone: the audit keeps "
				 "nothing there",
				 dir);
	return 0;
}

int vd_audit_memory_load(struct vd_audit_memory **out, const char *path)
{
	int owned = own_folder(path);

	char *text = NULL;
	size_t len = 0, cap = 0;
	ssize_t got;
	int fd, err;

	*out = NULL;
	if (owned)
		return owned;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT)
		return vd_audit_memory_new(out);
	if (fd < 0)
		return error_set(VD_EIO, "%s: %s", path, strerror(errno));
	do {
		if (array_grow(&text, &cap, len + 1, 1, 4096)) {
			close(fd);
			free(text);
			return VD_ENOMEM;
		}
		got = read(fd, text + len, cap - len - 1);
		len += got > 0 ? (size_t)got : 0;
	} while (got > 0);
	close(fd);
	err = got < 0 ? error_set(VD_EIO, "%s: %s", path, strerror(errno)) :
			vd_audit_memory_parse(out, text, len);
	free(text);
	if (err == VD_EPARSE) {
		char *why = strdup(vd_error_last());

		err = error_set(VD_EPARSE, "%s: %s", path, why ? why : "damaged");
		free(why);
	}
	return err;
}

int vd_audit_memory_save(struct vd_audit_memory *m, const char *path)
{
	char dir[4200];
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int ok;

	if (!m->changed)
		return 0;
	f = open_memstream(&text, &len);
	if (!f)
		return error_set(VD_ENOMEM, "out of memory");
	fputs(MEMORY_HEADER, f);
	for (size_t i = 0; i < m->n; i++)
		fprintf(f, "%s\t%d\t%lld\t%lld\n", m->quiet[i].uuid, (int)m->quiet[i].pid,
			(long long)m->quiet[i].since, (long long)m->quiet[i].quiet_since);
	ok = fclose(f) == 0;
	/* the default path's folders are made on the first save */
	if (ok && vd_audit_memory_path() && !strcmp(path, vd_audit_memory_path()))
		user_file(dir, sizeof(dir), "XDG_STATE_HOME", ".local/state", "audit", 1);
	if (ok && own_folder(path)) {
		free(text);
		return VD_EPERM;
	}
	ok = ok && file_replace(path, text, len) == 0;
	free(text);
	if (!ok)
		return error_set(VD_EIO, "cannot write %s: %s", path, strerror(errno));
	m->changed = 0;
	return 0;
}

void vd_audit_memory_free(struct vd_audit_memory *m)
{
	if (!m)
		return;
	free(m->quiet);
	free(m);
}

/* ---- The judgement -------------------------------------------------------------- */

/* Whether holder h holds a real lease (not a hold for a request in line). */
static int is_lease(const struct vd_lease_holder *h)
{
	return h->mode != VD_LEASE_HELD;
}

/* The GPU of the device a lease names, or NULL when the snapshot lacks it. */
static const struct vd_gpu *lease_gpu(const struct vd_system *sys, const struct vd_lease_holder *h)
{
	struct vd_device_ref d;

	return vd_system_find(&d, sys, h->uuid) ? NULL : &sys->gpus[d.gpu];
}

/*
 * Whether process pid is part of h's job: its first process, in its process
 * group, a descendant of its first process, or its user's visdev; always a
 * process of the lease's own user (the record's owner), for the pid and
 * group in a record are the holder's word: a record naming pid 1 must not
 * make every process on the GPU its job's.
 */
static int in_job(const struct vd_procs *procs, const struct vd_lease_holder *h, uint32_t pid)
{
	const struct vd_proc *p = proc_find(procs, (int32_t)pid);

	if (!p || p->uid != h->uid)
		return 0;
	if ((h->pid > 1 && p->pid == h->pid) || (h->pgid > 1 && p->pgid == h->pgid) ||
	    !strcmp(p->name, "visdev"))
		return 1;
	for (int depth = 0; p && depth < ANCESTORS_MAX; depth++) {
		if (h->pid > 1 && p->ppid == h->pid)
			return 1;
		p = proc_find(procs, p->ppid);
	}
	return 0;
}

/* Whether process pid is part of the job of any lease on gpu. */
static int in_any_job(const struct vd_system *sys, const struct vd_leases *leases,
		      const struct vd_procs *procs, const struct vd_gpu *gpu, uint32_t pid)
{
	for (size_t i = 0; i < leases->n; i++)
		if (is_lease(&leases->holders[i]) && lease_gpu(sys, &leases->holders[i]) == gpu &&
		    in_job(procs, &leases->holders[i], pid))
			return 1;
	return 0;
}

static int finding_add(struct vd_audit *a, size_t *cap, const struct vd_audit_finding *f)
{
	if (array_grow(&a->findings, cap, a->n, sizeof(*f), 8))
		return VD_ENOMEM;
	a->findings[a->n++] = *f;
	return 0;
}

/* The first lease on gpu: where findings about the GPU are told. */
static size_t first_lease(const struct vd_system *sys, const struct vd_leases *leases,
			  const struct vd_gpu *gpu)
{
	for (size_t i = 0; i < leases->n; i++)
		if (is_lease(&leases->holders[i]) && lease_gpu(sys, &leases->holders[i]) == gpu)
			return i;
	return SIZE_MAX;
}

/* The squatters and the unexplained memory on one GPU that has leases. */
static int judge_gpu(struct vd_audit *a, size_t *cap, const struct vd_system *sys,
		     const struct vd_leases *leases, const struct vd_procs *procs,
		     const struct vd_gpu *gpu)
{
	size_t lease = first_lease(sys, leases, gpu), nsquatters = 0;
	uint64_t listed = 0;
	int all_known = 1;
	int64_t unexplained = 0;

	if (lease == SIZE_MAX || gpu->lost || !(gpu->fields & VD_GPU_PROCESSES))
		return 0;
	for (size_t i = 0; i < gpu->nprocesses; i++) {
		const struct vd_process *pr = &gpu->processes[i];
		const struct vd_proc *p = proc_find(procs, (int32_t)pr->pid);
		struct vd_audit_finding f = { .kind = VD_AUDIT_SQUATTER, .lease = lease };

		listed += pr->used_known ? pr->used_mib : 0;
		/* a process /proc does not show (gone, another PID namespace) is not judged */
		if (!p || in_any_job(sys, leases, procs, gpu, pr->pid))
			continue;
		str_copy(f.uuid, gpu->uuid, sizeof(f.uuid));
		f.pid = (int32_t)pr->pid;
		f.uid = p->uid;
		user_name(f.user, sizeof(f.user), (uid_t)p->uid);
		str_copy(f.command, p->command, sizeof(f.command));
		f.mib = pr->used_known ? (int64_t)pr->used_mib : -1;
		if (finding_add(a, cap, &f))
			return VD_ENOMEM;
		nsquatters++;
	}
	/* a process whose memory the driver does not say could hold it all */
	for (size_t i = 0; i < gpu->nprocesses; i++)
		all_known &= gpu->processes[i].used_known;
	if (all_known && (gpu->fields & VD_GPU_MEMORY) && !gpu->mig_mode &&
	    gpu->memory_used_mib > listed && gpu->memory_used_mib - listed > UNEXPLAINED_MIB) {
		struct vd_audit_finding f = { .kind = VD_AUDIT_UNEXPLAINED, .lease = lease };

		str_copy(f.uuid, gpu->uuid, sizeof(f.uuid));
		unexplained = (int64_t)(gpu->memory_used_mib - listed);
		f.mib = unexplained;
		if (finding_add(a, cap, &f))
			return VD_ENOMEM;
	}
	for (size_t i = 0; i < leases->n; i++)
		if (is_lease(&leases->holders[i]) && lease_gpu(sys, &leases->holders[i]) == gpu) {
			a->leases[i].nsquatters = nsquatters;
			a->leases[i].unexplained_mib = unexplained;
		}
	return 0;
}

/* Whether h's job is at work now: 1 yes, 0 no, -1 nothing to tell by. */
static int at_work(const struct vd_system *sys, const struct vd_procs *procs,
		   const struct vd_lease_holder *h, size_t nsquatters)
{
	const struct vd_gpu *gpu = lease_gpu(sys, h);
	struct vd_device_ref d;
	int whole;

	size_t unseen = 0;

	if (!gpu || gpu->lost)
		return -1;
	for (size_t i = 0; (gpu->fields & VD_GPU_PROCESSES) && i < gpu->nprocesses; i++) {
		if (in_job(procs, h, gpu->processes[i].pid))
			return 1;
		unseen += !proc_find(procs, (int32_t)gpu->processes[i].pid);
	}
	/* a process /proc does not show (a container's, hidepid) may well be the job's */
	if (unseen)
		return -1;
	/* the utilisation is the whole GPU's: the job's only when the job has it alone */
	vd_system_find(&d, sys, h->uuid);
	whole = d.mig < 0 && h->mode == VD_LEASE_EXCLUSIVE && !nsquatters;
	if (whole && (gpu->fields & VD_GPU_UTILIZATION) && gpu->utilization_gpu > 0)
		return 1;
	if ((gpu->fields & VD_GPU_PROCESSES) || (whole && (gpu->fields & VD_GPU_UTILIZATION)))
		return 0;
	return -1;
}

/* The memory's entry for lease h, or NULL. */
static struct quiet *quiet_find(struct vd_audit_memory *m, const struct vd_lease_holder *h)
{
	for (size_t i = 0; m && i < m->n; i++)
		if (m->quiet[i].pid == h->pid && m->quiet[i].since == h->since &&
		    !strcmp(m->quiet[i].uuid, h->uuid))
			return &m->quiet[i];
	return NULL;
}

/*
 * Judges each lease's use, and makes the memory what this look saw: the
 * leases quiet now, each since the first look of its quiet streak.
 */
static int judge_use(struct vd_audit *a, size_t *cap, const struct vd_system *sys,
		     const struct vd_leases *leases, const struct vd_procs *procs,
		     struct vd_audit_memory *m, int64_t now, int64_t idle_after_s)
{
	struct quiet *kept = NULL;
	size_t nkept = 0, capkept = 0;

	for (size_t i = 0; i < leases->n; i++) {
		const struct vd_lease_holder *h = &leases->holders[i];
		struct vd_lease_audit *la = &a->leases[i];
		int work = is_lease(h) ? at_work(sys, procs, h, la->nsquatters) : -1;
		struct quiet *q;

		la->use = work < 0 ? VD_USE_UNKNOWN : work ? VD_USE_ACTIVE : VD_USE_QUIET;
		q = m ? quiet_find(m, h) : NULL;
		/* a look that could not tell ends no streak: only the job seen at work does */
		if (la->use == VD_USE_UNKNOWN && q) {
			if (array_grow(&kept, &capkept, nkept, sizeof(*kept), 8)) {
				free(kept);
				return VD_ENOMEM;
			}
			kept[nkept++] = *q;
			continue;
		}
		if (la->use != VD_USE_QUIET || !m)
			continue;
		if (array_grow(&kept, &capkept, nkept, sizeof(*kept), 8)) {
			free(kept);
			return VD_ENOMEM;
		}
		kept[nkept] =
			q ? *q :
			    (struct quiet){ .pid = h->pid, .since = h->since, .quiet_since = now };
		str_copy(kept[nkept].uuid, h->uuid, sizeof(kept[nkept].uuid));
		la->quiet_s = now > kept[nkept].quiet_since ? now - kept[nkept].quiet_since : 0;
		m->changed |= !q;
		nkept++;
		if (la->quiet_s >= idle_after_s) {
			struct vd_audit_finding f = { .kind = VD_AUDIT_IDLE, .lease = i };

			la->use = VD_USE_IDLE;
			str_copy(f.uuid, h->uuid, sizeof(f.uuid));
			f.pid = h->pid;
			f.uid = h->uid;
			str_copy(f.user, h->user, sizeof(f.user));
			str_copy(f.command, h->command, sizeof(f.command));
			f.seconds = la->quiet_s;
			if (finding_add(a, cap, &f)) {
				free(kept);
				return VD_ENOMEM;
			}
		}
	}
	if (m) {
		m->changed |= nkept != m->n;
		free(m->quiet);
		m->quiet = kept;
		m->n = nkept;
		m->cap = capkept;
	}
	return 0;
}

int vd_audit(struct vd_audit **out, const struct vd_system *sys, const struct vd_leases *leases,
	     const struct vd_procs *procs, struct vd_audit_memory *memory, int64_t now,
	     int64_t idle_after_s)
{
	struct vd_audit *a = calloc(1, sizeof(*a));
	size_t cap = 0;
	int err = 0;

	*out = NULL;
	if (!a || !(a->leases = calloc(leases->n ? leases->n : 1, sizeof(*a->leases)))) {
		free(a);
		return error_set(VD_ENOMEM, "out of memory");
	}
	a->nleases = leases->n;
	for (size_t i = 0; i < leases->n; i++)
		a->leases[i].quiet_s = -1;
	for (size_t g = 0; !err && g < sys->ngpus; g++)
		err = judge_gpu(a, &cap, sys, leases, procs, &sys->gpus[g]);
	if (!err)
		err = judge_use(a, &cap, sys, leases, procs, memory, now, idle_after_s);
	if (err) {
		vd_audit_free(a);
		return error_set(VD_ENOMEM, "out of memory");
	}
	*out = a;
	return 0;
}

void vd_audit_free(struct vd_audit *a)
{
	if (!a)
		return;
	free(a->leases);
	free(a->findings);
	free(a);
}

const char *vd_lease_use_name(enum vd_lease_use use)
{
	static const char *const names[] = { "unknown", "active", "quiet", "idle" };

	return (unsigned)use < ARRAY_SIZE(names) ? names[use] : NULL;
}

const char *vd_audit_kind_name(enum vd_audit_kind kind)
{
	static const char *const names[] = { "squatter", "unexplained_memory", "idle_lease" };

	return (unsigned)kind < ARRAY_SIZE(names) ? names[kind] : NULL;
}

int vd_audit_now(struct vd_audit **out, struct vd_procs **procs_out, const struct vd_system *sys,
		 const struct vd_leases *leases, int64_t idle_after_s, char **warning)
{
	const char *path = vd_audit_memory_path();
	struct vd_audit_memory *memory = NULL;
	struct vd_procs *procs = NULL;
	char *said = NULL;
	int err;

	*out = NULL;
	*warning = NULL;
	if (procs_out)
		*procs_out = NULL;
	if (!path) {
		said = strdup("idle leases are not judged: neither XDG_STATE_HOME nor HOME is set, "
			      "and the audit keeps what it saw there");
	} else if (vd_audit_memory_load(&memory, path)) {
		/* damaged: judged afresh, and written anew */
		if (asprintf(&said, "%s; starting afresh", vd_error_last()) < 0)
			said = NULL;
		err = vd_audit_memory_new(&memory);
		if (err)
			goto out;
	}
	err = vd_procs_read(&procs, sys);
	if (!err)
		err = vd_audit(out, sys, leases, procs, memory, (int64_t)time(NULL), idle_after_s);
	if (!err && memory && vd_audit_memory_save(memory, path) && !said &&
	    asprintf(&said, "idle leases are judged by this look alone: %s", vd_error_last()) < 0)
		said = NULL;
out:
	if (procs_out && !err)
		*procs_out = procs;
	else
		vd_procs_free(procs);
	vd_audit_memory_free(memory);
	if (err)
		free(said);
	else
		*warning = said;
	return err;
}
