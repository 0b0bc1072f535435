/*
 * cmd_list.c - `visdev list`: every GPU, its state, and how the current
 * CUDA_VISIBLE_DEVICES maps onto it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"

extern char **environ;

static const char usage[] =
	"usage: visdev list [--free] [--color WHEN] [--idle MINUTES] [--watch SECONDS]\n"
	"                   [--json | --format prometheus]\n"
	"                   [--demo | --fixture FILE | --nvml-lib PATH]\n"
	"\n"
	"Lists every GPU (and MIG device): its state, model, memory, utilisation,\n"
	"temperature, power, which cuda:N it is under the current CUDA_VISIBLE_DEVICES\n"
	"and CUDA_DEVICE_ORDER, and under it the processes (pid, user, memory, name)\n"
	"and the leases, with the audit's findings (see 'visdev leases --help').\n"
	"A state is one of:\n"
	"  free     no lease, nothing at work: any request may have it\n"
	"  shared   shared leases (--mem) only; the memory still reservable is shown\n"
	"  leased   an exclusive lease\n"
	"  held     held for a request waiting in line\n"
	"  busy     no lease, but processes visdev did not start, or memory in use\n"
	"           that nothing explains: someone's job\n"
	"  lost     fell off the bus: never chosen\n"
	"\n"
	"  --free             only what a request could have now: free devices, and\n"
	"                     shared ones with memory left (exit 3 when there is none)\n"
	"  --color WHEN       colour the states: auto (on a terminal, unless NO_COLOR\n"
	"                     is set), always or never\n"
	"  --idle MINUTES     a lease whose job has not used its GPU for this long,\n"
	"                     at every look, is idle (default 30)\n"
	"  --watch SECONDS    print it all again every SECONDS (fractions allowed), until\n"
	"                     interrupted; with --json, one object a line\n"
	"  --format prometheus  the GPUs, states, leases, line and audit as Prometheus\n"
	"                     metrics (text exposition format, for a textfile collector)\n" CLI_GLOBAL_USAGE;

/* clang-format off */
static const struct option options[] = {
	{ "free", no_argument, NULL, 'f' },
	{ "color", required_argument, NULL, 'c' },
	{ "format", required_argument, NULL, 'F' + 256 },
	{ "idle", required_argument, NULL, 'i' },
	{ "watch", required_argument, NULL, 'w' },
	CLI_GLOBAL_OPTIONS
};
/* clang-format on */

#define NAME_COLUMNS	37 /* the widest NAME column that keeps the rest within them */
#define PROCESSES_SHOWN 5  /* under a GPU; list --json has them all */
#define INDENT		"       "

/* One look at the machine, and how to show it. */
struct view {
	struct vd_system *sys;
	struct vd_resolution *res;
	struct cli_look around; /* the leases, their audit, the line */
	int w;			/* the NAME column */
	int color;		/* colour the states */
	int only_free;
	double idle; /* --idle, minutes */
};

/* A device's state, and whether --free shows it. */
struct state {
	struct vd_device_status st;
	int known; /* vd_device_status() answered */
};

static struct state device_state(const struct vd_system *sys, const struct vd_leases *leases,
				 struct vd_device_ref d)
{
	struct state s = { 0 };

	s.known = vd_device_status(&s.st, sys, leases, d) == 0;
	return s;
}

/* Whether a request could have the device now: --free shows it. */
static int state_free(const struct state *s)
{
	return s->known && (s->st.state == VD_STATE_FREE ||
			    (s->st.state == VD_STATE_SHARED && s->st.free_mib > 0));
}

/* What a --mem request could still reserve: 0 where no shared request may go. */
static json_t *json_reservable(const struct state *s)
{
	return s->known && s->st.reservable_mib >= 0 ? json_integer(s->st.reservable_mib) :
						       json_null();
}

