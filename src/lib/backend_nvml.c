/* backend_nvml.c - STUB, being written */
#include "internal.h"
static int nv_open(void **state, const char *path)
{
	(void)state;
	return error_set(VD_ENODRIVER, "no NVIDIA driver found: cannot load '%s'", path ? path : "libnvidia-ml.so.1");
}
static int nv_snapshot(struct vd_system **out, void *state)
{
	(void)out; (void)state;
	return VD_ENODRIVER;
}
static void nv_close(void *state)
{
	(void)state;
}
const struct vd_backend_ops backend_nvml_ops = { "nvml", nv_open, nv_snapshot, nv_close };
int vd_cuda_enumerate(char ***out, size_t *nout, const char *cuda_lib, const char *value, enum vd_order order)
{
	(void)cuda_lib; (void)value; (void)order;
	*out = NULL; *nout = 0;
	return error_set(VD_ECUDA, "not yet");
}
