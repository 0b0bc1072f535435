/*
 * internal.h - what the modules of libvisdev share and do not export.
 */
#ifndef VISDEV_INTERNAL_H
#define VISDEV_INTERNAL_H

#include <dirent.h>
#include <stdarg.h>
#include <sys/types.h>

#include <jansson.h>

#include "visdev.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Records a one-line message for vd_error_last() and returns code, so that
 * a failure reads `return error_set(VD_EINVAL, "bad '%s'", s);`.
 */
int error_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Copies src into dst of size n, always terminated, cut if need be. */
void str_copy(char *dst, const char *src, size_t n);

/* "alice", or "uid 1234" where the password database has no name for uid. */
void user_name(char *out, size_t n, uid_t uid);

/*
 * The edit distance of two strings (case ignored with fold_case), or
 * SIZE_MAX when one is longer than 63 characters.
 */
size_t str_distance(const char *a, const char *b, int fold_case);

/*
 * What is wrong with a value of CUDA_VISIBLE_DEVICES as written, before CUDA
 * reads it: quotes kept in it, a blank before a UUID (read then as
 * ordinals), a blank after a comma in a list of UUIDs (the list stops).
 */
enum env_flaw {
	ENV_FLAW_NONE = 0,
	ENV_FLAW_QUOTES,
	ENV_FLAW_BLANK_BEFORE_UUID,
	ENV_FLAW_BLANK_IN_UUIDS,
};
enum env_flaw env_value_flaw(const char *value);

/*
 * A "NAME=value" entry of an environment: NAME into name (of n bytes), and
 * the value; NULL when the entry has no '=' or a name too long to be one.
 */
const char *env_split(char *name, size_t n, const char *entry);

/*
 * The variable (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, NVIDIA_VISIBLE_DEVICES)
 * that name misspells, within two edits or a change of case, or NULL; with
 * case_only, whether case alone differs.
 */
const char *env_near_miss(const char *name, int *case_only);

/*
 * Room for one more item in a growing array: *items_ptr (a pointer to the
 * array's pointer) of *cap items of size bytes, n of them used, is doubled
 * (to first items at first) when full. Returns 0, or VD_ENOMEM.
 */
int array_grow(void *items_ptr, size_t *cap, size_t n, size_t size, size_t first);

/*
 * A file of the user's own: "$XDG_VAR/visdev/NAME" when that variable is
 * set, else "$HOME/UNDER_HOME/visdev/NAME" (under_home ".cache",
 * ".local/state"), into out of n bytes; with make_dirs, the folders on the
 * way are made (0700). -1 without either variable, or a path too long.
 */
int user_file(char *out, size_t n, const char *xdg_var, const char *under_home, const char *name,
	      int make_dirs);

/*
 * Replaces the file at path with len bytes of text, whole or not at all (a
 * new file renamed in place): 0, or -1 with errno.
 */
int file_replace(const char *path, const char *text, size_t len);

/*
 * Memory in use that the processes NVML lists do not explain is worth a word
 * (a busy GPU, an audit finding) past this: a context's own, below it.
 */
#define UNEXPLAINED_MIB 1024

