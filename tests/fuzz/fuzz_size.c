/*
 * fuzz_size.c - libFuzzer target for vd_parse_size_mib: any bytes must give
 * a size or VD_EINVAL with a one-line message, never a crash or a read
 * outside the input; a size that parses is at most INT64_MAX MiB and parses
 * again, written as a number of MiB ("NM"), to itself.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), again[32];
	uint64_t mib = 1, mib2 = 0;
	int err;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	err = vd_parse_size_mib(&mib, text);
	if (err) {
		if (err != VD_EINVAL || mib != 0 || strchr(vd_error_last(), '\n') ||
		    strncmp(vd_error_last(), "invalid size '", 14) != 0)
			abort();
	} else {
		if (mib > (uint64_t)INT64_MAX)
			abort();
		snprintf(again, sizeof(again), "%" PRIu64 "M", mib);
		if (vd_parse_size_mib(&mib2, again) || mib2 != mib)
			abort();
	}
	free(text);
	return 0;
}
