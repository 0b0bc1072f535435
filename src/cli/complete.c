/*
 * complete.c - `visdev __complete CWORD WORD...`: what a shell may complete
 * the word at CWORD of a visdev command line with, one candidate a line (the
 * shell keeps those that start with what is typed), or "@files" for a file
 * name and "@commands" for a command. The shells' scripts in completions/
 * only ask this; the options come from each command's own parsing table
 * (`visdev COMMAND --list-options`), so that none can be missing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/*
 * The options of command, from its own table as `COMMAND --list-options`
 * prints it ("--idle=" for one that takes a value), into buf.
 */
static void read_options(const char *command, char *buf, size_t n)
{
	char self[4096], *out = NULL, *err = NULL;
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	const char *argv[] = { self, command, "--list-options", NULL };

	buf[0] = '\0';
	if (len <= 0)
		return;
	self[len] = '\0';
	if (cli_capture(&out, &err, argv) == 0)
		snprintf(buf, n, "%s", out);
	free(out);
	free(err);
}

/* Whether option takes a value, by the command's own table. */
static int takes_value(const char *options, const char *option)
{
	size_t len = strlen(option);

	for (const char *p = options; (p = strstr(p, option)); p += len)
		if ((p == options || p[-1] == '\n') && p[len] == '=')
			return 1;
	return 0;
}

/* The GPUs' indices and UUIDs (MIG devices' too), as the global options before name them. */
static void devices(const struct cli_globals *g)
{
	struct vd_backend_options opts = g->backend;
	struct vd_backend *b = NULL;
	struct vd_system *sys = NULL;

	opts.use_env = 1;
	if (vd_backend_open(&b, &opts) == 0 && vd_backend_snapshot(&sys, b) == 0)
		for (size_t i = 0; i < sys->ngpus; i++) {
			printf("%zu\n%s\n", i, sys->gpus[i].uuid);
			for (size_t m = 0; m < sys->gpus[i].nmig; m++)
				printf("%s\n", sys->gpus[i].mig[m].uuid);
		}
	vd_system_free(sys);
	vd_backend_free(b);
}

/* The values an option takes, or "@files"; nothing when it takes any text. */
static void values_of(const char *command, const char *option, const struct cli_globals *g)
{
	static const struct {
		const char *option, *command, *values;
	} fixed[] = {
		{ "--order", NULL, "pci fastest" },	 { "--color", NULL, "auto always never" },
		{ "--shell", NULL, "sh bash zsh fish" }, { "--format", "list", "prometheus" },
		{ "--format", NULL, "index uuid" },
	};
	static const char *const files[] = { "--fixture", "--nvml-lib", "--state",  "--log-dir",
					     "--script",  "--status",	"--resume", "--cancel" };

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (!strcmp(option, files[i])) {
			printf("@files\n");
			return;
		}
	if (!strcmp(option, "--policy")) {
		for (unsigned p = 0; vd_policy_name((enum vd_policy)p); p++)
			printf("%s\n", vd_policy_name((enum vd_policy)p));
		return;
	}
	if (!strcmp(option, "--exclude")) {
		devices(g);
		return;
	}
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (!strcmp(option, fixed[i].option) &&
		    (!fixed[i].command || (command && !strcmp(command, fixed[i].command)))) {
			for (const char *v = fixed[i].values; *v;) {
				size_t len = strcspn(v, " ");

				printf("%.*s\n", (int)len, v);
				v += len + (v[len] == ' ');
			}
			return;
		}
}

int cli_complete(int argc, char **argv, const char *const *commands, size_t ncommands)
{
	struct cli_globals g = { 0 };
	const char *command = NULL, *cur, *prev;
	char options[8192];
	long cword;
	char *end;
	int i;

	/* argv: __complete CWORD visdev WORD... */
	if (argc < 3)
		return EXIT_USAGE;
	cword = strtol(argv[1], &end, 10);
	if (*end || cword < 1)
		return EXIT_USAGE;
	argv += 2; /* argv[0] is now "visdev" */
	argc -= 2;
	cur = cword < argc ? argv[cword] : "";
	prev = argv[cword - 1];
	/* "--policy=V" split by bash at '=': "--policy" "=" "V", or "=" itself being completed */
	if (!strcmp(cur, "=")) {
		cur = "";
		prev = argv[cword - 1];
	} else if (!strcmp(prev, "=") && cword >= 2) {
		prev = argv[cword - 2];
	}
	/* the global options, then the command ("--fixture F" or "--fixture" "=" "F") */
	for (i = 1; i < cword && i < argc; i++) {
		const char **value = !strcmp(argv[i], "--fixture")  ? &g.backend.fixture :
				     !strcmp(argv[i], "--nvml-lib") ? &g.backend.nvml_lib :
								      NULL;

		if (!strcmp(argv[i], "--demo")) {
			g.backend.demo = 1;
		} else if (value) {
			i += i + 1 < argc && !strcmp(argv[i + 1], "=");
			if (i + 1 < argc)
				*value = argv[++i];
		} else if (argv[i][0] != '-') {
			command = argv[i];
			break;
		}
	}
	read_options(command ? command : "list", options, sizeof(options));
	/* run's command line: after "--", or from its first word that is no option or value */
	for (int k = i + 1; command && !strcmp(command, "run") && k < cword && k < argc; k++) {
		int ends = !strcmp(argv[k], "--");

		if (!ends && argv[k][0] == '-') {
			k += takes_value(options, argv[k]) && !strchr(argv[k], '=');
			continue;
		}
		/* the job's program is argv[k] (after "--", the next word); then its arguments */
		printf(cword == k + ends ? "@commands\n" : "@files\n");
		return EXIT_OK;
	}
	/* a value for the option before (the global ones' when there is no command yet) */
	if (prev[0] == '-' && takes_value(options, prev)) {
		values_of(command, prev, &g);
		return EXIT_OK;
	}
	/* run's first word that is no option: the program */
	if (command && !strcmp(command, "run") && cur[0] != '-') {
		printf("@commands\n");
		return EXIT_OK;
	}
	if (!command && cur[0] != '-') {
		for (size_t k = 0; k < ncommands; k++)
			printf("%s\n", commands[k]);
		printf("help\n");
		return EXIT_OK;
	}
	if (!command) {
		printf("--demo\n--fixture\n--nvml-lib\n--json\n--help\n--version\n");
		return EXIT_OK;
	}
	if (!strcmp(command, "help")) {
		for (size_t k = 0; k < ncommands; k++)
			printf("%s\n", commands[k]);
		return EXIT_OK;
	}
	if (cur[0] == '-') {
		/* each option as it is typed: "--idle", not the table's "--idle=" */
		for (char *line = strtok(options, "\n"); line; line = strtok(NULL, "\n"))
			printf("%.*s\n", (int)strcspn(line, "="), line);
		return EXIT_OK;
	}
	/* a command's own words: job files, scripts; map's value is anyone's to type */
	if (!strcmp(command, "queue"))
		printf("@files\n");
	return EXIT_OK;
}