/* Appends a formatted line to a growing array of strings. */
int strings_push(char ***list, size_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * A backend: where the facts about GPUs come from. One static table of
 * these lives in backend.c; open() gets the path it should read (a fixture
 * file, an NVML library) or NULL for its default.
 */
struct vd_backend_ops {
	const char *name;
	int (*open)(void **state, const char *path);
	int (*snapshot)(struct vd_system **out, void *state);
	void (*close)(void *state);
};

extern const struct vd_backend_ops backend_nvml_ops;
extern const struct vd_backend_ops backend_fixture_ops;
extern const struct vd_backend_ops backend_demo_ops;

/*
 * Parses a fixture (the JSON format of docs/fixture.md) of len bytes; name is
 * the file name used in messages ("file:line:col: what is wrong").
 * Errors: VD_EPARSE, VD_ENOMEM.
 */
int fixture_parse(struct vd_system **out, const char *text, size_t len, const char *name);

/* Reads and parses a fixture file. Errors: VD_ENOTFOUND, VD_EIO, VD_EPARSE, VD_ENOMEM. */
int fixture_load(struct vd_system **out, const char *path);

/* The demo server: the source document's four GPUs, as fixture JSON. */
extern const char demo_json[];

/*
 * Allocates a zeroed snapshot with room for ngpus GPUs (indices set,
 * cuda_driver_version -1). Errors: VD_ENOMEM.
 */
int system_new(struct vd_system **out, size_t ngpus);

/*
 * From this driver on, a process can use one MIG device per GPU instance;
 * before it, one MIG device in all.
 */
#define MIG_PER_GI_MAJOR 570

/*
 * Why CUDA would not enumerate device b in a process that enumerates a,
 * under sys's driver (VD_DROP_NONE: it enumerates both). See vd_drop_reason.
 */
enum vd_drop_reason visible_conflict(const struct vd_system *sys, struct vd_device_ref a,
				     struct vd_device_ref b);

/* The GPU- or MIG- UUID of a device of sys. */
const char *system_device_uuid(const struct vd_system *sys, struct vd_device_ref d);

/* The driver's major version ("550.54.15" is 550), or 0 when unknown. */
unsigned system_driver_major(const struct vd_system *sys);

/*
 * How many leasable units sys has: each GPU in MIG mode with instances
 * counts as its instances, any other GPU as one.
 */
size_t system_units(const struct vd_system *sys);

/*
 * Copies a snapshot deeply (GPUs, their processes and MIG instances,
 * links): the copy shares nothing with src. Free it with vd_system_free().
 * Errors: VD_ENOMEM.
 */
int system_copy(struct vd_system **out, const struct vd_system *src);

/*
 * CUDA's fastest-first order of the devices (UUIDs, as vd_cuda_enumerate
 * gives them with the variable unset), from the per-user cache when it was
 * written in this boot under the same key (say, the driver version and the
 * GPUs' UUIDs), else from the driver, and then cached. Errors: as
 * vd_cuda_enumerate.
 */
int cuda_fastest_order(char ***out, size_t *nout, const char *key);

/*
 * Reads a lease record's text: its last whole line is the record, one
 * holder per device it names is added to l. Text that is not a record
 * adds nothing (a holder in the middle of writing, or a stranger's file).
 * Errors: VD_ENOMEM.
 */
int lease_record_parse(struct vd_leases *l, const char *text, size_t len);

/*
 * Records, of leases and of the line, are JSON lines appended to a file; a
 * reader takes the last whole line. record_last_line() is that line parsed
 * as an object (NULL: none); record_append() writes rec as a new last line
 * of fd: 0, or -1 with errno (ENOMEM when rec cannot be written out).
 */
json_t *record_last_line(const char *text, size_t len);
int record_append(int fd, const json_t *rec);

/* lease.c, for line.c: the lease directory opened and checked, record names. */
int lease_dir_open(int *out, const char *dir);
int lease_is_record(const char *name);

/* A scan of the lease directory dfd from its start; dir (or NULL) names it in the error. */
int lease_dir_scan(DIR **out, int dfd, const char *dir);

/* vd_lease_acquire(), made from a place in line when w is not NULL (line.c). */
int lease_acquire(struct vd_lease **out, struct vd_choice **choice, const char *dir,
		  const struct vd_system *sys, const struct vd_resolution *parent,
		  const struct vd_select_options *opts, const char *command, struct vd_waiter *w);

/*
 * select.c: the UUIDs of the devices a request could ever use (visible, of
 * its model...); none, and *all set, when that is every device.
 */
int select_within(char ***out, size_t *nout, int *all, const struct vd_system *sys,
		  const struct vd_resolution *parent, const struct vd_select_options *opts);
/* select.c: whether leases (and holds) keep every request off every device of sys. */
int select_all_taken(const struct vd_system *sys, const struct vd_leases *leases);

/* line.c, for lease.c: under the allocation lock. */
int line_is_name(const char *name);   /* wait.TICKET.json or .fifo */
int line_is_record(const char *name); /* wait.TICKET.json */
/*
 * Reads a line record's text (its last whole line) into w, which must be
 * zeroed: 1 when it is a whole, sane record of that ticket, 0 when not
 * (w may then hold strings to free), -1 out of memory.
 */
int line_record_parse(struct vd_waiting *w, const char *text, size_t len, uint64_t ticket);
/* Frees what a vd_waiting holds. */
void line_waiting_clear(struct vd_waiting *w);
/* Tickets of requests in line (of the records a scan found, or further back than was read). */
struct line_tickets {
	uint64_t *tickets;
	size_t n, cap;
};
/* Adds the ticket of name to t when it names a line record: 0, or VD_ENOMEM. */
int line_tickets_add(struct line_tickets *t, const char *name);
/*
 * Reads the line: every request, or with sys set, only as far back as
 * something is left for anyone on sys with leases, each request planned
 * as it is read; the tickets of the others go to rest (free them). The
 * records are those of names, which is emptied, or with names NULL of a
 * scan of the directory. Stale records are removed when tidy is set.
 */
int line_read_fd(struct vd_line **out, struct line_tickets *rest, struct line_tickets *names,
		 int dfd, const char *dir, int tidy, const struct vd_system *sys,
		 const struct vd_leases *leases);
/* Adds the holds of the requests before ticket to leases (UINT64_MAX: all). */
int line_holds_before(struct vd_leases *leases, const struct vd_line *line,
		      const struct vd_system *sys, uint64_t ticket);
/* Writes a byte to a bell, never raising SIGPIPE when its reader has just closed it. */
void line_bell_write(int fd);
/* Rings the bell of every request the plan says fits now, but own's. */
void line_ring_ready(const struct vd_line *line, int dfd, uint64_t own);
uint64_t waiter_ticket(const struct vd_waiter *w); /* 0: not in line (or w NULL) */
/* After the allocation lock is let go: closes what a try that succeeded left to close. */
void waiter_settle(struct vd_waiter *w);
/* After a try from w: leaves the line (fits), or takes a place in it, and watches. */
int waiter_after_try(struct vd_waiter *w, int dfd, const struct vd_line *line,
		     const struct line_tickets *rest, int fits, const struct vd_choice *choice,
		     const struct vd_system *sys, const struct vd_resolution *parent,
		     const struct vd_select_options *opts, const char *command);

#endif
