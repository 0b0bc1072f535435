/*
 * select.c - which devices fit a request: the pure core of pick and run.
 *
 * A snapshot, the live leases, the parent's restriction and the options go
 * in; the chosen devices, or a reason per device that does not fit, come
 * out. No I/O, no environment, no clock (the local time zone is only used
 * to write a lease's start, in ISO 8601).
 *
 * Units. Every GPU not in MIG mode is one unit; a GPU in MIG mode is not,
 * each of its MIG instances is. A GPU in MIG mode without instances gets a
 * reason of its own and is never chosen.
 *
 * A unit fits when, in this order (the first problem found is its reason):
 * - the parent made it visible: with CUDA_VISIBLE_DEVICES unset every unit
 *   is; set, only the devices it names, enumerated or not (a GPU in MIG
 *   mode named whole names its MIG instances);
 * - with opts->within set (a request read from the line), it is one of
 *   those UUIDs;
 * - it has not fallen off the bus;
 * - its GPU is not excluded (excluding a GPU excludes its MIG instances);
 * - (a GPU in MIG mode without MIG instances: never, and it says so);
 * - its GPU's name matches the model anywhere in it, case ignored: a shell
 *   pattern (fnmatch(3)) that may begin and end anywhere in the name, so
 *   that "A100" and "H100*HBM3" match "NVIDIA A100-SXM4-80GB" and "NVIDIA
 *   H100 80GB HBM3" (names begin with "NVIDIA", "Tesla" and the like);
 * - no lease stands in the way (a lease holds a unit by its GPU- or MIG-
 *   UUID; one on the UUID of a GPU in MIG mode holds none of its MIG
 *   instances, as leases are taken per unit): an exclusive request (mem_mib
 *   0) wants no live lease at all; a shared request wants no exclusive
 *   lease; neither may take a unit held for a request waiting in line;
 * - exclusive requests only: NVML shows no compute process on the GPU that
 *   is not a live lease's (a process whose pid is that of a holder of a
 *   lease on this unit). Where the process list is unknown it does not
 *   block. NVML lists processes per GPU, not per MIG instance, so a MIG
 *   unit is busy only through its leases and its memory;
 * - exclusive requests only: a unit no lease holds has no more than
 *   UNEXPLAINED_MIB of memory in use that the processes NVML lists do not
 *   account for. Such memory is someone's job that NVML does not show (in
 *   a container, or where NVML lists only the caller's processes), or a
 *   job that started outside visdev a moment ago; it is busy, whatever the
 *   process list says. MIG units are not judged so (NVML lists processes
 *   per GPU, not per MIG unit, so their memory in use tells nothing of
 *   whose it is): only their leases keep them;
 * - with max_util set, its utilisation is known and at most max_util. A
 *   MIG unit has its GPU's utilisation (mostly unknown: NVML does not
 *   report it in MIG mode), so max_util mostly rules MIG units out;
 * - with min_free_mib or mem_mib set, its memory is known and its
 *   effective free memory is at least the larger of the two. Effective
 *   free memory is what NVML reports free (a MIG instance: total less
 *   used) less what shared leases on the unit reserved but have not
 *   allocated yet.
 *
 * Order. Units at work (with a process visdev did not start, or memory in
 * use that nothing explains, as above; only shared requests can be given
 * them) come after every idle one, whatever their links. Then, for a
 * shared request, units already shared by a lease come before units no
 * lease holds, so that small jobs fill shared GPUs and whole GPUs stay
 * free for whole-GPU jobs. Then fitting units are ranked by the policy: most-free (effective free
 * memory, most first, unknown last), least-used (utilisation, lowest first,
 * unknown last; then as most-free), pack (effective free memory, least
 * first, unknown last). Ties go to the lower GPU index, then the lower MIG
 * index. For n > 1 the set is chosen by, in turn: how many members are at
 * work, for a shared request how many are not yet shared, its worst link between
 * two members (links from the snapshot; two MIG instances of one GPU are
 * nvlink-near; a pair without a link entry is sys), the policy's key
 * summed over the set (unknowns counted first, as above), and the members'
 * indices, lowest first. A set is only valid if CUDA will use all of it:
 * before driver R570 (or with the driver unknown) a process can use one
 * MIG device in all and no whole GPU beside it, from R570 one per GPU
 * instance (the engine's rule, visible_conflict()).
 *
 * Search. Every n-subset of the k fitting units is weighed while C(k, n) is
 * at most SUBSET_LIMIT. Beyond that, a greedy search: from each fitting
 * unit as a seed, in policy order, add the unit whose worst link to the
 * set so far is nearest (ties: policy order) until the set has n members;
 * the best of these sets by the same key wins. The result is deterministic
 * either way, but the greedy one may miss the best set.
 *
 * Reasons, one line per unit that does not fit, in index order, the first
 * problem only ("GPU 3" is "GPU 4 MIG 1g.10gb (gi 7 ci 0)" for a MIG unit),
 * each with its code (struct vd_reason) at the left here:
 *   hidden        GPU 3: hidden by CUDA_VISIBLE_DEVICES
 *   not-within    GPU 3: not among the devices the request may use
 *   lost          GPU 0: lost (fell off the bus)
 *   excluded      GPU 1: excluded
 *   mig-empty     GPU 2: in MIG mode with no MIG device to choose
 *   model         GPU 2: NVIDIA GeForce RTX 3090 does not match 'A100'
 *   leased        GPU 3: leased by alice (pid 4242, python train.py) since
 * 2026-12-06T10:02:00+01:00 held          GPU 3: held for alice, waiting in line (pid 4242, python
 * train.py) since ... leased        GPU 3: shared lease by bob (pid 5000, python eval.py, 8.0 GiB)
 * since ... and 1 more locked        GPU 3: holder unknown: locked without a lease record locked
 * GPU 3: lock file '/dev/shm/visdev-leases/GPU-....lock' is a directory: ... busy          GPU 0:
 * busy with 1 process visdev did not start (pid 31842 python) unexplained   GPU 1: busy: 9.8 GiB in
 * use that no lease and no process NVML lists explains (100% utilised) utilization   GPU 2: 97%
 * utilised, at most 50% asked utilization-unknown  GPU 4: utilisation unknown, at most 50% asked
 *   memory        GPU 1: 3.2 GiB free, 8.0 GiB asked (4.0 GiB reserved by leases not yet in use)
 *   memory-unknown  GPU 4: memory unknown, cannot promise 8.0 GiB
 * An exclusive holder is named before shared ones; a holder without a user
 * name is "uid N"; " since" is left out when the start is unknown. Up to
 * two processes are named ("pid 1 python, pid 2 and 3 more"). When no set
 * fits but some units do, a last line counts them: "2 GPUs fit, 3 wanted"
 * (the error says the same: "too few fit: 2 GPUs fit, 3 wanted"; none
 * fitting is "no GPU fits: 3 wanted")
 * ("devices" where MIG units are among them), with ": a process can use
 * only one MIG device ..." when the MIG rule is what failed; its code is
 * too-few, or mig-together for the MIG rule, and it is about VD_NO_GPU. On success
 * the reasons are filled the same way, without that last line.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SUBSET_LIMIT	200000 /* subsets weighed one by one, at most */
