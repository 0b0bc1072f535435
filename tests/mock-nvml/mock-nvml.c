/*
 * mock-nvml.c - a stand-in libnvidia-ml.so.1 that serves a fixture.
 *
 * It implements, through NVML's own C API, every entry point visdev's nvml
 * backend calls, and answers from the fixture named by MOCK_NVML_FIXTURE
 * (read with libvisdev's own parser). Unknown fields answer
 * NVML_ERROR_NOT_SUPPORTED, lost GPUs NVML_ERROR_GPU_IS_LOST, as a real
 * driver would. Built with -DMOCK_NVML_OLD it is a pre-R510 driver: the
 * versioned entry points of newer drivers are missing. Faults to inject are
 * chosen by environment variables: see README.md beside this file.
 *
 * The types below are written from nvml.h, independently of the backend's
 * own declarations, so that a mistake in one is caught by the other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MOCK_API __attribute__((visibility("default")))

/* The prototypes of what this file exports are nvml.h's, which it does not include. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"

typedef enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_NOT_FOUND = 6,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_DRIVER_NOT_LOADED = 9,
	NVML_ERROR_GPU_IS_LOST = 15,
	NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
	NVML_ERROR_UNKNOWN = 999,
} nvmlReturn_t;

typedef struct nvmlDevice_st *nvmlDevice_t;

typedef enum {
	NVML_TEMPERATURE_GPU = 0,
} nvmlTemperatureSensors_t;

typedef enum {
	NVML_P2P_CAPS_INDEX_READ = 0,
	NVML_P2P_CAPS_INDEX_WRITE = 1,
	NVML_P2P_CAPS_INDEX_NVLINK = 2,
} nvmlGpuP2PCapsIndex_t;

typedef enum {
	NVML_P2P_STATUS_OK = 0,
	NVML_P2P_STATUS_NOT_SUPPORTED = 5,
} nvmlGpuP2PStatus_t;

typedef enum {
	NVML_TOPOLOGY_INTERNAL = 0,
	NVML_TOPOLOGY_SINGLE = 10,
	NVML_TOPOLOGY_MULTIPLE = 20,
	NVML_TOPOLOGY_HOSTBRIDGE = 30,
	NVML_TOPOLOGY_NODE = 40,
	NVML_TOPOLOGY_SYSTEM = 50,
} nvmlGpuTopologyLevel_t;

typedef struct {
	char busIdLegacy[16];
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pciDeviceId;
	unsigned int pciSubSystemId;
	char busId[32];
} nvmlPciInfo_t;

typedef struct {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_t;

typedef struct {
	unsigned int version;
	unsigned long long total;
	unsigned long long reserved;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_v2_t;

typedef struct {
	unsigned int gpu;
	unsigned int memory;
} nvmlUtilization_t;

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

#define NOT_AVAILABLE 0xffffffffffffffffULL
#define NO_INSTANCE   0xffffffffU

/* What MOCK_NVML_NOT_SUPPORTED can name. */
enum {
	NS_TEMPERATURE = 1 << 0,
	NS_POWER = 1 << 1,
	NS_UTILIZATION = 1 << 2,
	NS_MEMORY = 1 << 3,
	NS_PROCESSES = 1 << 4,
	NS_NUMA = 1 << 5,
};

/* A handle: a whole GPU (mig < 0) or one MIG instance of it. */
struct nvmlDevice_st {
	size_t gpu;
	int mig;
	int asked_processes; /* MOCK_NVML_SMALL_FIRST: the last query failed */
};

static struct {
	int refs; /* nvmlInit_v2 calls not yet shut down */
	struct vd_system *sys;
	struct nvmlDevice_st *handles; /* ngpus whole GPUs, then every MIG instance */
	size_t nhandles;
	unsigned char *injected_lost; /* per GPU: MOCK_NVML_LOST */
	unsigned char *live_lost;     /* per GPU: "lost N" in MOCK_NVML_FAULT_FILE, now */
	unsigned not_supported;
	int small_first;
} mock;

