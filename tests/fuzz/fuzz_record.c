/*
 * fuzz_record.c - libFuzzer target for lease records, which anyone who can
 * write to the lease directory can write: whatever the bytes, reading them
 * must not crash, and every holder read must carry valid UTF-8 strings.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "internal.h"

/* Aborts unless s is a terminated string of at most n bytes that JSON can carry. */
static void check_string(const char *s, size_t n)
{
	json_t *v;

	if (!memchr(s, '\0', n))
		abort();
	v = json_string(s);
	if (!v)
		abort();
	json_decref(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vd_leases l = { 0 };

	if (lease_record_parse(&l, (const char *)data, size) == 0) {
		for (size_t i = 0; i < l.n; i++) {
			const struct vd_lease_holder *h = &l.holders[i];

			check_string(h->uuid, sizeof(h->uuid));
			check_string(h->user, sizeof(h->user));
			check_string(h->command, sizeof(h->command));
			if (h->mode != VD_LEASE_EXCLUSIVE && h->mode != VD_LEASE_SHARED)
				abort();
			if (h->mem_unused_mib != h->mem_mib)
				abort();
		}
	}
	free(l.holders);
	return 0;
}
