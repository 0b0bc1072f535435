/*
 * topview.c - what `visdev top` shows (topview.h): a look at the machine in,
 * lines of styled text out. Nothing here draws, reads or waits.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "topview.h"

#define INTERVAL_MIN  0.5
#define INTERVAL_MAX  60.0
#define NAME_MAX_COLS 28
#define PROCS_SHOWN   8 /* under one GPU */

const char *top_sort_name(enum top_sort sort)
{
	static const char *const names[] = { "index", "memory", "utilization" };

	return (unsigned)sort < TOP_SORTS ? names[sort] : "index";
}

void top_state_init(struct top_state *st, double interval)
{
	memset(st, 0, sizeof(*st));
	st->interval = interval;
}

int top_key(struct top_state *st, int key, size_t ngpus)
{
	switch (key) {
	case 'q':
	case 'Q':
		st->quit = 1;
		return 1;
	case '?':
	case 'h':
		st->help = !st->help;
		return 1;
	case 27: /* Escape leaves the help */
		if (!st->help)
			return 0;
		st->help = 0;
		return 1;
	case 'p':
		st->hide_processes = !st->hide_processes;
		return 1;
	case 's':
		st->sort = (enum top_sort)((st->sort + 1) % TOP_SORTS);
		return 1;
	case '+':
	case '=':
		st->interval = st->interval * 2 > INTERVAL_MAX ? INTERVAL_MAX : st->interval * 2;
		return 1;
	case '-':
		st->interval = st->interval / 2 < INTERVAL_MIN ? INTERVAL_MIN : st->interval / 2;
		return 1;
	case 'j':
	case TOP_KEY_DOWN:
		if (st->selected + 1 < ngpus)
			st->selected++;
		return 1;
	case 'k':
	case TOP_KEY_UP:
		if (st->selected > 0)
			st->selected--;
		return 1;
	case TOP_KEY_HOME:
		st->selected = 0;
		return 1;
	case TOP_KEY_END:
		st->selected = ngpus ? ngpus - 1 : 0;
		return 1;
	default:
		return 0;
	}
}

/* ---- Lines under construction ---------------------------------------------------- */

struct builder {
	struct top_screen *s;
	int cols;
	int failed;
};

/* A new empty line; NULL out of memory (b->failed set). */
static struct top_line *line_new(struct builder *b)
{
	struct top_line *l;

	if (b->failed || cli_grow(&b->s->lines, &b->s->cap, b->s->n, sizeof(*l), 32)) {
		b->failed = 1;
		return NULL;
	}
	l = &b->s->lines[b->s->n];
	memset(l, 0, sizeof(*l));
	l->text = calloc(1, (size_t)b->cols + 1);
	if (!l->text) {
		b->failed = 1;
		return NULL;
	}
	b->s->n++;
	return l;
}