#define KEY_LEN		7
#define NAMED_PROCESSES 2

/* Why a unit does not fit; the order is the order of the checks. */
enum problem {
	FITS = 0,
	HIDDEN,
	NOT_WITHIN,
	LOST,
	EXCLUDED,
	NO_MIG,
	MODEL,
	LEASED,
	BUSY,
	UNEXPLAINED,
	UTIL,
	UTIL_UNKNOWN,
	MEMORY,
	MEMORY_UNKNOWN,
};

struct unit {
	struct vd_device_ref ref;
	const struct vd_gpu *gpu;
	const struct vd_mig *mig; /* NULL for a whole GPU */
	const char *uuid;
	enum problem problem;
	int64_t free_mib;		      /* effective free memory, -1 when unknown */
	int64_t reserved_mib;		      /* reserved by shared leases, not yet allocated */
	int util;			      /* percent, -1 when unknown */
	size_t nholders;		      /* live leases on the unit */
	const struct vd_lease_holder *holder; /* the one to name: exclusive first */
	size_t nforeign;		      /* processes no lease of this unit accounts for */
	int64_t unexplained_mib;	      /* used, by nothing a lease or NVML names */
	const struct vd_process *foreign[NAMED_PROCESSES];
};

struct search {
	const struct vd_system *sys;
	const struct vd_select_options *opts;
	struct unit *units;
	size_t nunits;
	unsigned char *levels; /* ngpus * ngpus link levels */
};

/* ---- facts about one unit ----------------------------------------------- */

static int64_t sat_add(int64_t a, int64_t b)
{
	return a > INT64_MAX - b ? INT64_MAX : a + b;
}

static int names_unit(struct vd_device_ref d, const struct unit *u)
{
	return d.gpu == u->ref.gpu && (d.mig < 0 || d.mig == u->ref.mig);
}

/*
 * Whether the parent's value gave the unit to this process: it names it,
 * whether or not CUDA enumerates it beside the others (a child given it
 * alone sees it).
 */
static int is_visible(const struct vd_resolution *parent, const struct unit *u)
{
	if (!parent || !parent->set)
		return 1;
	for (size_t i = 0; i < parent->ndevices; i++)
		if (names_unit(parent->devices[i], u))
			return 1;
	for (size_t i = 0; i < parent->ndropped; i++)
		if (names_unit(parent->dropped[i].device, u))
			return 1;
	return 0;
}

static int is_within(const struct vd_select_options *opts, const struct unit *u)
{
	if (!opts->within)
		return 1;
	for (size_t i = 0; i < opts->nwithin; i++)
		if (opts->within[i] && !strcmp(opts->within[i], u->uuid))
			return 1;
	return 0;
}

static int is_excluded(const struct vd_select_options *opts, unsigned gpu)
{
	for (size_t i = 0; opts->exclude && i < opts->nexclude; i++)
		if (opts->exclude[i] == gpu)
			return 1;
	return 0;
}

/* Whether the pattern matches anywhere in the name, case ignored. */
static int model_matches(const char *pattern, const char *name)
{
	size_t len = strlen(pattern);
	char *anywhere = malloc(len + 3);
	int match;

	if (!anywhere)
		return 0;
	anywhere[0] = '*';
	memcpy(anywhere + 1, pattern, len);
	memcpy(anywhere + 1 + len, "*", 2);
	match = fnmatch(anywhere, name, FNM_CASEFOLD) == 0;
	free(anywhere);
	return match;
}

