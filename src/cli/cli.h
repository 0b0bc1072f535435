/*
 * cli.h - what the commands share: options every command takes, opening
 * the backend, messages and exit codes.
 */
#ifndef VISDEV_CLI_H
#define VISDEV_CLI_H

#include <getopt.h>
#include <jansson.h>

#include "quote.h"
#include "table.h"
#include "visdev.h"

/* Exit codes, documented in visdev(1). */
enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,	/* something went wrong */
	EXIT_USAGE = 2, /* the command line is wrong */
	EXIT_NONE = 3,	/* no GPU fits, or none was found */
};

/* Options every command takes. */
struct cli_globals {
	int json;
	int help;
	struct vd_backend_options backend;
};

/* The option tables read best one entry a line. */
/* clang-format off */

/* getopt_long entries for the global options, to end each command's table. */
#define CLI_GLOBAL_OPTIONS                                     \
	{ "json", no_argument, NULL, 'J' },                    \
	{ "demo", no_argument, NULL, 'D' },                    \
	{ "fixture", required_argument, NULL, 'F' },           \
	{ "nvml-lib", required_argument, NULL, 'N' },          \
	{ "help", no_argument, NULL, 'h' },                    \
	{ NULL, 0, NULL, 0 }

#define CLI_GLOBAL_USAGE                                                        \
	"  --json             machine-readable output\n"                        \
	"  --demo             use the built-in demo server (four GPUs)\n"       \
	"  --fixture FILE     use a simulated server described in FILE (JSON)\n" \
	"  --nvml-lib PATH    load this libnvidia-ml instead of the system's\n" \
	"  -h, --help         show this help\n"

/* clang-format on */

/*
 * Handles one global option returned by getopt_long. Returns 1 when the
 * option was a global one, 0 otherwise.
 */
int cli_global_option(struct cli_globals *g, int opt, const char *arg);

/*
 * getopt_long as visdev reads options: a long option only as written in
 * full, never abbreviated (--n is not --nvml-lib). A mistake (an unknown
 * option, a value missing or given to an option that takes none) is said
 * in one line, with the nearest real option and where the help is, and
 * '?' is returned. A leading '+' in shortopts stops at the first argument.
 */
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts);

/*
 * Prints "visdev: <message>; see 'visdev CMD --help'" (cmd NULL: visdev's
 * own help) to stderr and returns EXIT_USAGE: a wrong command line.
 */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Says that typed is no option of cmd's, with the nearest one of those given. */
void cli_say_unknown(const char *cmd, const char *typed, const struct option *longopts,
		     const char *shortopts);

/*
 * Reads the command line of a command that takes only the global options
 * and no arguments (list, leases). Returns -1 to go on, or the exit code:
 * 0 after --help, EXIT_USAGE after saying what is wrong.
 */
int cli_parse_plain(struct cli_globals *g, int argc, char **argv, const char *usage);

/* A whole number from min to max for option; -1 after saying why (a usage error). */
int cli_parse_count(long *out, const char *option, const char *arg, long min, long max);

/* With --help, prints the usage to stdout and returns 1; else 0. */
int cli_wants_help(const struct cli_globals *g, const char *usage);

/* Prints "visdev: <message>" to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "visdev: <message>" for the library's last error; returns the exit code it means. */
int cli_library_error(int err);

/*
 * Opens the backend the global options (or the environment) name. On
 * failure prints why and what to do, and returns the exit code.
 */
int cli_backend(struct vd_backend **out, const struct cli_globals *g);

/* Opens the backend as cli_backend() does and takes one snapshot. */
int cli_snapshot(struct vd_system **out, const struct cli_globals *g);

/* Prints a JSON value to stdout and frees it. Returns an exit code. */
int cli_print_json(json_t *value);

/*
 * A JSON string of text from users or processes, which may be any bytes:
 * invalid UTF-8 becomes '?' rather than the key going missing.
 */
json_t *cli_json_str(const char *s);

/* A MIG device's profile ("3g.40gb"), or null when unknown. */
json_t *cli_json_profile(const struct vd_mig *m);

/* A JSON integer, or null when unknown. */
json_t *cli_json_known_int(int known, long long value);

/*
 * A device as JSON: {"index", "uuid", "name", "pci_bus_id"}, and for a MIG
 * device (whose uuid is its own, the rest its GPU's) "gi", "ci", "profile".
 */
json_t *cli_json_device(const struct vd_system *sys, struct vd_device_ref d);

