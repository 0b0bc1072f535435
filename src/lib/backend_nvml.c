/*
 * backend_nvml.c - the facts from NVML (libnvidia-ml.so.1), loaded at run time.
 *
 * The library is dlopen()ed, never linked, so one binary runs with and
 * without a driver. Only the types and entry points used are declared here,
 * as nvml.h defines them. Entry points that older drivers lack are optional:
 * a missing one makes its field unknown, as does NVML_ERROR_NOT_SUPPORTED.
 * A GPU answering NVML_ERROR_GPU_IS_LOST is marked lost and the others are
 * read as usual.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

/* ---- NVML's ABI: what is used of nvml.h, nothing more ---------------- */

typedef struct nvmlDevice_st *nvmlDevice_t;

typedef enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_FUNCTION_NOT_FOUND = 13,
	NVML_ERROR_GPU_IS_LOST = 15,
} nvmlReturn_t;

enum {
	NVML_TEMPERATURE_GPU = 0,	/* nvmlTemperatureSensors_t */
	NVML_P2P_CAPS_INDEX_NVLINK = 2, /* nvmlGpuP2PCapsIndex_t */
	NVML_P2P_STATUS_OK = 0,		/* nvmlGpuP2PStatus_t */
	NVML_DEVICE_MIG_ENABLE = 1,
};

/* nvmlGpuTopologyLevel_t */
enum {
	NVML_TOPOLOGY_INTERNAL = 0,
	NVML_TOPOLOGY_SINGLE = 10,
	NVML_TOPOLOGY_MULTIPLE = 20,
	NVML_TOPOLOGY_HOSTBRIDGE = 30,
	NVML_TOPOLOGY_NODE = 40,
	NVML_TOPOLOGY_SYSTEM = 50,
};

#define NVML_VALUE_NOT_AVAILABLE_ULL 0xffffffffffffffffULL
#define NVML_UUID_SIZE		     96 /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
#define NVML_NAME_SIZE		     96 /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
#define NVML_DRIVER_SIZE	     80 /* NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE */

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

/* NVML_STRUCT_VERSION(Memory, 2): the size, and the version in the top byte. */
#define NVML_MEMORY_V2_VERSION ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2U << 24)))

typedef struct {
	unsigned int gpu;
	unsigned int memory;
} nvmlUtilization_t;

/* What the plain nvmlDeviceGetComputeRunningProcesses fills. */
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

/* What the _v2 and _v3 entry points fill (nvmlProcessInfo_t). */
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

/* ---- The loaded library ------------------------------------------------ */

struct nvml {
	void *dl;

