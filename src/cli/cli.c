/*
 * cli.c - helpers every command uses.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

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

int cli_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fputs("visdev: ", stderr);
	va_start(ap, fmt);
	cli_vfprintf(stderr, fmt, ap);
	va_end(ap);
	cli_fprintf(stderr, "; see 'visdev%s%s --help'\n", cmd ? " " : "", cmd ? cmd : "");
	return EXIT_USAGE;
}

void cli_say_unknown(const char *cmd, const char *typed, const struct option *longopts,
		     const char *shortopts)
{
	const char *words[96], *body = typed + strspn(typed, "-");
	char shorts[96][2];
	size_t n = 0, nlong;
	long near;

	for (const struct option *o = longopts; o->name && n < 64; o++)
		words[n++] = o->name;
	nlong = n;
	for (const char *c = shortopts; *c && n < 96; c++) {
		if (*c == ':' || *c == '+')
			continue;
		shorts[n][0] = *c;
		shorts[n][1] = '\0';
		words[n] = shorts[n];
		n++;
	}
	near = vd_nearest_word(body, words, n);
	if (near < 0)
		cli_usage(cmd, "unknown option '%s'", typed);
	else
		cli_usage(cmd, "unknown option '%s' (did you mean %s%s?)", typed,
			  (size_t)near < nlong ? "--" : "-", words[near]);
}

/* The long option as typed, with its value cut off: "--min-free" of "--min-free=8G". */
static void typed_name(char *buf, size_t n, const char *arg)
{
	size_t len = strcspn(arg, "=");

	snprintf(buf, n, "%.*s", (int)len, arg);
}

/*
 * The short option c that getopt found wrong, as typed: the whole element
 * when c begins it and what follows is no short options either ("-json",
 * a long option written with one dash, rather than "-j").
 */
static void typed_short(char *buf, size_t n, char **argv, int c, const char *shortopts)
{
	const char *el = argv[optind - 1];
	size_t len = strlen(el);

	if (el[0] != '-' || el[1] == '-' || el[len - 1] != c)
		el = argv[optind]; /* c was not the element's last: getopt stays on it */
	if (el && el[0] == '-' && el[1] == c && el[2] && el[2 + strspn(el + 2, shortopts)])
		snprintf(buf, n, "%s", el);
	else
		snprintf(buf, n, "-%c", c);
}

/* Whether the mistake getopt found at arg was a long option's, not a short one's. */
static int long_mistake(const char *arg, const struct option *longopts)
{
	size_t len = strcspn(arg, "=");

	if (!optopt)
		return 1; /* getopt names no short option for an unknown long one */
	if (strncmp(arg, "--", 2))
		return 0;
	for (const struct option *o = longopts; o->name; o++)
		if (o->val == optopt && !strncmp(o->name, arg + 2, len - 2))
			return 1;
	return 0;
}

/*
 * `visdev COMMAND --list-options` (for shell completion, and its tests): the
 * options the command parses, from the very table it parses with, one a
 * line, "=" after those that take a value; then exit 0.
 */
static void list_options(const char *shortopts, const struct option *longopts)
{
	for (const char *c = shortopts; *c; c++)
		if (*c != '+' && *c != ':')
			printf("-%c%s\n", *c, c[1] == ':' ? "=" : "");
	for (const struct option *o = longopts; o->name; o++)
		printf("--%s%s\n", o->name, o->has_arg == required_argument ? "=" : "");
	exit(fflush(stdout) ? EXIT_FAIL : EXIT_OK);
}