/* Counts the leases on u, picks the one to name, and sums the reservations. */
static void read_leases(struct unit *u, const struct vd_leases *leases)
{
	for (size_t i = 0; leases && i < leases->n; i++) {
		const struct vd_lease_holder *h = &leases->holders[i];

		if (strcmp(h->uuid, u->uuid) != 0)
			continue;
		u->nholders++;
		/* name an exclusive lease, or a hold, before shared ones */
		if (!u->holder ||
		    (u->holder->mode == VD_LEASE_SHARED && h->mode != VD_LEASE_SHARED))
			u->holder = h;
		if (h->mode == VD_LEASE_SHARED)
			u->reserved_mib =
				sat_add(u->reserved_mib, h->mem_unused_mib > INT64_MAX ?
								 INT64_MAX :
								 (int64_t)h->mem_unused_mib);
	}
}

/* Whether a lease or a hold keeps even a shared request off the unit. */
static int has_exclusive(const struct unit *u)
{
	return u->holder && u->holder->mode != VD_LEASE_SHARED;
}

/* Whether pid is that of a holder of a lease on u. */
static int is_holder_pid(const struct unit *u, const struct vd_leases *leases, uint32_t pid)
{
	for (size_t i = 0; leases && i < leases->n; i++) {
		const struct vd_lease_holder *h = &leases->holders[i];

		if (h->pid > 0 && (uint32_t)h->pid == pid && strcmp(h->uuid, u->uuid) == 0)
			return 1;
	}
	return 0;
}

/* The processes on a whole GPU that no lease of this unit accounts for. */
static void read_processes(struct unit *u, const struct vd_leases *leases)
{
	const struct vd_gpu *gpu = u->gpu;

	if (u->mig || !(gpu->fields & VD_GPU_PROCESSES))
		return;
	for (size_t i = 0; i < gpu->nprocesses; i++) {
		if (is_holder_pid(u, leases, gpu->processes[i].pid))
			continue;
		if (u->nforeign < NAMED_PROCESSES)
			u->foreign[u->nforeign] = &gpu->processes[i];
		u->nforeign++;
	}
}

/*
 * The memory in use on a unit no lease holds that the processes NVML lists
 * do not account for; 0 when leased or unknown.
 */
static int64_t unexplained_mib(const struct unit *u)
{
	const struct vd_gpu *gpu = u->gpu;
	uint64_t used, listed = 0;

	/* a MIG unit is judged by its leases; a GPU in MIG mode by its MIG units */
	if (u->nholders || u->mig || gpu->mig_mode || !(gpu->fields & VD_GPU_MEMORY))
		return 0;
	used = gpu->memory_used_mib;
	for (size_t i = 0; (gpu->fields & VD_GPU_PROCESSES) && i < gpu->nprocesses; i++)
		if (gpu->processes[i].used_known)
			listed += gpu->processes[i].used_mib;
	return used > listed ? (int64_t)(used - listed) : 0;
}

/* Whether a unit is at work with what visdev did not start. */
static int at_work(const struct unit *u)
{
	return u->nforeign > 0 || u->unexplained_mib > UNEXPLAINED_MIB;
}

/* The memory a request needs on each unit, 0 for none. */
static uint64_t needed_mib(const struct vd_select_options *opts)
{
	return opts->mem_mib > opts->min_free_mib ? opts->mem_mib : opts->min_free_mib;
}

/*
 * Whether a unit could fit some day, when leases end and loads change: not
 * hidden, lost, excluded or of another model, and with enough memory in all.
 */
static int could_ever_fit(const struct unit *u, const struct vd_select_options *opts)
{
	uint64_t want = opts->mem_mib > opts->min_free_mib ? opts->mem_mib : opts->min_free_mib;
	int known = u->mig ? (u->mig->fields & VD_GPU_MEMORY) : (u->gpu->fields & VD_GPU_MEMORY);
	uint64_t total = u->mig ? u->mig->memory_total_mib : u->gpu->memory_total_mib;

	if (u->problem >= HIDDEN && u->problem <= MODEL)
		return 0;
	return !known || total >= want;
}

/* Weighs one unit against the request: sets its facts and its first problem. */
static void weigh(struct unit *u, const struct vd_system *sys, const struct vd_leases *leases,
		  const struct vd_resolution *parent, const struct vd_select_options *opts)
{
	int shared = opts->mem_mib > 0;
	uint64_t need = needed_mib(opts);
	int64_t nvml_free;

	read_leases(u, leases);
	read_processes(u, leases);
	u->unexplained_mib = unexplained_mib(u);
	u->util = (u->gpu->fields & VD_GPU_UTILIZATION) ? (int)u->gpu->utilization_gpu : -1;
	nvml_free = vd_device_memory_free_mib(sys, u->ref);
	if (nvml_free < 0)
		u->free_mib = -1;
	else
		u->free_mib = nvml_free > u->reserved_mib ? nvml_free - u->reserved_mib : 0;

	if (!is_visible(parent, u))
		u->problem = HIDDEN;
	else if (!is_within(opts, u))
		u->problem = NOT_WITHIN;
	else if (u->gpu->lost)
		u->problem = LOST;
	else if (is_excluded(opts, u->ref.gpu))
		u->problem = EXCLUDED;
	else if (u->gpu->mig_mode && !u->mig)
		u->problem = NO_MIG;
	else if (opts->model && !model_matches(opts->model, u->gpu->name))
		u->problem = MODEL;
	else if (shared ? has_exclusive(u) : u->nholders > 0)
		u->problem = LEASED;
	else if (!shared && u->nforeign)
		u->problem = BUSY;
	else if (!shared && u->unexplained_mib > UNEXPLAINED_MIB)
		u->problem = UNEXPLAINED;
	else if (opts->max_util >= 0 && u->util < 0)
		u->problem = UTIL_UNKNOWN;
	else if (opts->max_util >= 0 && u->util > opts->max_util)
		u->problem = UTIL;
	else if (need && u->free_mib < 0)
		u->problem = MEMORY_UNKNOWN;
	else if (need && (uint64_t)u->free_mib < need)
		u->problem = MEMORY;
	else
		u->problem = FITS;
}