	/* required */
	nvmlReturn_t (*nvmlInit_v2)(void);
	nvmlReturn_t (*nvmlShutdown)(void);
	const char *(*nvmlErrorString)(nvmlReturn_t);
	nvmlReturn_t (*nvmlDeviceGetCount_v2)(unsigned int *);
	nvmlReturn_t (*nvmlDeviceGetHandleByIndex_v2)(unsigned int, nvmlDevice_t *);
	nvmlReturn_t (*nvmlDeviceGetUUID)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*nvmlDeviceGetName)(nvmlDevice_t, char *, unsigned int);

	/* optional: NULL when the driver lacks them */
	nvmlReturn_t (*nvmlSystemGetDriverVersion)(char *, unsigned int);
	nvmlReturn_t (*nvmlSystemGetCudaDriverVersion_v2)(int *);
	nvmlReturn_t (*nvmlSystemGetCudaDriverVersion)(int *);
	nvmlReturn_t (*nvmlSystemGetProcessName)(unsigned int, char *, unsigned int);
	nvmlReturn_t (*nvmlDeviceGetPciInfo_v3)(nvmlDevice_t, nvmlPciInfo_t *);
	nvmlReturn_t (*nvmlDeviceGetPciInfo_v2)(nvmlDevice_t, nvmlPciInfo_t *);
	nvmlReturn_t (*nvmlDeviceGetMemoryInfo_v2)(nvmlDevice_t, nvmlMemory_v2_t *);
	nvmlReturn_t (*nvmlDeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t *);
	nvmlReturn_t (*nvmlDeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t *);
	nvmlReturn_t (*nvmlDeviceGetTemperature)(nvmlDevice_t, int, unsigned int *);
	nvmlReturn_t (*nvmlDeviceGetPowerUsage)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*nvmlDeviceGetNumaNodeId)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*nvmlDeviceGetComputeRunningProcesses_v3)(nvmlDevice_t, unsigned int *,
								nvmlProcessInfo_v2_t *);
	nvmlReturn_t (*nvmlDeviceGetComputeRunningProcesses_v2)(nvmlDevice_t, unsigned int *,
								nvmlProcessInfo_v2_t *);
	nvmlReturn_t (*nvmlDeviceGetComputeRunningProcesses)(nvmlDevice_t, unsigned int *,
							     nvmlProcessInfo_v1_t *);
	nvmlReturn_t (*nvmlDeviceGetMigMode)(nvmlDevice_t, unsigned int *, unsigned int *);
	nvmlReturn_t (*nvmlDeviceGetMaxMigDeviceCount)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*nvmlDeviceGetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned int,
							    nvmlDevice_t *);
	nvmlReturn_t (*nvmlDeviceGetGpuInstanceId)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*nvmlDeviceGetComputeInstanceId)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*nvmlDeviceGetP2PStatus)(nvmlDevice_t, nvmlDevice_t, int, int *);
	nvmlReturn_t (*nvmlDeviceGetTopologyCommonAncestor)(nvmlDevice_t, nvmlDevice_t, int *);

	/* CUDA's fastest-first order, asked once per open */
	int cuda_asked;
	char **cuda_uuids;
	size_t ncuda;
};

/* Calls an optional entry point; a missing one answers FUNCTION_NOT_FOUND. */
#define CALL(nv, fn, ...) ((nv)->fn ? (nv)->fn(__VA_ARGS__) : NVML_ERROR_FUNCTION_NOT_FOUND)

/*
 * Resolves one entry point into nv; a required one that is missing is
 * remembered in missing, for nv_open's one failure path.
 */
#define resolve(nv, name, required, missing)                   \
 do {                                                          \
  (nv)->name = (__typeof__((nv)->name))dlsym((nv)->dl, #name); \
  if ((required) && !(nv)->name && !(missing))                 \
   (missing) = #name;                                          \
 } while (0)

/* Loads path (or libnvidia-ml.so.1), resolves the entry points, initialises NVML. */
static int nv_open(void **state, const char *path)
{
	const char *lib = path ? path : "libnvidia-ml.so.1";
	const char *missing = NULL;
	struct nvml *nv;
	nvmlReturn_t r;
	int err;

	*state = NULL;
	nv = calloc(1, sizeof(*nv));
	if (!nv)
		return error_set(VD_ENOMEM, "out of memory");
	nv->dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!nv->dl) {
		err = error_set(VD_ENODRIVER, "no NVIDIA driver found: cannot load '%s' (%s)", lib,
				dlerror());
		goto fail;
	}

	resolve(nv, nvmlInit_v2, 1, missing);
	resolve(nv, nvmlShutdown, 1, missing);
	resolve(nv, nvmlErrorString, 1, missing);
	resolve(nv, nvmlDeviceGetCount_v2, 1, missing);
	resolve(nv, nvmlDeviceGetHandleByIndex_v2, 1, missing);
	resolve(nv, nvmlDeviceGetUUID, 1, missing);
	resolve(nv, nvmlDeviceGetName, 1, missing);
	resolve(nv, nvmlSystemGetDriverVersion, 0, missing);
	resolve(nv, nvmlSystemGetCudaDriverVersion_v2, 0, missing);
	resolve(nv, nvmlSystemGetCudaDriverVersion, 0, missing);
	resolve(nv, nvmlSystemGetProcessName, 0, missing);
	resolve(nv, nvmlDeviceGetPciInfo_v3, 0, missing);
	resolve(nv, nvmlDeviceGetPciInfo_v2, 0, missing);
	resolve(nv, nvmlDeviceGetMemoryInfo_v2, 0, missing);
	resolve(nv, nvmlDeviceGetMemoryInfo, 0, missing);
	resolve(nv, nvmlDeviceGetUtilizationRates, 0, missing);
	resolve(nv, nvmlDeviceGetTemperature, 0, missing);
	resolve(nv, nvmlDeviceGetPowerUsage, 0, missing);
	resolve(nv, nvmlDeviceGetNumaNodeId, 0, missing);
	resolve(nv, nvmlDeviceGetComputeRunningProcesses_v3, 0, missing);
	resolve(nv, nvmlDeviceGetComputeRunningProcesses_v2, 0, missing);
	resolve(nv, nvmlDeviceGetComputeRunningProcesses, 0, missing);
	resolve(nv, nvmlDeviceGetMigMode, 0, missing);
	resolve(nv, nvmlDeviceGetMaxMigDeviceCount, 0, missing);
	resolve(nv, nvmlDeviceGetMigDeviceHandleByIndex, 0, missing);
	resolve(nv, nvmlDeviceGetGpuInstanceId, 0, missing);
	resolve(nv, nvmlDeviceGetComputeInstanceId, 0, missing);
	resolve(nv, nvmlDeviceGetP2PStatus, 0, missing);
	resolve(nv, nvmlDeviceGetTopologyCommonAncestor, 0, missing);

	if (missing) {
		err = error_set(VD_ENODRIVER, "no NVIDIA driver found: '%s' lacks %s", lib,
				missing);
		goto fail;
	}
	r = nv->nvmlInit_v2();
	if (r != NVML_SUCCESS) {
		err = error_set(VD_ENVML, "cannot initialise NVML from '%s': %s", lib,
				nv->nvmlErrorString(r));
		goto fail;
	}
	*state = nv;
	return 0;

fail:
	if (nv->dl)
		dlclose(nv->dl);
	free(nv);
	return err;
}