int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts)
{
	char spec[64], typed[128];
	int plus = shortopts[0] == '+', idx = -1, opt;
	const char *arg;

	if (optind <= 1 && argc == 2 && !strcmp(argv[1], "--list-options"))
		list_options(shortopts, longopts);
	snprintf(spec, sizeof(spec), "%s:%s", plus ? "+" : "", shortopts + plus);
	opterr = 0;
	opt = getopt_long(argc, argv, spec, longopts, &idx);
	if (opt == -1)
		return -1;
	arg = argv[optind - 1];
	if (idx >= 0 && longopts[idx].has_arg == required_argument && optarg == arg)
		arg = argv[optind - 2]; /* the value came as the next argument */
	if (opt != '?' && opt != ':' && idx < 0)
		return opt; /* a short option */
	if ((opt == '?' || opt == ':') && !long_mistake(arg, longopts)) {
		typed_short(typed, sizeof(typed), argv, optopt, shortopts);
		if (opt == ':')
			cli_usage(argv[0], "option '%s' needs a value", typed);
		else
			cli_say_unknown(argv[0], typed, longopts, shortopts);
		return '?';
	}
	typed_name(typed, sizeof(typed), arg);
	for (const struct option *o = longopts; o->name; o++) {
		if (strcmp(o->name, typed + 2))
			continue;
		/* written in full: getopt's answer stands, or names the mistake */
		if (opt == ':')
			cli_usage(argv[0], "option '%s' needs a value", typed);
		else if (opt == '?')
			cli_usage(argv[0], "option '%s' takes no value ('%s' given)", typed, arg);
		return opt == ':' ? '?' : opt;
	}
	/* unknown, or an abbreviation, which visdev never takes */
	cli_say_unknown(argv[0], typed, longopts, shortopts);
	return '?';
}

int cli_wants_help(const struct cli_globals *g, const char *usage)
{
	if (g->help)
		fputs(usage, stdout);
	return g->help;
}

int cli_parse_plain(struct cli_globals *g, int argc, char **argv, const char *usage)
{
	static const struct option options[] = { CLI_GLOBAL_OPTIONS };
	int opt;

	while ((opt = cli_getopt(argc, argv, "h", options)) != -1)
		if (!cli_global_option(g, opt, optarg))
			return EXIT_USAGE;
	if (cli_wants_help(g, usage))
		return EXIT_OK;
	if (optind < argc)
		return cli_usage(argv[0], "%s takes no arguments ('%s' given)", argv[0],
				 argv[optind]);
	return -1;
}

void cli_error(const char *fmt, ...)
{
	va_list ap;

	fputs("visdev: ", stderr);
	va_start(ap, fmt);
	cli_vfprintf(stderr, fmt, ap);
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

int cli_backend(struct vd_backend **out, const struct cli_globals *g)
{
	struct vd_backend_options opts = g->backend;
	int err;

	opts.use_env = 1;
	err = vd_backend_open(out, &opts);
	if (err == VD_ENODRIVER) {
		cli_error("%s", vd_error_last());
		cli_error("to try visdev on a simulated server, use --demo (or --fixture FILE)");
		return EXIT_NONE;
	}
	if (err == VD_ENOTFOUND || err == VD_EIO || err == VD_EPARSE) {
		cli_error("%s", vd_error_last());
		return EXIT_FAIL;
	}
	return err ? cli_library_error(err) : EXIT_OK;
}

int cli_snapshot(struct vd_system **out, const struct cli_globals *g)
{
	struct vd_backend *b = NULL;
	int rc, err;

	*out = NULL;
	rc = cli_backend(&b, g);
	if (rc)
		return rc;
	err = vd_backend_snapshot(out, b);
	vd_backend_free(b);
	return err ? cli_library_error(err) : EXIT_OK;
}

int cli_print_json(json_t *value)
{
	int rc = EXIT_OK;

	if (!value || json_dumpf(value, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(9)) < 0) {
		cli_error("cannot write JSON output");
		rc = EXIT_FAIL;
	}
	fputc('\n', stdout);
	json_decref(value);
	return rc;
}

json_t *cli_json_str(const char *s)
{
	json_t *v = json_string(s);
	size_t n;
	char *copy;

	if (v)
		return v;
	n = strlen(s) + 1;
	copy = malloc(n);
	if (!copy)
		return NULL;
	vd_utf8_copy(copy, s, n);
	v = json_string(copy);
	free(copy);
	return v;
}

json_t *cli_json_profile(const struct vd_mig *m)
{
	return m->profile[0] ? cli_json_str(m->profile) : json_null();
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
		json_object_set_new(o, "name", cli_json_str(gpu->name));
		json_object_set_new(o, "pci_bus_id", json_string(gpu->pci_bus_id));
		json_object_set_new(o, "gi", json_integer((json_int_t)m->gi));
		json_object_set_new(o, "ci", json_integer((json_int_t)m->ci));
		json_object_set_new(o, "profile", cli_json_profile(m));
		return o;
	}
	json_object_set_new(o, "uuid", json_string(gpu->uuid));
	json_object_set_new(o, "name", cli_json_str(gpu->name));
	json_object_set_new(o, "pci_bus_id", json_string(gpu->pci_bus_id));
	return o;
}

