/*
 * fuzz_slurm.c - libFuzzer target for what the Slurm dispatcher reads: a
 * state folder's queue.json (on a shared file system, anyone's to damage),
 * squeue's tasks and scontrol's MaxArraySize. Reading must not crash, and
 * what is read must hold together.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vd_slurm_queue *q = NULL;
	struct vd_slurm_task *t = NULL;
	char *text = malloc(size + 1);
	size_t n = 0, max = 0;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (vd_slurm_queue_parse(&q, text, size) == 0) {
		for (size_t i = 0; i < q->narrays; i++)
			if (!q->arrays[i].indices || q->arrays[i].njobs > q->njobs)
				abort();
		for (size_t i = 0; i < q->njobs; i++)
			if (!q->commands[i])
				abort();
	}
	vd_slurm_queue_free(q);
	if (vd_slurm_tasks_parse(&t, &n, text) == 0)
		for (size_t i = 0; i < n; i++)
			if (!t[i].array[0] || !memchr(t[i].state, '\0', sizeof(t[i].state)))
				abort();
	free(t);
	vd_slurm_max_array(&max, text);
	free(text);
	return 0;
}
