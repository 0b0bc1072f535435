/*
 * table.c - text tables for people, fitted to CLI_COLUMNS (table.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quote.h"
#include "table.h"
#include "visdev.h"

int cli_grow(void *items_ptr, size_t *cap, size_t n, size_t size, size_t first)
{
	void *items, *more;
	size_t c;

	if (n < *cap)
		return 0;
	c = *cap ? 2 * *cap : first;
	memcpy(&items, items_ptr, sizeof(items));
	more = realloc(items, c * size);
	if (!more)
		return -1;
	memcpy(items_ptr, &more, sizeof(more));
	*cap = c;
	return 0;
}

const char *cli_cut(char *buf, size_t n, const char *s, int width)
{
	size_t len = strlen(s);

	if (len <= (size_t)width) {
		snprintf(buf, n, "%s", s);
		return buf;
	}
	vd_utf8_copy(buf, s, (size_t)width - 1 < n ? (size_t)width - 1 : n);
	snprintf(buf + strlen(buf), n - strlen(buf), "..");
	return buf;
}

void cli_table_init(struct cli_table *t, const struct cli_column *columns, size_t ncolumns)
{
	memset(t, 0, sizeof(*t));
	t->columns = columns;
	t->ncolumns = ncolumns;
}

int cli_table_add(struct cli_table *t, ...)
{
	size_t first = t->nrows * t->ncolumns;
	va_list ap;
	int rc = 0;

	/* a row of cells is one item */
	if (cli_grow(&t->cells, &t->cap, t->nrows, t->ncolumns * sizeof(*t->cells), 8))
		return -1;
	va_start(ap, t);
	for (size_t i = 0; i < t->ncolumns; i++) {
		t->cells[first + i] = strdup(va_arg(ap, const char *));
		if (!t->cells[first + i])
			rc = -1;
	}
	va_end(ap);
	if (rc) {
		for (size_t i = 0; i < t->ncolumns; i++)
			free(t->cells[first + i]);
		return -1;
	}
	t->nrows++;
	return 0;
}

/* One line: each cell cut to its column's width, the last not padded. */
static void print_row(const struct cli_table *t, const int *width, const char *const *cells)
{
	for (size_t i = 0; i < t->ncolumns; i++) {
		char shown[4 * CLI_COLUMNS];
		int last = i + 1 == t->ncolumns;

		cli_cut(shown, sizeof(shown), cells[i], width[i]);
		if (last)
			cli_printf("%s\n", shown);
		else
			cli_printf(t->columns[i].right ? "%*s  " : "%-*s  ", width[i], shown);
	}
}

void cli_table_print(const struct cli_table *t)
{
	const char *headers[16];
	int width[16], used = 0;

	if (t->ncolumns > 16 || !t->ncolumns)
		return;
	for (size_t i = 0; i < t->ncolumns; i++) {
		const struct cli_column *c = &t->columns[i];

		headers[i] = c->header;
		width[i] = (int)strlen(c->header);
		for (size_t r = 0; r < t->nrows; r++) {
			int len = (int)strlen(t->cells[r * t->ncolumns + i]);

			width[i] = len > width[i] ? len : width[i];
		}
		if (c->max && width[i] > c->max)
			width[i] = c->max;
		if (i + 1 < t->ncolumns)
			used += width[i] + 2;
	}
	/* the last column takes what is left, and never less than its header */
	if (used + width[t->ncolumns - 1] > CLI_COLUMNS)
		width[t->ncolumns - 1] = CLI_COLUMNS - used;
	if (width[t->ncolumns - 1] < (int)strlen(headers[t->ncolumns - 1]))
		width[t->ncolumns - 1] = (int)strlen(headers[t->ncolumns - 1]);
	print_row(t, width, headers);
	for (size_t r = 0; r < t->nrows; r++)
		print_row(t, width, (const char *const *)&t->cells[r * t->ncolumns]);
}

void cli_table_release(struct cli_table *t)
{
	for (size_t i = 0; i < t->nrows * t->ncolumns; i++)
		free(t->cells[i]);
	free(t->cells);
	t->cells = NULL;
	t->nrows = t->cap = 0;
}
