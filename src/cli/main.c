/*
 * main.c - the command table, help and the version.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static const struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "list", cmd_list, "every GPU, its state, and how CUDA_VISIBLE_DEVICES maps onto it" },
	{ "map", cmd_map, "what CUDA makes of a CUDA_VISIBLE_DEVICES value: cuda:N -> GPU" },
	{ "pick", cmd_pick, "choose free GPUs and print CUDA_VISIBLE_DEVICES for them" },
	{ "run", cmd_run, "lease GPUs and run a command on them, for as long as it runs" },
	{ "leases", cmd_leases, "who holds which GPU now" },
	{ "queue", cmd_queue, "run many jobs over the GPUs as they free, resumably" },
	{ "doctor", cmd_doctor, "why a program does not see the GPUs it should, and the fix" },
	{ "top", cmd_top, "a live view of the GPUs, processes, leases, the line and the audit" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: visdev [--demo | --fixture FILE | --nvml-lib PATH] [--json] COMMAND "
		   "[ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < ARRAY_LEN(commands); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'visdev help COMMAND' tells more; the manual is visdev(1)\n");
}

/* Global options may come before the command: they are moved after its name. */
static int is_global(const char *arg, int *takes_value)
{
	static const char *const flags[] = { "--json", "--demo" };
	static const char *const valued[] = { "--fixture", "--nvml-lib" };

	*takes_value = 0;
	for (size_t i = 0; i < 2; i++) {
		size_t len = strlen(valued[i]);

		if (!strcmp(arg, flags[i]) || (!strncmp(arg, valued[i], len) && arg[len] == '='))
			return 1;
		if (!strcmp(arg, valued[i]))
			return *takes_value = 1;
	}
	return 0;
}

/* Runs command c with argv[i] its name: the global options before it go after it. */
static int run_command(const struct command *c, int argc, char **argv, int i)
{
	char **args = calloc((size_t)argc + 2, sizeof(*args));
	int n = 1, rc;

	if (!args) {
		cli_error("out of memory");
		return EXIT_FAIL;
	}
	args[0] = argv[i];
	for (int j = 1; j < i; j++)
		args[n++] = argv[j];
	for (int j = i + 1; j < argc; j++)
		args[n++] = argv[j];
	args[n] = NULL;
	rc = c->fn(n, args);
	free(args);
	return rc;
}

static const struct command *find_command(const char *name)
{
	for (size_t c = 0; c < ARRAY_LEN(commands); c++)
		if (!strcmp(name, commands[c].name))
			return &commands[c];
	return NULL;
}

/* Says that name is no command, with the nearest one; returns EXIT_USAGE. */
static int unknown_command(const char *name)
{
	const char *names[ARRAY_LEN(commands) + 1];
	long near;

	for (size_t c = 0; c < ARRAY_LEN(commands); c++)
		names[c] = commands[c].name;
	names[ARRAY_LEN(commands)] = "help";
	near = vd_nearest_word(name, names, ARRAY_LEN(names));
	if (near >= 0)
		return cli_usage(NULL, "'%s' is not a visdev command (did you mean %s?)", name,
				 names[near]);
	return cli_usage(NULL, "'%s' is not a visdev command", name);
}

/* visdev help [COMMAND]: the usage, or the command's own help. */
/* Whether man finds the page (`man -w PAGE`, quietly). */
static int page_installed(const char *page)
{
	const char *argv[] = { "man", "-w", page, NULL };
	char *out = NULL, *err = NULL;
	int found = cli_capture(&out, &err, argv) == 0;

	free(out);
	free(err);
	return found;
}

/* visdev help COMMAND: its page, where man has it; returns only when it does not. */
static void open_page(const char *command)
{
	char page[64];

	snprintf(page, sizeof(page), "visdev-%s", command);
	if (!page_installed(page))
		return;
	fflush(stdout);
	execlp("man", "man", page, (char *)NULL);
}

static int help(int argc, char **argv, int i)
{
	static char help_flag[] = "--help";
	const struct command *c;

	if (i + 1 >= argc) {
		usage(stdout);
		return EXIT_OK;
	}
	if (i + 2 < argc)
		return cli_usage(NULL, "help takes one command ('%s' is extra)", argv[i + 2]);
	c = find_command(argv[i + 1]);
	if (!c)
		return unknown_command(argv[i + 1]);
	open_page(c->name);
	argv[i] = argv[i + 1];
	argv[i + 1] = help_flag;
	return run_command(c, i + 2, argv, i);
}

/*
 * visdev --version: the program's version, the library's (the one it was
 * built with), and the NVIDIA driver's when NVML loads (VISDEV_NVML_LIB
 * names another libnvidia-ml): never a fixture's or the demo's.
 */
static int version(void)
{
	struct vd_backend_options opts = { .nvml_lib = getenv("VISDEV_NVML_LIB") };
	struct vd_backend *b = NULL;
	struct vd_system *sys = NULL;
	int err;

	if (opts.nvml_lib && !*opts.nvml_lib)
		opts.nvml_lib = NULL;
	printf("visdev %s\n", VD_VERSION);
	printf("libvisdev %s\n", vd_version());
	err = vd_backend_open(&b, &opts);
	if (!err)
		err = vd_backend_snapshot(&sys, b);
	if (err)
		cli_printf("NVIDIA driver: none loaded (%s)\n", vd_error_last());
	else if (sys->cuda_driver_version > 0)
		cli_printf("NVIDIA driver %s (CUDA %d.%d), from %s\n",
			   sys->driver_version[0] ? sys->driver_version : "?",
			   sys->cuda_driver_version / 1000, sys->cuda_driver_version % 1000 / 10,
			   vd_backend_source(b));
	else
		cli_printf("NVIDIA driver %s, from %s\n",
			   sys->driver_version[0] ? sys->driver_version : "?",
			   vd_backend_source(b));
	vd_system_free(sys);
	vd_backend_free(b);
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	static const struct option options[] = { { "version", no_argument, NULL, 'V' },
						 CLI_GLOBAL_OPTIONS };
	const struct command *c;
	int i = 1, takes_value;

	if (argc > 1 && !strcmp(argv[1], "__complete")) {
		const char *names[ARRAY_LEN(commands)];

		for (size_t k = 0; k < ARRAY_LEN(commands); k++)
			names[k] = commands[k].name;
		return cli_complete(argc - 1, argv + 1, names, ARRAY_LEN(commands));
	}
	while (i < argc && is_global(argv[i], &takes_value))
		i += 1 + takes_value;
	if (i > argc)
		return cli_usage(NULL, "option '%s' needs a value", argv[argc - 1]);
	if (i == argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V"))
		return version();
	if (!strcmp(argv[i], "help"))
		return help(argc, argv, i);
	if (argv[i][0] == '-') {
		char typed[128];

		snprintf(typed, sizeof(typed), "%.*s", (int)strcspn(argv[i], "="), argv[i]);
		cli_say_unknown(NULL, typed, options, "hV");
		return EXIT_USAGE;
	}
	c = find_command(argv[i]);
	if (!c)
		return unknown_command(argv[i]);
	return run_command(c, argc, argv, i);
}