/* "state", "reservable_mib" and "unexplained_mib" of a device. */
static void json_set_state(json_t *o, const struct state *s)
{
	json_object_set_new(o, "state",
			    s->known ? json_string(vd_state_name(s->st.state)) : json_null());
	json_object_set_new(o, "reservable_mib", json_reservable(s));
	json_object_set_new(o, "unexplained_mib",
			    s->known ? json_integer(s->st.unexplained_mib) : json_null());
}

static json_t *json_processes(const struct vd_gpu *gpu)
{
	json_t *a;

	if (!(gpu->fields & VD_GPU_PROCESSES))
		return json_null();
	a = json_array();
	for (size_t i = 0; i < gpu->nprocesses; i++) {
		const struct vd_process *p = &gpu->processes[i];

		json_array_append_new(
			a, json_pack("{s:I, s:o, s:o, s:o}", "pid", (json_int_t)p->pid, "user",
				     p->user[0] ? cli_json_str(p->user) : json_null(), "used_mib",
				     cli_json_known_int(p->used_known, (long long)p->used_mib),
				     "name", p->name[0] ? cli_json_str(p->name) : json_null()));
	}
	return a;
}

/*
 * The live leases on the device with this UUID, as JSON, each with its
 * audit (holds for the line are the line's).
 */
