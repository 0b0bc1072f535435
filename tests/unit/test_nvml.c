/*
 * test_nvml.c - the nvml backend, run against the stand-in NVML.
 *
 * The stand-in (tests/mock-nvml) serves a fixture through NVML's C API; the
 * nvml backend reading it must see exactly what the fixture backend sees of
 * the same file, unknowns and CUDA's order included (the stand-in libcuda
 * serves that, through VISDEV_CUDA_LIB). MOCK_NVML_DIR names the folder of
 * the built stand-ins; the Makefile's test target sets it. Run from the top
 * of the tree: fixtures are read by relative path.
 */
#include <glob.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"
#include "mock.h"

/* What a comparison leaves out. */
enum {
	CMP_NUMA = 1 << 0, /* the old driver has no nvmlDeviceGetNumaNodeId */
	CMP_RANK = 1 << 1, /* CUDA could not be asked */
};

/* Finds the stand-ins; each test starts with no fault injected. */
static int setup(void **state)
{
	(void)state;
	if (mock_find())
		return -1;
	setenv("VISDEV_CUDA_LIB", mock_cuda, 1);
	return 0;
}

static void compare_systems(const struct vd_system *nv, const struct vd_system *fx, unsigned skip);

/* A snapshot through the nvml backend on lib serving fixture: the second of two, the same. */
static struct vd_system *nvml_snapshot(const char *lib, const char *fixture)
{
	struct vd_backend_options opts = { .nvml_lib = lib };
	struct vd_backend *b = NULL;
	struct vd_system *sys = NULL, *again = NULL;

	setenv("MOCK_NVML_FIXTURE", fixture, 1);
	assert_int_equal(vd_backend_open(&b, &opts), 0);
	assert_string_equal(vd_backend_name(b), "nvml");
	assert_string_equal(vd_backend_source(b), lib);
	/* a monitor snapshots again and again: each must work */
	assert_int_equal(vd_backend_snapshot(&again, b), 0);
	assert_int_equal(vd_backend_snapshot(&sys, b), 0);
	compare_systems(sys, again, 0);
	vd_system_free(again);
	vd_backend_free(b);
	return sys;
}

static struct vd_system *fixture_snapshot(const char *fixture)
{
	struct vd_system *sys = NULL;

	assert_int_equal(fixture_load(&sys, fixture), 0);
	return sys;
}

/* Whether the kernel knows a NUMA node for this PCI bus id (then NVML's may come from it). */
static int sysfs_has(const char *bus_id)
{
	unsigned domain, bus, dev;
	char path[128];

	if (sscanf(bus_id, "%x:%x:%x.", &domain, &bus, &dev) != 3)
		return 0;
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%04x:%02x:%02x.0/numa_node", domain, bus,
		 dev);
	return access(path, R_OK) == 0;
}

static int link_cmp(const void *a, const void *b)
{
	const struct vd_link *x = a, *y = b;

	if (x->a != y->a)
		return x->a < y->a ? -1 : 1;
	if (x->b != y->b)
		return x->b < y->b ? -1 : 1;
	return 0;
}

/* The links of sys between GPUs that are not lost, a < b, sorted; *n of them. */
static struct vd_link *links_of(const struct vd_system *sys, size_t *n)
{
	struct vd_link *l = calloc(sys->nlinks + 1, sizeof(*l));

	assert_non_null(l);
	*n = 0;
	for (size_t i = 0; i < sys->nlinks; i++) {
		struct vd_link k = sys->links[i];

		if (sys->gpus[k.a].lost || sys->gpus[k.b].lost)
			continue;
		if (k.a > k.b) {
			unsigned t = k.a;

			k.a = k.b;
			k.b = t;
		}
		l[(*n)++] = k;
	}
	qsort(l, *n, sizeof(*l), link_cmp);
	return l;
}

