/*
 * test_cuda.c - vd_cuda_enumerate(), run against the stand-in libcuda.
 *
 * The stand-in (tests/mock-nvml/mock-cuda.c) lists the GPUs of the fixture
 * named by MOCK_NVML_FIXTURE: by cuda_rank when CUDA_DEVICE_ORDER is
 * FASTEST_FIRST, by index when it is PCI_BUS_ID. MOCK_NVML_DIR names the
 * folder of the built stand-ins; the Makefile's test target sets it. Run
 * from the top of the tree: fixtures are read by relative path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"
#include "mock.h"

/* Finds the stand-ins; each test starts on mixed.json, with no fault injected. */
static int setup(void **state)
{
	(void)state;
	if (mock_find())
		return -1;
	unsetenv("VISDEV_CUDA_LIB");
	setenv("MOCK_NVML_FIXTURE", "tests/fixtures/mixed.json", 1);
	return 0;
}

/* The GPU of sys with cuda_rank rank. */
static const struct vd_gpu *ranked(const struct vd_system *sys, unsigned rank)
{
	for (size_t i = 0; i < sys->ngpus; i++)
		if ((sys->gpus[i].fields & VD_GPU_CUDA_RANK) && sys->gpus[i].cuda_rank == rank)
			return &sys->gpus[i];
	fail_msg("no GPU has cuda_rank %u", rank);
	return NULL;
}

/* Both orders of every fixture with ranks are the fixture's. */
static void test_orders(void **state)
{
	static const char *const fixtures[] = {
		"tests/fixtures/mixed.json",  "tests/fixtures/eight.json",
		"tests/fixtures/engine.json", "tests/fixtures/mig.json",
		"tests/fixtures/lost.json",
	};

	(void)state;
	for (size_t f = 0; f < ARRAY_SIZE(fixtures); f++) {
		struct vd_system *sys = NULL;
		char **uuids = NULL;
		size_t n = 0, nranked = 0;

		print_message("# %s\n", fixtures[f]);
		setenv("MOCK_NVML_FIXTURE", fixtures[f], 1);
		assert_int_equal(fixture_load(&sys, fixtures[f]), 0);

		assert_int_equal(vd_cuda_enumerate(&uuids, &n, mock_cuda, NULL, VD_ORDER_PCI), 0);
		assert_int_equal(n, sys->ngpus);
		for (size_t i = 0; i < n; i++)
			assert_string_equal(uuids[i], sys->gpus[i].uuid);
		vd_strings_free(uuids, n);

		for (size_t i = 0; i < sys->ngpus; i++)
			nranked += !!(sys->gpus[i].fields & VD_GPU_CUDA_RANK);
		assert_int_equal(vd_cuda_enumerate(&uuids, &n, mock_cuda, NULL, VD_ORDER_FASTEST),
				 0);
		assert_int_equal(n, nranked);
		for (size_t i = 0; i < n; i++)
			assert_string_equal(uuids[i], ranked(sys, (unsigned)i)->uuid);
		vd_strings_free(uuids, n);
		vd_system_free(sys);
	}
}

/* mixed.json's fastest-first order differs from PCI order: spelt out. */
static void test_mixed_fastest(void **state)
{
	char **uuids = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(vd_cuda_enumerate(&uuids, &n, mock_cuda, NULL, VD_ORDER_FASTEST), 0);
	assert_int_equal(n, 4);
	assert_string_equal(uuids[0], "GPU-c40d7e15-2b96-4fa8-8e03-5a71f2c9d4b6");
	assert_string_equal(uuids[1], "GPU-6e29b4d0-8a71-4c35-b0f2-1d84c6e9a307");
	assert_string_equal(uuids[2], "GPU-93b58f2a-7c04-4d19-96e5-f0a2b7c8d361");
	assert_string_equal(uuids[3], "GPU-1f6a0c93-5d2e-4b87-a4c1-93e7d05b2f68");
	assert_null(uuids[4]);
	vd_strings_free(uuids, n);
}

/* The value reaches the driver; this process's environment is untouched. */
static void test_value(void **state)
{
	char **uuids = NULL;
	size_t n = 0;

	(void)state;
	setenv("CUDA_VISIBLE_DEVICES", "0", 1);
	unsetenv("CUDA_DEVICE_ORDER");
	assert_int_equal(vd_cuda_enumerate(&uuids, &n, mock_cuda, "3,1", VD_ORDER_PCI), 0);
	assert_int_equal(n, 2);
	assert_string_equal(uuids[0], "GPU-93b58f2a-7c04-4d19-96e5-f0a2b7c8d361");
	assert_string_equal(uuids[1], "GPU-6e29b4d0-8a71-4c35-b0f2-1d84c6e9a307");
	vd_strings_free(uuids, n);
	assert_string_equal(getenv("CUDA_VISIBLE_DEVICES"), "0");
	assert_null(getenv("CUDA_DEVICE_ORDER"));

	/* the empty value: the driver sees no device, which is no error */
	assert_int_equal(vd_cuda_enumerate(&uuids, &n, mock_cuda, "", VD_ORDER_FASTEST), 0);
	assert_int_equal(n, 0);
	vd_strings_free(uuids, n);
	unsetenv("CUDA_VISIBLE_DEVICES");
}