size_t cli_mig_label(char *buf, size_t n, const struct vd_mig *m)
{
	return (size_t)snprintf(buf, n, "MIG %s gi %u ci %u", m->profile, m->gi, m->ci);
}

void cli_device_short(char *buf, size_t n, const struct vd_system *sys, struct vd_device_ref d)
{
	if (d.mig < 0)
		snprintf(buf, n, "GPU %u", d.gpu);
	else
		snprintf(buf, n, "GPU %u gi %u ci %u", d.gpu, sys->gpus[d.gpu].mig[d.mig].gi,
			 sys->gpus[d.gpu].mig[d.mig].ci);
}

void cli_devices_text(char *buf, size_t n, const struct vd_system *sys,
		      const struct vd_device_ref *d, size_t nd)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < nd && len + 1 < n; i++) {
		char one[64];

		cli_device_short(one, sizeof(one), sys, d[i]);
		len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? ", " : "", one);
	}
}

int cli_name_width(const struct vd_system *sys)
{
	size_t w = 4;
	char label[64];

	for (size_t i = 0; i < sys->ngpus; i++) {
		if (strlen(sys->gpus[i].name) > w)
			w = strlen(sys->gpus[i].name);
		for (size_t m = 0; m < sys->gpus[i].nmig; m++)
			if (cli_mig_label(label, sizeof(label), &sys->gpus[i].mig[m]) > w)
				w = strlen(label);
	}
	return (int)w;
}

/*
 * A PCI bus id as Linux writes it ("0000:86:00.0") when NVML's eight-digit
 * domain fits four digits, as it does on nearly every machine; else as is.
 */
static const char *short_bus_id(const char *id)
{
	return strncmp(id, "0000", 4) == 0 && strlen(id) == 16 ? id + 4 : id;
}

void cli_device_columns(struct cli_device_columns *out, const struct vd_system *sys, int label)
{
	size_t rest, widest_uuid = 0, widest_bus = 0;

	out->label = label;
	out->index = snprintf(NULL, 0, "%zu", sys->ngpus ? sys->ngpus - 1 : 0);
	for (size_t i = 0; i < sys->ngpus; i++) {
		const struct vd_gpu *gpu = &sys->gpus[i];

		widest_uuid = strlen(gpu->uuid) > widest_uuid ? strlen(gpu->uuid) : widest_uuid;
		for (size_t m = 0; m < gpu->nmig; m++)
			if (strlen(gpu->mig[m].uuid) > widest_uuid)
				widest_uuid = strlen(gpu->mig[m].uuid);
		if (strlen(short_bus_id(gpu->pci_bus_id)) > widest_bus)
			widest_bus = strlen(short_bus_id(gpu->pci_bus_id));
	}
	/* "GPU N  NAME  UUID  BUS" */
	rest = (size_t)label + 4 + (size_t)out->index + 2 + 2 + widest_uuid + 2 + widest_bus;
	out->name = cli_name_width(sys);
	if (rest + (size_t)out->name > CLI_COLUMNS)
		out->name = rest + 8 < CLI_COLUMNS ? (int)(CLI_COLUMNS - rest) : 8;
}