static json_t *json_leases(const struct view *v, const char *uuid)
{
	json_t *a = json_array();

	for (size_t i = 0; v->around.leases && i < v->around.leases->n; i++) {
		json_t *o;

		if (v->around.leases->holders[i].mode == VD_LEASE_HELD ||
		    strcmp(v->around.leases->holders[i].uuid, uuid))
			continue;
		o = cli_json_lease(&v->around.leases->holders[i]);
		json_object_set_new(o, "audit", cli_json_lease_audit(v->around.audit, i));
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *json_mig(const struct view *v, struct vd_device_ref d, const struct state *s)
{
	const struct vd_system *sys = v->sys;
	const struct vd_mig *mi = &sys->gpus[d.gpu].mig[d.mig];
	int known = mi->fields & VD_GPU_MEMORY, mc = vd_resolution_cuda(v->res, d);
	json_t *o = cli_json_device(sys, d);

	json_object_set_new(o, "memory_total_mib",
			    cli_json_known_int(known, (long long)mi->memory_total_mib));
	json_object_set_new(o, "memory_used_mib",
			    cli_json_known_int(known, (long long)mi->memory_used_mib));
	json_object_set_new(o, "memory_free_mib",
			    cli_json_known_int(known, vd_device_memory_free_mib(sys, d)));
	json_set_state(o, s);
	json_object_set_new(o, "cuda", mc < 0 ? json_null() : json_integer(mc));
	json_object_set_new(o, "leases", json_leases(v, mi->uuid));
	return o;
}

/* A GPU as JSON; NULL when only_free and nothing of it is free. */
static json_t *json_gpu(const struct view *v, size_t i)
{
	const struct vd_gpu *g = &v->sys->gpus[i];
	unsigned f = g->fields;
	int cuda = vd_resolution_cuda(v->res, (struct vd_device_ref){ (unsigned)i, -1 });
	struct state s =
		device_state(v->sys, v->around.leases, (struct vd_device_ref){ (unsigned)i, -1 });
	int only_free = v->only_free;
	json_t *o = json_object(), *mig = json_array();

	for (size_t m = 0; m < g->nmig; m++) {
		struct vd_device_ref d = { (unsigned)i, (int)m };
		struct state ms = device_state(v->sys, v->around.leases, d);

		if (!only_free || state_free(&ms))
			json_array_append_new(mig, json_mig(v, d, &ms));
	}
	if (only_free && !state_free(&s) && !json_array_size(mig)) {
		json_decref(o);
		json_decref(mig);
		return NULL;
	}
	json_object_set_new(o, "index", json_integer(g->index));
	json_object_set_new(o, "uuid", json_string(g->uuid));
	json_object_set_new(o, "name", cli_json_str(g->name));
	json_object_set_new(o, "pci_bus_id", json_string(g->pci_bus_id));
	json_object_set_new(o, "lost", json_boolean(g->lost));
	json_set_state(o, &s);
	json_object_set_new(o, "memory_total_mib",
			    cli_json_known_int(f & VD_GPU_MEMORY, (long long)g->memory_total_mib));
	json_object_set_new(o, "memory_used_mib",
			    cli_json_known_int(f & VD_GPU_MEMORY, (long long)g->memory_used_mib));
	json_object_set_new(o, "memory_free_mib",
			    cli_json_known_int(f & VD_GPU_MEMORY, vd_gpu_memory_free_mib(g)));
	json_object_set_new(o, "utilization_gpu",
			    cli_json_known_int(f & VD_GPU_UTILIZATION, g->utilization_gpu));
	json_object_set_new(o, "temperature_c",
			    cli_json_known_int(f & VD_GPU_TEMPERATURE, g->temperature_c));
	json_object_set_new(o, "power_w",
			    f & VD_GPU_POWER ? json_real(g->power_mw / 1000.0) : json_null());
	json_object_set_new(o, "numa_node", cli_json_known_int(f & VD_GPU_NUMA, g->numa_node));
	json_object_set_new(o, "cuda_rank", cli_json_known_int(f & VD_GPU_CUDA_RANK, g->cuda_rank));
	json_object_set_new(o, "processes", json_processes(g));
	json_object_set_new(o, "mig_mode", json_boolean(g->mig_mode));
	json_object_set_new(o, "mig", mig);
	json_object_set_new(o, "cuda", cuda < 0 ? json_null() : json_integer(cuda));
	json_object_set_new(o, "leases", json_leases(v, g->uuid));
	return o;
}

/*
 * Prints the JSON (on one line with compact); returns EXIT_NONE when
 * only_free finds nothing free.
 */
static int print_json(const struct view *v, int compact)
{
	json_t *root = json_object(), *gpus = json_array(), *links = json_array();
	const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
	const struct vd_system *sys = v->sys;
	int rc;

	json_object_set_new(root, "driver_version",
			    sys->driver_version[0] ? json_string(sys->driver_version) :
						     json_null());
	json_object_set_new(
		root, "cuda_driver_version",
		cli_json_known_int(sys->cuda_driver_version >= 0, sys->cuda_driver_version));
	for (size_t i = 0; i < sys->ngpus; i++) {
		json_t *gpu = json_gpu(v, i);

		if (gpu)
			json_array_append_new(gpus, gpu);
	}
	json_object_set_new(root, "gpus", gpus);
	for (size_t i = 0; i < sys->nlinks; i++)
		json_array_append_new(links, json_pack("{s:i, s:i, s:s}", "a", (int)sys->links[i].a,
						       "b", (int)sys->links[i].b, "level",
						       vd_link_level_name(sys->links[i].level)));
	json_object_set_new(root, "links", links);
	json_object_set_new(root, "cuda_visible_devices", cvd ? cli_json_str(cvd) : json_null());
	json_object_set_new(root, "order", json_string(vd_order_name(v->res->order)));
	json_object_set_new(root, "warnings", cli_json_warnings(v->res, 1));
	json_object_set_new(root, "line", cli_json_line(v->around.line, sys));
	json_object_set_new(root, "idle_minutes", json_real(v->idle));
	json_object_set_new(root, "audit", cli_json_audit(v->around.audit, sys, v->around.leases));
	rc = v->only_free && !json_array_size(gpus) ? EXIT_NONE : EXIT_OK;
	if (!compact)
		return cli_print_json(root) ? EXIT_FAIL : rc;
	if (json_dumpf(root, stdout, JSON_COMPACT | JSON_REAL_PRECISION(9)) < 0)
		rc = EXIT_FAIL;
	fputc('\n', stdout);
	json_decref(root);
	return rc;
}

/* One line under a device, indented, cut to fit the table. */
static void print_under(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void print_under(const char *fmt, ...)
{
	char line[512], shown[CLI_COLUMNS + 8];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	cli_printf(INDENT "%s\n", cli_cut(shown, sizeof(shown), line, CLI_COLUMNS - 7));
}

/* "12.3 / 32.0 GiB", right-aligned, or "?" when unknown. */
static void format_memory(char *buf, size_t n, unsigned known, uint64_t used, uint64_t total)
{
	if (!known)
		snprintf(buf, n, "?");
	else
		snprintf(buf, n, "%5.1f / %5.1f GiB", used / 1024.0, total / 1024.0);
}

/* "cuda:N", "dropped" (named, but the MIG rules leave it out) or "hidden". */
static void format_cuda(char *buf, size_t n, const struct vd_resolution *res,
			struct vd_device_ref d)
{
	int cuda = vd_resolution_cuda(res, d);

	if (cuda >= 0)
		snprintf(buf, n, "cuda:%d", cuda);
	else if (vd_resolution_dropped(res, d))
		snprintf(buf, n, "dropped");
	else
		snprintf(buf, n, "hidden");
}

/* The processes on a GPU, one line each: pid, user, memory, name. */
static void print_processes(const struct vd_gpu *g)
{
	for (size_t i = 0; (g->fields & VD_GPU_PROCESSES) && i < g->nprocesses; i++) {
		const struct vd_process *p = &g->processes[i];
		char mem[24], user[16];

		if (i == PROCESSES_SHOWN) {
			print_under("and %zu more processes ('visdev list --json' has them all)",
				    g->nprocesses - i);
			return;
		}
		if (p->used_known)
			snprintf(mem, sizeof(mem), "%.1f GiB", p->used_mib / 1024.0);
		else
			snprintf(mem, sizeof(mem), "?");
		print_under("pid %-8u %-12s %9s  %s", p->pid,
			    p->user[0] ? cli_cut(user, sizeof(user), p->user, 12) : "?", mem,
			    p->name[0] ? p->name : "?");
	}
}

/*
 * One line under a device for each lease on it (and a second when the
 * audit saw it quiet or idle), and what is left to share.
 */
static void print_leases(const struct view *v, const char *uuid, const struct state *s)
{
	const struct vd_leases *leases = v->around.leases;

	for (size_t i = 0; leases && i < leases->n; i++) {
		const struct vd_lease_holder *h = &leases->holders[i];
		const struct vd_lease_audit *la =
			v->around.audit ? &v->around.audit->leases[i] : NULL;
		char since[32], use[32];

		if (strcmp(h->uuid, uuid) || h->mode == VD_LEASE_HELD)
			continue;
		vd_format_time(since, sizeof(since), h->since);
		if (h->mode == VD_LEASE_SHARED)
			print_under("leased by %s (pid %d, %s) since %s, sharing %.1f GiB", h->user,
				    (int)h->pid, h->command, since, h->mem_mib / 1024.0);
		else
			print_under("leased by %s (pid %d, %s) since %s", h->user, (int)h->pid,
				    h->command, since);
		cli_lease_use(use, sizeof(use), v->around.audit, i);
		if (la && (la->use == VD_USE_QUIET || la->use == VD_USE_IDLE) && la->quiet_s >= 0)
			print_under("%s: nothing of its job at work on it at any look since", use);
	}
	if (s->known && s->st.state == VD_STATE_SHARED && s->st.free_mib >= 0)
		print_under("%.1f GiB still reservable by --mem jobs", s->st.free_mib / 1024.0);
	if (s->known && s->st.unexplained_mib > 1024)
		print_under("%.1f GiB in use that no lease and no listed process explains",
			    s->st.unexplained_mib / 1024.0);
}

/* The SGR colour of a state: green free, yellow leased or held, red busy or lost. */
static const char *state_color(const struct state *s)
{
	static const char *const sgr[] = {
		[VD_STATE_FREE] = "32", [VD_STATE_SHARED] = "36", [VD_STATE_LEASED] = "33",
		[VD_STATE_HELD] = "33", [VD_STATE_BUSY] = "31",	  [VD_STATE_LOST] = "1;31",
		[VD_STATE_MIG] = NULL,
	};

	return s->known ? sgr[s->st.state] : NULL;
}

/* A row: index (or blank), name, state, and the rest of the columns as given. */
static void print_row(const struct view *t, const char *index, const char *name,
		      const struct state *s, const char *rest)
{
	char shown[NAME_COLUMNS + 8];

	cli_printf("%3s  %-*s  ", index, t->w, cli_cut(shown, sizeof(shown), name, t->w));
	cli_print_colored(t->color, state_color(s), 6, s->known ? vd_state_name(s->st.state) : "?");
	cli_printf("  %s\n", rest);
}

static void print_gpu(const struct view *t, size_t i)
{
	const struct vd_gpu *g = &t->sys->gpus[i];
	struct vd_device_ref ref = { (unsigned)i, -1 };
	struct state s = device_state(t->sys, t->around.leases, ref);
	char index[16], mem[48], util[8], temp[8], power[16], cuda[16], rest[128];

	snprintf(index, sizeof(index), "%u", g->index);
	format_cuda(cuda, sizeof(cuda), t->res, ref);
	if (g->lost) {
		snprintf(rest, sizeof(rest), "%17s  %4s  %4s  %5s  %s", "-", "-", "-", "-", cuda);
		print_row(t, index, g->name[0] ? g->name : g->uuid, &s, rest);
		print_under("fell off the bus: never chosen (a reset or a reboot brings it back)");
		return;
	}
	format_memory(mem, sizeof(mem), g->fields & VD_GPU_MEMORY, g->memory_used_mib,
		      g->memory_total_mib);
	snprintf(util, sizeof(util), g->fields & VD_GPU_UTILIZATION ? "%u%%" : "?",
		 g->utilization_gpu);
	snprintf(temp, sizeof(temp), g->fields & VD_GPU_TEMPERATURE ? "%dC" : "?",
		 g->temperature_c);
	snprintf(power, sizeof(power), g->fields & VD_GPU_POWER ? "%u W" : "?",
		 (g->power_mw + 500) / 1000);
	snprintf(rest, sizeof(rest), "%17s  %4s  %4s  %5s  %s", mem, util, temp, power,
		 g->mig_mode && !vd_resolution_dropped(t->res, ref) ? "MIG mode" : cuda);
	print_row(t, index, g->name, &s, rest);
	print_processes(g);
	print_leases(t, g->uuid, &s);
	for (size_t m = 0; m < g->nmig; m++) {
		const struct vd_mig *mi = &g->mig[m];
		struct vd_device_ref d = { (unsigned)i, (int)m };
		struct state ms = device_state(t->sys, t->around.leases, d);
		char label[96];

		if (t->only_free && !state_free(&ms))
			continue;
		label[0] = label[1] = ' ';
		cli_mig_label(label + 2, sizeof(label) - 2, mi);
		format_memory(mem, sizeof(mem), mi->fields & VD_GPU_MEMORY, mi->memory_used_mib,
			      mi->memory_total_mib);
		format_cuda(cuda, sizeof(cuda), t->res, d);
		snprintf(rest, sizeof(rest), "%17s  %4s  %4s  %5s  %s", mem, "", "", "", cuda);
		print_row(t, "", label, &ms, rest);
		print_under("%s", mi->uuid);
		print_leases(t, mi->uuid, &ms);
	}
}

/* Whether --free shows GPU i: it, or one of its MIG devices, is free. */
static int gpu_shown(const struct view *t, size_t i)
{
	const struct vd_gpu *g = &t->sys->gpus[i];
	struct state s =
		device_state(t->sys, t->around.leases, (struct vd_device_ref){ (unsigned)i, -1 });

	if (!t->only_free || state_free(&s))
		return 1;
	for (size_t m = 0; m < g->nmig; m++) {
		s = device_state(t->sys, t->around.leases,
				 (struct vd_device_ref){ (unsigned)i, (int)m });
		if (state_free(&s))
			return 1;
	}
	return 0;
}

/* The table; returns how many GPUs it showed. */
static size_t print_table(const struct view *t)
{
	size_t shown = 0;

	for (size_t i = 0; i < t->sys->ngpus; i++) {
		if (!gpu_shown(t, i))
			continue;
		if (!shown++)
			cli_printf("GPU  %-*s  %-6s  %-17s  %4s  %4s  %5s  %s\n", t->w, "NAME",
				   "STATE", "MEMORY USED/TOTAL", "UTIL", "TEMP", "POWER", "CUDA");
		print_gpu(t, i);
	}
	return shown;
}

/* Whether a GPU of sys is in MIG mode, so that CUDA's devices are not all GPUs. */
static int system_has_mig(const struct vd_system *sys)
{
	for (size_t i = 0; i < sys->ngpus; i++)
		if (sys->gpus[i].mig_mode)
			return 1;
	return 0;
}

/* One line on how the environment maps onto the GPUs. */
static void print_mapping(const struct vd_system *sys, const struct vd_resolution *res)
{
	const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
	const char *order = getenv("CUDA_DEVICE_ORDER");

	if (sys->ngpus)
		cli_printf("\n");
	if (!cvd && !sys->ngpus)
		cli_printf("CUDA_VISIBLE_DEVICES is unset, and there is no GPU for CUDA to see");
	else if (!cvd && sys->ngpus == 1 && !system_has_mig(sys))
		cli_printf("CUDA_VISIBLE_DEVICES is unset: CUDA sees the one GPU");
	else if (!cvd && !system_has_mig(sys))
		cli_printf("CUDA_VISIBLE_DEVICES is unset: CUDA sees all %zu GPUs", sys->ngpus);
	else if (!cvd)
		cli_printf("CUDA_VISIBLE_DEVICES is unset: CUDA sees %zu of %zu devices",
			   res->ndevices, res->ndevices + res->ndropped);
	else if (system_has_mig(sys))
		cli_printf("CUDA_VISIBLE_DEVICES=%s: CUDA sees %zu device%s", cvd, res->ndevices,
			   res->ndevices == 1 ? "" : "s");
	else
		cli_printf("CUDA_VISIBLE_DEVICES=%s: CUDA sees %zu of %zu GPUs", cvd, res->ndevices,
			   sys->ngpus);
	if (!sys->ngpus) {
		cli_printf("\n");
		return;
	}
	cli_printf(", numbered %s (CUDA_DEVICE_ORDER%s%s)\n",
		   res->order == VD_ORDER_PCI ? "in PCI bus order, as above" : "fastest first",
		   order ? "=" : " unset", order ? order : "");
	if (res->ndropped || (cvd && (res->stop || res->duplicate)))
		cli_printf("'visdev map' explains how CUDA reads the value\n");
}

/* Looks at the machine through backend b: v's snapshot, leases, line and audit. */
static int look(struct view *v, struct vd_backend *b)
{
	int err = vd_backend_snapshot(&v->sys, b), rc;
	char note[1024];

	if (err)
		return cli_library_error(err);
	rc = cli_resolve_env(&v->res, v->sys, 0);
	if (rc)
		return rc;
	/* the GPUs are worth listing even when the lease directory cannot be read */
	cli_look_around(&v->around, v->sys, v->idle, note, sizeof(note));
	cli_print_note(note);
	return EXIT_OK;
}

static void forget(struct view *v)
{
	cli_look_release(&v->around);
	vd_resolution_free(v->res);
	vd_system_free(v->sys);
	v->res = NULL;
	v->sys = NULL;
}

/* The table and all under it, for people. */
static int print_text(struct view *v)
{
	char **notes = NULL;
	size_t nnotes = 0;
	int rc = EXIT_OK;

	v->w = cli_name_width(v->sys);
	if (v->w > NAME_COLUMNS)
		v->w = NAME_COLUMNS;
	if (!print_table(v)) { /* no GPU, or none free */
		if (!v->sys->ngpus)
			cli_printf("no GPU found\n");
		else
			cli_printf("no GPU is free now: 'visdev list' shows who has them, and "
				   "'visdev run --wait' waits in line for one\n");
		if (v->only_free)
			rc = EXIT_NONE;
	}
	if (v->only_free)
		return rc;
	cli_print_audit(v->around.audit, v->sys, v->around.leases);
	cli_print_line(v->around.line, v->sys);
	print_mapping(v->sys, v->res);
	cli_print_notes(v->res->warnings, v->res->nwarnings);
	if (vd_env_check(&notes, &nnotes, environ) == 0)
		cli_print_notes(notes, nnotes);
	vd_strings_free(notes, nnotes);
	return rc;
}

int cmd_list(int argc, char **argv)
{
	struct cli_globals g = { 0 };
	struct vd_backend *b = NULL;
	struct view v = { .idle = CLI_IDLE_DEFAULT };
	const char *color = NULL;
	double watch = 0;
	int rc, opt, prometheus = 0;

	while ((opt = cli_getopt(argc, argv, "h", options)) != -1) {
		if (opt == 'f')
			v.only_free = 1;
		else if (opt == 'c')
			color = optarg;
		else if (opt == 'i' && cli_parse_idle(&v.idle, optarg))
			return EXIT_USAGE;
		else if (opt == 'w' && cli_parse_seconds(&watch, "--watch", optarg, 0.1, 86400))
			return EXIT_USAGE;
		else if (opt == 'F' + 256 && !strcmp(optarg, "prometheus"))
			prometheus = 1;
		else if (opt == 'F' + 256)
			return cli_usage(argv[0],
					 "--format takes prometheus, not '%s' (and --json "
					 "gives JSON)",
					 optarg);
		else if (opt != 'i' && opt != 'w' && !cli_global_option(&g, opt, optarg))
			return EXIT_USAGE;
	}
	if (cli_wants_help(&g, usage))
		return EXIT_OK;
	if (optind < argc)
		return cli_usage(argv[0], "list takes no arguments ('%s' given)", argv[optind]);
	if (prometheus && (g.json || v.only_free))
		return cli_usage(argv[0],
				 "--format prometheus describes every device: not with "
				 "%s",
				 g.json ? "--json" : "--free");
	if (prometheus && watch > 0)
		return cli_usage(argv[0], "--format prometheus is read by a collector, not "
					  "watched: run it from cron instead of --watch");
	v.color = cli_color_choice(argv[0], color);
	if (v.color < 0)
		return EXIT_USAGE;
	rc = cli_backend(&b, &g);
	if (rc)
		return rc;
	for (;;) {
		if (watch > 0 && !g.json) {
			char now[32];

			vd_format_time(now, sizeof(now), (int64_t)time(NULL));
			cli_printf("-- %s, every %gs --\n", now, watch);
		}
		rc = look(&v, b);
		if (rc == EXIT_OK && g.json)
			rc = print_json(&v, watch > 0);
		else if (rc == EXIT_OK && prometheus)
			cli_print_prometheus(v.sys, v.around.leases, v.around.line, v.around.audit);
		else if (rc == EXIT_OK)
			rc = print_text(&v);
		forget(&v);
		if (watch <= 0)
			break;
		/* a look that failed (NVML erred for a moment) is said, and the next one made */
		if (!g.json)
			cli_printf("\n");
		/* nobody reads any more (the other end of a pipe is gone): stop */
		if (fflush(stdout) || ferror(stdout))
			break;
		nanosleep(&(struct timespec){ (time_t)watch,
					      (long)((watch - (double)(time_t)watch) * 1e9) },
			  NULL);
	}
	vd_backend_free(b);
	return rc;
}
