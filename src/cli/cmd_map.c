/*
 * cmd_map.c - `visdev map`: applies CUDA's rules to a value of
 * CUDA_VISIBLE_DEVICES and shows cuda:N -> physical GPU, what was cut off
 * and why; translates logical and physical ids.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

extern char **environ;

static const char usage[] =
	"usage: visdev map [VALUE] [--unset] [--order pci|fastest] [--logical LIST]\n"
	"                  [--physical LIST] [--json] [--demo | --fixture FILE | --nvml-lib PATH]\n"
	"\n"
	"Shows what CUDA makes of VALUE as CUDA_VISIBLE_DEVICES (default: the\n"
	"environment's): which physical GPU each cuda:N is, which devices named it\n"
	"does not enumerate (MIG) and why, which GPUs are hidden, and where and why\n"
	"CUDA stopped reading the list.\n"
	"\n"
	"  VALUE              the value to read, instead of the environment's; one that\n"
	"                     starts with a dash and a digit is a value, not an option:\n"
	"                     'visdev map -1' (TensorFlow's way to hide every GPU);\n"
	"                     after '--', any value: 'visdev map -- -x'\n"
	"  --unset            read the variable as unset\n"
	"  --order ORDER      pci (CUDA_DEVICE_ORDER=PCI_BUS_ID) or fastest (the default);\n"
	"                     without it, the environment's CUDA_DEVICE_ORDER\n"
	"  --logical LIST     which physical GPUs cuda:N are, e.g. DataParallel's device_ids\n"
	"  --physical LIST    which cuda:N physical GPUs are, or that they are hidden\n" CLI_GLOBAL_USAGE;

struct map_args {
	int have_value;
	const char *value;
	int unset;
	int have_order;
	enum vd_order order;
	unsigned *logical;
	size_t nlogical;
	unsigned *physical;
	size_t nphysical;
};

/* Whether none of GPU g's devices is enumerated or even named: it is hidden. */
static int is_hidden(const struct vd_resolution *res, unsigned g)
{
	for (size_t i = 0; i < res->ndevices; i++)
		if (res->devices[i].gpu == g)
			return 0;
	for (size_t i = 0; i < res->ndropped; i++)
		if (res->dropped[i].device.gpu == g)
			return 0;
	return 1;
}

/* Plain words for why CUDA does not enumerate a device that was named. */
static void drop_words(char *buf, size_t n, const struct vd_system *sys, const struct vd_dropped *d)
{
	const char *driver = sys->driver_version[0] ? sys->driver_version : "(unknown)";

	switch (d->reason) {
	case VD_DROP_MIG_EMPTY:
		snprintf(buf, n, "in MIG mode without MIG devices: nothing of it for CUDA to use");
		break;
	case VD_DROP_ONE_MIG:
		snprintf(buf, n,
			 "driver %s lets a process use one MIG device in all: CUDA takes "
			 "the first",
			 driver);
		break;
	case VD_DROP_BESIDE_MIG:
		snprintf(buf, n, "driver %s enumerates no whole GPU beside a MIG device", driver);
		break;
	case VD_DROP_SAME_GI:
		snprintf(buf, n,
			 "driver %s lets a process use one compute instance per GPU "
			 "instance: CUDA takes the first of gi %u",
			 driver, sys->gpus[d->device.gpu].mig[d->device.mig].gi);
		break;
	case VD_DROP_NONE:
		buf[0] = '\0';
		break;
	}
}

/* Plain words for why the list stopped at the element it did. */
static const char *stop_words(enum vd_stop_reason reason)
{
	switch (reason) {
	case VD_STOP_EMPTY:
		return "an empty element ends the list";
	case VD_STOP_NOT_A_NUMBER:
		return "an element with no digits ends the list";
	case VD_STOP_NEGATIVE:
		return "a negative ordinal ends the list";
	case VD_STOP_OUT_OF_RANGE:
		return "an ordinal not below the number of GPUs ends the list";
	case VD_STOP_NOT_UUID:
		return "in a list of UUIDs, an element without GPU- or MIG- ends the list";
	case VD_STOP_NO_MATCH:
		return "a UUID that names no GPU here ends the list";
	case VD_STOP_AMBIGUOUS:
		return "a UUID prefix that matches several devices ends the list";
	case VD_STOP_NONE:
		break;
	}
	return "";
}