void cli_print_device(const struct vd_system *sys, const struct cli_device_columns *c,
		      const char *label, struct vd_device_ref d)
{
	const struct vd_gpu *gpu = &sys->gpus[d.gpu];
	const char *uuid = gpu->uuid, *name = gpu->name;
	char mig[64], shown[256];

	if (d.mig >= 0) {
		cli_mig_label(mig, sizeof(mig), &gpu->mig[d.mig]);
		uuid = gpu->mig[d.mig].uuid;
		name = mig;
	}
	cli_printf("%-*sGPU %-*u  %-*s  %s  %s\n", c->label, label, c->index, gpu->index, c->name,
		   cli_cut(shown, sizeof(shown), name, c->name), uuid,
		   short_bus_id(gpu->pci_bus_id));
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
			/* the list may be long: quote its start and the wrong element */
			cli_error("%s takes a list of whole numbers from 0 to 65535 such as 0,2; "
				  "'%.*s' (element %zu of '%.20s%s') is not one",
				  option, (int)strcspn(s, ","), s, n + 1, text,
				  strlen(text) > 20 ? "..." : "");
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

int cli_resolve_env(struct vd_resolution **out, const struct vd_system *sys, int say_notes)
{
	enum vd_order order;
	int err;

	vd_order_parse(&order, getenv("CUDA_DEVICE_ORDER"));
	err = vd_visible_resolve(out, sys, getenv("CUDA_VISIBLE_DEVICES"), order);
	if (err)
		return cli_library_error(err);
	for (size_t i = 0; say_notes && (*out)->set && i < (*out)->nwarnings; i++)
		cli_error("note: CUDA_VISIBLE_DEVICES=%s: %s", getenv("CUDA_VISIBLE_DEVICES"),
			  (*out)->warnings[i]);
	return EXIT_OK;
}

void cli_print_notes(char *const *notes, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cli_printf("note: %s\n", notes[i]);
}

void cli_select_init(struct cli_select *s, char **argv)
{
	memset(s, 0, sizeof(*s));
	vd_select_options_init(&s->opts);
	s->format = -1;
	s->argv = argv;
}

void cli_select_release(struct cli_select *s)
{
	free(s->exclude);
	s->exclude = NULL;
}

/* A whole number from min to max, for option; -1 (after saying why) if it is not one. */
int cli_parse_count(long *out, const char *option, const char *arg, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (*arg < '0' || *arg > '9' || *end || errno || v < min || v > max) {
		cli_error("%s takes a whole number from %ld to %ld, not '%s'", option, min, max,
			  arg);
		return -1;
	}
	*out = v;
	return 0;
}

/*
 * Says so when a size's unit was written apart ("--min-free 40 GB"), and
 * would otherwise be read as the command or an argument; 0 when not.
 */
static int unit_apart(const struct cli_select *s, const char *name, const char *arg)
{
	const char *next = s->argv && optind > 0 ? s->argv[optind] : NULL;
	char *joined = NULL;
	uint64_t mib;
	int apart;

	if (!next || strchr(next, ' ') || asprintf(&joined, "%s %s", arg, next) < 0)
		return 0;
	apart = vd_parse_size_mib(&mib, joined) == 0;
	free(joined);
	if (apart)
		cli_error("%s %s %s: the unit goes with the number: write %s %s%s", name, arg, next,
			  name, arg, next);
	return apart;
}

int cli_select_option(struct cli_select *s, int opt, const char *arg)
{
	size_t n;
	long v;

	switch (opt) {
	case 'n':
		if (cli_parse_count(&v, "-n", arg, 1, 64))
			return -1;
		s->opts.n = (unsigned)v;
		return 1;
	case 'M':
	case 'R':
		if (vd_parse_size_mib(opt == 'M' ? &s->opts.min_free_mib : &s->opts.mem_mib, arg)) {
			const char *name = opt == 'M' ? "--min-free" : "--mem";
			char *why = strdup(vd_error_last());

			if (!unit_apart(s, name, arg))
				cli_error("%s: %s", name, why ? why : vd_error_last());
			free(why);
			return -1;
		}
		if (opt == 'R' && !s->opts.mem_mib) {
			cli_error(
				"--mem: must be more than 0 (without --mem, the lease is exclusive)");
			return -1;
		}
		return 1;
	case 'U':
		if (cli_parse_count(&v, "--max-util", arg, 0, 100))
			return -1;
		s->opts.max_util = (int)v;
		return 1;
	case 'm':
		s->opts.model = arg;
		return 1;
	case 'x':
		free(s->exclude);
		if (cli_parse_index_list(&s->exclude, &n, "--exclude", arg))
			return -1;
		s->opts.exclude = s->exclude;
		s->opts.nexclude = n;
		return 1;
	case 'p':
		if (vd_policy_parse(&s->opts.policy, arg)) {
			cli_error("--policy: %s", vd_error_last());
			return -1;
		}
		return 1;
	case 'f':
		if (!strcmp(arg, "index"))
			s->format = VD_FORMAT_INDEX;
		else if (!strcmp(arg, "uuid"))
			s->format = VD_FORMAT_UUID;
		else {
			cli_error("--format takes index or uuid, not '%s'", arg);
			return -1;
		}
		return 1;
	case 'C':
		s->or_cpu = 1;
		return 1;
	}
	return 0;
}

int cli_child_value(char **out, const struct vd_system *sys, const struct vd_resolution *parent,
		    const struct vd_device_ref *devs, size_t n, int format)
{
	int err = vd_child_value(out, sys, parent, devs, n, format);

	return err ? cli_library_error(err) : EXIT_OK;
}

const char *cli_reason_text(const struct vd_choice *choice, size_t i)
{
	const char *line = choice->reasons[i], *colon;

	if (choice->why[i].device.gpu == VD_NO_GPU || !(colon = strstr(line, ": ")))
		return line;
	return colon + 2;
}

/*
 * The devices whose reasons, from i on, say what reason i says, marked in
 * told; named in buf ("GPUs 0, 1, 3", "GPU 0 gi 7 ci 0, GPU 7 and 19 more").
 * Returns how many there are.
 */
static size_t same_reason(char *buf, size_t n, const struct vd_choice *choice,
			  const struct vd_system *sys, size_t i, unsigned char *told)
{
	const char *why = cli_reason_text(choice, i);
	size_t count = 0, shown = 0, len = 0;
	int mig = 0;

	for (size_t j = i; j < choice->nreasons; j++)
		if (choice->why[j].device.gpu != VD_NO_GPU &&
		    !strcmp(cli_reason_text(choice, j), why))
			mig |= choice->why[j].device.mig >= 0;
	buf[0] = '\0';
	for (size_t j = i; j < choice->nreasons; j++) {
		struct vd_device_ref d = choice->why[j].device;
		char one[64];

		if (d.gpu == VD_NO_GPU || strcmp(cli_reason_text(choice, j), why))
			continue;
		told[j] = 1;
		count++;
		if (mig && sys)
			cli_device_short(one, sizeof(one), sys, d);
		else
			snprintf(one, sizeof(one), "%u", d.gpu);
		/* names up to about a line, then a count */
		if (shown + 1 == count && len + strlen(one) + 2 < (mig ? 60 : n - 16)) {
			len += (size_t)snprintf(buf + len, n - len, "%s%s", shown ? ", " : "", one);
			shown++;
		}
	}
	if (shown < count && len + 1 < n)
		snprintf(buf + len, n - len, " and %zu more", count - shown);
	return count;
}

void cli_print_reasons(const struct vd_choice *choice, const struct vd_system *sys)
{
	size_t n = choice ? choice->nreasons : 0;
	unsigned char *told = calloc(n ? n : 1, 1);

	for (size_t i = 0; i < n; i++) {
		char devices[512];

		if (told && told[i])
			continue;
		/* the devices that all say the same thing, on one line */
		if (told && choice->why[i].device.gpu != VD_NO_GPU &&
		    same_reason(devices, sizeof(devices), choice, sys, i, told) > 1)
			cli_fprintf(stderr, "  %s%s: %s\n",
				    isdigit((unsigned char)devices[0]) ? "GPUs " : "", devices,
				    cli_reason_text(choice, i));
		else
			cli_fprintf(stderr, "  %s\n", choice->reasons[i]);
	}
	free(told);
}

json_t *cli_json_strings(char *const *s, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, cli_json_str(s[i]));
	return a;
}

