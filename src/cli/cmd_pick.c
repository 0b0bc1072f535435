/*
 * cmd_pick.c - `visdev pick`: chooses GPUs by policy and prints the value
 * of CUDA_VISIBLE_DEVICES for them. It reserves nothing: `visdev run` does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const char usage[] =
	"usage: visdev pick [-n N] [selection options] [--shell sh|fish | --value] [--json]\n"
	"\n"
	"Chooses GPUs that are free (no lease, no process) and fit the options, and\n"
	"prints the variables for them, to eval:  eval \"$(visdev pick -n 2)\"\n"
	"When none fits (exit 3), what it prints for eval hides every GPU and fails,\n"
	"so that a script with 'set -e' stops there.\n"
	"pick reserves nothing: another job may take the same GPUs a moment later.\n"
	"To hold them for a job, use 'visdev run'.\n"
	"\n" CLI_SELECT_USAGE "  --shell SHELL      sh (default, also bash and zsh) or fish\n"
	"  --value            print the value alone, UUIDs unless --format index:\n"
	"                     CUDA_VISIBLE_DEVICES=$(visdev pick --value -n 2);\n"
	"                     nothing, and exit 3, when none fits\n" CLI_GLOBAL_USAGE;

/* Whether a value can go unquoted into a shell line. */
static int shell_safe(const char *v)
{
	return *v &&
	       strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789,-_./") ==
		       strlen(v);
}

static void print_shell(int fish, const char *value)
{
	const char *q = shell_safe(value) ? "" : "'";

	if (fish) {
		cli_printf("set -gx CUDA_VISIBLE_DEVICES %s%s%s;\n", q, value, q);
		cli_printf("set -gx CUDA_DEVICE_ORDER PCI_BUS_ID;\n");
	} else {
		cli_printf("export CUDA_VISIBLE_DEVICES=%s%s%s\n", q, value, q);
		cli_printf("export CUDA_DEVICE_ORDER=PCI_BUS_ID\n");
	}
}

/*
 * What eval gets when no GPU fits: every GPU hidden, and a status that
 * fails, so that the idiom fails closed.
 */
static void print_shell_none(int fish)
{
	cli_printf(fish ? "set -gx CUDA_VISIBLE_DEVICES '';\n" :
			  "export CUDA_VISIBLE_DEVICES=''\n");
	cli_printf(fish ? "false;\n" : "false\n");
}

/*
 * Reason i as JSON: the device (as in map --json; {"index": null} for the
 * request as a whole), "reason" (the stable code) and "why" (the line,
 * without the device's label before it).
 */
static json_t *json_reason(const struct vd_system *sys, const struct vd_choice *choice, size_t i)
{
	const struct vd_reason *r = &choice->why[i];
	json_t *o = r->device.gpu == VD_NO_GPU ? json_pack("{s:n}", "index") :
						 cli_json_device(sys, r->device);

	json_object_set_new(o, "reason", json_string(r->code));
	json_object_set_new(o, "why", cli_json_str(cli_reason_text(choice, i)));
	return o;
}

static int print_json(const struct vd_system *sys, const struct vd_choice *choice,
		      const char *value)
{
	json_t *devs = json_array(), *reasons = json_array(), *env = json_null();

	for (size_t i = 0; value && choice && i < choice->ndevices; i++) {
		int64_t free_mib = vd_device_memory_free_mib(sys, choice->devices[i]);
		json_t *d = cli_json_device(sys, choice->devices[i]);

		/* a MIG instance's own memory, never its GPU's */
		json_object_set_new(d, "memory_free_mib",
				    cli_json_known_int(free_mib >= 0, free_mib));
		json_array_append_new(devs, d);
	}
	for (size_t i = 0; choice && i < choice->nreasons; i++)
		json_array_append_new(reasons, json_reason(sys, choice, i));
	if (value)
		env = json_pack("{s:s, s:s}", "CUDA_VISIBLE_DEVICES", value, "CUDA_DEVICE_ORDER",
				"PCI_BUS_ID");
	return cli_print_json(
		json_pack("{s:o, s:o, s:o}", "devices", devs, "env", env, "reasons", reasons));
}