/* One GPU, field by field; a lost one by identity alone. */
static void compare_gpu(const struct vd_gpu *nv, const struct vd_gpu *fx, unsigned skip)
{
	unsigned mask = VD_GPU_MEMORY | VD_GPU_UTILIZATION | VD_GPU_TEMPERATURE | VD_GPU_POWER |
			VD_GPU_NUMA | VD_GPU_CUDA_RANK | VD_GPU_PROCESSES;

	print_message("# gpu %u (%s)\n", fx->index, fx->uuid);
	assert_int_equal(nv->index, fx->index);
	assert_string_equal(nv->uuid, fx->uuid);
	assert_string_equal(nv->name, fx->name);
	assert_string_equal(nv->pci_bus_id, fx->pci_bus_id);
	assert_int_equal(!!nv->lost, !!fx->lost);
	if (fx->lost)
		return;
	if ((skip & CMP_NUMA) || (!(fx->fields & VD_GPU_NUMA) && sysfs_has(fx->pci_bus_id)))
		mask &= ~(unsigned)VD_GPU_NUMA;
	if (skip & CMP_RANK)
		mask &= ~(unsigned)VD_GPU_CUDA_RANK;
	assert_int_equal(nv->fields & mask, fx->fields & mask);
	if (fx->fields & VD_GPU_MEMORY) {
		assert_int_equal(nv->memory_total_mib, fx->memory_total_mib);
		assert_int_equal(nv->memory_used_mib, fx->memory_used_mib);
	}
	if (fx->fields & VD_GPU_UTILIZATION)
		assert_int_equal(nv->utilization_gpu, fx->utilization_gpu);
	if (fx->fields & VD_GPU_TEMPERATURE)
		assert_int_equal(nv->temperature_c, fx->temperature_c);
	if (fx->fields & VD_GPU_POWER)
		assert_int_equal(nv->power_mw, fx->power_mw);
	if (fx->fields & mask & VD_GPU_NUMA)
		assert_int_equal(nv->numa_node, fx->numa_node);
	if (fx->fields & mask & VD_GPU_CUDA_RANK)
		assert_int_equal(nv->cuda_rank, fx->cuda_rank);
	if (fx->fields & VD_GPU_PROCESSES) {
		assert_int_equal(nv->nprocesses, fx->nprocesses);
		for (size_t k = 0; k < fx->nprocesses; k++) {
			const struct vd_process *a = &nv->processes[k], *b = &fx->processes[k];

			assert_int_equal(a->pid, b->pid);
			assert_int_equal(!!a->used_known, !!b->used_known);
			if (b->used_known)
				assert_int_equal(a->used_mib, b->used_mib);
			assert_string_equal(a->name, b->name);
		}
	}
	assert_int_equal(!!nv->mig_mode, !!fx->mig_mode);
	assert_int_equal(nv->nmig, fx->nmig);
	for (size_t k = 0; k < fx->nmig; k++) {
		const struct vd_mig *a = &nv->mig[k], *b = &fx->mig[k];

		assert_string_equal(a->uuid, b->uuid);
		assert_int_equal(a->gi, b->gi);
		assert_int_equal(a->ci, b->ci);
		assert_string_equal(a->profile, b->profile);
		assert_int_equal(a->fields, b->fields);
		if (b->fields & VD_GPU_MEMORY) {
			assert_int_equal(a->memory_total_mib, b->memory_total_mib);
			assert_int_equal(a->memory_used_mib, b->memory_used_mib);
		}
	}
}

/* Two snapshots of one machine, field by field. */
static void compare_systems(const struct vd_system *nv, const struct vd_system *fx, unsigned skip)
{
	struct vd_link *la, *lb;
	size_t na, nb;

	assert_string_equal(nv->driver_version, fx->driver_version);
	assert_int_equal(nv->cuda_driver_version, fx->cuda_driver_version);
	assert_int_equal(nv->ngpus, fx->ngpus);
	for (size_t i = 0; i < fx->ngpus; i++)
		compare_gpu(&nv->gpus[i], &fx->gpus[i], skip);
	la = links_of(nv, &na);
	lb = links_of(fx, &nb);
	assert_int_equal(na, nb);
	for (size_t i = 0; i < nb; i++) {
		assert_int_equal(la[i].a, lb[i].a);
		assert_int_equal(la[i].b, lb[i].b);
		assert_int_equal(la[i].level, lb[i].level);
	}
	free(la);
	free(lb);
}

