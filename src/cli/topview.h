/*
 * topview.h - what `visdev top` shows, as lines of styled text: a pure
 * function of one look at the machine (snapshot, leases, line, audit, what
 * /proc says of the processes) and of the viewer's choices (sort, hidden
 * processes, selected GPU, refresh interval, screen size). cmd_top.c draws
 * the lines with curses; the unit tests read them as text.
 */
#ifndef VISDEV_TOPVIEW_H
#define VISDEV_TOPVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "visdev.h"

/* How a piece of a line is drawn: cmd_top.c maps each to a colour or attribute. */
enum top_style {
	TOP_PLAIN = 0,
	TOP_TITLE,    /* the first line */
	TOP_HEADER,   /* column headers, section names */
	TOP_USED,     /* memory in use, in a bar */
	TOP_RESERVED, /* memory reserved by shared leases, not yet in use */
	TOP_LOAD,     /* utilisation, in a bar */
	TOP_GOOD,     /* a free device */
	TOP_WARN,     /* leased, held, quiet */
	TOP_ALERT,    /* busy, lost, a squatter, idle, an error */
	TOP_STYLES
};

struct top_span {
	unsigned start, len; /* bytes of the line's text */
	enum top_style style;
};

#define TOP_SPANS 16

struct top_line {
	char *text; /* at most cols characters, no line end */
	struct top_span spans[TOP_SPANS];
	unsigned nspans;
	int selected; /* the selected GPU's row: drawn in reverse */
};

enum top_sort {
	TOP_SORT_INDEX = 0,
	TOP_SORT_MEMORY,      /* most memory in use first */
	TOP_SORT_UTILIZATION, /* busiest first */
	TOP_SORTS
};

/* "index", "memory", "utilization". */
const char *top_sort_name(enum top_sort sort);

/* The viewer's choices, changed by keys (top_key). */
struct top_state {
	enum top_sort sort;
	int hide_processes;
	int help;	 /* the help screen instead */
	size_t selected; /* place of the selected GPU in the sorted order */
	double interval; /* seconds between looks */
	int quit;
};

/* A fresh state: sorted by index, processes shown, every interval seconds. */
void top_state_init(struct top_state *st, double interval);

/* Keys top_key() knows besides printable characters (curses' own are mapped by cmd_top.c). */
enum {
	TOP_KEY_UP = 0x1001,
	TOP_KEY_DOWN,
	TOP_KEY_HOME,
	TOP_KEY_END
};

/*
 * Applies a key to the state: q quits, arrows or j/k move, p hides the
 * processes, s changes the sort, + and - the interval (0.5 s to 60 s),
 * ? shows or hides the help. ngpus bounds the selection. Returns 1 when the
 * screen must be drawn again, 0 for a key that means nothing.
 */
int top_key(struct top_state *st, int key, size_t ngpus);

/* A queue whose job holds a lease: where it stands, from its journal. */
struct top_queue {
	char journal[VD_COMMAND_MAX]; /* its journal, as the lease record names it */
	char user[32];		      /* who runs it */
	size_t jobs, done, failed, running, pending;
	int64_t eta_s;	 /* how long the rest should take at the pace so far; -1 unknown */
	char error[160]; /* why its journal could not be read ("" when it was) */
};

/*
 * Where a queue stands by its journal j: the counts, and an estimate of the
 * time left from the mean length of the jobs that ended and how many run at
 * once. journal, user and error are left to the caller.
 */
void top_queue_count(struct top_queue *q, const struct vd_journal *j);

/* One look at the machine; any pointer may be NULL (nothing known of it). */
struct top_look {
	const struct vd_system *sys;
	const struct vd_leases *leases; /* holds of the line included */
	const struct vd_line *line;
	const struct vd_audit *audit;
	const struct vd_procs *procs;
	const char *error; /* why the last look failed (what is shown is older); NULL */
	const char *note;  /* what the look could not do, a line each, under the title; NULL */
	int64_t now;	   /* seconds since the epoch, for ages and the clock */
	int64_t taken;	   /* when this look was taken */
	double idle;	   /* the audit's threshold, minutes */
	const struct top_queue *queues; /* running queues, nqueues of them */
	size_t nqueues;
};

struct top_screen {
	struct top_line *lines;
	size_t n, cap;
};

/*
 * The screen for look and state, rows lines of at most cols characters
 * (rows >= 1, cols >= 20; smaller is drawn as that). The title and the GPU
 * table's header stay on top; when the rest does not fit, it scrolls so that
 * the selected GPU is seen. Returns 0, or -1 out of memory.
 */
int top_render(struct top_screen *out, const struct top_look *look, const struct top_state *st,
	       int rows, int cols);
void top_screen_release(struct top_screen *s);

#endif
