/*
 * cmd_top.c - `visdev top`: the live view of a shared server in a terminal.
 * Each look (the GPUs, the leases, the line, the audit) is made here; what
 * it shows is topview.c's, drawn with curses.
 */
#include <curses.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "topview.h"

static const char usage[] =
	"usage: visdev top [--interval SECONDS] [--idle MINUTES] [--color WHEN]\n"
	"                  [--demo | --fixture FILE | --nvml-lib PATH]\n"
	"\n"
	"A live view of the machine in the terminal: each GPU with its memory (in use,\n"
	"and reserved by shared leases but not yet in use), utilisation, temperature,\n"
	"power and state, the processes on it (pid, user, memory, run time, command),\n"
	"the leases with what the audit says of each, the line of waiting requests,\n"
	"and the audit's findings. Keys: q quits, arrows or j/k move, p hides the\n"
	"processes, s changes the sort, + and - the interval, ? shows them all.\n"
	"For a log or a pipe, where there is no terminal: visdev list --watch SECONDS.\n"
	"\n"
	"  --interval SECONDS how often to look (0.5 to 60, default 1)\n"
	"  --idle MINUTES     a lease whose job has not used its GPU for this long,\n"
	"                     at every look, is idle (default 30)\n"
	"  --color WHEN       auto (unless NO_COLOR is set), always or never\n"
	"  --json             refused: for JSON again and again, 'visdev list --watch\n"
	"                     SECONDS --json' prints one object a line\n"
	"  --demo             use the built-in demo server (four GPUs)\n"
	"  --fixture FILE     use a simulated server described in FILE (JSON)\n"
	"  --nvml-lib PATH    load this libnvidia-ml instead of the system's\n"
	"  -h, --help         show this help\n";

/* clang-format off */
static const struct option options[] = {
	{ "interval", required_argument, NULL, 'i' },
	{ "idle", required_argument, NULL, 'I' },
	{ "color", required_argument, NULL, 'c' },
	CLI_GLOBAL_OPTIONS
};
/* clang-format on */

/* What the screen shows: the last good look, and why a later one failed. */
struct looks {
	struct vd_backend *backend;
	struct vd_system *sys;
	struct cli_look around;	  /* the leases, their audit, the line */
	struct top_queue *queues; /* the queues whose jobs hold leases */
	size_t nqueues, capqueues;
	char error[512]; /* why the last look failed */
	char note[1024]; /* what this look could not have (the audit's memory, the line) */
	int64_t taken;
	double idle;
};

/* Each queue whose job holds a lease, once, with where it stands by its journal. */
static void read_queues(struct looks *k)
{
	k->nqueues = 0;
	for (size_t i = 0; k->around.leases && i < k->around.leases->n; i++) {
		const struct vd_lease_holder *h = &k->around.leases->holders[i];
		struct vd_journal *j = NULL;
		struct top_queue *q;
		size_t seen = 0;

		if (h->mode == VD_LEASE_HELD || !h->journal[0])
			continue;
		while (seen < k->nqueues && strcmp(k->queues[seen].journal, h->journal))
			seen++;
		if (seen < k->nqueues ||
		    cli_grow(&k->queues, &k->capqueues, k->nqueues, sizeof(*q), 4))
			continue;
		q = &k->queues[k->nqueues++];
		memset(q, 0, sizeof(*q));
		snprintf(q->journal, sizeof(q->journal), "%s", h->journal);
		snprintf(q->user, sizeof(q->user), "%s", h->user);
		/* another user's journal may be unreadable: the queue is shown, its progress not */
		if (vd_journal_read(&j, h->journal))
			snprintf(q->error, sizeof(q->error), "%s", vd_error_last());
		else
			top_queue_count(q, j);
		vd_journal_free(j);
	}
}

static void forget(struct looks *k)
{
	k->nqueues = 0;
	cli_look_release(&k->around);
}

/*
 * Looks again. A snapshot that fails (NVML erring for a moment) keeps the
 * last one on screen under the error; nothing here prints, curses owns the
 * terminal.
 */
static void look(struct looks *k)
{
	struct vd_system *sys = NULL;
	int err = vd_backend_snapshot(&sys, k->backend);

	k->error[0] = '\0';
	if (err) {
		snprintf(k->error, sizeof(k->error), "the GPUs could not be read: %s",
			 vd_error_last());
		return;
	}
	forget(k);
	vd_system_free(k->sys);
	k->sys = sys;
	k->taken = (int64_t)time(NULL);
	cli_look_around(&k->around, sys, k->idle, k->note, sizeof(k->note));
	read_queues(k);
}

/* Colour pairs, one per style; attributes alone without colour. */
static int style_attr(enum top_style s, int color)
{
	static const int bold[TOP_STYLES] = {
		[TOP_TITLE] = 1,
		[TOP_HEADER] = 1,
		[TOP_ALERT] = 1,
	};
	int a = bold[s] ? A_BOLD : A_NORMAL;

	if (color && s != TOP_PLAIN && s != TOP_TITLE && s != TOP_HEADER)
		a |= COLOR_PAIR(s);
	if (!color && s == TOP_RESERVED)
		a |= A_DIM;
	return a;
}

static void start_colors(void)
{
	static const short fg[TOP_STYLES] = {
		[TOP_USED] = COLOR_GREEN, [TOP_RESERVED] = COLOR_YELLOW, [TOP_LOAD] = COLOR_CYAN,
		[TOP_GOOD] = COLOR_GREEN, [TOP_WARN] = COLOR_YELLOW,	 [TOP_ALERT] = COLOR_RED,
	};

	start_color();
	use_default_colors();
	for (int s = 1; s < TOP_STYLES; s++)
		init_pair((short)s, fg[s] ? fg[s] : -1, -1);
}