static void nv_close(void *state)
{
	struct nvml *nv = state;

	if (!nv)
		return;
	nv->nvmlShutdown();
	dlclose(nv->dl);
	vd_strings_free(nv->cuda_uuids, nv->ncuda);
	free(nv);
}

/* Total and used memory of a GPU or MIG handle, in MiB: _v2 first, then plain. */
static nvmlReturn_t read_memory(struct nvml *nv, nvmlDevice_t dev, uint64_t *total, uint64_t *used)
{
	nvmlMemory_v2_t m2 = { .version = NVML_MEMORY_V2_VERSION };
	nvmlMemory_t m1 = { 0 };
	nvmlReturn_t r;

	r = CALL(nv, nvmlDeviceGetMemoryInfo_v2, dev, &m2);
	if (r == NVML_SUCCESS) {
		*total = m2.total >> 20;
		*used = m2.used >> 20;
		return r;
	}
	/*
	 * A driver that has _v2 knows its struct: a version mismatch is our
	 * mistake, to be seen (memory unknown), not hidden by the fallback.
	 */
	if (r != NVML_ERROR_FUNCTION_NOT_FOUND && r != NVML_ERROR_NOT_SUPPORTED)
		return r;
	r = CALL(nv, nvmlDeviceGetMemoryInfo, dev, &m1);
	if (r == NVML_SUCCESS) {
		*total = m1.total >> 20;
		*used = m1.used >> 20;
	}
	return r;
}

/* The NUMA node from sysfs for a PCI device, or -1 when unknown. */
static int sysfs_numa_node(const nvmlPciInfo_t *pci)
{
	char path[128];
	FILE *f;
	int node = -1;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%04x:%02x:%02x.0/numa_node", pci->domain,
		 pci->bus, pci->device);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%d", &node) != 1)
		node = -1;
	fclose(f);
	return node < 0 ? -1 : node;
}

/*
 * Who owns a process, from /proc: NVML does not say. Left "" when the pid
 * is not in this pid namespace (a process of another container).
 */