/* Reads the fault-injection variables. */
static void read_faults(void)
{
	const char *v;
	char *list, *tok, *save = NULL;

	v = getenv("MOCK_NVML_LOST");
	if (v && (list = strdup(v))) {
		for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			char *end;
			unsigned long i = strtoul(tok, &end, 10);

			if (end != tok && i < mock.sys->ngpus)
				mock.injected_lost[i] = 1;
		}
		free(list);
	}
	v = getenv("MOCK_NVML_NOT_SUPPORTED");
	save = NULL;
	if (v && (list = strdup(v))) {
		static const struct {
			const char *name;
			unsigned bit;
		} names[] = {
			{ "temperature", NS_TEMPERATURE }, { "power", NS_POWER },
			{ "utilization", NS_UTILIZATION }, { "memory", NS_MEMORY },
			{ "processes", NS_PROCESSES },	   { "numa", NS_NUMA },
		};

		for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			for (size_t k = 0; k < ARRAY_SIZE(names); k++)
				if (!strcmp(tok, names[k].name))
					mock.not_supported |= names[k].bit;
		free(list);
	}
	v = getenv("MOCK_NVML_SMALL_FIRST");
	mock.small_first = v && !strcmp(v, "1");
}

/*
 * Faults that come and go while a program runs: while the file named by
 * MOCK_NVML_FAULT_FILE exists, a line "lost N" there makes GPU N lost, and
 * anything else makes nvmlDeviceGetCount_v2 fail with NVML_ERROR_UNKNOWN.
 * Read at each nvmlDeviceGetCount_v2, where every look at the GPUs begins.
 */
static nvmlReturn_t live_faults(void)
{
	const char *path = getenv("MOCK_NVML_FAULT_FILE");
	char line[64];
	int any = 0;
	FILE *f;

	memset(mock.live_lost, 0, mock.sys->ngpus ? mock.sys->ngpus : 1);
	if (!path || !(f = fopen(path, "re")))
		return NVML_SUCCESS;
	while (fgets(line, sizeof(line), f)) {
		unsigned i;

		if (sscanf(line, "lost %u", &i) == 1 && i < mock.sys->ngpus) {
			mock.live_lost[i] = 1;
			any = 1;
		}
	}
	fclose(f);
	return any ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

static void release(void)
{
	vd_system_free(mock.sys);
	free(mock.handles);
	free(mock.injected_lost);
	free(mock.live_lost);
	memset(&mock, 0, sizeof(mock));
}

MOCK_API nvmlReturn_t nvmlInit_v2(void)
{
	const char *v = getenv("MOCK_NVML_INIT_FAIL");
	const char *path = getenv("MOCK_NVML_FIXTURE");
	size_t n = 0;

	if (v && !strcmp(v, "1"))
		return NVML_ERROR_DRIVER_NOT_LOADED;
	if (mock.refs) {
		mock.refs++;
		return NVML_SUCCESS;
	}
	if (!path || fixture_load(&mock.sys, path) < 0)
		return NVML_ERROR_UNKNOWN;
	for (size_t i = 0; i < mock.sys->ngpus; i++)
		n += 1 + mock.sys->gpus[i].nmig;
	mock.handles = calloc(n ? n : 1, sizeof(*mock.handles));
	mock.injected_lost = calloc(mock.sys->ngpus ? mock.sys->ngpus : 1, 1);
	mock.live_lost = calloc(mock.sys->ngpus ? mock.sys->ngpus : 1, 1);
	if (!mock.handles || !mock.injected_lost || !mock.live_lost) {
		release();
		return NVML_ERROR_UNKNOWN;
	}
	mock.nhandles = mock.sys->ngpus;
	for (size_t i = 0; i < mock.sys->ngpus; i++)
		mock.handles[i] = (struct nvmlDevice_st){ .gpu = i, .mig = -1 };
	for (size_t i = 0; i < mock.sys->ngpus; i++)
		for (size_t k = 0; k < mock.sys->gpus[i].nmig; k++)
			mock.handles[mock.nhandles++] =
				(struct nvmlDevice_st){ .gpu = i, .mig = (int)k };
	read_faults();
	mock.refs = 1;
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlShutdown(void)
{
	if (!mock.refs)
		return NVML_ERROR_UNINITIALIZED;
	if (--mock.refs == 0)
		release();
	return NVML_SUCCESS;
}

MOCK_API const char *nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case NVML_SUCCESS:
		return "Success";
	case NVML_ERROR_UNINITIALIZED:
		return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT:
		return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED:
		return "Not Supported";
	case NVML_ERROR_NOT_FOUND:
		return "Not Found";
	case NVML_ERROR_INSUFFICIENT_SIZE:
		return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED:
		return "Driver Not Loaded";
	case NVML_ERROR_GPU_IS_LOST:
		return "GPU is lost";
	case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
		return "Argument version mismatch";
	default:
		return "Unknown Error";
	}
}