json_t *cli_json_warnings(const struct vd_resolution *res, int env)
{
	json_t *a = cli_json_strings(res->warnings, res->nwarnings);
	char **notes = NULL;
	size_t nnotes = 0;

	if (env && vd_env_check(&notes, &nnotes, environ) == 0)
		for (size_t i = 0; i < nnotes; i++)
			json_array_append_new(a, cli_json_str(notes[i]));
	vd_strings_free(notes, nnotes);
	return a;
}

json_t *cli_json_lease(const struct vd_lease_holder *h)
{
	char since[32];

	vd_format_time(since, sizeof(since), h->since);
	return json_pack(
		"{s:o, s:I, s:I, s:I, s:o, s:s, s:s, s:o, s:o}", "user", cli_json_str(h->user),
		"uid", (json_int_t)h->uid, "pid", (json_int_t)h->pid, "pgid", (json_int_t)h->pgid,
		"command", cli_json_str(h->command), "since", since, "mode",
		h->mode == VD_LEASE_SHARED ? "shared" : "exclusive", "mem_mib",
		h->mode == VD_LEASE_SHARED ? json_integer((json_int_t)h->mem_mib) : json_null(),
		"queue",
		h->journal[0] ? json_pack("{s:o, s:I}", "journal", cli_json_str(h->journal), "job",
					  (json_int_t)h->job) :
				json_null());
}