static json_t *json_stop(const struct vd_resolution *res)
{
	if (res->stop == VD_STOP_NONE)
		return json_null();
	return json_pack("{s:I, s:o, s:s}", "position", (json_int_t)res->stop_position, "token",
			 cli_json_str(res->stop_token), "reason", vd_stop_reason_name(res->stop));
}

static json_t *json_container(const struct vd_system *sys, const char *value)
{
	static const char *const modes[] = { "unset", "all", "none", "void", "list" };
	struct vd_container_view *v = NULL;
	json_t *o, *devs;

	if (!value || vd_container_resolve(&v, sys, value))
		return json_null();
	devs = json_array();
	for (size_t i = 0; i < v->ndevices; i++)
		json_array_append_new(devs, cli_json_device(sys, v->devices[i]));
	o = json_pack("{s:o, s:s, s:o, s:b, s:o}", "value", cli_json_str(value), "mode",
		      modes[v->mode], "devices", devs, "refused", v->refused, "warnings",
		      cli_json_strings(v->warnings, v->nwarnings));
	vd_container_view_free(v);
	return o;
}

static int print_json(const struct vd_system *sys, const struct vd_resolution *res,
		      const struct map_args *a, const char *value)
{
	json_t *root = json_object(), *devs = json_array(), *hidden = json_array();
	json_t *dropped = json_array();

	for (size_t i = 0; i < res->ndevices; i++) {
		json_t *d = cli_json_device(sys, res->devices[i]);

		json_object_set_new(d, "cuda", json_integer((json_int_t)i));
		json_array_append_new(devs, d);
	}
	for (size_t i = 0; i < res->ndropped; i++) {
		const struct vd_dropped *dr = &res->dropped[i];
		json_t *d = cli_json_device(sys, dr->device);
		char why[256];

		drop_words(why, sizeof(why), sys, dr);
		json_object_set_new(d, "position",
				    dr->position == VD_NO_POSITION ?
					    json_null() :
					    json_integer((json_int_t)dr->position));
		json_object_set_new(d, "reason", json_string(vd_drop_reason_name(dr->reason)));
		json_object_set_new(d, "why", json_string(why));
		json_array_append_new(dropped, d);
	}
	for (unsigned g = 0; g < sys->ngpus; g++)
		if (is_hidden(res, g))
			json_array_append_new(hidden, json_integer(g));
	json_object_set_new(root, "value", value ? cli_json_str(value) : json_null());
	json_object_set_new(root, "order", json_string(vd_order_name(res->order)));
	json_object_set_new(root, "order_assumed", json_boolean(res->order_assumed));
	json_object_set_new(root, "devices", devs);
	json_object_set_new(root, "not_enumerated", dropped);
	json_object_set_new(root, "hidden", hidden);
	json_object_set_new(root, "stop", json_stop(res));
	json_object_set_new(root, "duplicate",
			    res->duplicate ? json_pack("{s:I, s:I}", "first",
						       (json_int_t)res->duplicate_first, "position",
						       (json_int_t)res->duplicate_position) :
					     json_null());
	json_object_set_new(root, "warnings", cli_json_warnings(res, !a->have_value && !a->unset));
	json_object_set_new(root, "nvidia_visible_devices",
			    json_container(sys, getenv("NVIDIA_VISIBLE_DEVICES")));
	if (a->logical) {
		json_t *l = json_array();

		for (size_t i = 0; i < a->nlogical; i++) {
			unsigned n = a->logical[i];
			json_t *d = n < res->ndevices ? cli_json_device(sys, res->devices[n]) :
							json_object();

			if (n >= res->ndevices)
				json_object_set_new(d, "index", json_null());
			json_object_set_new(d, "cuda", json_integer(n));
			json_array_append_new(l, d);
		}
		json_object_set_new(root, "logical", l);
	}
	if (a->physical) {
		json_t *p = json_array();

		for (size_t i = 0; i < a->nphysical; i++) {
			unsigned g = a->physical[i];
			int c = vd_resolution_cuda(res, (struct vd_device_ref){ g, -1 });
			json_t *mig = json_array();

			for (size_t m = 0; m < sys->gpus[g].nmig; m++) {
				int mc = vd_resolution_cuda(res,
							    (struct vd_device_ref){ g, (int)m });

				if (mc >= 0)
					json_array_append_new(mig, json_integer(mc));
			}
			json_array_append_new(p,
					      json_pack("{s:i, s:o, s:o}", "index", (int)g, "cuda",
							c < 0 ? json_null() : json_integer(c),
							"mig_cuda", mig));
		}
		json_object_set_new(root, "physical", p);
	}
	return cli_print_json(root);
}