/* Every good fixture, through lib, against the fixture backend. */
static void compare_all(const char *lib, unsigned skip)
{
	glob_t g;

	assert_int_equal(glob("tests/fixtures/*.json", 0, NULL, &g), 0);
	assert_true(g.gl_pathc >= 4);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		struct vd_system *nv, *fx;

		print_message("# %s through %s\n", g.gl_pathv[i], lib);
		nv = nvml_snapshot(lib, g.gl_pathv[i]);
		fx = fixture_snapshot(g.gl_pathv[i]);
		compare_systems(nv, fx, skip);
		vd_system_free(nv);
		vd_system_free(fx);
	}
	globfree(&g);
}

static void test_fixtures_match(void **state)
{
	(void)state;
	compare_all(mock_new, 0);
}

/* A pre-R510 driver: plain memory and process calls, no NUMA call, PCI info _v2. */
static void test_old_driver_matches(void **state)
{
	(void)state;
	compare_all(mock_old, CMP_NUMA);
}

/* Without a CUDA driver the ranks are unknown, and nothing else changes. */
static void test_no_cuda(void **state)
{
	struct vd_system *nv, *fx;

	(void)state;
	setenv("VISDEV_CUDA_LIB", "/nonexistent/libcuda.so.1", 1);
	nv = nvml_snapshot(mock_new, "tests/fixtures/mixed.json");
	fx = fixture_snapshot("tests/fixtures/mixed.json");
	compare_systems(nv, fx, CMP_RANK);
	for (size_t i = 0; i < nv->ngpus; i++)
		assert_false(nv->gpus[i].fields & VD_GPU_CUDA_RANK);
	assert_false(vd_system_fastest_known(nv));
	vd_system_free(nv);
	vd_system_free(fx);

	setenv("MOCK_CUDA_FAIL", "1", 1);
	setenv("VISDEV_CUDA_LIB", mock_cuda, 1);
	nv = nvml_snapshot(mock_new, "tests/fixtures/mixed.json");
	assert_false(vd_system_fastest_known(nv));
	vd_system_free(nv);
}

static void test_fastest_known(void **state)
{
	struct vd_system *nv;

	(void)state;
	nv = nvml_snapshot(mock_new, "tests/fixtures/eight.json");
	assert_true(vd_system_fastest_known(nv));
	vd_system_free(nv);
}

/* A GPU that falls off the bus is lost, with nothing known; the others are intact. */
static void test_injected_lost(void **state)
{
	const char *libs[] = { mock_new, mock_old };

	(void)state;
	for (size_t l = 0; l < ARRAY_SIZE(libs); l++) {
		struct vd_system *nv, *fx;

		setenv("MOCK_NVML_LOST", "1,3", 1);
		nv = nvml_snapshot(libs[l], "tests/fixtures/mixed.json");
		fx = fixture_snapshot("tests/fixtures/mixed.json");
		assert_int_equal(nv->ngpus, 4);
		for (size_t i = 0; i < nv->ngpus; i++) {
			const struct vd_gpu *g = &nv->gpus[i];

			if (i == 1 || i == 3) {
				assert_true(g->lost);
				assert_int_equal(g->index, i);
				assert_int_equal(g->fields & ~(unsigned)VD_GPU_CUDA_RANK, 0);
				assert_int_equal(g->nprocesses, 0);
				continue;
			}
			compare_gpu(g, &fx->gpus[i], l ? CMP_NUMA : 0);
		}
		vd_system_free(nv);
		vd_system_free(fx);
	}
}

/* A fixture's lost GPU keeps its identity and no links. */
static void test_fixture_lost(void **state)
{
	struct vd_system *nv;

	(void)state;
	nv = nvml_snapshot(mock_new, "tests/fixtures/lost.json");
	assert_true(nv->gpus[1].lost);
	assert_string_equal(nv->gpus[1].uuid, "GPU-b3e71c05-2d98-4a6f-8c40-5e17f9b2d6a3");
	assert_int_equal(nv->gpus[1].fields, 0);
	for (size_t i = 0; i < nv->nlinks; i++)
		assert_true(nv->links[i].a != 1 && nv->links[i].b != 1);
	assert_false(nv->gpus[0].lost);
	assert_false(nv->gpus[2].lost);
	vd_system_free(nv);
}

