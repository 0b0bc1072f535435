/*
 * main.c - the command table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

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
};

static void usage(FILE *f)
{
	fprintf(f, "usage: visdev [--demo | --fixture FILE | --nvml-lib PATH] [--json] COMMAND "
		   "[ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'visdev COMMAND --help' tells more; the manual is visdev(1)\n");
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

int main(int argc, char **argv)
{
	char **args;
	int i = 1, n = 1, takes_value, rc;

	while (i < argc && is_global(argv[i], &takes_value))
		i += 1 + takes_value;
	if (i > argc) {
		cli_error("%s needs a value", argv[argc - 1]);
		return EXIT_USAGE;
	}
	if (i == argc || !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
		usage(i == argc ? stderr : stdout);
		return i == argc ? EXIT_USAGE : EXIT_OK;
	}
	if (!strcmp(argv[i], "--version")) {
		printf("visdev %s\n", vd_version());
		return EXIT_OK;
	}
	for (size_t c = 0; c < sizeof(commands) / sizeof(commands[0]); c++) {
		if (strcmp(argv[i], commands[c].name))
			continue;
		args = calloc((size_t)argc + 1, sizeof(*args));
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
		rc = commands[c].fn(n, args);
		free(args);
		return rc;
	}
	cli_error("'%s' is not a visdev command", argv[i]);
	fputc('\n', stderr);
	usage(stderr);
	return EXIT_USAGE;
}