/* The explanation for people: what CUDA saw in the value, in plain words. */
static void print_explanation(const struct vd_resolution *res, const char *value)
{
	if (!value && !res->ndropped) {
		cli_printf("CUDA_VISIBLE_DEVICES is unset: CUDA sees every GPU\n");
		return;
	}
	if (!value) {
		cli_printf(
			"CUDA_VISIBLE_DEVICES is unset: CUDA sees %zu device%s, not all %zu there "
			"are (the MIG rules above)\n",
			res->ndevices, res->ndevices == 1 ? "" : "s",
			res->ndevices + res->ndropped);
		return;
	}
	if (!*value) {
		cli_printf(
			"CUDA_VISIBLE_DEVICES is empty: CUDA sees no GPU, and the program runs on "
			"the CPU\n");
		return;
	}
	if (res->duplicate)
		cli_printf("elements %zu and %zu name the same device: CUDA then refuses to start "
			   "(cuInit fails with CUDA_ERROR_INVALID_DEVICE)\n",
			   res->duplicate_first + 1, res->duplicate_position + 1);
	if (res->stop)
		cli_printf("CUDA stops reading at element %zu of %zu, '%s': %s; it ignores that "
			   "element and all after it\n",
			   res->stop_position + 1, res->nelements, res->stop_token,
			   stop_words(res->stop));
	if (!res->ndevices)
		cli_printf(
			"CUDA sees no GPU: torch.cuda.device_count() is 0 and the program runs on "
			"the CPU\n");
}

/* What the container runtime makes of value, its devices in columns c. */
static void print_container(const struct vd_system *sys, const char *value,
			    const struct cli_device_columns *c)
{
	static const char *const words[] = {
		"",
		"a container gets every GPU",
		"a container gets no GPU, but the driver",
		"a container gets no GPU support at all",
		"a container gets these devices",
	};
	struct vd_container_view *v = NULL;

	if (!value || vd_container_resolve(&v, sys, value))
		return;
	if (v->refused)
		cli_printf("NVIDIA_VISIBLE_DEVICES=%s: the container runtime does not start a "
			   "container\n",
			   value);
	else
		cli_printf("NVIDIA_VISIBLE_DEVICES=%s: %s\n", value, words[v->mode]);
	if (v->mode == VD_CONTAINER_LIST && !v->refused)
		for (size_t i = 0; i < v->ndevices; i++)
			cli_print_device(sys, c, "", v->devices[i]);
	cli_print_notes(v->warnings, v->nwarnings);
	vd_container_view_free(v);
}

/* What CUDA calls physical GPU g, or why it does not see it. */
static void print_physical(const struct vd_system *sys, const struct vd_resolution *res, unsigned g)
{
	int c = vd_resolution_cuda(res, (struct vd_device_ref){ g, -1 }), said = 0;

	if (c >= 0) {
		cli_printf("GPU %u is cuda:%d\n", g, c);
		return;
	}
	for (size_t m = 0; m < sys->gpus[g].nmig; m++) {
		int mc = vd_resolution_cuda(res, (struct vd_device_ref){ g, (int)m });

		if (mc >= 0 && !said++)
			cli_printf("GPU %u is in MIG mode: ", g);
		if (mc >= 0)
			cli_printf("%sits MIG device %s is cuda:%d", said > 1 ? "; " : "",
				   sys->gpus[g].mig[m].uuid, mc);
	}
	if (said)
		cli_printf("\n");
	else if (is_hidden(res, g))
		cli_printf("GPU %u is hidden: CUDA does not see it\n", g);
	else
		cli_printf("GPU %u is not enumerated by CUDA: see 'dropped' above\n", g);
}