/* "GPU 2", or "GPU 0 gi 7 ci 0" for a MIG device: a device in a narrow column. */
void cli_device_short(char *buf, size_t n, const struct vd_system *sys, struct vd_device_ref d);

/* Devices for people, in one line: "GPU 1, GPU 3 gi 7 ci 0". */
void cli_devices_text(char *buf, size_t n, const struct vd_system *sys,
		      const struct vd_device_ref *d, size_t nd);

/* "MIG 3g.40gb gi 1 ci 0": how a MIG device is named in tables. Returns its length. */
size_t cli_mig_label(char *buf, size_t n, const struct vd_mig *m);

/* The widest GPU name (or MIG device's label) of a snapshot. */
int cli_name_width(const struct vd_system *sys);

/* The columns of a table of devices, one a line (cli_print_device). */
struct cli_device_columns {
	int label; /* what comes before "GPU N" ("cuda:0 -> ") */
	int index; /* the GPU index */
	int name;  /* the name, cut to fit CLI_COLUMNS */
};

/* The columns for the devices of sys, each line starting with label columns. */
void cli_device_columns(struct cli_device_columns *out, const struct vd_system *sys, int label);

/*
 * Writes device d in one line for people, after label:
 * "cuda:0 -> GPU 2  NVIDIA ...  GPU-...  0000:86:00.0", the PCI bus id with a
 * four-digit domain where it has one. That a GPU is lost is for the caller to say.
 */
void cli_print_device(const struct vd_system *sys, const struct cli_device_columns *c,
		      const char *label, struct vd_device_ref d);

/*
 * Parses a comma-separated list of whole numbers ("0,2,3") into a new
 * array. On malformed input prints why, naming option, and returns -1.
 */
int cli_parse_index_list(unsigned **out, size_t *nout, const char *option, const char *text);

/*
 * The resolution of the environment's CUDA_VISIBLE_DEVICES and
 * CUDA_DEVICE_ORDER. With say_notes, what the engine noticed about a set
 * value (an order it had to assume, say) is printed to stderr.
 */
int cli_resolve_env(struct vd_resolution **out, const struct vd_system *sys, int say_notes);

/* Options of pick and run: which devices, and how to write them for the child. */
struct cli_select {
	struct vd_select_options opts;
	unsigned *exclude;
	int format; /* -1: the safest form for the case; else enum vd_format */
	int or_cpu;
	char **argv; /* the command line getopt reads, for a unit written apart */
};

/* clang-format off */
#define CLI_SELECT_OPTIONS                                       \
	{ "min-free", required_argument, NULL, 'M' },            \
	{ "max-util", required_argument, NULL, 'U' },            \
	{ "model", required_argument, NULL, 'm' },               \
	{ "exclude", required_argument, NULL, 'x' },             \
	{ "policy", required_argument, NULL, 'p' },              \
	{ "format", required_argument, NULL, 'f' },              \
	{ "or-cpu", no_argument, NULL, 'C' },                    \
	{ "mem", required_argument, NULL, 'R' }

#define CLI_SELECT_USAGE                                                                  \
	"  -n N               how many GPUs (default 1)\n"                                 \
	"  --min-free SIZE    at least this much free memory on each, with its unit\n"      \
	"                     (8G, 8GiB, 8192M; a bare number is refused)\n"               \
	"  --max-util PCT     at most this utilisation on each\n"                          \
	"  --model PATTERN    only GPUs whose name matches anywhere (A100, 'H100*HBM3')\n" \
	"  --exclude LIST     never these GPUs (indices, e.g. 0,3)\n"                      \
	"  --policy POLICY    most-free (default), least-used, or pack\n"                  \
	"  --mem SIZE         share a GPU: reserve SIZE of its memory, not the whole GPU;\n" \
	"                     GPUs already shared are filled before a new one is opened\n" \
	"  --format FORM      write the value as index (with CUDA_DEVICE_ORDER=PCI_BUS_ID)\n" \
	"                     or uuid; default index, uuid under a parent restriction or MIG\n" \
	"  --or-cpu           when no GPU fits, fall back to the CPU (an empty value), exit 0\n"

/* clang-format on */

/* Sets up the defaults of the selection options, for the command line argv. */
void cli_select_init(struct cli_select *s, char **argv);

/*
 * Handles one selection option returned by getopt_long ('n' included).
 * Returns 1 when handled, 0 when not a selection option, -1 (after printing
 * why) when its value is malformed.
 */