/* ---- reasons ------------------------------------------------------------ */

static double gib(uint64_t mib)
{
	return (double)mib / 1024.0;
}

/* "GPU 3" or "GPU 4 MIG 1g.10gb (gi 7 ci 0)". */
static void unit_label(char *buf, size_t size, const struct unit *u)
{
	if (!u->mig)
		snprintf(buf, size, "GPU %u", u->ref.gpu);
	else
		snprintf(buf, size, "GPU %u MIG %s%s(gi %u ci %u)", u->ref.gpu, u->mig->profile,
			 u->mig->profile[0] ? " " : "", u->mig->gi, u->mig->ci);
}

/* "leased by alice (pid 4242, python train.py) since 10:02", and the like. */
static void describe_lease(char *buf, size_t size, const struct unit *u)
{
	const struct vd_lease_holder *h = u->holder;
	char who[48], what[320], since[40] = "", more[48] = "";
	size_t len;

	if (h->pid <= 0) {
		/* no lease record: a lock held by another program, or a lock file unusable */
		snprintf(buf, size, "%.255s", h->command);
		return;
	}
	if (h->user[0])
		snprintf(who, sizeof(who), "%.31s", h->user);
	else
		snprintf(who, sizeof(who), "uid %u", h->uid);
	len = (size_t)snprintf(what, sizeof(what), "pid %d", (int)h->pid);
	if (h->command[0])
		len += (size_t)snprintf(what + len, sizeof(what) - len, ", %.255s", h->command);
	if (h->mode == VD_LEASE_SHARED && len < sizeof(what))
		snprintf(what + len, sizeof(what) - len, ", %.1f GiB", gib(h->mem_mib));
	if (h->since > 0) {
		memcpy(since, " since ", 7);
		vd_format_time(since + 7, sizeof(since) - 7, h->since);
	}
	if (h->mode == VD_LEASE_HELD) {
		snprintf(buf, size, "held for %s, waiting in line (%s)%s", who, what, since);
		return;
	}
	if (u->nholders > 1)
		snprintf(more, sizeof(more), " and %zu more", u->nholders - 1);
	snprintf(buf, size, "%s by %s (%s)%s%s",
		 h->mode == VD_LEASE_SHARED ? "shared lease" : "leased", who, what, since, more);
}

/* "busy with 1 process visdev did not start (pid 31842 python)". */
static void describe_busy(char *buf, size_t size, const struct unit *u)
{
	size_t len, named = u->nforeign < NAMED_PROCESSES ? u->nforeign : NAMED_PROCESSES;

	len = (size_t)snprintf(buf, size, "busy with %zu process%s visdev did not start (",
			       u->nforeign, u->nforeign == 1 ? "" : "es");
	for (size_t i = 0; i < named && len < size; i++) {
		const struct vd_process *p = u->foreign[i];

		len += (size_t)snprintf(buf + len, size - len, "%spid %u%s%s", i ? ", " : "",
					p->pid, p->name[0] ? " " : "", p->name);
	}
	if (u->nforeign > named && len < size)
		len += (size_t)snprintf(buf + len, size - len, " and %zu more",
					u->nforeign - named);
	if (len < size)
		snprintf(buf + len, size - len, ")");
}

/* Adds a reason line about device d, with its code. */
static int reason_push(struct vd_choice *choice, struct vd_device_ref d, const char *code,
		       const char *text)
{
	struct vd_reason *why = realloc(choice->why, (choice->nreasons + 1) * sizeof(*why));

	if (!why)
		return error_set(VD_ENOMEM, "out of memory");
	choice->why = why;
	why[choice->nreasons] = (struct vd_reason){ d, code };
	return strings_push(&choice->reasons, &choice->nreasons, "%s", text);
}

/* The code of a lease problem: a hold in line, a lock without a record, a lease. */
static const char *lease_code(const struct unit *u)
{
	if (u->holder->pid <= 0)
		return "locked";
	return u->holder->mode == VD_LEASE_HELD ? "held" : "leased";
}

/* The stable code of each problem (docs/json.md); LEASED's is lease_code()'s. */
static const char *const problem_codes[] = {
	[HIDDEN] = "hidden",	[NOT_WITHIN] = "not-within",
	[LOST] = "lost",	[EXCLUDED] = "excluded",
	[NO_MIG] = "mig-empty", [MODEL] = "model",
	[BUSY] = "busy",	[UNEXPLAINED] = "unexplained",
	[UTIL] = "utilization", [UTIL_UNKNOWN] = "utilization-unknown",
	[MEMORY] = "memory",	[MEMORY_UNKNOWN] = "memory-unknown",
};

