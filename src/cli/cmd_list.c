/*
 * cmd_list.c - `visdev list`: every GPU, its state, and how the current
 * CUDA_VISIBLE_DEVICES maps onto it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

extern char **environ;

static const char usage[] =
	"usage: visdev list [--json] [--demo | --fixture FILE | --nvml-lib PATH]\n"
	"\n"
	"Lists every GPU (and MIG instance): index, model, memory, utilisation,\n"
	"temperature, power, processes, and which cuda:N it is under the current\n"
	"CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER.\n"
	"\n" CLI_GLOBAL_USAGE;

static json_t *json_processes(const struct vd_gpu *gpu)
{
	json_t *a;

	if (!(gpu->fields & VD_GPU_PROCESSES))
		return json_null();
	a = json_array();
	for (size_t i = 0; i < gpu->nprocesses; i++) {
		const struct vd_process *p = &gpu->processes[i];

		json_array_append_new(
			a, json_pack("{s:I, s:o, s:o}", "pid", (json_int_t)p->pid, "used_mib",
				     cli_json_known_int(p->used_known, (long long)p->used_mib),
				     "name", p->name[0] ? cli_json_str(p->name) : json_null()));
	}
	return a;
}

/* The live leases on the device with this UUID, as JSON. */
static json_t *json_leases(const struct vd_leases *leases, const char *uuid)
{
	json_t *a = json_array();

	for (size_t i = 0; leases && i < leases->n; i++)
		if (!strcmp(leases->holders[i].uuid, uuid))
			json_array_append_new(a, cli_json_lease(&leases->holders[i]));
	return a;
}

static json_t *json_gpu(const struct vd_system *sys, const struct vd_resolution *res,
			const struct vd_leases *leases, size_t i)
{
	const struct vd_gpu *g = &sys->gpus[i];
	unsigned f = g->fields;
	int cuda = vd_resolution_cuda(res, (struct vd_device_ref){ (unsigned)i, -1 });
	json_t *o = json_object(), *mig = json_array();

	json_object_set_new(o, "index", json_integer(g->index));
	json_object_set_new(o, "uuid", json_string(g->uuid));
	json_object_set_new(o, "name", cli_json_str(g->name));
	json_object_set_new(o, "pci_bus_id", json_string(g->pci_bus_id));
	json_object_set_new(o, "lost", json_boolean(g->lost));
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
	for (size_t m = 0; m < g->nmig; m++) {
		const struct vd_mig *mi = &g->mig[m];
		int mc = vd_resolution_cuda(res, (struct vd_device_ref){ (unsigned)i, (int)m });
		int known = mi->fields & VD_GPU_MEMORY;

		json_array_append_new(
			mig,
			json_pack("{s:s, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o}", "uuid", mi->uuid,
				  "gi", (json_int_t)mi->gi, "ci", (json_int_t)mi->ci, "profile",
				  cli_json_profile(mi), "memory_total_mib",
				  cli_json_known_int(known, (long long)mi->memory_total_mib),
				  "memory_used_mib",
				  cli_json_known_int(known, (long long)mi->memory_used_mib),
				  "memory_free_mib",
				  cli_json_known_int(
					  known, vd_device_memory_free_mib(
							 sys, (struct vd_device_ref){ (unsigned)i,
										      (int)m })),
				  "cuda", mc < 0 ? json_null() : json_integer(mc), "leases",
				  json_leases(leases, mi->uuid)));
	}
	json_object_set_new(o, "mig", mig);
	json_object_set_new(o, "cuda", cuda < 0 ? json_null() : json_integer(cuda));
	json_object_set_new(o, "leases", json_leases(leases, g->uuid));
	return o;
}

static int print_json(const struct vd_system *sys, const struct vd_resolution *res,
		      const struct vd_leases *leases, const struct vd_line *line)
{
	json_t *root = json_object(), *gpus = json_array(), *links = json_array();
	const char *cvd = getenv("CUDA_VISIBLE_DEVICES");

	json_object_set_new(root, "driver_version",
			    sys->driver_version[0] ? json_string(sys->driver_version) :
						     json_null());
	json_object_set_new(
		root, "cuda_driver_version",
		cli_json_known_int(sys->cuda_driver_version >= 0, sys->cuda_driver_version));
	for (size_t i = 0; i < sys->ngpus; i++)
		json_array_append_new(gpus, json_gpu(sys, res, leases, i));
	json_object_set_new(root, "gpus", gpus);
	for (size_t i = 0; i < sys->nlinks; i++)
		json_array_append_new(links, json_pack("{s:i, s:i, s:s}", "a", (int)sys->links[i].a,
						       "b", (int)sys->links[i].b, "level",
						       vd_link_level_name(sys->links[i].level)));
	json_object_set_new(root, "links", links);
	json_object_set_new(root, "cuda_visible_devices", cvd ? cli_json_str(cvd) : json_null());
	json_object_set_new(root, "order", json_string(vd_order_name(res->order)));
	json_object_set_new(root, "line", cli_json_line(line, sys));
	return cli_print_json(root);
}

/* "12.3 / 32.0 GiB", or "?" when unknown. */
static void format_memory(char *buf, size_t n, unsigned known, uint64_t used, uint64_t total)
{
	if (!known)
		snprintf(buf, n, "?");
	else
		snprintf(buf, n, "%.1f / %.1f GiB", used / 1024.0, total / 1024.0);
}