/* ---- Handles ----------------------------------------------------------- */

/*
 * Checks a handle before a per-device call. identity: the call reads what
 * the driver keeps of a GPU that fell off the bus (UUID, name, PCI), which
 * a fixture's "lost" GPU still answers; injected losses answer nothing.
 */
static nvmlReturn_t check(nvmlDevice_t dev, int identity)
{
	if (!mock.refs)
		return NVML_ERROR_UNINITIALIZED;
	if (!dev || dev < mock.handles || dev >= mock.handles + mock.nhandles)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (mock.injected_lost[dev->gpu] || mock.live_lost[dev->gpu])
		return NVML_ERROR_GPU_IS_LOST;
	if (!identity && mock.sys->gpus[dev->gpu].lost)
		return NVML_ERROR_GPU_IS_LOST;
	return NVML_SUCCESS;
}

#define CHECK(dev, identity)              \
 do {                                     \
  nvmlReturn_t r_ = check(dev, identity); \
  if (r_ != NVML_SUCCESS)                 \
   return r_;                             \
 } while (0)

static struct vd_gpu *gpu_of(nvmlDevice_t dev)
{
	return &mock.sys->gpus[dev->gpu];
}

static struct vd_mig *mig_of(nvmlDevice_t dev)
{
	return dev->mig < 0 ? NULL : &gpu_of(dev)->mig[dev->mig];
}

/* Copies s into buf of length len as NVML does; "" is an unknown field. */
static nvmlReturn_t answer_string(char *buf, unsigned int len, const char *s)
{
	if (!buf)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!*s)
		return NVML_ERROR_NOT_SUPPORTED;
	if (strlen(s) + 1 > len)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(buf, s, strlen(s) + 1);
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	nvmlReturn_t r;

	if (!mock.refs)
		return NVML_ERROR_UNINITIALIZED;
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	r = live_faults();
	if (r != NVML_SUCCESS)
		return r;
	*count = (unsigned int)mock.sys->ngpus;
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *dev)
{
	if (!mock.refs)
		return NVML_ERROR_UNINITIALIZED;
	if (!dev || index >= mock.sys->ngpus)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (mock.injected_lost[index] || mock.live_lost[index])
		return NVML_ERROR_GPU_IS_LOST;
	*dev = &mock.handles[index];
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int len)
{
	CHECK(dev, 1);
	return answer_string(uuid, len, mig_of(dev) ? mig_of(dev)->uuid : gpu_of(dev)->uuid);
}

/* A MIG device is named after its GPU and profile: "NVIDIA A100-SXM4-40GB MIG 3g.20gb". */
MOCK_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int len)
{
	char buf[VD_NAME_MAX + VD_PROFILE_MAX + 8];
	const struct vd_mig *m;

	CHECK(dev, 1);
	m = mig_of(dev);
	if (m && m->profile[0] && gpu_of(dev)->name[0]) {
		snprintf(buf, sizeof(buf), "%s MIG %s", gpu_of(dev)->name, m->profile);
		return answer_string(name, len, buf);
	}
	return answer_string(name, len, gpu_of(dev)->name);
}

static nvmlReturn_t pci_info(nvmlDevice_t dev, nvmlPciInfo_t *pci)
{
	const char *id;

	CHECK(dev, 1);
	if (!pci)
		return NVML_ERROR_INVALID_ARGUMENT;
	id = gpu_of(dev)->pci_bus_id;
	memset(pci, 0, sizeof(*pci));
	if (!*id || sscanf(id, "%x:%x:%x.", &pci->domain, &pci->bus, &pci->device) != 3)
		return NVML_ERROR_NOT_SUPPORTED;
	snprintf(pci->busId, sizeof(pci->busId), "%s", id);
	snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0",
		 pci->domain & 0xffff, pci->bus & 0xff, pci->device & 0xff);
	pci->pciDeviceId = 0x20b010de;
	return NVML_SUCCESS;
}

