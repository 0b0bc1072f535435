/*
 * mock-cuda.c - a stand-in libcuda.so.1 that serves a fixture.
 *
 * Just enough of the CUDA driver API for vd_cuda_enumerate(): cuInit,
 * cuDeviceGetCount, cuDeviceGet, cuDeviceGetUuid and cuDeviceGetUuid_v2,
 * over the fixture named by MOCK_NVML_FIXTURE. CUDA_DEVICE_ORDER=PCI_BUS_ID
 * lists every GPU in index order; otherwise (fastest first) the GPUs that
 * carry a cuda_rank are listed by it, and the others not at all.
 *
 * CUDA_VISIBLE_DEVICES: only simple lists are honoured, whole elements
 * that are ordinals (in the order above) or full GPU-/MIG- UUIDs; the list
 * ends at the first other element. CUDA's full rules are visible.c's, not
 * this file's. A MIG instance named by UUID is listed as a MIG device: its
 * cuDeviceGetUuid_v2 is the MIG UUID, its cuDeviceGetUuid its GPU's. A
 * device named twice makes cuInit fail with CUDA_ERROR_INVALID_DEVICE, as
 * driver R580 does.
 *
 * MOCK_CUDA_FAIL=1 makes cuInit fail with CUDA_ERROR_UNKNOWN (999); any
 * other number N makes it answer N (100: CUDA_ERROR_NO_DEVICE).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MOCK_API __attribute__((visibility("default")))

/* The prototypes of what this file exports are cuda.h's, which it does not include. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"

typedef int CUresult;
typedef int CUdevice;
typedef struct {
	char bytes[16];
} CUuuid;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_UNKNOWN = 999,
};

/* One device CUDA lists: a whole GPU or one MIG instance. */
struct entry {
	size_t gpu;
	int mig;
};

static struct {
	int ready;
	struct vd_system *sys;
	struct entry *list;
	int n;
} mock;

/* The GPU with cuda_rank rank, or -1. */
static long ranked(unsigned rank)
{
	for (size_t i = 0; i < mock.sys->ngpus; i++)
		if ((mock.sys->gpus[i].fields & VD_GPU_CUDA_RANK) &&
		    mock.sys->gpus[i].cuda_rank == rank)
			return (long)i;
	return -1;
}

/* The device a CUDA_VISIBLE_DEVICES element names, in base (n of them); 0 or -1. */
static int element(struct entry *out, const char *tok, const struct entry *base, int n)
{
	if (!strncmp(tok, "GPU-", 4) || !strncmp(tok, "MIG-", 4)) {
		for (size_t i = 0; i < mock.sys->ngpus; i++) {
			const struct vd_gpu *g = &mock.sys->gpus[i];

			if (!strcmp(g->uuid, tok)) {
				*out = (struct entry){ i, -1 };
				return 0;
			}
			for (size_t k = 0; k < g->nmig; k++) {
				if (!strcmp(g->mig[k].uuid, tok)) {
					*out = (struct entry){ i, (int)k };
					return 0;
				}
			}
		}
		return -1;
	}
	if (!*tok || strlen(tok) > 9 || strspn(tok, "0123456789") != strlen(tok) || atoi(tok) >= n)
		return -1;
	*out = base[atoi(tok)];
	return 0;
}