/* Adds the line saying why u does not fit. */
static int add_reason(struct vd_choice *choice, const struct unit *u,
		      const struct vd_select_options *opts)
{
	char label[VD_PROFILE_MAX + 64], why[512], line[VD_PROFILE_MAX + 64 + 512 + 2];
	uint64_t need = needed_mib(opts);
	size_t len;

	unit_label(label, sizeof(label), u);
	switch (u->problem) {
	case HIDDEN:
		snprintf(why, sizeof(why), "hidden by CUDA_VISIBLE_DEVICES");
		break;
	case NOT_WITHIN:
		snprintf(why, sizeof(why), "not among the devices the request may use");
		break;
	case LOST:
		snprintf(why, sizeof(why), "lost (fell off the bus)");
		break;
	case EXCLUDED:
		snprintf(why, sizeof(why), "excluded");
		break;
	case NO_MIG:
		snprintf(why, sizeof(why), "in MIG mode with no MIG device to choose");
		break;
	case MODEL:
		snprintf(why, sizeof(why), "%s does not match '%.200s'", u->gpu->name, opts->model);
		break;
	case LEASED:
		describe_lease(why, sizeof(why), u);
		break;
	case BUSY:
		describe_busy(why, sizeof(why), u);
		break;
	case UNEXPLAINED:
		len = (size_t)snprintf(why, sizeof(why),
				       "busy: %.1f GiB in use that no lease and no process NVML "
				       "lists explains",
				       gib((uint64_t)u->unexplained_mib));
		if (u->util >= 0)
			snprintf(why + len, sizeof(why) - len, " (%d%% utilised)", u->util);
		break;
	case UTIL:
		snprintf(why, sizeof(why), "%d%% utilised, at most %d%% asked", u->util,
			 opts->max_util);
		break;
	case UTIL_UNKNOWN:
		snprintf(why, sizeof(why), "utilisation unknown, at most %d%% asked",
			 opts->max_util);
		break;
	case MEMORY:
		if (u->reserved_mib > 0)
			snprintf(why, sizeof(why),
				 "%.1f GiB free, %.1f GiB asked (%.1f GiB reserved by leases not "
				 "yet in use)",
				 gib((uint64_t)u->free_mib), gib(need),
				 gib((uint64_t)u->reserved_mib));
		else
			snprintf(why, sizeof(why), "%.1f GiB free, %.1f GiB asked",
				 gib((uint64_t)u->free_mib), gib(need));
		break;
	case MEMORY_UNKNOWN:
		snprintf(why, sizeof(why), "memory unknown, cannot promise %.1f GiB", gib(need));
		break;
	case FITS:
		return 0;
	}
	snprintf(line, sizeof(line), "%s: %s", label, why);
	return reason_push(choice, u->ref,
			   u->problem == LEASED ? lease_code(u) : problem_codes[u->problem], line);
}

/* ---- ranking ------------------------------------------------------------ */

static enum vd_link_level unit_level(const struct search *s, size_t a, size_t b)
{
	const struct unit *ua = &s->units[a], *ub = &s->units[b];

	if (ua->ref.gpu == ub->ref.gpu)
		return VD_LINK_NVLINK;
	return (enum vd_link_level)s->levels[ua->ref.gpu * s->sys->ngpus + ub->ref.gpu];
}

/* The nearest link level between every two GPUs; sys where none is given. */
static int link_table(struct search *s)
{
	size_t n = s->sys->ngpus;

	s->levels = malloc(n ? n * n : 1);
	if (!s->levels)
		return error_set(VD_ENOMEM, "out of memory");
	memset(s->levels, VD_LINK_SYS, n * n);
	for (size_t i = 0; i < s->sys->nlinks; i++) {
		const struct vd_link *l = &s->sys->links[i];
		unsigned char level = (unsigned char)l->level;

		if (l->a >= n || l->b >= n || l->level > VD_LINK_SYS)
			continue;
		if (level < s->levels[l->a * n + l->b]) {
			s->levels[l->a * n + l->b] = level;
			s->levels[l->b * n + l->a] = level;
		}
	}
	return 0;
}

/*
 * The key of a set (lower is better): its members at work, for a shared
 * request its members not yet shared, its worst link, then the policy's
 * sums, unknowns counted first.
 */
static void set_key(int64_t key[KEY_LEN], const struct search *s, const size_t *members, size_t n)
{
	int64_t worst = VD_LINK_NVLINK, nomem = 0, noutil = 0, free_sum = 0, util_sum = 0;
	int64_t working = 0, fresh = 0;

	for (size_t i = 0; i < n; i++) {
		const struct unit *u = &s->units[members[i]];

		for (size_t j = 0; j < i; j++) {
			int64_t level = unit_level(s, members[i], members[j]);

			if (level > worst)
				worst = level;
		}
		working += at_work(u);
		fresh += s->opts->mem_mib > 0 && u->nholders == 0;
		if (u->free_mib < 0)
			nomem++;
		else
			free_sum = sat_add(free_sum, u->free_mib);
		if (u->util < 0)
			noutil++;
		else
			util_sum += u->util;
	}
	memset(key, 0, KEY_LEN * sizeof(*key));
	key[0] = working;
	key[1] = fresh;
	key[2] = worst;
	switch (s->opts->policy) {
	case VD_POLICY_LEAST_USED:
		key[3] = noutil;
		key[4] = util_sum;
		key[5] = nomem;
		key[6] = -free_sum;
		break;
	case VD_POLICY_PACK:
		key[3] = nomem;
		key[4] = free_sum;
		break;
	case VD_POLICY_MOST_FREE:
	default:
		key[3] = nomem;
		key[4] = -free_sum;
		break;
	}
}