static int print_text(const struct vd_system *sys, const struct vd_resolution *res,
		      const struct map_args *a, const char *value)
{
	int hidden = 0, rc = EXIT_OK, lead;
	struct cli_device_columns c;
	char **notes = NULL, label[32];
	size_t nnotes = 0, missing = 0;

	if (value)
		cli_printf("CUDA_VISIBLE_DEVICES='%s'", value);
	else
		cli_printf("CUDA_VISIBLE_DEVICES unset");
	if (res->uuid_form)
		cli_printf(
			", UUIDs: numbered in the order written, whatever CUDA_DEVICE_ORDER says\n");
	else
		cli_printf(", %s %s\n", value ? "ordinals counted" : "devices numbered",
			   res->order == VD_ORDER_PCI ?
				   "in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID)" :
				   "fastest first (CUDA_DEVICE_ORDER=FASTEST_FIRST, the "
				   "default)");
	/* "cuda:N -> ", as wide as the widest N, or as "dropped:  " */
	lead = res->ndevices ? snprintf(NULL, 0, "cuda:%zu -> ", res->ndevices - 1) : 0;
	cli_device_columns(&c, sys, lead > 10 ? lead : 10);
	for (size_t i = 0; i < res->ndevices; i++) {
		snprintf(label, sizeof(label), "cuda:%zu -> ", i);
		cli_print_device(sys, &c, label, res->devices[i]);
	}
	for (size_t i = 0; i < res->ndropped; i++) {
		char why[256];

		drop_words(why, sizeof(why), sys, &res->dropped[i]);
		cli_print_device(sys, &c, i ? "" : "dropped:", res->dropped[i].device);
		if (res->dropped[i].position == VD_NO_POSITION)
			cli_printf("            %s\n", why);
		else
			cli_printf("            element %zu: %s\n", res->dropped[i].position + 1,
				   why);
	}
	for (unsigned g = 0; g < sys->ngpus; g++) {
		if (!is_hidden(res, g))
			continue;
		cli_print_device(sys, &c,
				 hidden++ ? "" : "hidden:", (struct vd_device_ref){ g, -1 });
	}
	print_explanation(res, value);
	cli_print_notes(res->warnings, res->nwarnings);
	if (!a->have_value && !a->unset && vd_env_check(&notes, &nnotes, environ) == 0)
		cli_print_notes(notes, nnotes);
	vd_strings_free(notes, nnotes);
	print_container(sys, getenv("NVIDIA_VISIBLE_DEVICES"), &c);

	for (size_t i = 0; i < a->nlogical; i++) {
		unsigned n = a->logical[i];

		if (n < res->ndevices) {
			snprintf(label, sizeof(label), "cuda:%u is ", n);
			cli_print_device(sys, &c, label, res->devices[n]);
		} else if (!missing++) {
			/* one line for the first, a count for the rest */
			cli_error("cuda:%u does not exist: CUDA sees %zu device%s, so it answers "
				  "'invalid device ordinal'",
				  n, res->ndevices, res->ndevices == 1 ? "" : "s");
		}
	}
	if (missing > 1)
		cli_error("and %zu more of the ordinals --logical names do not exist either",
			  missing - 1);
	if (missing)
		rc = EXIT_NONE;
	for (size_t i = 0; i < a->nphysical; i++)
		print_physical(sys, res, a->physical[i]);
	return rc;
}

/* Says that map was given more than one value; returns EXIT_USAGE. */
static int extra_value(const char *arg)
{
	return cli_usage("map",
			 "map takes one value; quote it if it has blanks or commas ('%s' is extra)",
			 arg);
}

/* Whether argument arg is an option of options written so that its value is the next argument. */
static int value_follows(const char *arg, const struct option *options)
{
	if (strncmp(arg, "--", 2))
		return 0;
	for (const struct option *o = options; o->name; o++)
		if (o->has_arg == required_argument && !strcmp(o->name, arg + 2))
			return 1;
	return 0;
}

/*
 * Takes out of argv the VALUE that starts with a dash and a digit ("-1",
 * "-0"), which getopt would read as options: no option of map looks like
 * that. An option's separate argument and what follows "--" stay.
 * Returns -1 to go on, or EXIT_USAGE after saying why.
 */
static int take_dash_value(struct map_args *a, int *argc, char **argv, const struct option *options)
{
	for (int i = 1; i < *argc && strcmp(argv[i], "--"); i++) {
		if (value_follows(argv[i], options)) {
			i++;
			continue;
		}
		if (argv[i][0] != '-' || !isdigit((unsigned char)argv[i][1]))
			continue;
		if (a->have_value) {
			return extra_value(argv[i]);
		}
		a->have_value = 1;
		a->value = argv[i];
		memmove(&argv[i], &argv[i + 1], (size_t)(*argc - i) * sizeof(*argv));
		(*argc)--;
		i--;
	}
	return -1;
}