#ifndef MOCK_NVML_OLD
MOCK_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci)
{
	return pci_info(dev, pci);
}
#endif

MOCK_API nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t dev, nvmlPciInfo_t *pci)
{
	return pci_info(dev, pci);
}

/* ---- Measurements ------------------------------------------------------ */

/* Total and used bytes of a GPU or MIG handle, or NOT_SUPPORTED. */
static nvmlReturn_t memory_bytes(nvmlDevice_t dev, unsigned long long *total,
				 unsigned long long *used)
{
	const struct vd_mig *m = mig_of(dev);
	const struct vd_gpu *g = gpu_of(dev);

	if (mock.not_supported & NS_MEMORY)
		return NVML_ERROR_NOT_SUPPORTED;
	if (m) {
		if (!(m->fields & VD_GPU_MEMORY))
			return NVML_ERROR_NOT_SUPPORTED;
		*total = (unsigned long long)m->memory_total_mib << 20;
		*used = (unsigned long long)m->memory_used_mib << 20;
		return NVML_SUCCESS;
	}
	if (!(g->fields & VD_GPU_MEMORY))
		return NVML_ERROR_NOT_SUPPORTED;
	*total = (unsigned long long)g->memory_total_mib << 20;
	*used = (unsigned long long)g->memory_used_mib << 20;
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *mem)
{
	unsigned long long total, used;
	nvmlReturn_t r;

	CHECK(dev, 0);
	if (!mem)
		return NVML_ERROR_INVALID_ARGUMENT;
	r = memory_bytes(dev, &total, &used);
	if (r != NVML_SUCCESS)
		return r;
	mem->total = total;
	mem->used = used;
	mem->free = used < total ? total - used : 0;
	return NVML_SUCCESS;
}

#ifndef MOCK_NVML_OLD
/* Insists on NVML_STRUCT_VERSION(Memory, 2), as the real library does. */
MOCK_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *mem)
{
	unsigned long long total, used;
	nvmlReturn_t r;

	CHECK(dev, 0);
	if (!mem)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (mem->version != (unsigned int)(sizeof(nvmlMemory_v2_t) | (2U << 24)))
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	r = memory_bytes(dev, &total, &used);
	if (r != NVML_SUCCESS)
		return r;
	mem->total = total;
	mem->reserved = 0;
	mem->used = used;
	mem->free = used < total ? total - used : 0;
	return NVML_SUCCESS;
}
#endif

MOCK_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *util)
{
	CHECK(dev, 0);
	if (!util)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (mig_of(dev) || (mock.not_supported & NS_UTILIZATION) ||
	    !(gpu_of(dev)->fields & VD_GPU_UTILIZATION))
		return NVML_ERROR_NOT_SUPPORTED;
	util->gpu = gpu_of(dev)->utilization_gpu;
	util->memory = 0;
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, nvmlTemperatureSensors_t sensor,
					       unsigned int *temp)
{
	CHECK(dev, 0);
	if (!temp || sensor != NVML_TEMPERATURE_GPU)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (mig_of(dev) || (mock.not_supported & NS_TEMPERATURE) ||
	    !(gpu_of(dev)->fields & VD_GPU_TEMPERATURE))
		return NVML_ERROR_NOT_SUPPORTED;
	*temp = (unsigned int)gpu_of(dev)->temperature_c;
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned int *power)
{
	CHECK(dev, 0);
	if (!power)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (mig_of(dev) || (mock.not_supported & NS_POWER) || !(gpu_of(dev)->fields & VD_GPU_POWER))
		return NVML_ERROR_NOT_SUPPORTED;
	*power = gpu_of(dev)->power_mw;
	return NVML_SUCCESS;
}