/* NOT_SUPPORTED is unknown, never zero. */
static void test_not_supported(void **state)
{
	const char *libs[] = { mock_new, mock_old };

	(void)state;
	for (size_t l = 0; l < ARRAY_SIZE(libs); l++) {
		struct vd_system *nv;

		setenv("MOCK_NVML_NOT_SUPPORTED",
		       "temperature,power,utilization,memory,processes,numa", 1);
		nv = nvml_snapshot(libs[l], "tests/fixtures/mig.json");
		for (size_t i = 0; i < nv->ngpus; i++) {
			const struct vd_gpu *g = &nv->gpus[i];
			unsigned none = VD_GPU_MEMORY | VD_GPU_UTILIZATION | VD_GPU_TEMPERATURE |
					VD_GPU_POWER | VD_GPU_PROCESSES;

			if (!sysfs_has(g->pci_bus_id))
				none |= VD_GPU_NUMA;
			assert_int_equal(g->fields & none, 0);
			assert_true(g->fields & VD_GPU_CUDA_RANK);
			assert_int_equal(g->nprocesses, 0);
			assert_null(g->processes);
			for (size_t k = 0; k < g->nmig; k++)
				assert_int_equal(g->mig[k].fields & VD_GPU_MEMORY, 0);
			assert_int_equal(vd_gpu_memory_free_mib(g), -1);
		}
		assert_int_equal(nv->gpus[0].nmig, 3);
		vd_system_free(nv);

		/* one at a time: only that one goes */
		setenv("MOCK_NVML_NOT_SUPPORTED", "power", 1);
		nv = nvml_snapshot(libs[l], "tests/fixtures/mig.json");
		assert_false(nv->gpus[0].fields & VD_GPU_POWER);
		assert_true(nv->gpus[0].fields & VD_GPU_TEMPERATURE);
		assert_true(nv->gpus[0].fields & VD_GPU_MEMORY);
		vd_system_free(nv);
	}
}

static void test_init_failure(void **state)
{
	struct vd_backend_options opts = { .nvml_lib = mock_new };
	struct vd_backend *b = (struct vd_backend *)(uintptr_t)1; /* must be reset */

	(void)state;
	setenv("MOCK_NVML_FIXTURE", "tests/fixtures/mixed.json", 1);
	setenv("MOCK_NVML_INIT_FAIL", "1", 1);
	assert_int_equal(vd_backend_open(&b, &opts), VD_ENVML);
	assert_null(b);
	assert_non_null(strstr(vd_error_last(), "Driver Not Loaded"));

	/* the same library works once the fault is gone: the failure released it */
	unsetenv("MOCK_NVML_INIT_FAIL");
	assert_int_equal(vd_backend_open(&b, &opts), 0);
	vd_backend_free(b);
}

static void test_no_library(void **state)
{
	struct vd_backend_options opts = { .nvml_lib = "/nonexistent/dir/libnvidia-ml.so.1" };
	struct vd_backend *b = (struct vd_backend *)(uintptr_t)1; /* must be reset */
	const char *msg;

	(void)state;
	assert_int_equal(vd_backend_open(&b, &opts), VD_ENODRIVER);
	assert_null(b);
	msg = vd_error_last();
	assert_non_null(strstr(msg, "no NVIDIA driver found: cannot load "
				    "'/nonexistent/dir/libnvidia-ml.so.1' ("));
	assert_null(strchr(msg, '\n'));

	/* a library that is not NVML */
	opts.nvml_lib = mock_cuda;
	assert_int_equal(vd_backend_open(&b, &opts), VD_ENODRIVER);
	assert_non_null(strstr(vd_error_last(), "lacks nvmlInit_v2"));
}