/* Reads the command line into a; returns -1 to go on, or an exit code. */
static int parse_args(struct map_args *a, struct cli_globals *g, int argc, char **argv)
{
	enum {
		OPT_UNSET = 256,
		OPT_ORDER,
		OPT_LOGICAL,
		OPT_PHYSICAL
	};
	static const struct option options[] = {
		{ "unset", no_argument, NULL, OPT_UNSET },
		{ "order", required_argument, NULL, OPT_ORDER },
		{ "logical", required_argument, NULL, OPT_LOGICAL },
		{ "physical", required_argument, NULL, OPT_PHYSICAL },
		CLI_GLOBAL_OPTIONS
	};
	int opt;

	if (take_dash_value(a, &argc, argv, options) >= 0)
		return EXIT_USAGE;
	while ((opt = cli_getopt(argc, argv, "h", options)) != -1) {
		switch (opt) {
		case OPT_UNSET:
			a->unset = 1;
			break;
		case OPT_ORDER:
			a->have_order = 1;
			if (!strcmp(optarg, "pci"))
				a->order = VD_ORDER_PCI;
			else if (!strcmp(optarg, "fastest"))
				a->order = VD_ORDER_FASTEST;
			else {
				cli_error("--order takes pci or fastest, not '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case OPT_LOGICAL:
			free(a->logical);
			if (cli_parse_index_list(&a->logical, &a->nlogical, "--logical", optarg))
				return EXIT_USAGE;
			break;
		case OPT_PHYSICAL:
			free(a->physical);
			if (cli_parse_index_list(&a->physical, &a->nphysical, "--physical", optarg))
				return EXIT_USAGE;
			break;
		default:
			if (!cli_global_option(g, opt, optarg))
				return EXIT_USAGE;
		}
	}
	if (cli_wants_help(g, usage))
		return EXIT_OK;
	if (argc - optind > (a->have_value ? 0 : 1)) {
		return extra_value(argv[argc - 1]);
	}
	if (optind < argc) {
		a->have_value = 1;
		a->value = argv[optind];
	}
	if (a->have_value && a->unset) {
		cli_error("--unset and a VALUE contradict each other: give one");
		return EXIT_USAGE;
	}
	return -1;
}

int cmd_map(int argc, char **argv)
{
	struct map_args a = { 0 };
	struct cli_globals g = { 0 };
	struct vd_system *sys = NULL;
	struct vd_resolution *res = NULL;
	const char *value;
	int rc, err;

	rc = parse_args(&a, &g, argc, argv);
	if (rc >= 0)
		goto out;
	value = a.unset ? NULL : a.have_value ? a.value : getenv("CUDA_VISIBLE_DEVICES");
	if (!a.have_order && vd_order_parse(&a.order, getenv("CUDA_DEVICE_ORDER")))
		cli_error("%s", vd_error_last());
	rc = cli_snapshot(&sys, &g);
	if (rc)
		goto out;
	for (size_t i = 0; i < a.nphysical; i++) {
		if (a.physical[i] >= sys->ngpus && !sys->ngpus) {
			cli_error("--physical %u: this machine has no GPU", a.physical[i]);
			rc = EXIT_NONE;
			goto out;
		}
		if (a.physical[i] >= sys->ngpus) {
			cli_error("--physical %u: there is no GPU %u here (GPUs 0 to %zu); 'visdev "
				  "list' shows them",
				  a.physical[i], a.physical[i], sys->ngpus - 1);
			rc = EXIT_NONE;
			goto out;
		}
	}
	err = vd_visible_resolve(&res, sys, value, a.order);
	if (err) {
		rc = cli_library_error(err);
		goto out;
	}
	if (g.json) {
		rc = print_json(sys, res, &a, value);
		for (size_t i = 0; rc == EXIT_OK && i < a.nlogical; i++)
			if (a.logical[i] >= res->ndevices)
				rc = EXIT_NONE;
	} else {
		rc = print_text(sys, res, &a, value);
	}
out:
	free(a.logical);
	free(a.physical);
	vd_resolution_free(res);
	vd_system_free(sys);
	return rc;
}