static void draw(const struct top_screen *screen, int color)
{
	erase();
	for (size_t y = 0; y < screen->n && (int)y < LINES; y++) {
		const struct top_line *l = &screen->lines[y];
		unsigned at = 0;

		move((int)y, 0);
		if (l->selected)
			attron(A_REVERSE);
		for (unsigned i = 0; i <= l->nspans; i++) {
			unsigned start =
				i < l->nspans ? l->spans[i].start : (unsigned)strlen(l->text);

			if (start > at)
				addnstr(l->text + at, (int)(start - at));
			if (i == l->nspans)
				break;
			attron(style_attr(l->spans[i].style, color));
			addnstr(l->text + start, (int)l->spans[i].len);
			attroff(style_attr(l->spans[i].style, color));
			at = start + l->spans[i].len;
		}
		if (l->selected) {
			/* the whole row, to the edge */
			for (int x = (int)strlen(l->text); x < COLS; x++)
				addch(' ');
			attroff(A_REVERSE);
		}
	}
	refresh();
}

/* curses' keys as top_key() knows them. */
static int key_of(int ch)
{
	switch (ch) {
	case KEY_UP:
		return TOP_KEY_UP;
	case KEY_DOWN:
		return TOP_KEY_DOWN;
	case KEY_HOME:
		return TOP_KEY_HOME;
	case KEY_END:
		return TOP_KEY_END;
	default:
		return ch;
	}
}

/* The screen until q: a look every interval, a key or a resize drawn at once. */
static int run_screen(struct looks *k, struct top_state *st, int color)
{
	struct top_screen screen;
	struct top_look tl;
	double next = 0;
	int dirty = 1;

	while (!st->quit) {
		int ch;
		double wait;

		if (cli_now() >= next) {
			look(k);
			next = cli_now() + st->interval;
			dirty = 1;
		}
		if (dirty) {
			tl = (struct top_look){ .sys = k->sys,
						.leases = k->around.leases,
						.line = k->around.line,
						.audit = k->around.audit,
						.procs = k->around.procs,
						.error = k->error[0] ? k->error : NULL,
						.note = k->note[0] ? k->note : NULL,
						.now = (int64_t)time(NULL),
						.taken = k->taken,
						.idle = k->idle,
						.queues = k->queues,
						.nqueues = k->nqueues };
			if (top_render(&screen, &tl, st, LINES, COLS))
				return EXIT_FAIL;
			draw(&screen, color);
			top_screen_release(&screen);
			dirty = 0;
		}
		wait = next - cli_now();
		timeout(wait <= 0 ? 0 : (int)(wait * 1000) + 1);
		ch = getch();
		if (ch == ERR)
			continue;
		if (ch == KEY_RESIZE) {
			dirty = 1;
		} else {
			double before = st->interval;

			dirty = top_key(st, key_of(ch), k->sys ? k->sys->ngpus : 0);
			/* a new interval starts from now */
			if (st->interval != before)
				next = cli_now() + st->interval;
		}
	}
	return EXIT_OK;
}

int cmd_top(int argc, char **argv)
{
	struct cli_globals g = { 0 };
	struct looks k = { .idle = CLI_IDLE_DEFAULT };
	struct top_state st;
	const char *when = NULL;
	SCREEN *screen;
	double interval = 1;
	int opt, rc, color;

	while ((opt = cli_getopt(argc, argv, "h", options)) != -1) {
		if (opt == 'i' && cli_parse_seconds(&interval, "--interval", optarg, 0.5, 60))
			return EXIT_USAGE;
		else if (opt == 'I' && cli_parse_idle(&k.idle, optarg))
			return EXIT_USAGE;
		else if (opt == 'c')
			when = optarg;
		else if (opt != 'i' && opt != 'I' && opt != 'c' &&
			 !cli_global_option(&g, opt, optarg))
			return EXIT_USAGE;
	}
	if (g.help) {
		fputs(usage, stdout);
		return EXIT_OK;
	}
	if (optind < argc)
		return cli_usage(argv[0], "top takes no arguments ('%s' given)", argv[optind]);
	if (g.json)
		return cli_usage(argv[0], "top is for a terminal: for JSON again and again, use "
					  "'visdev list --watch SECONDS --json'");
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		cli_error("top draws on a terminal, and this is none: for a log or a pipe, use "
			  "'visdev list --watch SECONDS' (--json for one object a line)");
		return EXIT_FAIL;
	}
	color = cli_color_choice(argv[0], when);
	if (color < 0)
		return EXIT_USAGE;
	rc = cli_backend(&k.backend, &g);
	if (rc)
		return rc;
	/* its warnings (an owner who could empty it) now, while stderr is still a terminal's */
	cli_lease_dir();
	setlocale(LC_ALL, "");
	screen = newterm(NULL, stdout, stdin);
	if (!screen) {
		cli_error("cannot draw on this terminal (TERM=%s)", getenv("TERM"));
		vd_backend_free(k.backend);
		return EXIT_FAIL;
	}
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	curs_set(0);
	if (color && has_colors())
		start_colors();
	else
		color = 0;
	top_state_init(&st, interval);
	rc = run_screen(&k, &st, color);
	endwin();
	delscreen(screen);
	forget(&k);
	free(k.queues);
	vd_system_free(k.sys);
	vd_backend_free(k.backend);
	if (rc)
		cli_error("out of memory");
	return rc;
}
