/*
 * cmd_leases.c - `visdev leases`: who holds which GPU now.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const char usage[] =
	"usage: visdev leases [--json] [--demo | --fixture FILE | --nvml-lib PATH]\n"
	"\n"
	"Lists the live leases in the lease directory (VISDEV_LEASE_DIR, default\n" VD_LEASE_DIR_DEFAULT
	"): the device, who holds it, the job's pid and command, since when, and\n"
	"whether exclusively or as a share of its memory; then the requests waiting\n"
	"in line, first first: what each asked, since when, and the GPUs it holds.\n"
	"\n" CLI_GLOBAL_USAGE;

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
static void print_leases(const struct vd_leases *leases, const struct vd_system *sys)
{
	static const struct cli_column columns[] = {
		{ "DEVICE", 18, 0 }, { "USER", 10, 0 }, { "PID", 7, 1 },
		{ "SINCE", 25, 0 },  { "MODE", 15, 0 }, { "COMMAND", 0, 0 },
	};
	struct cli_table t;

	cli_table_init(&t, columns, sizeof(columns) / sizeof(columns[0]));
	for (size_t i = 0; i < leases->n; i++) {
		const struct vd_lease_holder *h = &leases->holders[i];
		char label[VD_UUID_MAX + 32], since[32], mode[32], pid[16];
		int index;

		device_label(label, sizeof(label), sys, h->uuid, &index);
		vd_format_time(since, sizeof(since), h->since);
		if (h->mode == VD_LEASE_SHARED)
			snprintf(mode, sizeof(mode), "shared %.1f GiB", h->mem_mib / 1024.0);
		else
			snprintf(mode, sizeof(mode), "exclusive");
		snprintf(pid, sizeof(pid), "%d", (int)h->pid);
		if (cli_table_add(&t, label, h->user, pid, since, mode, h->command))
			cli_error(
				"out of memory: the table lacks a lease; see 'visdev leases --json'");
	}
	cli_table_print(&t);
	cli_table_release(&t);
}

int cmd_leases(int argc, char **argv)
{
	struct cli_globals g = { 0 };
	struct vd_backend_options bopts;
	struct vd_backend *b = NULL;
	struct vd_system *sys = NULL;
	struct vd_leases *leases = NULL;
	struct vd_line *line = NULL;
	int err, rc;

	rc = cli_parse_plain(&g, argc, argv, usage);
	if (rc >= 0)
		return rc;
	rc = EXIT_OK;
	/* GPU indices are a nicety here: without a backend, devices are shown by UUID */
	bopts = g.backend;
	bopts.use_env = 1;
	if (vd_backend_open(&b, &bopts) == 0)
		vd_backend_snapshot(&sys, b);
	vd_backend_free(b);
	err = vd_leases_read(&leases, cli_lease_dir(), sys);
	if (err) {
		rc = cli_library_error(err);
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
			json_array_append_new(a, o);
		}
		rc = cli_print_json(json_pack("{s:s, s:o, s:o, s:o}", "lease_dir", cli_lease_dir(),
					      "leases", a, "line", cli_json_line(line, sys),
					      "line_ignored", cli_json_line_ignored(line)));
		goto out;
	}
	if (!leases->n) {
		cli_printf("no leases in %s\n", cli_lease_dir());
		cli_print_line(line, sys);
		goto out;
	}
	print_leases(leases, sys);
	cli_print_line(line, sys);
out:
	vd_line_free(line);
	vd_leases_free(leases);
	vd_system_free(sys);
	return rc;
}