/* A MIG instance's UUID comes back as MIG-, its GPU's as GPU-. */
static void test_mig_uuid(void **state)
{
	char **uuids = NULL;
	size_t n = 0;

	(void)state;
	setenv("MOCK_NVML_FIXTURE", "tests/fixtures/mig.json", 1);
	assert_int_equal(vd_cuda_enumerate(&uuids, &n, mock_cuda,
					   "MIG-d72a14e8-6b03-5f9c-8d21-40ce95a7f3b2,"
					   "GPU-e83d0a67-1c4f-4b92-a5e8-2f7b96c0d143",
					   VD_ORDER_FASTEST),
			 0);
	assert_int_equal(n, 2);
	assert_string_equal(uuids[0], "MIG-d72a14e8-6b03-5f9c-8d21-40ce95a7f3b2");
	assert_string_equal(uuids[1], "GPU-e83d0a67-1c4f-4b92-a5e8-2f7b96c0d143");
	vd_strings_free(uuids, n);
}

static void test_cuinit_fails(void **state)
{
	char **uuids = (char **)(uintptr_t)1; /* must be reset */
	size_t n = 7;

	(void)state;
	setenv("MOCK_CUDA_FAIL", "1", 1);
	assert_int_equal(vd_cuda_enumerate(&uuids, &n, mock_cuda, NULL, VD_ORDER_FASTEST),
			 VD_ECUDA);
	assert_null(uuids);
	assert_int_equal(n, 0);
	assert_string_equal(vd_error_last(), "cuInit failed: CUDA_ERROR_UNKNOWN (999)");

	setenv("MOCK_CUDA_FAIL", "34", 1);
	assert_int_equal(vd_cuda_enumerate(&uuids, &n, mock_cuda, NULL, VD_ORDER_FASTEST),
			 VD_ECUDA);
	assert_string_equal(vd_error_last(), "cuInit failed: CUDA_ERROR_STUB_LIBRARY (34)");

	setenv("MOCK_CUDA_FAIL", "12345", 1);
	assert_int_equal(vd_cuda_enumerate(&uuids, &n, mock_cuda, NULL, VD_ORDER_FASTEST),
			 VD_ECUDA);
	assert_string_equal(vd_error_last(), "cuInit failed: CUDA error (12345)");

	/* a working driver with no device: an empty list, not a failure */
	setenv("MOCK_CUDA_FAIL", "100", 1);
	assert_int_equal(vd_cuda_enumerate(&uuids, &n, mock_cuda, NULL, VD_ORDER_FASTEST), 0);
	assert_int_equal(n, 0);
	vd_strings_free(uuids, n);
}

static void test_no_library(void **state)
{
	char **uuids = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(
		vd_cuda_enumerate(&uuids, &n, "/nonexistent/libcuda.so.1", NULL, VD_ORDER_FASTEST),
		VD_ECUDA);
	assert_null(uuids);
	assert_non_null(strstr(vd_error_last(),
			       "cannot load the CUDA driver '/nonexistent/libcuda.so.1' ("));

	/* a library that is not the CUDA driver */
	assert_int_equal(vd_cuda_enumerate(&uuids, &n, "libc.so.6", NULL, VD_ORDER_FASTEST),
			 VD_ECUDA);
	assert_non_null(strstr(vd_error_last(), "lacks the CUDA driver API"));
}

/* With no library named, VISDEV_CUDA_LIB names it, then libcuda.so.1. */
static void test_env_library(void **state)
{
	char **uuids = NULL;
	size_t n = 0;

	(void)state;
	setenv("VISDEV_CUDA_LIB", mock_cuda, 1);
	assert_int_equal(vd_cuda_enumerate(&uuids, &n, NULL, NULL, VD_ORDER_PCI), 0);
	assert_int_equal(n, 4);
	vd_strings_free(uuids, n);

	setenv("VISDEV_CUDA_LIB", "/nonexistent/libcuda-env.so.1", 1);
	assert_int_equal(vd_cuda_enumerate(&uuids, &n, NULL, NULL, VD_ORDER_PCI), VD_ECUDA);
	assert_non_null(strstr(vd_error_last(), "/nonexistent/libcuda-env.so.1"));
	unsetenv("VISDEV_CUDA_LIB");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_orders, setup),
		cmocka_unit_test_setup(test_mixed_fastest, setup),
		cmocka_unit_test_setup(test_value, setup),
		cmocka_unit_test_setup(test_mig_uuid, setup),
		cmocka_unit_test_setup(test_cuinit_fails, setup),
		cmocka_unit_test_setup(test_no_library, setup),
		cmocka_unit_test_setup(test_env_library, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