/* Lists the devices for CUDA_DEVICE_ORDER and CUDA_VISIBLE_DEVICES. */
static CUresult enumerate(void)
{
	const char *order = getenv("CUDA_DEVICE_ORDER");
	const char *visible = getenv("CUDA_VISIBLE_DEVICES");
	struct entry *base;
	size_t max = mock.sys->ngpus;
	int nbase = 0, twice = 0;

	for (size_t i = 0; i < mock.sys->ngpus; i++)
		max += mock.sys->gpus[i].nmig;
	for (const char *p = visible; p && *p; p++)
		max += *p == ',';
	base = calloc(mock.sys->ngpus + 1, sizeof(*base));
	mock.list = calloc(max + 1, sizeof(*mock.list));
	if (!base || !mock.list) {
		free(base);
		return CUDA_ERROR_UNKNOWN;
	}
	if (order && !strcmp(order, "PCI_BUS_ID")) {
		for (size_t i = 0; i < mock.sys->ngpus; i++)
			base[nbase++] = (struct entry){ i, -1 };
	} else {
		long i;

		for (unsigned rank = 0; (i = ranked(rank)) >= 0; rank++)
			base[nbase++] = (struct entry){ (size_t)i, -1 };
	}
	if (!visible) {
		memcpy(mock.list, base, (size_t)nbase * sizeof(*base));
		mock.n = nbase;
	} else {
		char *copy = strdup(visible), *tok, *rest;

		for (rest = copy; rest && (size_t)mock.n < max;) {
			tok = strsep(&rest, ",");
			if (element(&mock.list[mock.n], tok, base, nbase) < 0)
				break;
			for (int k = 0; k < mock.n; k++)
				if (mock.list[k].gpu == mock.list[mock.n].gpu &&
				    mock.list[k].mig == mock.list[mock.n].mig)
					twice = 1;
			mock.n++;
		}
		free(copy);
	}
	if (twice) {
		free(base);
		return CUDA_ERROR_INVALID_DEVICE;
	}
	free(base);
	return mock.n ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

/* With MOCK_CUDA_LOG, which program asks: its command line, a line to that file. */
static void log_caller(void)
{
	const char *log = getenv("MOCK_CUDA_LOG");
	char cmd[512];
	FILE *in, *out;
	size_t n;

	if (!log || !(in = fopen("/proc/self/cmdline", "r")))
		return;
	n = fread(cmd, 1, sizeof(cmd) - 1, in);
	fclose(in);
	for (size_t i = 0; i < n; i++)
		cmd[i] = cmd[i] ? cmd[i] : ' ';
	cmd[n] = '\0';
	out = fopen(log, "a");
	if (out) {
		fprintf(out, "%s\n", cmd);
		fclose(out);
	}
}

MOCK_API CUresult cuInit(unsigned int flags)
{
	const char *fail = getenv("MOCK_CUDA_FAIL");
	const char *path = getenv("MOCK_NVML_FIXTURE");
	CUresult r;

	log_caller();
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (fail && *fail)
		return atoi(fail) == 1 ? CUDA_ERROR_UNKNOWN : atoi(fail);
	if (mock.ready)
		return CUDA_SUCCESS;
	if (!path || fixture_load(&mock.sys, path) < 0)
		return CUDA_ERROR_UNKNOWN;
	r = enumerate();
	if (r != CUDA_SUCCESS) {
		vd_system_free(mock.sys);
		free(mock.list);
		memset(&mock, 0, sizeof(mock));
		return r;
	}
	mock.ready = 1;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDeviceGetCount(int *count)
{
	if (!mock.ready)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = mock.n;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	if (!mock.ready)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal < 0 || ordinal >= mock.n)
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

/* The 16 bytes of "GPU-8932f937-d72c-..." or "MIG-..."; -1 when it is not 32 hex digits. */
static int uuid_bytes(CUuuid *out, const char *s)
{
	int nibbles = 0;

	if (!strncmp(s, "GPU-", 4) || !strncmp(s, "MIG-", 4))
		s += 4;
	for (; *s && nibbles < 32; s++) {
		const char *hex = "0123456789abcdef", *d;
		char c = *s >= 'A' && *s <= 'F' ? (char)(*s - 'A' + 'a') : *s;

		if (c == '-')
			continue;
		d = c ? strchr(hex, c) : NULL;
		if (!d)
			return -1;
		if (nibbles % 2 == 0)
			out->bytes[nibbles / 2] = (char)((d - hex) << 4);
		else
			out->bytes[nibbles / 2] = (char)(out->bytes[nibbles / 2] | (d - hex));
		nibbles++;
	}
	return nibbles == 32 && !*s ? 0 : -1;
}

/* The UUID of device dev: its MIG instance's when mig_uuid and it is one. */
static CUresult device_uuid(CUuuid *uuid, CUdevice dev, int mig_uuid)
{
	const struct entry *e;
	const char *s;

	if (!mock.ready)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= mock.n)
		return CUDA_ERROR_INVALID_DEVICE;
	e = &mock.list[dev];
	s = mig_uuid && e->mig >= 0 ? mock.sys->gpus[e->gpu].mig[e->mig].uuid :
				      mock.sys->gpus[e->gpu].uuid;
	return uuid_bytes(uuid, s) < 0 ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}

MOCK_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	return device_uuid(uuid, dev, 0);
}

MOCK_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	return device_uuid(uuid, dev, 1);
}
