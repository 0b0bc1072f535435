/*
 * table.h - text tables for people: columns as wide as what they hold, at
 * most CLI_COLUMNS in all, a cell too long for its column cut and ending
 * "..". The last column takes what the others leave, so a long command line
 * is cut rather than the columns before it.
 */
#ifndef VISDEV_TABLE_H
#define VISDEV_TABLE_H

#include <stddef.h>

/* Every line of a table fits in this many columns. */
#define CLI_COLUMNS 100

/*
 * Room for one more item in a growing array: *items_ptr (a pointer to the
 * array's pointer) of *cap items of size bytes, n of them used, is doubled
 * (to first items at first) when full. Returns 0, or -1 out of memory.
 */
int cli_grow(void *items_ptr, size_t *cap, size_t n, size_t size, size_t first);

/* s into buf, cut to at most width bytes and then ending "..". Returns buf. */
const char *cli_cut(char *buf, size_t n, const char *s, int width);

/* A column: its header, the most it may take (0: as much as it needs), its side. */
struct cli_column {
	const char *header;
	int max;
	int right; /* aligned right, as numbers are */
};

/* A table; the caller owns it, its rows are its own copies. */
struct cli_table {
	const struct cli_column *columns;
	size_t ncolumns;
	char **cells; /* row after row, ncolumns a row */
	size_t nrows, cap;
};

/* An empty table of ncolumns columns (columns must outlive it). */
void cli_table_init(struct cli_table *t, const struct cli_column *columns, size_t ncolumns);

/* Adds a row of ncolumns strings, copied. Returns 0, or -1 out of memory. */
int cli_table_add(struct cli_table *t, ...);

/* Writes the header and the rows, escaped, to stdout. */
void cli_table_print(const struct cli_table *t);

/* Frees the rows; the table is empty again. */
void cli_table_release(struct cli_table *t);

#endif