int cmd_pick(int argc, char **argv)
{
	enum {
		OPT_SHELL = 256,
		OPT_VALUE
	};
	static const struct option options[] = { { "shell", required_argument, NULL, OPT_SHELL },
						 { "value", no_argument, NULL, OPT_VALUE },
						 CLI_SELECT_OPTIONS,
						 CLI_GLOBAL_OPTIONS };
	struct cli_globals g = { 0 };
	struct cli_select sel;
	struct vd_system *sys = NULL;
	struct vd_resolution *parent = NULL;
	struct vd_leases *leases = NULL;
	struct vd_line *line = NULL;
	struct vd_choice *choice = NULL;
	char *value = NULL;
	int opt, rc = -1, fish = 0, bare = 0, shell = 0, err;

	cli_select_init(&sel, argv);
	while (rc < 0 && (opt = cli_getopt(argc, argv, "hn:", options)) != -1) {
		int r = cli_select_option(&sel, opt, optarg);

		if (r < 0)
			rc = EXIT_USAGE;
		else if (r == 0 && opt == OPT_VALUE)
			bare = 1;
		else if (r == 0 && opt == OPT_SHELL) {
			shell = 1;
			fish = !strcmp(optarg, "fish");
			if (!fish && strcmp(optarg, "sh") && strcmp(optarg, "bash") &&
			    strcmp(optarg, "zsh")) {
				cli_error("--shell takes sh, bash, zsh or fish, not '%s'", optarg);
				rc = EXIT_USAGE;
			}
		} else if (r == 0 && !cli_global_option(&g, opt, optarg))
			rc = EXIT_USAGE;
	}
	if (rc >= 0)
		goto out;
	if (cli_wants_help(&g, usage)) {
		rc = EXIT_OK;
		goto out;
	}
	if (bare && (shell || g.json)) {
		rc = cli_usage("pick", "--value prints the value alone: not with %s",
			       shell ? "--shell" : "--json");
		goto out;
	}
	if (bare && sel.format < 0)
		sel.format = VD_FORMAT_UUID; /* alone, it cannot bring CUDA_DEVICE_ORDER along */
	if (optind < argc) {
		rc = cli_usage("pick",
			       "pick takes no arguments ('%s' given); to run a command, use "
			       "'visdev run'",
			       argv[optind]);
		goto out;
	}
	rc = cli_snapshot(&sys, &g);
	if (rc == EXIT_NONE && sel.or_cpu) {
		/* no driver, no GPU: the CPU is what there is */
		cli_error("falling back to the CPU (--or-cpu): CUDA_VISIBLE_DEVICES is empty");
		value = strdup("");
		rc = EXIT_OK;
		goto print;
	}
	if (rc)
		goto out;
	rc = cli_resolve_env(&parent, sys, 1);
	if (rc)
		goto out;
	err = vd_leases_read(&leases, cli_lease_dir(), sys);
	if (err) {
		rc = cli_library_error(err);
		goto out;
	}
	/* what is held for requests waiting in line is theirs: pick does not offer it */
	line = cli_line(sys, leases);
	if (line && vd_line_holds(leases, line, sys)) {
		rc = cli_library_error(VD_ENOMEM);
		goto out;
	}
	err = vd_select(&choice, sys, leases, parent, &sel.opts);
	if (err == VD_ENOFIT) {
		if (!sel.or_cpu) {
			rc = EXIT_NONE;
			if (g.json)
				print_json(sys, choice, NULL);
			else if (!bare)
				print_shell_none(fish);
			cli_error("%s", vd_error_last());
			cli_print_reasons(choice, sys);
			cli_note_own_leases(sys);
			goto out;
		}
		cli_error("%s; falling back to the CPU (--or-cpu): CUDA_VISIBLE_DEVICES is empty",
			  vd_error_last());
		cli_print_reasons(choice, sys);
		value = strdup("");
		choice->ndevices = 0;
	} else if (err) {
		rc = cli_library_error(err);
		goto out;
	} else {
		rc = cli_child_value(&value, sys, parent, choice->devices, choice->ndevices,
				     sel.format);
		if (rc)
			goto out;
	}
print:
	if (!value) {
		cli_error("out of memory");
		rc = EXIT_FAIL;
	} else if (g.json)
		rc = print_json(sys, choice, value);
	else if (bare)
		cli_printf("%s\n", value);
	else
		print_shell(fish, value);
out:
	free(value);
	vd_choice_free(choice);
	vd_line_free(line);
	vd_leases_free(leases);
	vd_resolution_free(parent);
	vd_system_free(sys);
	cli_select_release(&sel);
	return rc < 0 ? EXIT_OK : rc;
}