#ifndef MOCK_NVML_OLD
MOCK_API nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t dev, unsigned int *node)
{
	CHECK(dev, 0);
	if (!node)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (mig_of(dev) || (mock.not_supported & NS_NUMA) || !(gpu_of(dev)->fields & VD_GPU_NUMA))
		return NVML_ERROR_NOT_SUPPORTED;
	*node = (unsigned int)gpu_of(dev)->numa_node;
	return NVML_SUCCESS;
}
#endif

/* ---- Processes --------------------------------------------------------- */

/*
 * The compute processes of a GPU into infos (v1 records when v1, else v2),
 * *count of them at most; INSUFFICIENT_SIZE with the count needed when
 * they do not fit, and under MOCK_NVML_SMALL_FIRST on every other query of
 * a GPU with processes, starting with the first: the one after it is the
 * retry, which succeeds.
 */
static nvmlReturn_t processes(nvmlDevice_t dev, unsigned int *count, void *infos, int v1)
{
	const struct vd_gpu *g;
	unsigned int n;

	CHECK(dev, 0);
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	g = gpu_of(dev);
	if (mig_of(dev) || (mock.not_supported & NS_PROCESSES) || !(g->fields & VD_GPU_PROCESSES))
		return NVML_ERROR_NOT_SUPPORTED;
	n = (unsigned int)g->nprocesses;
	if (n > *count || (mock.small_first && n && !dev->asked_processes)) {
		dev->asked_processes = 1;
		*count = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	dev->asked_processes = 0;
	if (n && !infos)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (unsigned int i = 0; i < n; i++) {
		const struct vd_process *p = &g->processes[i];
		unsigned long long used =
			p->used_known ? (unsigned long long)p->used_mib << 20 : NOT_AVAILABLE;

		if (v1) {
			nvmlProcessInfo_v1_t *o = (nvmlProcessInfo_v1_t *)infos + i;

			o->pid = p->pid;
			o->usedGpuMemory = used;
		} else {
			nvmlProcessInfo_v2_t *o = (nvmlProcessInfo_v2_t *)infos + i;

			o->pid = p->pid;
			o->usedGpuMemory = used;
			o->gpuInstanceId = NO_INSTANCE;
			o->computeInstanceId = NO_INSTANCE;
		}
	}
	*count = n;
	return NVML_SUCCESS;
}

#ifndef MOCK_NVML_OLD
MOCK_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev, unsigned int *count,
							      nvmlProcessInfo_v2_t *infos)
{
	return processes(dev, count, infos, 0);
}

MOCK_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t dev, unsigned int *count,
							      nvmlProcessInfo_v2_t *infos)
{
	return processes(dev, count, infos, 0);
}
#endif

MOCK_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t dev, unsigned int *count,
							   nvmlProcessInfo_v1_t *infos)
{
	return processes(dev, count, infos, 1);
}

/* The name of a process: the first the fixture gives it on any GPU. */
MOCK_API nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int len)
{
	if (!mock.refs)
		return NVML_ERROR_UNINITIALIZED;
	for (size_t i = 0; i < mock.sys->ngpus; i++) {
		const struct vd_gpu *g = &mock.sys->gpus[i];

		for (size_t k = 0; k < g->nprocesses; k++)
			if (g->processes[k].pid == pid && g->processes[k].name[0])
				return answer_string(name, len, g->processes[k].name);
	}
	return NVML_ERROR_NOT_FOUND;
}

/* ---- MIG --------------------------------------------------------------- */

MOCK_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int *current,
					   unsigned int *pending)
{
	CHECK(dev, 0);
	if (!current || !pending || mig_of(dev))
		return NVML_ERROR_INVALID_ARGUMENT;
	*current = *pending = gpu_of(dev)->mig_mode ? 1 : 0;
	return NVML_SUCCESS;
}