char *cli_lease_env(const struct vd_lease *lease, const struct vd_system *sys)
{
	struct vd_lease_holder h;
	size_t ndevs;
	const struct vd_device_ref *devs = vd_lease_devices(lease, &ndevs);
	json_t *o, *a = json_array();
	char *s;

	for (size_t i = 0; a && i < ndevs; i++)
		json_array_append_new(a, cli_json_device(sys, devs[i]));
	vd_lease_holder(lease, &h);
	o = cli_json_lease(&h);
	json_object_set_new(o, "devices", a);
	json_object_set_new(o, "lease_dir", json_string(cli_lease_dir()));
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

struct vd_line *cli_line(const struct vd_system *sys, const struct vd_leases *leases)
{
	struct vd_line *line = NULL;

	if (vd_line_read(&line, cli_lease_dir())) {
		cli_error("the line of waiting requests is unknown: %s", vd_error_last());
		return NULL;
	}
	if (sys && vd_line_plan(line, sys, leases))
		cli_error("what the waiting requests hold is unknown: %s", vd_error_last());
	return line;
}

json_t *cli_json_line(const struct vd_line *line, const struct vd_system *sys)
{
	json_t *a = json_array();

	for (size_t i = 0; line && i < line->n; i++) {
		const struct vd_waiting *w = &line->waiting[i];
		json_t *holds = json_array();
		char since[32];

		for (size_t k = 0; sys && k < w->nholds; k++)
			json_array_append_new(holds, cli_json_device(sys, w->holds[k]));
		vd_format_time(since, sizeof(since), w->since);
		json_array_append_new(
			a,
			json_pack("{s:I, s:o, s:I, s:I, s:s, s:I, s:o, s:o, s:o, s:o, s:s, s:o, "
				  "s:o, s:b}",
				  "place", (json_int_t)w->place, "user", cli_json_str(w->user),
				  "uid", (json_int_t)w->uid, "pid", (json_int_t)w->pid, "since",
				  since, "n", (json_int_t)w->n, "mem_mib",
				  w->mem_mib ? json_integer((json_int_t)w->mem_mib) : json_null(),
				  "min_free_mib",
				  w->min_free_mib ? json_integer((json_int_t)w->min_free_mib) :
						    json_null(),
				  "max_util",
				  w->max_util >= 0 ? json_integer(w->max_util) : json_null(),
				  "model", w->model[0] ? cli_json_str(w->model) : json_null(),
				  "policy", vd_policy_name(w->policy), "command",
				  cli_json_str(w->command), "holds", holds, "ready", w->ready));
	}
	return a;
}

json_t *cli_json_line_ignored(const struct vd_line *line)
{
	json_t *a = json_array();

	for (size_t i = 0; line && i < line->nignored; i++)
		json_array_append_new(a, cli_json_str(line->ignored[i]));
	return a;
}

/* A size in MiB as an option takes it: "40G" when whole gibibytes, else "40960M". */
static const char *option_size(char *buf, size_t n, uint64_t mib)
{
	if (mib % 1024)
		snprintf(buf, n, "%lluM", (unsigned long long)mib);
	else
		snprintf(buf, n, "%lluG", (unsigned long long)(mib / 1024));
	return buf;
}

/* What waiter w asked, as the options that ask it: "-n 2 --mem 10G". */
static void format_asked(char *buf, size_t n, const struct vd_waiting *w)
{
	size_t len = (size_t)snprintf(buf, n, "-n %u", w->n);
	char size[32];

	if (w->mem_mib && len < n)
		len += (size_t)snprintf(buf + len, n - len, " --mem %s",
					option_size(size, sizeof(size), w->mem_mib));
	if (w->min_free_mib && len < n)
		len += (size_t)snprintf(buf + len, n - len, " --min-free %s",
					option_size(size, sizeof(size), w->min_free_mib));
	if (w->max_util >= 0 && len < n)
		len += (size_t)snprintf(buf + len, n - len, " --max-util %d", w->max_util);
	if (w->model[0] && len < n)
		snprintf(buf + len, n - len, " --model %s", w->model);
}

/* What waiter w holds, for people: "GPU 1, GPU 3 (starting)", "-". */
static void format_holds(char *buf, size_t n, const struct vd_waiting *w,
			 const struct vd_system *sys)
{
	snprintf(buf, n, "-");
	if (!sys || !w->nholds)
		return;
	cli_devices_text(buf, n, sys, w->holds, w->nholds);
	if (w->ready && strlen(buf) + 1 < n)
		snprintf(buf + strlen(buf), n - strlen(buf), " (starting)");
}

void cli_print_line(const struct vd_line *line, const struct vd_system *sys)
{
	static const struct cli_column columns[] = {
		{ "PLACE", 5, 1 },  { "USER", 10, 0 },	{ "PID", 7, 1 },     { "SINCE", 25, 0 },
		{ "ASKED", 18, 0 }, { "HOLDS", 12, 0 }, { "COMMAND", 0, 0 },
	};
	struct cli_table t;

	if (!line)
		return;
	for (size_t i = 0; i < line->nignored; i++)
		cli_error("%s", line->ignored[i]);
	if (!line->n)
		return;
	cli_table_init(&t, columns, sizeof(columns) / sizeof(columns[0]));
	for (size_t i = 0; i < line->n; i++) {
		const struct vd_waiting *w = &line->waiting[i];
		char since[32], asked[160], holds[160], place[16], pid[16];

		vd_format_time(since, sizeof(since), w->since);
		format_asked(asked, sizeof(asked), w);
		format_holds(holds, sizeof(holds), w, sys);
		snprintf(place, sizeof(place), "%u", w->place);
		snprintf(pid, sizeof(pid), "%d", (int)w->pid);
		if (cli_table_add(&t, place, w->user, pid, since, asked, holds, w->command))
			cli_error(
				"out of memory: the line lacks a request; see 'visdev leases --json'");
	}
	cli_printf("\n");
	cli_printf("waiting in line, first come first served:\n");
	cli_table_print(&t);
	cli_table_release(&t);
}

void cli_send_lease_env(int fd, const struct vd_lease *lease, const struct vd_system *sys)
{
	size_t room = CLI_LEASE_ENV_SIZE - sizeof(CLI_LEASE_ENV_PREFIX);
	char *json = cli_lease_env(lease, sys);
	size_t len = json ? strlen(json) : 0, done = 0;

	if (!json || len > room)
		cli_error("note: VISDEV_LEASE is empty: %s",
			  json ? "the lease is too long to describe" : "out of memory");
	while (json && len <= room && done < len) {
		ssize_t n = send(fd, json + done, len - done, MSG_NOSIGNAL);

		if (n < 0 && errno != EINTR)
			break; /* the child is gone: it never reads it */
		done += n > 0 ? (size_t)n : 0;
	}
	free(json);
}

void cli_receive_lease_env(int fd, char *buf)
{
	size_t done = strlen(CLI_LEASE_ENV_PREFIX);
	ssize_t n;

	memcpy(buf, CLI_LEASE_ENV_PREFIX, done);
	while (done < CLI_LEASE_ENV_SIZE - 1 &&
	       ((n = read(fd, buf + done, CLI_LEASE_ENV_SIZE - 1 - done)) > 0 ||
		(n < 0 && errno == EINTR)))
		done += n > 0 ? (size_t)n : 0;
	buf[done] = '\0';
}

const char *cli_lease_dir(void)
{
	static int checked;
	const char *dir = vd_lease_dir();
	struct passwd *pw;
	uint32_t owner;
	char name[32];

	if (checked++ || vd_lease_dir_owner(&owner, dir) || owner == 0 || owner == geteuid())
		return dir;
	pw = getpwuid((uid_t)owner);
	if (pw)
		snprintf(name, sizeof(name), "%s", pw->pw_name);
	else
		snprintf(name, sizeof(name), "uid %u", owner);
	cli_error("warning: the lease directory %s belongs to the user %s, who can remove "
		  "anyone's leases in it; an administrator fixes that with: sudo chown root: %s",
		  dir, name, dir);
	return dir;
}

size_t cli_own_leases(const struct vd_system *sys)
{
	struct vd_leases *leases = NULL;
	pid_t group = getpgrp();
	size_t own = 0;

	if (!getenv("VISDEV_LEASE") || vd_leases_read(&leases, cli_lease_dir(), sys))
		return 0;
	for (size_t i = 0; i < leases->n; i++)
		own += leases->holders[i].pgid == group;
	vd_leases_free(leases);
	return own;
}

int cli_note_own_leases(const struct vd_system *sys)
{
	size_t own = cli_own_leases(sys);

	if (own)
		cli_error(
			"note: this is a job that 'visdev run' started, and it holds %zu of "
			"these devices itself (VISDEV_LEASE describes its lease): use the GPUs it "
			"was given, which CUDA_VISIBLE_DEVICES already names",
			own);
	return own > 0;
}

int cli_color_choice(const char *cmd, const char *when)
{
	const char *no = getenv("NO_COLOR"), *term = getenv("TERM");

	if (when && !strcmp(when, "always"))
		return 1;
	if (when && !strcmp(when, "never"))
		return 0;
	if (when && strcmp(when, "auto")) {
		cli_usage(cmd, "--color is auto, always or never, not '%s'", when);
		return -1;
	}
	return isatty(STDOUT_FILENO) && !(no && *no) && !(term && !strcmp(term, "dumb"));
}

void cli_print_colored(int on, const char *sgr, int width, const char *s)
{
	if (on && sgr)
		printf("\033[%sm", sgr);
	cli_printf("%-*s", width, s);
	if (on && sgr)
		fputs("\033[0m", stdout);
}

double cli_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Reads fd to its end into a growing string (*buf of *len). */
static int drain(char **buf, size_t *len, size_t *cap, int fd)
{
	char chunk[4096];
	ssize_t n = read(fd, chunk, sizeof(chunk));

	if (n <= 0)
		return (int)n;
	/* cli_grow makes room for one more byte past its third argument, doubling */
	while (*len + (size_t)n + 1 > *cap)
		if (cli_grow(buf, cap, *cap, 1, 4096))
			return -1;
	memcpy(*buf + *len, chunk, (size_t)n);
	*len += (size_t)n;
	(*buf)[*len] = '\0';
	return (int)n;
}

int cli_capture(char **out, char **err, const char *const *argv)
{
	int po[2], pe[2], status;
	char *bufs[2] = { NULL, NULL }, **copy;
	size_t lens[2] = { 0, 0 }, caps[2] = { 0, 0 }, n = 0;
	pid_t pid;

	*out = *err = NULL;
	/* exec's own copy of the words, which it takes as writable */
	while (argv[n])
		n++;
	copy = calloc(n + 1, sizeof(*copy));
	for (size_t i = 0; copy && i < n; i++)
		if (!(copy[i] = strdup(argv[i]))) {
			vd_strings_free(copy, i);
			copy = NULL;
		}
	if (!copy)
		return -1;
	if (pipe2(po, O_CLOEXEC) < 0) {
		vd_strings_free(copy, n);
		return -1;
	}
	if (pipe2(pe, O_CLOEXEC) < 0) {
		close(po[0]);
		close(po[1]);
		vd_strings_free(copy, n);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		dup2(po[1], STDOUT_FILENO);
		dup2(pe[1], STDERR_FILENO);
		/* Ctrl-C is the follower's to detach on: an sbatch it reached could leave an
		   array Slurm took and the sweep never recorded */
		signal(SIGINT, SIG_IGN);
		execvp(copy[0], copy);
		_exit(127);
	}
	vd_strings_free(copy, n);
	close(po[1]);
	close(pe[1]);
	for (int open_fds = pid > 0 ? 2 : 0; open_fds;) {
		struct pollfd p[2] = { { po[0], POLLIN, 0 }, { pe[0], POLLIN, 0 } };

		open_fds = 0;
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		for (int k = 0; k < 2; k++) {
			if (p[k].fd < 0)
				continue;
			if (p[k].revents && drain(&bufs[k], &lens[k], &caps[k], p[k].fd) <= 0) {
				close(p[k].fd);
				if (k == 0)
					po[0] = -1;
				else
					pe[0] = -1;
			}
		}
		open_fds = (po[0] >= 0) + (pe[0] >= 0);
	}
	if (po[0] >= 0)
		close(po[0]);
	if (pe[0] >= 0)
		close(pe[0]);
	*out = bufs[0] ? bufs[0] : strdup("");
	*err = bufs[1] ? bufs[1] : strdup("");
	if (pid < 0)
		return -1;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