/* NVML says the buffer is too small: the backend grows it and asks again. */
static void test_grow_and_retry(void **state)
{
	const char *libs[] = { mock_new, mock_old };

	(void)state;
	for (size_t l = 0; l < ARRAY_SIZE(libs); l++) {
		struct vd_system *nv, *fx;

		setenv("MOCK_NVML_SMALL_FIRST", "1", 1);
		nv = nvml_snapshot(libs[l], "tests/fixtures/mixed.json");
		fx = fixture_snapshot("tests/fixtures/mixed.json");
		compare_systems(nv, fx, l ? CMP_NUMA : 0);
		assert_int_equal(nv->gpus[1].nprocesses, 2);
		vd_system_free(nv);
		vd_system_free(fx);
	}
}

/* More processes than the backend's first buffer holds. */
static void test_many_processes(void **state)
{
	char path[] = "/tmp/visdev-test-nvml-XXXXXX";
	const char *libs[] = { mock_new, mock_old };
	FILE *f;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fprintf(f, "{ \"gpus\": [ { \"uuid\": \"GPU-11111111-2222-3333-4444-555555555555\", "
		   "\"name\": \"NVIDIA H100 80GB HBM3\", \"pci_bus_id\": \"00000000:18:00.0\", "
		   "\"cuda_rank\": 0, \"processes\": [");
	for (int i = 0; i < 150; i++)
		fprintf(f, "%s{ \"pid\": %d, \"used_mib\": %d, \"name\": \"job%d\" }",
			i ? ", " : "", 1000 + i, i * 10, i);
	fprintf(f, "] } ] }\n");
	assert_int_equal(fclose(f), 0);
	for (size_t l = 0; l < ARRAY_SIZE(libs); l++) {
		struct vd_system *nv = nvml_snapshot(libs[l], path);
		struct vd_system *fx = fixture_snapshot(path);

		compare_systems(nv, fx, l ? CMP_NUMA : 0);
		assert_int_equal(nv->gpus[0].nprocesses, 150);
		vd_system_free(nv);
		vd_system_free(fx);
	}
	unlink(path);
}

/* A process's owner comes from /proc, as NVML does not say; none for a pid not here. */
static void test_process_user(void **state)
{
	char path[] = "/tmp/visdev-test-nvml-XXXXXX";
	struct passwd *pw = getpwuid(geteuid());
	struct vd_system *nv;
	char me[64];
	FILE *f;
	int fd;

	(void)state;
	if (pw)
		snprintf(me, sizeof(me), "%s", pw->pw_name);
	else
		snprintf(me, sizeof(me), "uid %u", (unsigned)geteuid());
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fprintf(f,
		"{ \"gpus\": [ { \"uuid\": \"GPU-11111111-2222-3333-4444-555555555555\", "
		"\"name\": \"NVIDIA H100 80GB HBM3\", \"pci_bus_id\": \"00000000:18:00.0\", "
		"\"processes\": [ { \"pid\": %d }, { \"pid\": 2147483000 } ] } ] }\n",
		(int)getpid());
	assert_int_equal(fclose(f), 0);
	nv = nvml_snapshot(mock_new, path);
	assert_int_equal(nv->gpus[0].nprocesses, 2);
	assert_string_equal(nv->gpus[0].processes[0].user, me);
	assert_string_equal(nv->gpus[0].processes[1].user, "");
	vd_system_free(nv);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_fixtures_match, setup),
		cmocka_unit_test_setup(test_old_driver_matches, setup),
		cmocka_unit_test_setup(test_no_cuda, setup),
		cmocka_unit_test_setup(test_fastest_known, setup),
		cmocka_unit_test_setup(test_injected_lost, setup),
		cmocka_unit_test_setup(test_fixture_lost, setup),
		cmocka_unit_test_setup(test_not_supported, setup),
		cmocka_unit_test_setup(test_init_failure, setup),
		cmocka_unit_test_setup(test_no_library, setup),
		cmocka_unit_test_setup(test_grow_and_retry, setup),
		cmocka_unit_test_setup(test_many_processes, setup),
		cmocka_unit_test_setup(test_process_user, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
