/*
 * system.c - the device model: snapshots of a machine's GPUs.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int system_new(struct vd_system **out, size_t ngpus)
{
	struct vd_system *sys;

	*out = NULL;
	sys = calloc(1, sizeof(*sys));
	if (!sys)
		return error_set(VD_ENOMEM, "out of memory");
	sys->cuda_driver_version = -1;
	if (ngpus) {
		sys->gpus = calloc(ngpus, sizeof(*sys->gpus));
		if (!sys->gpus) {
			free(sys);
			return error_set(VD_ENOMEM, "out of memory");
		}
	}
	sys->ngpus = ngpus;
	for (size_t i = 0; i < ngpus; i++)
		sys->gpus[i].index = (unsigned)i;
	*out = sys;
	return 0;
}

/* A copy of n elements of size bytes, or NULL when there are none or memory runs out. */
static void *array_copy(const void *src, size_t n, size_t size)
{
	void *dst;

	if (!n || n > SIZE_MAX / size)
		return NULL;
	dst = malloc(n * size);
	if (dst)
		memcpy(dst, src, n * size);
	return dst;
}

int system_copy(struct vd_system **out, const struct vd_system *src)
{
	struct vd_system *sys = NULL;
	int err;

	*out = NULL;
	err = system_new(&sys, src->ngpus);
	if (err)
		return err;
	memcpy(sys->driver_version, src->driver_version, sizeof(sys->driver_version));
	sys->cuda_driver_version = src->cuda_driver_version;
	for (size_t i = 0; i < src->ngpus; i++) {
		const struct vd_gpu *from = &src->gpus[i];
		struct vd_gpu *to = &sys->gpus[i];

		*to = *from;
		to->processes =
			array_copy(from->processes, from->nprocesses, sizeof(*to->processes));
		to->mig = array_copy(from->mig, from->nmig, sizeof(*to->mig));
		if ((from->nprocesses && !to->processes) || (from->nmig && !to->mig))
			goto out;
	}
	sys->links = array_copy(src->links, src->nlinks, sizeof(*sys->links));
	sys->nlinks = src->nlinks;
	if (src->nlinks && !sys->links)
		goto out;
	*out = sys;
	return 0;
out:
	vd_system_free(sys);
	return error_set(VD_ENOMEM, "out of memory");
}

void vd_system_free(struct vd_system *sys)
{
	if (!sys)
		return;
	for (size_t i = 0; i < sys->ngpus; i++) {
		free(sys->gpus[i].processes);
		free(sys->gpus[i].mig);
	}
	free(sys->gpus);
	free(sys->links);
	free(sys);
}

int64_t vd_gpu_memory_free_mib(const struct vd_gpu *gpu)
{
	if (!(gpu->fields & VD_GPU_MEMORY))
		return -1;
	if (gpu->memory_used_mib >= gpu->memory_total_mib)
		return 0;
	return (int64_t)(gpu->memory_total_mib - gpu->memory_used_mib);
}

const char *system_device_uuid(const struct vd_system *sys, struct vd_device_ref d)
{
	const struct vd_gpu *g = &sys->gpus[d.gpu];

	return d.mig >= 0 ? g->mig[d.mig].uuid : g->uuid;
}

int64_t vd_device_memory_free_mib(const struct vd_system *sys, struct vd_device_ref d)
{
	const struct vd_gpu *gpu = &sys->gpus[d.gpu];
	const struct vd_mig *m;

	if (d.mig < 0)
		return vd_gpu_memory_free_mib(gpu);
	m = &gpu->mig[d.mig];
	if (!(m->fields & VD_GPU_MEMORY))
		return -1;
	if (m->memory_used_mib >= m->memory_total_mib)
		return 0;
	return (int64_t)(m->memory_total_mib - m->memory_used_mib);
}

int vd_system_find(struct vd_device_ref *out, const struct vd_system *sys, const char *uuid)
{
	for (size_t g = 0; g < sys->ngpus; g++) {
		if (!strcmp(sys->gpus[g].uuid, uuid)) {
			*out = (struct vd_device_ref){ (unsigned)g, -1 };
			return 0;
		}
		for (size_t m = 0; m < sys->gpus[g].nmig; m++) {
			if (!strcmp(sys->gpus[g].mig[m].uuid, uuid)) {
				*out = (struct vd_device_ref){ (unsigned)g, (int)m };
				return 0;
			}
		}
	}
	return VD_ENOTFOUND;
}

int vd_system_fastest_known(const struct vd_system *sys)
{
	for (size_t i = 0; i < sys->ngpus; i++)
		if (!(sys->gpus[i].fields & VD_GPU_CUDA_RANK))
			return 0;
	return 1;
}

const char *vd_link_level_name(enum vd_link_level level)
{
	static const char *const names[] = { "nvlink", "pix", "pxb", "phb", "node", "sys" };

	if ((unsigned)level >= ARRAY_SIZE(names))
		return NULL;
	return names[level];
}

unsigned system_driver_major(const struct vd_system *sys)
{
	return (unsigned)strtoul(sys->driver_version, NULL, 10);
}

size_t system_units(const struct vd_system *sys)
{
	size_t n = 0;

	for (size_t i = 0; i < sys->ngpus; i++)
		n += sys->gpus[i].mig_mode && sys->gpus[i].nmig ? sys->gpus[i].nmig : 1;
	return n;
}