/* "2: python, train.py", "-" for none, "?" when unknown. */
static void format_processes(char *buf, size_t n, const struct vd_gpu *g)
{
	size_t len;

	if (!(g->fields & VD_GPU_PROCESSES)) {
		snprintf(buf, n, "?");
		return;
	}
	if (!g->nprocesses) {
		snprintf(buf, n, "-");
		return;
	}
	len = (size_t)snprintf(buf, n, "%zu:", g->nprocesses);
	for (size_t i = 0; i < g->nprocesses && i < 2 && len < n; i++)
		len += (size_t)snprintf(buf + len, n - len, "%s %s", i ? "," : "",
					g->processes[i].name[0] ? g->processes[i].name : "?");
	if (g->nprocesses > 2 && len < n)
		snprintf(buf + len, n - len, ", ...");
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

/* One line under a device for each lease on it. */
static void print_leases(const struct vd_leases *leases, const char *uuid)
{
	for (size_t i = 0; leases && i < leases->n; i++) {
		const struct vd_lease_holder *h = &leases->holders[i];
		char since[32];

		if (strcmp(h->uuid, uuid))
			continue;
		vd_format_time(since, sizeof(since), h->since);
		if (h->mode == VD_LEASE_SHARED)
			cli_printf("       leased by %s (pid %d, %s) since %s, sharing %.1f GiB\n",
				   h->user, (int)h->pid, h->command, since, h->mem_mib / 1024.0);
		else
			cli_printf("       leased by %s (pid %d, %s) since %s\n", h->user,
				   (int)h->pid, h->command, since);
	}
}

static void print_table(const struct vd_system *sys, const struct vd_resolution *res,
			const struct vd_leases *leases)
{
	int w = cli_name_width(sys);

	cli_printf("GPU  %-*s  %-17s  %4s  %4s  %5s  %-20s  %s\n", w, "NAME", "MEMORY USED/TOTAL",
		   "UTIL", "TEMP", "POWER", "PROCESSES", "CUDA");
	for (size_t i = 0; i < sys->ngpus; i++) {
		const struct vd_gpu *g = &sys->gpus[i];
		struct vd_device_ref ref = { (unsigned)i, -1 };
		char mem[48], util[8], temp[8], power[16], procs[64], cuda[16];

		format_cuda(cuda, sizeof(cuda), res, ref);
		if (g->lost) {
			cli_printf("%3u  %-*s  lost: fell off the bus, never chosen  %s\n",
				   g->index, w, g->name[0] ? g->name : g->uuid, cuda);
			continue;
		}
		format_memory(mem, sizeof(mem), g->fields & VD_GPU_MEMORY, g->memory_used_mib,
			      g->memory_total_mib);
		snprintf(util, sizeof(util), g->fields & VD_GPU_UTILIZATION ? "%u%%" : "?",
			 g->utilization_gpu);
		snprintf(temp, sizeof(temp), g->fields & VD_GPU_TEMPERATURE ? "%dC" : "?",
			 g->temperature_c);
		snprintf(power, sizeof(power), g->fields & VD_GPU_POWER ? "%u W" : "?",
			 (g->power_mw + 500) / 1000);
		format_processes(procs, sizeof(procs), g);
		cli_printf("%3u  %-*s  %-17s  %4s  %4s  %5s  %-20s  %s\n", g->index, w, g->name,
			   mem, util, temp, power, procs,
			   g->mig_mode && !vd_resolution_dropped(res, ref) ? "MIG mode" : cuda);
		print_leases(leases, g->uuid);
		for (size_t m = 0; m < g->nmig; m++) {
			const struct vd_mig *mi = &g->mig[m];
			char label[96];

			snprintf(label, sizeof(label), "  MIG %s gi %u ci %u", mi->profile, mi->gi,
				 mi->ci);
			format_memory(mem, sizeof(mem), mi->fields & VD_GPU_MEMORY,
				      mi->memory_used_mib, mi->memory_total_mib);
			format_cuda(cuda, sizeof(cuda), res,
				    (struct vd_device_ref){ (unsigned)i, (int)m });
			cli_printf("%3s  %-*s  %-17s  %4s  %4s  %5s  %-20s  %s\n", "", w, label,
				   mem, "", "", "", mi->uuid, cuda);
			print_leases(leases, mi->uuid);
		}
	}
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

int cmd_list(int argc, char **argv)
{
	struct cli_globals g = { 0 };
	struct vd_system *sys = NULL;
	struct vd_resolution *res = NULL;
	struct vd_leases *leases = NULL;
	struct vd_line *line = NULL;
	char **notes = NULL;
	size_t nnotes = 0;
	int rc, lease_err;

	rc = cli_parse_plain(&g, argc, argv, usage);
	if (rc >= 0)
		return rc;
	rc = cli_snapshot(&sys, &g);
	if (rc)
		return rc;
	rc = cli_resolve_env(&res, sys, 0);
	if (rc)
		goto out;
	/* the GPUs are worth listing even when the lease directory cannot be read */
	lease_err = vd_leases_read(&leases, cli_lease_dir(), sys);
	if (lease_err)
		cli_error("leases unknown: %s", vd_error_last());
	else
		line = cli_line(sys, leases);
	if (g.json) {
		rc = print_json(sys, res, leases, line);
		goto out;
	}
	if (sys->ngpus)
		print_table(sys, res, leases);
	else
		cli_printf("no GPU found\n");
	cli_print_line(line, sys);
	print_mapping(sys, res);
	cli_print_notes(res->warnings, res->nwarnings);
	if (vd_env_check(&notes, &nnotes, environ) == 0)
		cli_print_notes(notes, nnotes);
	vd_strings_free(notes, nnotes);
out:
	vd_line_free(line);
	vd_leases_free(leases);
	vd_resolution_free(res);
	vd_system_free(sys);
	return rc;
}
