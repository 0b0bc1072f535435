/*
 * fuzz_line.c - libFuzzer target for the records of the line, which anyone
 * who can write to the lease directory can write: whatever the bytes,
 * reading them must not crash, and a record taken as whole must be sane.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vd_waiting w = { 0 };
	int ok = line_record_parse(&w, (const char *)data, size, 7);

	if (ok == 1) {
		if (w.ticket != 7 || w.n < 1 || w.pid < 1 || w.max_util < -1 || w.max_util > 100 ||
		    !memchr(w.model, '\0', sizeof(w.model)) ||
		    !memchr(w.command, '\0', sizeof(w.command)))
			abort();
		for (size_t i = 0; i < w.nwithin; i++)
			if (strlen(w.within[i]) >= VD_UUID_MAX)
				abort();
	}
	line_waiting_clear(&w);
	return 0;
}
