/*
 * mock.h - the stand-in NVML and libcuda (tests/mock-nvml) as the unit
 * tests find them: in the folder MOCK_NVML_DIR names, which the Makefile's
 * test target sets.
 */
#ifndef VISDEV_TESTS_MOCK_H
#define VISDEV_TESTS_MOCK_H

#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

/* The stand-ins' paths, set by mock_find(). */
static char mock_new[4096], mock_old[4096], mock_cuda[4096];

/* Each fault the stand-ins inject when their variable is set. */
static const char *const mock_fault_vars[] = {
	"MOCK_NVML_INIT_FAIL",	 "MOCK_NVML_LOST", "MOCK_NVML_NOT_SUPPORTED",
	"MOCK_NVML_SMALL_FIRST", "MOCK_CUDA_FAIL",
};

/*
 * Sets the stand-ins' paths and clears every injected fault, for a test's
 * setup; -1, with a message, when MOCK_NVML_DIR is not set.
 */
static inline int mock_find(void)
{
	const char *dir = getenv("MOCK_NVML_DIR");

	if (!dir || !*dir) {
		fprintf(stderr, "MOCK_NVML_DIR is not set: run the tests with 'make test'\n");
		return -1;
	}
	snprintf(mock_new, sizeof(mock_new), "%s/libnvidia-ml.so.1", dir);
	snprintf(mock_old, sizeof(mock_old), "%s/old/libnvidia-ml.so.1", dir);
	snprintf(mock_cuda, sizeof(mock_cuda), "%s/libcuda.so.1", dir);
	for (size_t i = 0; i < ARRAY_SIZE(mock_fault_vars); i++)
		unsetenv(mock_fault_vars[i]);
	/* no cache of CUDA's order: every open asks the stand-in driver, as each test expects */
	setenv("XDG_CACHE_HOME", "/dev/null/no-cache", 1);
	return 0;
}

#endif
