/*
 * cli.c - helpers every command uses.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_global_option(struct cli_globals *g, int opt, const char *arg)
{
	switch (opt) {
	case 'J':
		g->json = 1;
		return 1;
	case 'D':
		g->backend.demo = 1;
		return 1;
	case 'F':
		g->backend.fixture = arg;
		return 1;
	case 'N':
		g->backend.nvml_lib = arg;
		return 1;
	case 'h':
		g->help = 1;
		return 1;
	}
	return 0;
}

int cli_usage_error(const char *usage)
{
	fputs(usage, stderr);
	return EXIT_USAGE;
}

void cli_error(const char *fmt, ...)
{
	va_list ap;

	fputs("visdev: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_library_error(int err)
{
	cli_error("%s", vd_error_last());
	switch (err) {
	case VD_ENODRIVER:
	case VD_ENOTFOUND:
		return EXIT_NONE;
	case VD_EINVAL:
		return EXIT_USAGE;
	default:
		return EXIT_FAIL;
	}
}

int cli_snapshot(struct vd_system **out, const struct cli_globals *g)
{
	struct vd_backend_options opts = g->backend;
	struct vd_backend *b = NULL;
	int err;

	*out = NULL;
	opts.use_env = 1;
	err = vd_backend_open(&b, &opts);
	if (err == VD_ENODRIVER) {
		cli_error("%s", vd_error_last());
		cli_error("to try visdev on a simulated server, use --demo (or --fixture FILE)");
		return EXIT_NONE;
	}
	if (err == VD_ENOTFOUND || err == VD_EIO || err == VD_EPARSE) {
		cli_error("%s", vd_error_last());
		return EXIT_FAIL;
	}
	if (!err)
		err = vd_backend_snapshot(out, b);
	vd_backend_free(b);
	return err ? cli_library_error(err) : EXIT_OK;
}

int cli_print_json(json_t *value)
{
	int rc = EXIT_OK;

	if (!value || json_dumpf(value, stdout, JSON_INDENT(2)) < 0) {
		cli_error("cannot write JSON output");
		rc = EXIT_FAIL;
	}
	fputc('\n', stdout);
	json_decref(value);
	return rc;
}

json_t *cli_json_known_int(int known, long long value)
{
	return known ? json_integer(value) : json_null();
}

json_t *cli_json_device(const struct vd_system *sys, struct vd_device_ref d)
{
	const struct vd_gpu *gpu = &sys->gpus[d.gpu];
	json_t *o = json_object();

	json_object_set_new(o, "index", json_integer(gpu->index));
	if (d.mig >= 0) {
		const struct vd_mig *m = &gpu->mig[d.mig];

		json_object_set_new(o, "uuid", json_string(m->uuid));
		json_object_set_new(o, "name", json_string(gpu->name));
		json_object_set_new(o, "pci_bus_id", json_string(gpu->pci_bus_id));
		json_object_set_new(o, "mig", json_pack("{s:i, s:i, s:s}", "gi", (int)m->gi, "ci",
							(int)m->ci, "profile", m->profile));
		return o;
	}
	json_object_set_new(o, "uuid", json_string(gpu->uuid));
	json_object_set_new(o, "name", json_string(gpu->name));
	json_object_set_new(o, "pci_bus_id", json_string(gpu->pci_bus_id));
	return o;
}

int cli_name_width(const struct vd_system *sys)
{
	size_t w = 4;

	for (size_t i = 0; i < sys->ngpus; i++)
		if (strlen(sys->gpus[i].name) > w)
			w = strlen(sys->gpus[i].name);
	return (int)w;
}

void cli_print_device(const struct vd_system *sys, struct vd_device_ref d, int name_width)
{
	const struct vd_gpu *gpu = &sys->gpus[d.gpu];

	if (d.mig >= 0) {
		const struct vd_mig *m = &gpu->mig[d.mig];
		char label[64];

		snprintf(label, sizeof(label), "MIG %s (gi %u ci %u)", m->profile, m->gi, m->ci);
		printf("GPU %u  %-*s  %s  %s\n", gpu->index, name_width, label, m->uuid,
		       gpu->pci_bus_id);
		return;
	}
	printf("GPU %u  %-*s  %s  %s%s\n", gpu->index, name_width, gpu->name, gpu->uuid,
	       gpu->pci_bus_id, gpu->lost ? "  (lost: fell off the bus)" : "");
}

int cli_parse_index_list(unsigned **out, size_t *nout, const char *option, const char *text)
{
	size_t cap = 1, n = 0;
	unsigned *list;
	const char *s = text;

	*out = NULL;
	*nout = 0;
	for (const char *p = text; *p; p++)
		cap += *p == ',';
	list = calloc(cap, sizeof(*list));
	if (!list) {
		cli_error("out of memory");
		return -1;
	}
	for (;;) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(s, &end, 10);
		if (*s < '0' || *s > '9' || errno || v > 65535 || (*end && *end != ',')) {
			cli_error("%s takes a list of whole numbers such as 0,2; '%s' is not one",
				  option, text);
			free(list);
			return -1;
		}
		list[n++] = (unsigned)v;
		if (!*end)
			break;
		s = end + 1;
	}
	*out = list;
	*nout = n;
	return 0;
}

int cli_resolve_env(struct vd_resolution **out, const struct vd_system *sys)
{
	enum vd_order order;
	int err;

	vd_order_parse(&order, getenv("CUDA_DEVICE_ORDER"));
	err = vd_visible_resolve(out, sys, getenv("CUDA_VISIBLE_DEVICES"), order);
	return err ? cli_library_error(err) : EXIT_OK;
}

void cli_print_notes(char *const *notes, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("note: %s\n", notes[i]);
}
