/*
 * cmd_leases.c - `visdev leases`: who holds which GPU now, and whether
 * anyone misuses one (the audit).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const char usage[] =
	"usage: visdev leases [--audit] [--idle MINUTES] [--json]\n"
	"                     [--demo | --fixture FILE | --nvml-lib PATH]\n"
	"\n"
	"Lists the live leases in the lease directory (VISDEV_LEASE_DIR, default\n" VD_LEASE_DIR_DEFAULT
	"): the device, who holds it, the job's pid and command, since when,\n"
	"whether exclusively or as a share of its memory, and its use (USE): active,\n"
	"quiet or idle, or squatted; then the requests waiting in line, first first;\n"
	"then what the audit found: squatters (processes on a leased GPU that are\n"
	"part of no job leasing it), memory there that no listed process explains,\n"
	"and idle leases.\n"
	"\n"
	"  --audit            only the audit's findings; exit 1 when there is one\n"
	"                     (for an administrator's cron job)\n"
	"  --idle MINUTES     a lease whose job has not used its GPU for this long,\n"
	"                     at every look, is idle (default 30)\n" CLI_GLOBAL_USAGE;

/* clang-format off */
static const struct option options[] = {
	{ "audit", no_argument, NULL, 'a' },
	{ "idle", required_argument, NULL, 'i' },
	CLI_GLOBAL_OPTIONS
};
/* clang-format on */

/* "GPU 2", "GPU 4 gi 1 ci 0", or the UUID when the device is not in the snapshot. */
static void device_label(char *buf, size_t n, const struct vd_system *sys, const char *uuid,
			 int *index)
{
	struct vd_device_ref d;

	*index = -1;
	if (!sys || vd_system_find(&d, sys, uuid)) {
		snprintf(buf, n, "%s", uuid);
		return;
	}
	*index = (int)d.gpu;
	cli_device_short(buf, n, sys, d);
}

/* The leases as a table, the command cut to fit. */
static void print_leases(const struct vd_leases *leases, const struct vd_system *sys,
			 const struct vd_audit *audit)
{
	static const struct cli_column columns[] = {
		{ "DEVICE", 18, 0 }, { "USER", 10, 0 }, { "PID", 7, 1 },     { "SINCE", 25, 0 },
		{ "MODE", 15, 0 },   { "USE", 12, 0 },	{ "COMMAND", 0, 0 },
	};
	struct cli_table t;

	cli_table_init(&t, columns, sizeof(columns) / sizeof(columns[0]));
	for (size_t i = 0; i < leases->n; i++) {
		const struct vd_lease_holder *h = &leases->holders[i];
		char label[VD_UUID_MAX + 32], since[32], mode[32], pid[16], use[32];
		int index;

		device_label(label, sizeof(label), sys, h->uuid, &index);
		vd_format_time(since, sizeof(since), h->since);
		if (h->mode == VD_LEASE_SHARED)
			snprintf(mode, sizeof(mode), "shared %.1f GiB", h->mem_mib / 1024.0);
		else
			snprintf(mode, sizeof(mode), "exclusive");
		snprintf(pid, sizeof(pid), "%d", (int)h->pid);
		cli_lease_use(use, sizeof(use), audit, i);
		if (cli_table_add(&t, label, h->user, pid, since, mode, use, h->command))
			cli_error(
				"out of memory: the table lacks a lease; see 'visdev leases --json'");
	}
	cli_table_print(&t);
	cli_table_release(&t);
}

/* The audit's findings alone: none is a line that says so. */
static int print_audit_only(const struct vd_audit *audit, const struct vd_system *sys,
			    const struct vd_leases *leases, double idle)
{
	if (!audit)
		return EXIT_FAIL;
	if (!audit->n) {
		cli_printf("no squatter, no unexplained memory, no lease idle for %g minutes, in "
			   "%zu lease%s\n",
			   idle, leases->n, leases->n == 1 ? "" : "s");
		return EXIT_OK;
	}
	cli_print_audit(audit, sys, leases);
	return EXIT_FAIL;
}

int cmd_leases(int argc, char **argv)
{
	struct cli_globals g = { 0 };
	struct vd_backend_options bopts;
	struct vd_backend *b = NULL;
	struct vd_system *sys = NULL;
	struct vd_leases *leases = NULL;
	struct vd_line *line = NULL;
	struct vd_audit *audit = NULL;
	double idle = CLI_IDLE_DEFAULT;
	int err, rc, opt, audit_only = 0;

	while ((opt = cli_getopt(argc, argv, "h", options)) != -1) {
		if (opt == 'a')
			audit_only = 1;
		else if (opt == 'i' && cli_parse_idle(&idle, optarg))
			return EXIT_USAGE;
		else if (opt != 'i' && !cli_global_option(&g, opt, optarg))
			return EXIT_USAGE;
	}
	if (cli_wants_help(&g, usage))
		return EXIT_OK;
	if (optind < argc)
		return cli_usage(argv[0], "leases takes no arguments ('%s' given)", argv[optind]);
	rc = EXIT_OK;
	/* GPU indices are a nicety here: without a backend, devices are shown by UUID */
	bopts = g.backend;
	bopts.use_env = 1;
	err = vd_backend_open(&b, &bopts);
	if (!err)
		err = vd_backend_snapshot(&sys, b);
	vd_backend_free(b);
	/* the audit needs the GPUs' processes: without them it has nothing to say */
	if (err && audit_only) {
		rc = cli_library_error(err);
		goto out;
	}
	err = vd_leases_read(&leases, cli_lease_dir(), sys);
	if (err) {
		rc = cli_library_error(err);
		goto out;
	}
	audit = cli_audit(sys, leases, idle);
	if (audit_only && !g.json) {
		rc = print_audit_only(audit, sys, leases, idle);
		goto out;
	}
	line = cli_line(sys, leases);
	if (g.json) {
		json_t *a = json_array();

		for (size_t i = 0; i < leases->n; i++) {
			const struct vd_lease_holder *h = &leases->holders[i];
			json_t *o = cli_json_lease(h);
			char label[VD_UUID_MAX + 32];
			int index;

			device_label(label, sizeof(label), sys, h->uuid, &index);
			json_object_set_new(o, "uuid", json_string(h->uuid));
			json_object_set_new(o, "index",
					    index < 0 ? json_null() : json_integer(index));
			json_object_set_new(o, "audit", cli_json_lease_audit(audit, i));
			json_array_append_new(a, o);
		}
		if (cli_print_json(json_pack("{s:s, s:o, s:o, s:o, s:f, s:o}", "lease_dir",
					     cli_lease_dir(), "leases", a, "line",
					     cli_json_line(line, sys), "line_ignored",
					     cli_json_line_ignored(line), "idle_minutes", idle,
					     "audit", cli_json_audit(audit, sys, leases))))
			rc = EXIT_FAIL;
		else if (audit_only)
			rc = audit && !audit->n ? EXIT_OK : EXIT_FAIL;
		goto out;
	}
	if (!leases->n) {
		cli_printf("no leases in %s\n", cli_lease_dir());
		cli_print_line(line, sys);
		goto out;
	}
	print_leases(leases, sys, audit);
	cli_print_line(line, sys);
	cli_print_audit(audit, sys, leases);
out:
	vd_audit_free(audit);
	vd_line_free(line);
	vd_leases_free(leases);
	vd_system_free(sys);
	return rc;
}
