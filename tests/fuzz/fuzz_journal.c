/*
 * fuzz_journal.c - libFuzzer target for a queue's journal, which a crash may
 * leave cut anywhere: whatever the bytes, reading them must not crash, and
 * what is read must hold together.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vd_journal *j = NULL;

	if (vd_journal_parse(&j, (const char *)data, size) == 0) {
		if (j->whole > size || (j->torn != (j->whole < size)))
			abort();
		for (size_t i = 0; i < j->njobs; i++) {
			const struct vd_journal_job *jj = &j->jobs[i];

			if (!vd_job_state_name(jj->state))
				abort();
			if ((jj->state != VD_JOB_PENDING) != (jj->command != NULL))
				abort();
			if (jj->state == VD_JOB_DONE && jj->status != 0)
				abort();
		}
	}
	vd_journal_free(j);
	return 0;
}