static void process_user(struct vd_process *p)
{
	char path[32];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%u", (unsigned)p->pid);
	if (stat(path, &st) == 0)
		user_name(p->user, sizeof(p->user), st.st_uid);
}

/*
 * The compute processes of a GPU: _v3, then _v2, then plain (whose records
 * are smaller), growing the buffer while NVML says it is too small.
 */
static nvmlReturn_t read_processes(struct nvml *nv, nvmlDevice_t dev, struct vd_gpu *gpu,
				   int *nomem)
{
	nvmlProcessInfo_v2_t *v2 = NULL;
	nvmlProcessInfo_v1_t *v1 = NULL;
	unsigned int cap = 16, n = 0;
	nvmlReturn_t r = NVML_ERROR_FUNCTION_NOT_FOUND;
	int plain = !nv->nvmlDeviceGetComputeRunningProcesses_v3 &&
		    !nv->nvmlDeviceGetComputeRunningProcesses_v2;

	for (int tries = 0; tries < 8; tries++) {
		void *grown = realloc(plain ? (void *)v1 : (void *)v2,
				      cap * (plain ? sizeof(*v1) : sizeof(*v2)));

		if (!grown) {
			*nomem = 1;
			break;
		}
		if (plain)
			v1 = grown;
		else
			v2 = grown;
		n = cap;
		if (nv->nvmlDeviceGetComputeRunningProcesses_v3)
			r = nv->nvmlDeviceGetComputeRunningProcesses_v3(dev, &n, v2);
		else if (nv->nvmlDeviceGetComputeRunningProcesses_v2)
			r = nv->nvmlDeviceGetComputeRunningProcesses_v2(dev, &n, v2);
		else
			r = CALL(nv, nvmlDeviceGetComputeRunningProcesses, dev, &n, v1);
		if (r != NVML_ERROR_INSUFFICIENT_SIZE)
			break;
		/* room for what NVML asked, and for processes starting meanwhile */
		cap = (n > cap ? n : cap) + 16;
	}
	if (r != NVML_SUCCESS || *nomem)
		goto out;
	if (n > cap)
		n = cap;
	gpu->processes = n ? calloc(n, sizeof(*gpu->processes)) : NULL;
	if (n && !gpu->processes) {
		*nomem = 1;
		goto out;
	}
	for (unsigned int i = 0; i < n; i++) {
		struct vd_process *p = &gpu->processes[i];
		unsigned long long used = plain ? v1[i].usedGpuMemory : v2[i].usedGpuMemory;
		char name[256];

		p->pid = plain ? v1[i].pid : v2[i].pid;
		p->used_known = used != NVML_VALUE_NOT_AVAILABLE_ULL;
		p->used_mib = p->used_known ? used >> 20 : 0;
		if (CALL(nv, nvmlSystemGetProcessName, p->pid, name, sizeof(name)) == NVML_SUCCESS)
			str_copy(p->name, name, sizeof(p->name));
		process_user(p);
	}
	gpu->nprocesses = n;
	gpu->fields |= VD_GPU_PROCESSES;
out:
	free(v1);
	free(v2);
	return r;
}

/* The MIG profile from a MIG device's name ("NVIDIA A100-SXM4-40GB MIG 3g.20gb"). */
static void profile_from_name(char *profile, size_t size, const char *name)
{
	const char *p = NULL, *s;

	for (s = strstr(name, " MIG "); s; s = strstr(s + 1, " MIG "))
		p = s + 5;
	str_copy(profile, p ? p : "", size);
}