static int key_cmp(const int64_t *a, const int64_t *b)
{
	for (size_t i = 0; i < KEY_LEN; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

/* Policy order of two units: their keys alone, then their indices. */
static int unit_cmp(const void *pa, const void *pb, void *arg)
{
	const struct search *s = arg;
	size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
	int64_t ka[KEY_LEN], kb[KEY_LEN];
	int c;

	set_key(ka, s, &a, 1);
	set_key(kb, s, &b, 1);
	c = key_cmp(ka, kb);
	if (c)
		return c;
	/* units are stored in index order: GPU, then MIG */
	return a < b ? -1 : a > b;
}

static int size_cmp(const void *pa, const void *pb)
{
	size_t a = *(const size_t *)pa, b = *(const size_t *)pb;

	return a < b ? -1 : a > b;
}

/* Whether CUDA will use u together with the n members already chosen, all of them. */
static int can_join(const struct search *s, const size_t *members, size_t n, size_t u)
{
	struct vd_device_ref d = s->units[u].ref;

	for (size_t i = 0; i < n; i++) {
		struct vd_device_ref m = s->units[members[i]].ref;

		if (visible_conflict(s->sys, m, d) || visible_conflict(s->sys, d, m))
			return 0;
	}
	return 1;
}

static int set_valid(const struct search *s, const size_t *members, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (!can_join(s, members, i, members[i]))
			return 0;
	return 1;
}

/* C(k, n) when it is at most limit, else limit + 1. */
static uint64_t choose_capped(size_t k, size_t n, uint64_t limit)
{
	uint64_t c = 1;

	if (n > k)
		return 0;
	if (n > k - n)
		n = k - n;
	for (size_t i = 1; i <= n; i++) {
		c = c * (uint64_t)(k - n + i) / i;
		if (c > limit)
			return limit + 1;
	}
	return c;
}

/*
 * Whether the set cand (sorted by index) beats best (sorted too): by key,
 * then by indices. best_key is NULL while there is no best yet.
 */
static int beats(const int64_t *cand_key, const size_t *cand, const int64_t *best_key,
		 const size_t *best, size_t n)
{
	int c;

	if (!best_key)
		return 1;
	c = key_cmp(cand_key, best_key);
	if (c)
		return c < 0;
	for (size_t i = 0; i < n; i++)
		if (cand[i] != best[i])
			return cand[i] < best[i];
	return 0;
}

/* Weighs every n-subset of fit[0..k) (in index order); best gets the winner. */
static int search_all(const struct search *s, size_t *best, const size_t *fit, size_t k, size_t n)
{
	size_t *pos = malloc(n * sizeof(*pos)), *set = malloc(n * sizeof(*set));
	int64_t key[KEY_LEN], best_key[KEY_LEN];
	int found = 0;

	if (!pos || !set) {
		free(pos);
		free(set);
		return error_set(VD_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
		pos[i] = i;
	for (;;) {
		size_t i;

		for (i = 0; i < n; i++)
			set[i] = fit[pos[i]];
		if (set_valid(s, set, n)) {
			set_key(key, s, set, n);
			/* subsets come in lexicographic order: ties keep the first */
			if (!found || key_cmp(key, best_key) < 0) {
				memcpy(best_key, key, sizeof(key));
				memcpy(best, set, n * sizeof(*set));
				found = 1;
			}
		}
		/* the next combination */
		for (i = n; i-- > 0;)
			if (pos[i] < k - n + i)
				break;
		if (i == (size_t)-1)
			break;
		pos[i]++;
		for (size_t j = i + 1; j < n; j++)
			pos[j] = pos[j - 1] + 1;
	}
	free(pos);
	free(set);
	return found;
}

/*
 * Greedy search over fitting units (order: policy order): grows a set from
 * each seed by the nearest unit, and keeps the best set.
 */
static int search_greedy(const struct search *s, size_t *best, const size_t *order, size_t k,
			 size_t n)
{
	size_t *set = malloc(n * sizeof(*set)), *sorted = malloc(n * sizeof(*sorted));
	unsigned char *worst = malloc(k), *taken = malloc(k);
	int64_t key[KEY_LEN], best_key[KEY_LEN];
	int found = 0;

	if (!set || !sorted || !worst || !taken) {
		found = error_set(VD_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t seed = 0; seed < k; seed++) {
		size_t m = 1;

		memset(taken, 0, k);
		set[0] = order[seed];
		taken[seed] = 1;
		for (size_t j = 0; j < k; j++)
			worst[j] = (unsigned char)unit_level(s, order[seed], order[j]);
		while (m < n) {
			size_t pick = k;

			/* order is policy order: the first of the nearest wins ties */
			for (size_t j = 0; j < k; j++)
				if (!taken[j] && (pick == k || worst[j] < worst[pick]) &&
				    can_join(s, set, m, order[j]))
					pick = j;
			if (pick == k)
				break;
			taken[pick] = 1;
			set[m++] = order[pick];
			for (size_t j = 0; j < k; j++) {
				unsigned char level =
					(unsigned char)unit_level(s, order[pick], order[j]);

				if (level > worst[j])
					worst[j] = level;
			}
		}
		if (m < n)
			continue;
		memcpy(sorted, set, n * sizeof(*set));
		qsort(sorted, n, sizeof(*sorted), size_cmp);
		set_key(key, s, sorted, n);
		if (beats(key, sorted, found ? best_key : NULL, best, n)) {
			memcpy(best_key, key, sizeof(key));
			memcpy(best, sorted, n * sizeof(*sorted));
			found = 1;
		}
	}
out:
	free(set);
	free(sorted);
	free(worst);
	free(taken);
	return found;
}

/* ---- the choice --------------------------------------------------------- */

/* Makes u the device d of sys (d in sys), with no facts yet. */
static void unit_init(struct unit *u, const struct vd_system *sys, struct vd_device_ref d)
{
	const struct vd_gpu *gpu = &sys->gpus[d.gpu];

	u->ref = d;
	u->gpu = gpu;
	u->mig = d.mig >= 0 ? &gpu->mig[d.mig] : NULL;
	u->uuid = u->mig ? u->mig->uuid : gpu->uuid;
}

/* Lists every unit of sys, in index order. */
static int units_list(struct search *s)
{
	const struct vd_system *sys = s->sys;
	size_t n = system_units(sys);

	s->units = calloc(n ? n : 1, sizeof(*s->units));
	if (!s->units)
		return error_set(VD_ENOMEM, "out of memory");
	for (size_t i = 0; i < sys->ngpus; i++) {
		const struct vd_gpu *gpu = &sys->gpus[i];
		size_t nmig = gpu->mig_mode ? gpu->nmig : 0;

		for (size_t m = 0; m < (nmig ? nmig : 1); m++)
			unit_init(&s->units[s->nunits++], sys,
				  (struct vd_device_ref){ (unsigned)i, nmig ? (int)m : -1 });
	}
	return 0;
}

/* The last reason line when some units fit but no set of n does. */
static int add_shortfall(struct vd_choice *choice, const struct search *s, const size_t *fit,
			 size_t k, size_t n)
{
	const char *what = "GPU";
	char why[160] = "", line[256];

	for (size_t i = 0; i < k; i++)
		if (s->units[fit[i]].mig)
			what = "device";
	if (k >= n && system_driver_major(s->sys) < MIG_PER_GI_MAJOR)
		snprintf(why, sizeof(why),
			 ": a process can use only one MIG device, and no whole GPU beside it, "
			 "with driver %s",
			 s->sys->driver_version[0] ? s->sys->driver_version : "(unknown)");
	else if (k >= n)
		snprintf(why, sizeof(why),
			 ": a process can use only one MIG device per GPU instance");
	snprintf(line, sizeof(line), "%zu %s%s fit%s, %zu wanted%s", k, what, k == 1 ? "" : "s",
		 k == 1 ? "s" : "", n, why);
	return reason_push(choice, (struct vd_device_ref){ VD_NO_GPU, -1 },
			   k >= n ? "mig-together" : "too-few", line);
}

int vd_select(struct vd_choice **out, const struct vd_system *sys, const struct vd_leases *leases,
	      const struct vd_resolution *parent, const struct vd_select_options *opts)
{
	struct search s = { .sys = sys, .opts = opts };
	struct vd_choice *choice = NULL;
	size_t n = opts->n ? opts->n : 1, k = 0, possible = 0, *fit = NULL, *order = NULL;
	size_t *best = NULL;
	int err, found = 0;

	*out = NULL;
	for (size_t i = 0; i < opts->nexclude; i++)
		if (opts->exclude[i] >= sys->ngpus)
			return error_set(
				VD_EINVAL,
				"there is no GPU %u to exclude: this machine has %zu GPU%s; "
				"'visdev list' shows them",
				opts->exclude[i], sys->ngpus, sys->ngpus == 1 ? "" : "s");
	if (opts->model && !*opts->model)
		return error_set(VD_EINVAL,
				 "an empty model pattern would match every GPU: give part of a "
				 "name, such as A100");
	choice = calloc(1, sizeof(*choice));
	if (!choice)
		return error_set(VD_ENOMEM, "out of memory");
	err = units_list(&s);
	if (!err)
		err = link_table(&s);
	if (err)
		goto out;
	fit = malloc((s.nunits ? s.nunits : 1) * sizeof(*fit));
	order = malloc((s.nunits ? s.nunits : 1) * sizeof(*order));
	if (!fit || !order) {
		err = error_set(VD_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < s.nunits; i++) {
		weigh(&s.units[i], sys, leases, parent, opts);
		if (s.units[i].problem == FITS)
			fit[k++] = i;
		else if ((err = add_reason(choice, &s.units[i], opts)))
			goto out;
		possible += could_ever_fit(&s.units[i], opts);
	}
	choice->never = possible < n;
	memcpy(order, fit, k * sizeof(*fit));
	qsort_r(order, k, sizeof(*order), unit_cmp, &s);
	choice->fitting = malloc((k ? k : 1) * sizeof(*choice->fitting));
	if (!choice->fitting) {
		err = error_set(VD_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < k; i++)
		choice->fitting[i] = s.units[order[i]].ref;
	choice->nfitting = k;
	if (k >= n) {
		best = malloc(n * sizeof(*best));
		if (!best) {
			err = error_set(VD_ENOMEM, "out of memory");
			goto out;
		}
		if (choose_capped(k, n, SUBSET_LIMIT) <= SUBSET_LIMIT)
			found = search_all(&s, best, fit, k, n);
		else
			found = search_greedy(&s, best, order, k, n);
		if (found < 0) {
			err = found;
			goto out;
		}
	}
	if (!found) {
		if (k && (err = add_shortfall(choice, &s, fit, k, n)))
			goto out;
		if (!k)
			err = error_set(VD_ENOFIT, "no GPU fits: %zu wanted", n);
		else /* the words of the last reason line */
			err = error_set(VD_ENOFIT, "too few fit%s: %s", k >= n ? " together" : "",
					choice->reasons[choice->nreasons - 1]);
		*out = choice;
		choice = NULL;
		goto out;
	}
	qsort_r(best, n, sizeof(*best), unit_cmp, &s);
	choice->devices = malloc(n * sizeof(*choice->devices));
	if (!choice->devices) {
		err = error_set(VD_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		choice->devices[i] = s.units[best[i]].ref;
	choice->ndevices = n;
	*out = choice;
	choice = NULL;
out:
	vd_choice_free(choice);
	free(s.units);
	free(s.levels);
	free(fit);
	free(order);
	free(best);
	return err;
}

int select_within(char ***out, size_t *nout, int *all, const struct vd_system *sys,
		  const struct vd_resolution *parent, const struct vd_select_options *opts)
{
	struct search s = { .sys = sys, .opts = opts };
	int err = units_list(&s);

	*out = NULL;
	*nout = 0;
	for (size_t i = 0; !err && i < s.nunits; i++) {
		weigh(&s.units[i], sys, NULL, parent, opts);
		if (could_ever_fit(&s.units[i], opts))
			err = strings_push(out, nout, "%s", s.units[i].uuid);
	}
	*all = !err && *nout == s.nunits;
	free(s.units);
	if (err || *all) {
		vd_strings_free(*out, *nout);
		*out = NULL;
		*nout = 0;
	}
	return err;
}

int select_all_taken(const struct vd_system *sys, const struct vd_leases *leases)
{
	struct search s = { .sys = sys };
	int taken = 1;

	if (units_list(&s))
		return 0; /* out of memory: as if something were left */
	for (size_t i = 0; taken && i < s.nunits; i++) {
		struct unit *u = &s.units[i];

		if (u->gpu->lost || (u->gpu->mig_mode && !u->mig))
			continue; /* never anyone's */
		read_leases(u, leases);
		taken = has_exclusive(u);
	}
	free(s.units);
	return taken;
}

void vd_choice_free(struct vd_choice *choice)
{
	if (!choice)
		return;
	free(choice->devices);
	free(choice->fitting);
	vd_strings_free(choice->reasons, choice->nreasons);
	free(choice->why);
	free(choice);
}

/* ---- the state of one device -------------------------------------------- */

const char *vd_state_name(enum vd_state state)
{
	static const char *const names[] = { "free", "shared", "leased", "held",
					     "busy", "lost",   "mig" };

	return (unsigned)state < sizeof(names) / sizeof(names[0]) ? names[state] : NULL;
}

int vd_device_status(struct vd_device_status *out, const struct vd_system *sys,
		     const struct vd_leases *leases, struct vd_device_ref d)
{
	struct vd_select_options opts;
	struct unit u = { 0 };

	memset(out, 0, sizeof(*out));
	if (d.gpu >= sys->ngpus || d.mig < -1 ||
	    (d.mig >= 0 && (size_t)d.mig >= sys->gpus[d.gpu].nmig))
		return error_set(VD_EINVAL, "there is no device %u/%d on this machine", d.gpu,
				 d.mig);
	vd_select_options_init(&opts);
	unit_init(&u, sys, d);
	weigh(&u, sys, leases, NULL, &opts); /* as an exclusive request sees it */
	out->free_mib = u.free_mib;
	out->nleases = u.nholders;
	out->nforeign = u.nforeign;
	out->unexplained_mib = u.unexplained_mib;
	if (u.gpu->lost)
		out->state = VD_STATE_LOST;
	else if (u.gpu->mig_mode && !u.mig)
		out->state = VD_STATE_MIG;
	else if (has_exclusive(&u))
		out->state = u.holder->mode == VD_LEASE_HELD ? VD_STATE_HELD : VD_STATE_LEASED;
	else if (u.nholders)
		out->state = VD_STATE_SHARED;
	else if (at_work(&u))
		out->state = VD_STATE_BUSY;
	else
		out->state = VD_STATE_FREE;
	/* a shared request may go where it may fill the memory left: not where a lease is */
	out->reservable_mib = out->state == VD_STATE_FREE || out->state == VD_STATE_SHARED ||
					      out->state == VD_STATE_BUSY ?
				      out->free_mib :
				      0;
	return 0;
}
