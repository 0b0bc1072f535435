/*
 * fuzz_fixture.c - libFuzzer target for the fixture parser: any bytes must
 * give a snapshot or VD_EPARSE/VD_ENOMEM with a one-line message, never a
 * crash, a leak or a read outside the input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vd_system *sys = NULL, *copy = NULL;
	int err;

	err = fixture_parse(&sys, (const char *)data, size, "fuzz.json");
	if (err) {
		if ((err != VD_EPARSE && err != VD_ENOMEM) || sys || strchr(vd_error_last(), '\n'))
			abort();
		return 0;
	}
	/* What parses is whole: indices in order, links in range, and it copies. */
	for (size_t i = 0; i < sys->ngpus; i++)
		if (sys->gpus[i].index != i)
			abort();
	for (size_t i = 0; i < sys->nlinks; i++)
		if (sys->links[i].a >= sys->links[i].b || sys->links[i].b >= sys->ngpus)
			abort();
	if (system_copy(&copy, sys) == 0)
		vd_system_free(copy);
	vd_system_free(sys);
	return 0;
}