/* Appends text in a style, cut at the screen's width; returns the columns it took. */
static int put(struct builder *b, struct top_line *l, enum top_style style, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int put(struct builder *b, struct top_line *l, enum top_style style, const char *fmt, ...)
{
	size_t used, room;
	char piece[512];
	va_list ap;
	int len;

	if (!l)
		return 0;
	used = strlen(l->text);
	room = (size_t)b->cols - used;
	va_start(ap, fmt);
	vsnprintf(piece, sizeof(piece), fmt, ap);
	va_end(ap);
	/* no control characters on a screen: a name or command may hold any byte */
	for (char *c = piece; *c; c++)
		if ((unsigned char)*c < ' ' || *c == 0x7f)
			*c = '?';
	len = (int)vd_utf8_copy(l->text + used, piece, room + 1);
	if (style != TOP_PLAIN && len > 0 && l->nspans < TOP_SPANS)
		l->spans[l->nspans++] = (struct top_span){ (unsigned)used, (unsigned)len, style };
	return len;
}

/* Pads the line with blanks up to column col. */
static void pad_to(struct builder *b, struct top_line *l, int col)
{
	size_t used;

	if (!l)
		return;
	used = strlen(l->text);
	while ((int)used < col && (int)used < b->cols)
		l->text[used++] = ' ';
	l->text[used] = '\0';
}

/* A text cut to width characters (ending ".." when cut), left-aligned in it. */
static void fit(char *buf, size_t n, const char *s, int width)
{
	char cut[512];

	cli_cut(cut, sizeof(cut), s, width);
	snprintf(buf, n, "%-*s", width, cut);
}

/* ---- The GPUs ---------------------------------------------------------------- */

/* The style of a device's state. */
static enum top_style state_style(enum vd_state s)
{
	switch (s) {
	case VD_STATE_FREE:
	case VD_STATE_SHARED:
		return TOP_GOOD;
	case VD_STATE_LEASED:
	case VD_STATE_HELD:
		return TOP_WARN;
	case VD_STATE_BUSY:
	case VD_STATE_LOST:
		return TOP_ALERT;
	default:
		return TOP_PLAIN;
	}
}

/* A bar of width cells: "[" used "|", reserved ":", the rest blank "]". */
static void bar(struct builder *b, struct top_line *l, int width, double used, double reserved,
		enum top_style style)
{
	int inner = width - 2, nu, nr;
	char cells[256];

	if (inner < 1)
		return;
	if (inner > (int)sizeof(cells) - 1)
		inner = (int)sizeof(cells) - 1;
	used = used < 0 ? 0 : used > 1 ? 1 : used;
	reserved = reserved < 0 ? 0 : reserved > 1 - used ? 1 - used : reserved;
	nu = (int)(used * inner + 0.5);
	nr = (int)((used + reserved) * inner + 0.5) - nu;
	put(b, l, TOP_PLAIN, "[");
	memset(cells, '|', (size_t)nu);
	cells[nu] = '\0';
	put(b, l, style, "%s", cells);
	memset(cells, ':', (size_t)nr);
	cells[nr] = '\0';
	put(b, l, TOP_RESERVED, "%s", cells);
	memset(cells, ' ', (size_t)(inner - nu - nr));
	cells[inner - nu - nr] = '\0';
	put(b, l, TOP_PLAIN, "%s]", cells);
}

/*
 * The GPU table: "%3u " index, the name and a blank, a memory bar,
 * " %-11s " its figures, a utilisation bar, " %3u%%", " %3dC", " %4uW " and
 * the state.
 */
#define FIXED_COLS (4 + 1 + 13 + 5 + 5 + 7 + 6)

struct columns {
	int name, membar, utilbar;
};

static struct columns columns_for(const struct vd_system *sys, int cols)
{
	struct columns c = { 0 };
	int name = sys ? cli_name_width(sys) : 4, rest;

	for (size_t i = 0; sys && i < sys->ngpus; i++)
		if (sys->gpus[i].nmig) { /* MIG devices are indented under their GPU */
			name += 2;
			break;
		}
	c.name = name > NAME_MAX_COLS ? NAME_MAX_COLS : name;
	rest = cols - FIXED_COLS - c.name;
	if (rest < 16) { /* a narrow screen: the name gives way first */
		c.name -= 16 - rest;
		if (c.name < 6)
			c.name = 6;
		rest = 16;
	}
	c.membar = rest * 3 / 5;
	c.utilbar = rest - c.membar;
	return c;
}

static void gpu_header(struct builder *b, const struct columns *c)
{
	struct top_line *l = line_new(b);
	char name[600], mem[600], util[600];

	fit(name, sizeof(name), "NAME", c->name);
	fit(mem, sizeof(mem), "MEMORY", c->membar);
	fit(util, sizeof(util), "UTIL", c->utilbar);
	put(b, l, TOP_HEADER, "GPU %s %s %-11s %s      TEMP POWER STATE", name, mem, "", util);
}

/* "29.7/32.0G", or without the tenths from 100 GiB on, as the column holds 11. */
static void memory_text(char *buf, size_t n, uint64_t used, uint64_t total)
{
	if (total >= 100 * 1024)
		snprintf(buf, n, "%.0f/%.0fG", used / 1024.0, total / 1024.0);
	else
		snprintf(buf, n, "%.1f/%.1fG", used / 1024.0, total / 1024.0);
}

/* The memory reserved by shared leases and not yet in use on a device, MiB. */
static int64_t reserved_unused(const struct vd_leases *leases, const char *uuid)
{
	int64_t r = 0;

	for (size_t i = 0; leases && i < leases->n; i++)
		if (leases->holders[i].mode == VD_LEASE_SHARED &&
		    !strcmp(leases->holders[i].uuid, uuid))
			r += (int64_t)leases->holders[i].mem_unused_mib;
	return r;
}

/* One row of a device: a whole GPU, or one MIG device under it. */
static void device_row(struct builder *b, const struct top_look *look, const struct columns *c,
		       struct vd_device_ref d, int selected)
{
	const struct vd_system *sys = look->sys;
	const struct vd_gpu *g = &sys->gpus[d.gpu];
	const struct vd_mig *mi = d.mig >= 0 ? &g->mig[d.mig] : NULL;
	struct top_line *l = line_new(b);
	struct vd_device_status st;
	unsigned fields = mi ? mi->fields : g->fields;
	uint64_t used = mi ? mi->memory_used_mib : g->memory_used_mib;
	uint64_t total = mi ? mi->memory_total_mib : g->memory_total_mib;
	char name[600], label[96], mem[32];
	int known = vd_device_status(&st, sys, look->leases, d) == 0;

	if (!l)
		return;
	l->selected = selected;
	if (mi) {
		label[0] = label[1] = ' ';
		cli_mig_label(label + 2, sizeof(label) - 2, mi);
	} else {
		snprintf(label, sizeof(label), "%s", g->name);
	}
	fit(name, sizeof(name), label, c->name);
	if (mi)
		put(b, l, TOP_PLAIN, "    %s ", name);
	else
		put(b, l, TOP_PLAIN, "%3u %s ", g->index, name);
	if (g->lost) {
		put(b, l, TOP_PLAIN, "%-*s ", c->membar + 12 + 1 + c->utilbar + 16,
		    "fell off the bus");
	} else {
		if (fields & VD_GPU_MEMORY) {
			double tot = total ? (double)total : 1;

			bar(b, l, c->membar, (double)used / tot,
			    (double)reserved_unused(look->leases, mi ? mi->uuid : g->uuid) / tot,
			    TOP_USED);
			memory_text(mem, sizeof(mem), used, total);
			put(b, l, TOP_PLAIN, " %-11s ", mem);
		} else {
			put(b, l, TOP_PLAIN, "%-*s %-11s ", c->membar, "?", "");
		}
		if (mi || !(g->fields & VD_GPU_UTILIZATION)) {
			put(b, l, TOP_PLAIN, "%-*s %4s", c->utilbar, mi ? "" : "?", mi ? "" : "?");
		} else {
			bar(b, l, c->utilbar, g->utilization_gpu / 100.0, 0, TOP_LOAD);
			put(b, l, TOP_PLAIN, " %3u%%", g->utilization_gpu);
		}
		if (mi || !(g->fields & VD_GPU_TEMPERATURE))
			put(b, l, TOP_PLAIN, " %4s", mi ? "" : "?");
		else
			put(b, l, TOP_PLAIN, " %3dC", g->temperature_c);
		if (mi || !(g->fields & VD_GPU_POWER))
			put(b, l, TOP_PLAIN, " %5s ", mi ? "" : "?");
		else
			put(b, l, TOP_PLAIN, " %4uW ", (g->power_mw + 500) / 1000);
	}
	put(b, l, known ? state_style(st.state) : TOP_PLAIN, "%s",
	    known ? vd_state_name(st.state) : "?");
}

/* Whether pid is a squatter the audit found on the GPU of that UUID. */
static int is_squatter(const struct vd_audit *a, const char *uuid, uint32_t pid)
{
	for (size_t i = 0; a && i < a->n; i++)
		if (a->findings[i].kind == VD_AUDIT_SQUATTER &&
		    (uint32_t)a->findings[i].pid == pid && !strcmp(a->findings[i].uuid, uuid))
			return 1;
	return 0;
}

static void processes(struct builder *b, const struct top_look *look, const struct vd_gpu *g)
{
	for (size_t i = 0; (g->fields & VD_GPU_PROCESSES) && i < g->nprocesses; i++) {
		const struct vd_process *p = &g->processes[i];
		const struct vd_proc *pp = vd_procs_find(look->procs, p->pid);
		struct top_line *l;
		char mem[16], age[32], user[16];
		int squat = is_squatter(look->audit, g->uuid, p->pid);

		if (i == PROCS_SHOWN) {
			l = line_new(b);
			put(b, l, TOP_PLAIN, "      and %zu more processes", g->nprocesses - i);
			return;
		}
		l = line_new(b);
		if (p->used_known)
			snprintf(mem, sizeof(mem), "%.1fG", p->used_mib / 1024.0);
		else
			snprintf(mem, sizeof(mem), "?");
		cli_format_span(age, sizeof(age), pp && pp->start ? look->now - pp->start : -1);
		cli_cut(user, sizeof(user), p->user[0] ? p->user : "?", 10);
		put(b, l, TOP_PLAIN, "      %7u %-10s %7s %6s ", p->pid, user, mem, age);
		if (squat)
			put(b, l, TOP_ALERT, "squatter ");
		put(b, l, TOP_PLAIN, "%s", pp ? pp->command : p->name[0] ? p->name : "?");
	}
}

/* The GPUs in the order of the sort. */
static void sorted_gpus(size_t *order, const struct vd_system *sys, enum top_sort sort)
{
	for (size_t i = 0; i < sys->ngpus; i++)
		order[i] = i;
	/* insertion sort: a handful of GPUs, and a stable order among equals */
	for (size_t i = 1; i < sys->ngpus; i++) {
		size_t k = order[i], j = i;

		for (; j > 0; j--) {
			const struct vd_gpu *a = &sys->gpus[order[j - 1]], *c = &sys->gpus[k];
			int before;

			if (sort == TOP_SORT_MEMORY)
				before = (c->fields & VD_GPU_MEMORY ? c->memory_used_mib : 0) >
					 (a->fields & VD_GPU_MEMORY ? a->memory_used_mib : 0);
			else if (sort == TOP_SORT_UTILIZATION)
				before = (c->fields & VD_GPU_UTILIZATION ? c->utilization_gpu : 0) >
					 (a->fields & VD_GPU_UTILIZATION ? a->utilization_gpu : 0);
			else
				before = 0;
			if (!before)
				break;
			order[j] = order[j - 1];
		}
		order[j] = k;
	}
}

/* ---- Leases, the line ------------------------------------------------------------ */

static void section(struct builder *b, const char *title)
{
	line_new(b);
	put(b, line_new(b), TOP_HEADER, "%s", title);
}

static void leases_section(struct builder *b, const struct top_look *look)
{
	const struct vd_leases *leases = look->leases;
	size_t n = 0;

	for (size_t i = 0; leases && i < leases->n; i++)
		n += leases->holders[i].mode != VD_LEASE_HELD;
	if (!n)
		return;
	section(b, "LEASES   DEVICE           USER       PID      FOR    USE          COMMAND");
	for (size_t i = 0; i < leases->n; i++) {
		const struct vd_lease_holder *h = &leases->holders[i];
		const struct vd_lease_audit *la = look->audit ? &look->audit->leases[i] : NULL;
		struct top_line *l;
		struct vd_device_ref d;
		char dev[64], user[16], age[32], use[32];
		enum top_style us = TOP_PLAIN;

		if (h->mode == VD_LEASE_HELD)
			continue;
		l = line_new(b);
		if (look->sys && vd_system_find(&d, look->sys, h->uuid) == 0)
			cli_device_short(dev, sizeof(dev), look->sys, d);
		else
			cli_cut(dev, sizeof(dev), h->uuid, 16);
		cli_cut(user, sizeof(user), h->user, 10);
		cli_format_span(age, sizeof(age), h->since > 0 ? look->now - h->since : -1);
		cli_lease_use(use, sizeof(use), look->audit, i);
		if (la && (la->nsquatters || la->use == VD_USE_IDLE))
			us = TOP_ALERT;
		else if (la && la->use == VD_USE_QUIET)
			us = TOP_WARN;
		put(b, l, TOP_PLAIN, "         %-16s %-10s %-8d %-6s ", dev, user, (int)h->pid,
		    age);
		put(b, l, us, "%-12s", use);
		put(b, l, TOP_PLAIN, " %s%s", h->mode == VD_LEASE_SHARED ? "(shared) " : "",
		    h->command);
	}
}

static void line_section(struct builder *b, const struct top_look *look)
{
	if (!look->line || !look->line->n)
		return;
	section(b, "LINE     PLACE  USER       PID      FOR    WANTS             HOLDS  COMMAND");
	for (size_t i = 0; i < look->line->n; i++) {
		const struct vd_waiting *w = &look->line->waiting[i];
		struct top_line *l = line_new(b);
		char user[16], age[32], wants[64];

		cli_cut(user, sizeof(user), w->user, 10);
		cli_format_span(age, sizeof(age), w->since > 0 ? look->now - w->since : -1);
		if (w->mem_mib)
			snprintf(wants, sizeof(wants), "%u GPU%s, %.0fG each", w->n,
				 w->n == 1 ? "" : "s", w->mem_mib / 1024.0);
		else
			snprintf(wants, sizeof(wants), "%u GPU%s", w->n, w->n == 1 ? "" : "s");
		put(b, l, TOP_PLAIN, "         %5u  %-10s %-8d %-6s %-17s %5zu  %s", w->place, user,
		    (int)w->pid, age, wants, w->nholds, w->command);
	}
}

void top_queue_count(struct top_queue *q, const struct vd_journal *j)
{
	int64_t ran_ms = 0;
	size_t ended = 0;

	q->jobs = j->njobs;
	q->done = q->failed = q->running = q->pending = 0;
	for (size_t i = 0; i < j->njobs; i++) {
		const struct vd_journal_job *jj = &j->jobs[i];

		q->done += jj->state == VD_JOB_DONE;
		q->failed += jj->state == VD_JOB_FAILED;
		q->running += jj->state == VD_JOB_RUNNING;
		q->pending += jj->state == VD_JOB_PENDING;
		if ((jj->state == VD_JOB_DONE || jj->state == VD_JOB_FAILED) && jj->start_ms &&
		    jj->end_ms >= jj->start_ms) {
			ran_ms += jj->end_ms - jj->start_ms;
			ended++;
		}
	}
	/* the jobs left, run as many at a time as run now, each as long as the mean so far */
	q->eta_s = -1;
	if (ended && (q->running || !q->pending)) {
		size_t lanes = q->running ? q->running : 1;
		double left = (double)(q->pending + q->running) / (double)lanes;

		q->eta_s = (int64_t)(left * (double)ran_ms / (double)ended / 1000.0 + 0.5);
	}
}

static void queues_section(struct builder *b, const struct top_look *look)
{
	if (!look->nqueues)
		return;
	section(b,
		"QUEUES   USER       PROGRESS                  RUN  FAIL  LEFT  ETA     JOURNAL");
	for (size_t i = 0; i < look->nqueues; i++) {
		const struct top_queue *q = &look->queues[i];
		struct top_line *l = line_new(b);
		char user[16], eta[32], figures[32];

		cli_cut(user, sizeof(user), q->user, 10);
		put(b, l, TOP_PLAIN, "         %-10s ", user);
		if (q->error[0]) {
			put(b, l, TOP_WARN, "%s", q->error);
			continue;
		}
		bar(b, l, 12, q->jobs ? (double)(q->done + q->failed) / (double)q->jobs : 0, 0,
		    q->failed ? TOP_ALERT : TOP_GOOD);
		snprintf(figures, sizeof(figures), "%zu/%zu", q->done + q->failed, q->jobs);
		cli_format_span(eta, sizeof(eta), q->eta_s);
		put(b, l, TOP_PLAIN, " %-12s %4zu ", figures, q->running);
		put(b, l, q->failed ? TOP_ALERT : TOP_PLAIN, "%5zu", q->failed);
		put(b, l, TOP_PLAIN, " %5zu  %-7s %s", q->pending, eta, q->journal);
	}
}

/* The audit's findings, one line each, in the alert style. */
static void audit_section(struct builder *b, const struct top_look *look)
{
	char text[VD_COMMAND_MAX + 256];

	if (!look->audit || !look->audit->n || !look->sys)
		return;
	section(b, "AUDIT");
	for (size_t i = 0; i < look->audit->n; i++) {
		cli_audit_text(text, sizeof(text), look->audit, i, look->sys, look->leases);
		put(b, line_new(b), TOP_ALERT, "         %s", text);
	}
}

/* ---- The whole screen --------------------------------------------------------- */

static void title(struct builder *b, const struct top_look *look, const struct top_state *st)
{
	struct top_line *l = line_new(b);
	char clock[32], age[32];
	size_t nleases = 0;

	for (size_t i = 0; look->leases && i < look->leases->n; i++)
		nleases += look->leases->holders[i].mode != VD_LEASE_HELD;
	/* the clock alone: "2026-12-07T04:50:22+00:00" from its hour to its second */
	vd_format_time(clock, sizeof(clock), look->now);
	if (strlen(clock) >= 19)
		memmove(clock, clock + 11, 9);
	clock[8] = '\0';
	put(b, l, TOP_TITLE, "visdev top");
	put(b, l, TOP_PLAIN, "  %s  %zu GPU%s, %zu lease%s, %zu waiting  every %gs, sort %s", clock,
	    look->sys ? look->sys->ngpus : 0, look->sys && look->sys->ngpus == 1 ? "" : "s",
	    nleases, nleases == 1 ? "" : "s", look->line ? look->line->n : 0, st->interval,
	    top_sort_name(st->sort));
	if ((int)strlen(l ? l->text : "") + 8 <= b->cols) {
		pad_to(b, l, b->cols - 8);
		put(b, l, TOP_PLAIN, "  ? help");
	}
	if (look->error) {
		l = line_new(b);
		cli_format_span(age, sizeof(age), look->taken ? look->now - look->taken : -1);
		put(b, l, TOP_ALERT, "%s; retrying (what is shown is %s old)", look->error, age);
	}
	/* a line each: the note may say several things */
	for (const char *p = look->note; p && *p;) {
		int len = (int)strcspn(p, "\n");

		put(b, line_new(b), TOP_WARN, "%.*s", len, p);
		p += len + (p[len] == '\n');
	}
}

static void help(struct builder *b, const struct top_state *st)
{
	static const char *const keys[] = {
		"q            quit",
		"up, down, j, k  move between GPUs (Home, End: first, last)",
		"p            hide or show the processes",
		"s            sort by index, memory in use, utilisation",
		"+, -         look less or more often (0.5 s to 60 s)",
		"?, Escape    this help, or back",
		"",
		"Bars: memory in use |, reserved by shared leases but not yet in use :,",
		"utilisation |. USE of a lease: active, quiet or idle for how long,",
		"squatted (a process outside every job leasing the GPU is on it).",
		"NO_COLOR set: no colours. Not on a terminal: visdev list --watch SECONDS.",
	};

	put(b, line_new(b), TOP_TITLE, "visdev top: keys (every %gs, sort %s)", st->interval,
	    top_sort_name(st->sort));
	line_new(b);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		put(b, line_new(b), TOP_PLAIN, "  %s", keys[i]);
}

/* Keeps the fixed top lines and a window of the rest that shows the selected row. */
static void scroll(struct top_screen *s, size_t fixed, int rows)
{
	size_t sel = SIZE_MAX, first, room;

	if (s->n <= (size_t)rows)
		return;
	for (size_t i = fixed; i < s->n; i++)
		if (s->lines[i].selected)
			sel = i;
	room = (size_t)rows > fixed ? (size_t)rows - fixed : 0;
	first = fixed;
	if (sel != SIZE_MAX && room && sel >= fixed + room)
		first = sel - room + 1;
	for (size_t i = fixed; i < first; i++)
		free(s->lines[i].text);
	memmove(&s->lines[fixed], &s->lines[first], (s->n - first) * sizeof(*s->lines));
	s->n -= first - fixed;
	for (size_t i = (size_t)rows; i < s->n; i++)
		free(s->lines[i].text);
	s->n = (size_t)rows;
}

int top_render(struct top_screen *out, const struct top_look *look, const struct top_state *st,
	       int rows, int cols)
{
	struct builder b = { out, cols < 20 ? 20 : cols, 0 };
	const struct vd_system *sys = look->sys;
	size_t fixed, *order = NULL;
	struct columns c;

	memset(out, 0, sizeof(*out));
	rows = rows < 1 ? 1 : rows;
	if (st->help) {
		help(&b, st);
		scroll(out, 0, rows);
		return b.failed ? -1 : 0;
	}
	title(&b, look, st);
	c = columns_for(sys, b.cols);
	gpu_header(&b, &c);
	fixed = out->n;
	if (sys && sys->ngpus && !(order = calloc(sys->ngpus, sizeof(*order))))
		b.failed = 1;
	if (!sys)
		put(&b, line_new(&b), TOP_PLAIN, "no look at the GPUs yet");
	else if (!sys->ngpus)
		put(&b, line_new(&b), TOP_PLAIN, "no GPU found");
	if (order)
		sorted_gpus(order, sys, st->sort);
	for (size_t k = 0; order && k < sys->ngpus; k++) {
		const struct vd_gpu *g = &sys->gpus[order[k]];

		device_row(&b, look, &c, (struct vd_device_ref){ (unsigned)order[k], -1 },
			   k == (st->selected < sys->ngpus ? st->selected : sys->ngpus - 1));
		for (size_t m = 0; m < g->nmig; m++)
			device_row(&b, look, &c,
				   (struct vd_device_ref){ (unsigned)order[k], (int)m }, 0);
		if (!st->hide_processes)
			processes(&b, look, g);
	}
	free(order);
	leases_section(&b, look);
	line_section(&b, look);
	queues_section(&b, look);
	audit_section(&b, look);
	if (!b.failed)
		scroll(out, fixed, rows);
	return b.failed ? -1 : 0;
}

void top_screen_release(struct top_screen *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->lines[i].text);
	free(s->lines);
	memset(s, 0, sizeof(*s));
}