int cli_select_option(struct cli_select *s, int opt, const char *arg);

void cli_select_release(struct cli_select *s);

/*
 * The value of CUDA_VISIBLE_DEVICES for a child that must see exactly devs,
 * in the form s->format asks (or the safest one), checked to resolve back
 * to devs under CUDA's rules with CUDA_DEVICE_ORDER=PCI_BUS_ID. Prints why
 * on failure and returns an exit code.
 */
int cli_child_value(char **out, const struct vd_system *sys, const struct vd_resolution *parent,
		    const struct vd_device_ref *devs, size_t n, int format);

/*
 * Inside a job that visdev run started (VISDEV_LEASE set), how many devices
 * that very job holds (its process group is the caller's); else 0.
 */
size_t cli_own_leases(const struct vd_system *sys);

/*
 * Inside a job that visdev run started (VISDEV_LEASE set), says which GPUs
 * that very job holds, since no visdev inside it can take them, and returns
 * 1; returns 0 when the caller holds none.
 */
int cli_note_own_leases(const struct vd_system *sys);

/*
 * Prints the reasons no GPU fitted, one "  GPU 3: ..." line each, to stderr;
 * devices that all say the same are one line: "  GPUs 0, 1, 5: excluded",
 * "  GPU 0 gi 7 ci 0, GPU 0 gi 9 ci 1 and 6 more: leased by ..." (sys names
 * the MIG devices; NULL names their GPUs).
 */
void cli_print_reasons(const struct vd_choice *choice, const struct vd_system *sys);

/* What reason i says, without the device's label before it: "excluded". */
const char *cli_reason_text(const struct vd_choice *choice, size_t i);

/*
 * The lease directory, as vd_lease_dir() names it. The first call in a
 * command warns on stderr, with the fix, when the directory belongs to an
 * ordinary user other than the caller: its owner can remove every lease.
 */
const char *cli_lease_dir(void);

/*
 * The line of waiting requests, planned on sys with the leases (what each
 * holds); NULL, after saying why, when it cannot be read. vd_line_free().
 */
struct vd_line *cli_line(const struct vd_system *sys, const struct vd_leases *leases);

/* The line as JSON: one object per request, first first (docs/json.md). */
json_t *cli_json_line(const struct vd_line *line, const struct vd_system *sys);

/* What was ignored in the line, as a JSON array of strings. */
json_t *cli_json_line_ignored(const struct vd_line *line);

/* The line as a table (nothing when empty), and what was ignored, on stderr. */
void cli_print_line(const struct vd_line *line, const struct vd_system *sys);

/* Strings from users or processes as a JSON array (cli_json_str() each). */
json_t *cli_json_strings(char *const *s, size_t n);

/*
 * The warnings of res, and with env the environment's near misses
 * (vd_env_check()), as a JSON array of strings: "warnings" in list and map.
 */
json_t *cli_json_warnings(const struct vd_resolution *res, int env);

/* A lease as JSON: {"user", "uid", "pid", "pgid", "command", "since", "mode", "mem_mib"}. */
json_t *cli_json_lease(const struct vd_lease_holder *h);

/*
 * VISDEV_LEASE's value for a job holding lease: one line of JSON, the lease
 * as cli_json_lease() gives it with its "devices" (as cli_json_device()) and
 * "lease_dir". NULL when out of memory; free() it.
 */
char *cli_lease_env(const struct vd_lease *lease, const struct vd_system *sys);

/*
 * VISDEV_LEASE for a child that is to start once its lease names it: the
 * parent sends the lease's JSON (cli_lease_env()) over a socket fd, and
 * the child, between fork and exec, reads it up to end of file into buf,
 * of CLI_LEASE_ENV_SIZE bytes, as "VISDEV_LEASE=..." (no allocation: safe
 * there). A lease too long to describe leaves the value empty, with a note.
 */
#define CLI_LEASE_ENV_PREFIX "VISDEV_LEASE="
#define CLI_LEASE_ENV_SIZE   (1 << 16)
void cli_send_lease_env(int fd, const struct vd_lease *lease, const struct vd_system *sys);
void cli_receive_lease_env(int fd, char *buf);

/*
 * Whether to colour standard output, for --color's value when (NULL: not
 * given): "always", "never", or "auto": on a terminal whose TERM is not
 * "dumb", unless NO_COLOR is set to anything but "". Returns 1 or 0, or -1
 * after saying that the value is wrong (a usage error of cmd).
 */
