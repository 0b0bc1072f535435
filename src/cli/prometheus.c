/*
 * prometheus.c - `visdev list --format prometheus`: the GPUs, their states,
 * the leases and the line as metrics in Prometheus's text exposition format,
 * for a node_exporter textfile collector. docs/prometheus.md names them.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* A label value as the format wants it: backslash, double quote and newline escaped. */
static void put_value(const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			printf("\\%c", *s);
		else if (*s == '\n')
			printf("\\n");
		else
			putchar(*s);
	}
}

/* "# HELP" and "# TYPE" of a metric: once, before its samples. */
static void header(const char *name, const char *type, const char *help)
{
	printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The labels that name a device: gpu, uuid (and gi, ci for a MIG device). */
static void device_labels(const struct vd_system *sys, struct vd_device_ref d)
{
	const struct vd_gpu *g = &sys->gpus[d.gpu];

	printf("gpu=\"%u\",uuid=\"", g->index);
	put_value(d.mig >= 0 ? g->mig[d.mig].uuid : g->uuid);
	printf("\"");
	if (d.mig >= 0)
		printf(",gi=\"%u\",ci=\"%u\"", g->mig[d.mig].gi, g->mig[d.mig].ci);
}

/* Every device of sys, MIG devices after their GPU: calls fn for each. */
typedef void (*device_fn)(const struct vd_system *sys, const struct vd_leases *leases,
			  struct vd_device_ref d);

static void each_device(const struct vd_system *sys, const struct vd_leases *leases, device_fn fn)
{
	for (size_t i = 0; i < sys->ngpus; i++) {
		fn(sys, leases, (struct vd_device_ref){ (unsigned)i, -1 });
		for (size_t m = 0; m < sys->gpus[i].nmig; m++)
			fn(sys, leases, (struct vd_device_ref){ (unsigned)i, (int)m });
	}
}

static void info(const struct vd_system *sys, const struct vd_leases *leases,
		 struct vd_device_ref d)
{
	const struct vd_gpu *g = &sys->gpus[d.gpu];

	(void)leases;
	printf("visdev_device_info{");
	device_labels(sys, d);
	printf(",name=\"");
	put_value(g->name);
	printf("\",pci_bus_id=\"");
	put_value(g->pci_bus_id);
	if (d.mig >= 0) {
		printf("\",profile=\"");
		put_value(g->mig[d.mig].profile);
	}
	printf("\"} 1\n");
}

/* One sample per device and state: 1 for the state it is in, 0 for the others. */
static void states(const struct vd_system *sys, const struct vd_leases *leases,
		   struct vd_device_ref d)
{
	struct vd_device_status st;

	if (vd_device_status(&st, sys, leases, d))
		return;
	for (int s = VD_STATE_FREE; vd_state_name((enum vd_state)s); s++) {
		printf("visdev_device_state{");
		device_labels(sys, d);
		printf(",state=\"%s\"} %d\n", vd_state_name((enum vd_state)s), s == (int)st.state);
	}
}

static void reservable(const struct vd_system *sys, const struct vd_leases *leases,
		       struct vd_device_ref d)
{
	struct vd_device_status st;

	if (vd_device_status(&st, sys, leases, d) || st.reservable_mib < 0)
		return;
	printf("visdev_device_reservable_bytes{");
	device_labels(sys, d);
	printf("} %lld\n", (long long)st.reservable_mib * 1048576);
}

static void memory(const struct vd_system *sys, const struct vd_leases *leases,
		   struct vd_device_ref d, int used)
{
	const struct vd_gpu *g = &sys->gpus[d.gpu];
	unsigned fields = d.mig >= 0 ? g->mig[d.mig].fields : g->fields;
	uint64_t v = d.mig >= 0 ? (used ? g->mig[d.mig].memory_used_mib :
					  g->mig[d.mig].memory_total_mib) :
				  (used ? g->memory_used_mib : g->memory_total_mib);

	(void)leases;
	if (!(fields & VD_GPU_MEMORY))
		return;
	printf("visdev_device_memory_%s_bytes{", used ? "used" : "total");
	device_labels(sys, d);
	printf("} %llu\n", (unsigned long long)v * 1048576);
}

static void memory_total(const struct vd_system *sys, const struct vd_leases *leases,
			 struct vd_device_ref d)
{
	memory(sys, leases, d, 0);
}

static void memory_used(const struct vd_system *sys, const struct vd_leases *leases,
			struct vd_device_ref d)
{
	memory(sys, leases, d, 1);
}

/* The GPUs' own readings, known ones only: a reading NVML did not give is no sample. */
static void readings(const struct vd_system *sys)
{
	static const struct {
		const char *name, *help;
		unsigned field;
	} what[] = {
		{ "visdev_gpu_utilization_ratio", "GPU utilisation, 0 to 1.", VD_GPU_UTILIZATION },
		{ "visdev_gpu_temperature_celsius", "GPU temperature.", VD_GPU_TEMPERATURE },
		{ "visdev_gpu_power_watts", "GPU power draw.", VD_GPU_POWER },
	};

	for (size_t k = 0; k < sizeof(what) / sizeof(what[0]); k++) {
		header(what[k].name, "gauge", what[k].help);
		for (size_t i = 0; i < sys->ngpus; i++) {
			const struct vd_gpu *g = &sys->gpus[i];

			if (!(g->fields & what[k].field))
				continue;
			printf("%s{", what[k].name);
			device_labels(sys, (struct vd_device_ref){ (unsigned)i, -1 });
			if (what[k].field == VD_GPU_UTILIZATION)
				printf("} %.2f\n", g->utilization_gpu / 100.0);
			else if (what[k].field == VD_GPU_TEMPERATURE)
				printf("} %d\n", g->temperature_c);
			else
				printf("} %.3f\n", g->power_mw / 1000.0);
		}
	}
	header("visdev_gpu_lost", "gauge", "1 when the GPU fell off the bus.");
	for (size_t i = 0; i < sys->ngpus; i++) {
		printf("visdev_gpu_lost{");
		device_labels(sys, (struct vd_device_ref){ (unsigned)i, -1 });
		printf("} %d\n", sys->gpus[i].lost);
	}
}

/* The labels that name a lease: its device (gpu and uuid where the snapshot has it), user, pid. */
static void lease_labels(const struct vd_system *sys, const struct vd_lease_holder *h)
{
	struct vd_device_ref d;

	if (sys && vd_system_find(&d, sys, h->uuid) == 0) {
		device_labels(sys, d);
	} else {
		printf("uuid=\"");
		put_value(h->uuid);
		printf("\"");
	}
	printf(",user=\"");
	put_value(h->user);
	/* with since, unique: one process may hold two shared leases on one GPU */
	printf("\",pid=\"%d\",since=\"%lld\"", (int)h->pid, (long long)h->since);
}

static void leases_metrics(const struct vd_system *sys, const struct vd_leases *leases,
			   const struct vd_audit *audit)
{
	size_t n = 0;

	header("visdev_lease_info", "gauge",
	       "A live lease: its device, holder, job and mode (1 per lease and device).");
	for (size_t i = 0; leases && i < leases->n; i++) {
		const struct vd_lease_holder *h = &leases->holders[i];

		if (h->mode == VD_LEASE_HELD)
			continue;
		n++;
		printf("visdev_lease_info{");
		lease_labels(sys, h);
		printf(",mode=\"%s\"} 1\n", h->mode == VD_LEASE_SHARED ? "shared" : "exclusive");
	}
	header("visdev_leases", "gauge", "How many leases are live.");
	printf("visdev_leases %zu\n", n);
	header("visdev_lease_quiet_seconds", "gauge",
	       "How long the audit has seen a lease's job not use its device (0: at work).");
	for (size_t i = 0; audit && i < audit->nleases; i++) {
		const struct vd_lease_audit *la = &audit->leases[i];

		if (la->use == VD_USE_UNKNOWN || (la->use != VD_USE_ACTIVE && la->quiet_s < 0))
			continue;
		printf("visdev_lease_quiet_seconds{");
		lease_labels(sys, &leases->holders[i]);
		printf("} %lld\n", la->use == VD_USE_ACTIVE ? 0LL : (long long)la->quiet_s);
	}
	header("visdev_lease_idle", "gauge",
	       "1 when a lease is idle: quiet at every look for the idle threshold.");
	for (size_t i = 0; audit && i < audit->nleases; i++) {
		if (audit->leases[i].use == VD_USE_UNKNOWN)
			continue;
		printf("visdev_lease_idle{");
		lease_labels(sys, &leases->holders[i]);
		printf("} %d\n", audit->leases[i].use == VD_USE_IDLE);
	}
}

/* The audit's findings: squatters one by one, memory nothing explains per GPU, and a count. */
static void audit_metrics(const struct vd_system *sys, const struct vd_audit *audit)
{
	static const enum vd_audit_kind kinds[] = { VD_AUDIT_SQUATTER, VD_AUDIT_UNEXPLAINED,
						    VD_AUDIT_IDLE };
	struct vd_device_ref d;

	header("visdev_audit_squatter_info", "gauge",
	       "A process on a leased GPU that is part of no job leasing it (1 each).");
	for (size_t i = 0; audit && i < audit->n; i++) {
		const struct vd_audit_finding *f = &audit->findings[i];

		if (f->kind != VD_AUDIT_SQUATTER || vd_system_find(&d, sys, f->uuid))
			continue;
		printf("visdev_audit_squatter_info{");
		device_labels(sys, d);
		printf(",pid=\"%d\",user=\"", (int)f->pid);
		put_value(f->user);
		printf("\"} 1\n");
	}
	header("visdev_audit_unexplained_bytes", "gauge",
	       "Memory in use on a leased GPU that no listed process explains.");
	for (size_t i = 0; audit && i < audit->n; i++) {
		const struct vd_audit_finding *f = &audit->findings[i];

		if (f->kind != VD_AUDIT_UNEXPLAINED || vd_system_find(&d, sys, f->uuid))
			continue;
		printf("visdev_audit_unexplained_bytes{");
		device_labels(sys, d);
		printf("} %lld\n", (long long)f->mib * 1048576);
	}
	header("visdev_audit_findings", "gauge", "How many findings of each kind the audit made.");
	for (size_t k = 0; audit && k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		size_t n = 0;

		for (size_t i = 0; i < audit->n; i++)
			n += audit->findings[i].kind == kinds[k];
		printf("visdev_audit_findings{kind=\"%s\"} %zu\n", vd_audit_kind_name(kinds[k]), n);
	}
}

static void line_metrics(const struct vd_line *line)
{
	header("visdev_waiting_requests", "gauge", "How many requests wait in line for GPUs.");
	printf("visdev_waiting_requests %zu\n", line ? line->n : 0);
	header("visdev_waiting_request_info", "gauge",
	       "A request waiting in line: its place, user, pid and how many GPUs it wants.");
	for (size_t i = 0; line && i < line->n; i++) {
		const struct vd_waiting *w = &line->waiting[i];

		printf("visdev_waiting_request_info{place=\"%u\",user=\"", w->place);
		put_value(w->user);
		printf("\",pid=\"%d\",gpus=\"%u\"} 1\n", (int)w->pid, w->n);
	}
}

void cli_print_prometheus(const struct vd_system *sys, const struct vd_leases *leases,
			  const struct vd_line *line, const struct vd_audit *audit)
{
	header("visdev_device_info", "gauge",
	       "A GPU or MIG device: its model, PCI bus id (and MIG profile); always 1.");
	each_device(sys, leases, info);
	header("visdev_device_state", "gauge",
	       "1 for the state a device is in (free, shared, leased, held, busy, lost, mig), "
	       "0 for the others.");
	each_device(sys, leases, states);
	header("visdev_device_memory_total_bytes", "gauge", "Memory of the device.");
	each_device(sys, leases, memory_total);
	header("visdev_device_memory_used_bytes", "gauge", "Memory in use on the device.");
	each_device(sys, leases, memory_used);
	header("visdev_device_reservable_bytes", "gauge",
	       "Memory a shared (--mem) request could still reserve on the device.");
	each_device(sys, leases, reservable);
	readings(sys);
	leases_metrics(sys, leases, audit);
	line_metrics(line);
	audit_metrics(sys, audit);
	fflush(stdout);
}