/* The MIG instances of a GPU in MIG mode. Returns an NVML answer; *nomem on ENOMEM. */
static nvmlReturn_t read_mig(struct nvml *nv, nvmlDevice_t dev, struct vd_gpu *gpu, int *nomem)
{
	unsigned int current = 0, pending = 0, max = 0;
	nvmlReturn_t r;

	r = CALL(nv, nvmlDeviceGetMigMode, dev, &current, &pending);
	if (r != NVML_SUCCESS || current != NVML_DEVICE_MIG_ENABLE)
		return r;
	gpu->mig_mode = 1;
	r = CALL(nv, nvmlDeviceGetMaxMigDeviceCount, dev, &max);
	if (r != NVML_SUCCESS)
		return r;
	for (unsigned int i = 0; i < max; i++) {
		nvmlDevice_t mdev;
		struct vd_mig *m, *grown;
		char buf[NVML_NAME_SIZE > NVML_UUID_SIZE ? NVML_NAME_SIZE : NVML_UUID_SIZE];
		unsigned int id;

		r = CALL(nv, nvmlDeviceGetMigDeviceHandleByIndex, dev, i, &mdev);
		if (r == NVML_ERROR_GPU_IS_LOST)
			return r;
		if (r != NVML_SUCCESS)
			continue; /* NOT_FOUND: an empty slot */
		grown = realloc(gpu->mig, (gpu->nmig + 1) * sizeof(*grown));
		if (!grown) {
			*nomem = 1;
			return NVML_SUCCESS;
		}
		gpu->mig = grown;
		m = memset(&gpu->mig[gpu->nmig++], 0, sizeof(*m));
		if (nv->nvmlDeviceGetUUID(mdev, buf, sizeof(buf)) == NVML_SUCCESS)
			str_copy(m->uuid, buf, sizeof(m->uuid));
		if (CALL(nv, nvmlDeviceGetGpuInstanceId, mdev, &id) == NVML_SUCCESS)
			m->gi = id;
		if (CALL(nv, nvmlDeviceGetComputeInstanceId, mdev, &id) == NVML_SUCCESS)
			m->ci = id;
		if (nv->nvmlDeviceGetName(mdev, buf, sizeof(buf)) == NVML_SUCCESS)
			profile_from_name(m->profile, sizeof(m->profile), buf);
		if (read_memory(nv, mdev, &m->memory_total_mib, &m->memory_used_mib) ==
		    NVML_SUCCESS)
			m->fields |= VD_GPU_MEMORY;
	}
	return NVML_SUCCESS;
}

/* In read_gpu: stops reading a GPU that fell off the bus, keeping what was read. */
#define CHECK_LOST(r)                  \
 do {                                  \
  if ((r) == NVML_ERROR_GPU_IS_LOST) { \
   gpu->lost = 1;                      \
   goto out;                           \
  }                                    \
 } while (0)

/*
 * Reads GPU i into gpu and its handle into *dev (NULL when there is none).
 * A lost GPU keeps what was read before NVML said so. Errors: VD_ENOMEM.
 */