int cli_color_choice(const char *cmd, const char *when);

/*
 * Prints s to stdout, escaped, left-aligned in width columns, in the SGR
 * colour sgr ("32" green, "1;31" bold red) when on; sgr NULL: plain.
 */
void cli_print_colored(int on, const char *sgr, int width, const char *s);

/*
 * The GPUs, their states, the leases, the line and the audit's findings
 * (audit may be NULL) as Prometheus metrics (text exposition format) on
 * stdout: prometheus.c, docs/prometheus.md.
 */
void cli_print_prometheus(const struct vd_system *sys, const struct vd_leases *leases,
			  const struct vd_line *line, const struct vd_audit *audit);

/* Prints what the engine found: warnings and the environment's near misses, as "note: ...". */
void cli_print_notes(char *const *notes, size_t n);

/* ---- The lease audit (audit.c) ---- */

/* --idle: after how many minutes a quiet lease counts as idle, by default and at most. */
#define CLI_IDLE_DEFAULT VD_AUDIT_IDLE_DEFAULT_MIN
#define CLI_IDLE_MAX	 525600

/* Reads --idle MINUTES (a number, fractions allowed): 0, or -1 after saying what is wrong. */
int cli_parse_idle(double *minutes, const char *arg);

/* A number from min to max, fractions allowed (digits first: no sign, no "nan"): 0, or -1. */
int cli_parse_amount(double *out, const char *arg, double min, double max);

/* Reads OPTION SECONDS, from min to max: 0, or -1 after saying what is wrong. */
int cli_parse_seconds(double *out, const char *option, const char *arg, double min, double max);

/* A span of s seconds in a few characters: "42s", "17m", "3h05m", "2d04h"; "?" below 0. */
void cli_format_span(char *buf, size_t n, int64_t s);

/*
 * The audit of the leases on sys now, with this user's memory of earlier
 * looks (read, then written back); NULL without a snapshot or leases, or
 * after saying why it failed.
 */
struct vd_audit *cli_audit(const struct vd_system *sys, const struct vd_leases *leases,
			   double idle_minutes);

/*
 * What list and top show beside the GPUs of sys, one look: the leases, the
 * audit of them (and the processes it read), and the line planned on them
 * with its holds added to the leases. Free with cli_look_release().
 */
struct cli_look {
	struct vd_leases *leases; /* NULL when they could not be read */
	struct vd_audit *audit;
	struct vd_procs *procs;
	struct vd_line *line;
};

/*
 * Takes that look; what it could not have is said in note (n bytes, one
 * line each; "" when nothing), for the caller to print (cli_print_note) or
 * show.
 */
void cli_look_around(struct cli_look *l, const struct vd_system *sys, double idle_minutes,
		     char *note, size_t n);
void cli_look_release(struct cli_look *l);

/* A note's lines on standard error, as cli_error writes them. */
void cli_print_note(const char *note);

/* What the audit says of lease i in a word or two: "active", "idle 42m", "squatted", "?". */
void cli_lease_use(char *buf, size_t n, const struct vd_audit *a, size_t i);

/* Lease i's audit as JSON (null without an audit), and the findings (null likewise). */
json_t *cli_json_lease_audit(const struct vd_audit *a, size_t i);
json_t *cli_json_audit(const struct vd_audit *a, const struct vd_system *sys,
		       const struct vd_leases *leases);

/* Finding i in a sentence, and every finding on a line of its own ("audit: ..."). */
void cli_audit_text(char *buf, size_t n, const struct vd_audit *a, size_t i,
		    const struct vd_system *sys, const struct vd_leases *leases);
void cli_print_audit(const struct vd_audit *a, const struct vd_system *sys,
		     const struct vd_leases *leases);

/*
 * `visdev __complete CWORD visdev WORD...` (complete.c): what a shell may
 * complete word CWORD with, one a line; commands names the commands.
 */
int cli_complete(int argc, char **argv, const char *const *commands, size_t ncommands);

/* Seconds on the monotonic clock: for intervals, never for dates. */
double cli_now(void);

/*
 * Runs argv (from PATH, or a path) with its output read into *out and *err
 * (free() them), Ctrl-C ignored by it. Returns its exit status, 128+N for
 * signal N, or -1 when it could not be started.
 */
int cli_capture(char **out, char **err, const char *const *argv);

#endif