/* Seven slots, as an A100 or H100 has, some of them empty. */
MOCK_API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned int *count)
{
	CHECK(dev, 0);
	if (!count || mig_of(dev))
		return NVML_ERROR_INVALID_ARGUMENT;
	*count = gpu_of(dev)->nmig > 7 ? (unsigned int)gpu_of(dev)->nmig : 7;
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned int index,
							  nvmlDevice_t *mig)
{
	CHECK(dev, 0);
	if (!mig || mig_of(dev))
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!gpu_of(dev)->mig_mode)
		return NVML_ERROR_NOT_SUPPORTED;
	if (index >= gpu_of(dev)->nmig)
		return NVML_ERROR_NOT_FOUND;
	for (size_t h = mock.sys->ngpus; h < mock.nhandles; h++) {
		if (mock.handles[h].gpu == dev->gpu && mock.handles[h].mig == (int)index) {
			*mig = &mock.handles[h];
			return NVML_SUCCESS;
		}
	}
	return NVML_ERROR_NOT_FOUND;
}

MOCK_API nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t dev, unsigned int *id)
{
	CHECK(dev, 0);
	if (!id || !mig_of(dev))
		return NVML_ERROR_INVALID_ARGUMENT;
	*id = mig_of(dev)->gi;
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t dev, unsigned int *id)
{
	CHECK(dev, 0);
	if (!id || !mig_of(dev))
		return NVML_ERROR_INVALID_ARGUMENT;
	*id = mig_of(dev)->ci;
	return NVML_SUCCESS;
}

/* ---- Topology ---------------------------------------------------------- */

/* The fixture's link between two whole GPUs, or NULL. */
static const struct vd_link *link_between(nvmlDevice_t a, nvmlDevice_t b)
{
	for (size_t i = 0; i < mock.sys->nlinks; i++) {
		const struct vd_link *l = &mock.sys->links[i];

		if ((l->a == a->gpu && l->b == b->gpu) || (l->a == b->gpu && l->b == a->gpu))
			return l;
	}
	return NULL;
}

MOCK_API nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b,
					     nvmlGpuP2PCapsIndex_t index,
					     nvmlGpuP2PStatus_t *status)
{
	const struct vd_link *l;

	CHECK(a, 0);
	CHECK(b, 0);
	if (!status || mig_of(a) || mig_of(b))
		return NVML_ERROR_INVALID_ARGUMENT;
	l = link_between(a, b);
	*status = l && l->level == VD_LINK_NVLINK && index == NVML_P2P_CAPS_INDEX_NVLINK ?
			  NVML_P2P_STATUS_OK :
			  NVML_P2P_STATUS_NOT_SUPPORTED;
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
							  nvmlGpuTopologyLevel_t *level)
{
	static const nvmlGpuTopologyLevel_t levels[] = {
		[VD_LINK_NVLINK] = NVML_TOPOLOGY_SYSTEM, /* NVLink says nothing of PCIe */
		[VD_LINK_PIX] = NVML_TOPOLOGY_SINGLE,	  [VD_LINK_PXB] = NVML_TOPOLOGY_MULTIPLE,
		[VD_LINK_PHB] = NVML_TOPOLOGY_HOSTBRIDGE, [VD_LINK_NODE] = NVML_TOPOLOGY_NODE,
		[VD_LINK_SYS] = NVML_TOPOLOGY_SYSTEM,
	};
	const struct vd_link *l;

	CHECK(a, 0);
	CHECK(b, 0);
	if (!level || mig_of(a) || mig_of(b))
		return NVML_ERROR_INVALID_ARGUMENT;
	l = link_between(a, b);
	if (!l || (size_t)l->level >= ARRAY_SIZE(levels))
		return NVML_ERROR_NOT_SUPPORTED;
	*level = levels[l->level];
	return NVML_SUCCESS;
}

/* ---- The system -------------------------------------------------------- */

MOCK_API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int len)
{
	if (!mock.refs)
		return NVML_ERROR_UNINITIALIZED;
	return answer_string(version, len, mock.sys->driver_version);
}

static nvmlReturn_t cuda_version(int *version)
{
	if (!mock.refs)
		return NVML_ERROR_UNINITIALIZED;
	if (!version)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (mock.sys->cuda_driver_version < 0)
		return NVML_ERROR_NOT_SUPPORTED;
	*version = mock.sys->cuda_driver_version;
	return NVML_SUCCESS;
}

#ifndef MOCK_NVML_OLD
MOCK_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version)
{
	return cuda_version(version);
}
#endif

MOCK_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version)
{
	return cuda_version(version);
}