static int read_gpu(struct nvml *nv, unsigned int i, struct vd_gpu *gpu, nvmlDevice_t *dev)
{
	char buf[NVML_NAME_SIZE > NVML_UUID_SIZE ? NVML_NAME_SIZE : NVML_UUID_SIZE];
	nvmlPciInfo_t pci;
	nvmlUtilization_t util;
	unsigned int u;
	int have_pci = 0, nomem = 0;
	nvmlReturn_t r;

	*dev = NULL;
	r = nv->nvmlDeviceGetHandleByIndex_v2(i, dev);
	if (r != NVML_SUCCESS) {
		*dev = NULL;
		CHECK_LOST(r);
		goto out;
	}
	r = nv->nvmlDeviceGetUUID(*dev, buf, sizeof(buf));
	CHECK_LOST(r);
	if (r == NVML_SUCCESS)
		str_copy(gpu->uuid, buf, sizeof(gpu->uuid));
	r = nv->nvmlDeviceGetName(*dev, buf, sizeof(buf));
	CHECK_LOST(r);
	if (r == NVML_SUCCESS)
		str_copy(gpu->name, buf, sizeof(gpu->name));
	memset(&pci, 0, sizeof(pci));
	r = CALL(nv, nvmlDeviceGetPciInfo_v3, *dev, &pci);
	if (r == NVML_ERROR_FUNCTION_NOT_FOUND)
		r = CALL(nv, nvmlDeviceGetPciInfo_v2, *dev, &pci);
	CHECK_LOST(r);
	if (r == NVML_SUCCESS) {
		have_pci = 1;
		pci.busId[sizeof(pci.busId) - 1] = '\0';
		str_copy(gpu->pci_bus_id, pci.busId, sizeof(gpu->pci_bus_id));
	}

	r = read_memory(nv, *dev, &gpu->memory_total_mib, &gpu->memory_used_mib);
	CHECK_LOST(r);
	if (r == NVML_SUCCESS)
		gpu->fields |= VD_GPU_MEMORY;
	r = CALL(nv, nvmlDeviceGetUtilizationRates, *dev, &util);
	CHECK_LOST(r);
	if (r == NVML_SUCCESS) {
		gpu->utilization_gpu = util.gpu;
		gpu->fields |= VD_GPU_UTILIZATION;
	}
	r = CALL(nv, nvmlDeviceGetTemperature, *dev, NVML_TEMPERATURE_GPU, &u);
	CHECK_LOST(r);
	if (r == NVML_SUCCESS) {
		gpu->temperature_c = (int)u;
		gpu->fields |= VD_GPU_TEMPERATURE;
	}
	r = CALL(nv, nvmlDeviceGetPowerUsage, *dev, &u);
	CHECK_LOST(r);
	if (r == NVML_SUCCESS) {
		gpu->power_mw = u;
		gpu->fields |= VD_GPU_POWER;
	}
	/*
	 * nvmlDeviceGetNumaNodeId answers only where the GPU's memory is a
	 * NUMA node of its own; elsewhere the kernel knows the PCI device's.
	 */
	r = CALL(nv, nvmlDeviceGetNumaNodeId, *dev, &u);
	CHECK_LOST(r);
	if (r == NVML_SUCCESS) {
		gpu->numa_node = (int)u;
		gpu->fields |= VD_GPU_NUMA;
	} else if (have_pci && (gpu->numa_node = sysfs_numa_node(&pci)) >= 0) {
		gpu->fields |= VD_GPU_NUMA;
	} else {
		gpu->numa_node = 0;
	}
	r = read_processes(nv, *dev, gpu, &nomem);
	if (nomem)
		goto out;
	CHECK_LOST(r);
	r = read_mig(nv, *dev, gpu, &nomem);
	if (nomem)
		goto out;
	CHECK_LOST(r);
out:
	if (gpu->lost)
		*dev = NULL;
	return nomem ? error_set(VD_ENOMEM, "out of memory") : 0;
}

/* How near two GPUs are; -1 when NVML cannot say. */
static int read_link(struct nvml *nv, nvmlDevice_t a, nvmlDevice_t b)
{
	int status = -1, level = -1;

	if (CALL(nv, nvmlDeviceGetP2PStatus, a, b, NVML_P2P_CAPS_INDEX_NVLINK, &status) ==
		    NVML_SUCCESS &&
	    status == NVML_P2P_STATUS_OK)
		return VD_LINK_NVLINK;
	if (CALL(nv, nvmlDeviceGetTopologyCommonAncestor, a, b, &level) != NVML_SUCCESS)
		return -1;
	switch (level) {
	case NVML_TOPOLOGY_INTERNAL:
	case NVML_TOPOLOGY_SINGLE:
		return VD_LINK_PIX;
	case NVML_TOPOLOGY_MULTIPLE:
		return VD_LINK_PXB;
	case NVML_TOPOLOGY_HOSTBRIDGE:
		return VD_LINK_PHB;
	case NVML_TOPOLOGY_NODE:
		return VD_LINK_NODE;
	case NVML_TOPOLOGY_SYSTEM:
		return VD_LINK_SYS;
	default:
		return -1;
	}
}

/* The links between every pair of GPUs that NVML can place. Errors: VD_ENOMEM. */
static int read_links(struct nvml *nv, struct vd_system *sys, nvmlDevice_t *devs)
{
	size_t n = sys->ngpus;

	if (n < 2)
		return 0;
	sys->links = calloc(n * (n - 1) / 2, sizeof(*sys->links));
	if (!sys->links)
		return error_set(VD_ENOMEM, "out of memory");
	for (size_t a = 0; a < n; a++) {
		for (size_t b = a + 1; b < n; b++) {
			int level;

			if (!devs[a] || !devs[b])
				continue;
			level = read_link(nv, devs[a], devs[b]);
			if (level < 0)
				continue;
			sys->links[sys->nlinks++] = (struct vd_link){
				.a = (unsigned)a,
				.b = (unsigned)b,
				.level = (enum vd_link_level)level,
			};
		}
	}
	return 0;
}

