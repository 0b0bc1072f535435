/*
 * fuzz_jobs.c - libFuzzer target for a queue's job file and its grids: the
 * bytes are a job file; and, split at the first two NULs, a template and a
 * grid. Whatever they are, reading them must not crash, and what is read
 * must be what the text says.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct vd_jobs *j = NULL;
	char *copy;

	if (vd_jobs_parse(&j, text, size) == 0) {
		for (size_t i = 0; i < j->n; i++)
			if (strchr(j->commands[i], '\n') || !j->commands[i][0] || j->lines[i] == 0)
				abort();
	} else if (!memchr(text, '\0', size)) {
		abort(); /* only a NUL makes a job file unreadable */
	}
	vd_jobs_free(j);
	/* a template, then a grid, each ended by a NUL */
	copy = malloc(size + 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	copy[size] = '\0';
	{
		const char *templ = copy, *grid = copy + strlen(copy) + 1;
		const char *grids[1] = { grid };

		j = NULL;
		if (grid <= copy + size && vd_jobs_grid(&j, templ, grids, 1) == 0 && j->n == 0)
			abort();
		vd_jobs_free(j);
	}
	free(copy);
	return 0;
}