/*
 * Fills cuda_rank from the CUDA driver's fastest-first order, asked once
 * per open (and cached across runs for the same driver and GPUs): a GPU's
 * rank is its place among the whole GPUs CUDA lists. Where the driver
 * cannot be asked, ranks stay unknown.
 */
static void fill_cuda_ranks(struct nvml *nv, struct vd_system *sys)
{
	unsigned rank = 0;

	if (!nv->cuda_asked) {
		char *key = NULL;
		size_t len = strlen(sys->driver_version) + 1;

		nv->cuda_asked = 1;
		for (size_t i = 0; i < sys->ngpus; i++)
			len += strlen(sys->gpus[i].uuid) + 1;
		key = malloc(len);
		if (key) {
			strcpy(key, sys->driver_version);
			for (size_t i = 0; i < sys->ngpus; i++)
				strcat(strcat(key, " "), sys->gpus[i].uuid);
		}
		if (!key || cuda_fastest_order(&nv->cuda_uuids, &nv->ncuda, key) < 0) {
			nv->cuda_uuids = NULL;
			nv->ncuda = 0;
		}
		free(key);
	}
	for (size_t k = 0; k < nv->ncuda; k++) {
		if (strncmp(nv->cuda_uuids[k], "GPU-", 4))
			continue;
		for (size_t i = 0; i < sys->ngpus; i++) {
			struct vd_gpu *gpu = &sys->gpus[i];

			if (gpu->uuid[0] && !strcmp(gpu->uuid, nv->cuda_uuids[k])) {
				gpu->cuda_rank = rank;
				gpu->fields |= VD_GPU_CUDA_RANK;
				break;
			}
		}
		rank++;
	}
}

/* Reads the whole machine afresh. */
static int nv_snapshot(struct vd_system **out, void *state)
{
	struct nvml *nv = state;
	struct vd_system *sys = NULL;
	nvmlDevice_t *devs = NULL;
	char buf[NVML_DRIVER_SIZE];
	unsigned int count = 0;
	int version, err;
	nvmlReturn_t r;

	*out = NULL;
	r = nv->nvmlDeviceGetCount_v2(&count);
	if (r != NVML_SUCCESS)
		return error_set(VD_ENVML, "cannot count GPUs: %s", nv->nvmlErrorString(r));
	err = system_new(&sys, count);
	if (err < 0)
		return err;
	if (count) {
		devs = calloc(count, sizeof(*devs));
		if (!devs) {
			err = error_set(VD_ENOMEM, "out of memory");
			goto out;
		}
	}
	if (CALL(nv, nvmlSystemGetDriverVersion, buf, sizeof(buf)) == NVML_SUCCESS)
		str_copy(sys->driver_version, buf, sizeof(sys->driver_version));
	r = CALL(nv, nvmlSystemGetCudaDriverVersion_v2, &version);
	if (r == NVML_ERROR_FUNCTION_NOT_FOUND)
		r = CALL(nv, nvmlSystemGetCudaDriverVersion, &version);
	if (r == NVML_SUCCESS)
		sys->cuda_driver_version = version;

	for (unsigned int i = 0; i < count; i++) {
		err = read_gpu(nv, i, &sys->gpus[i], &devs[i]);
		if (err < 0)
			goto out;
	}
	err = read_links(nv, sys, devs);
	if (err < 0)
		goto out;
	fill_cuda_ranks(nv, sys);
	*out = sys;
	sys = NULL;
out:
	free(devs);
	vd_system_free(sys);
	return err;
}

const struct vd_backend_ops backend_nvml_ops = {
	.name = "nvml",
	.open = nv_open,
	.snapshot = nv_snapshot,
	.close = nv_close,
};
