/*
 * backend.c - choosing and driving a backend through its vtable.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct vd_backend {
	const struct vd_backend_ops *ops;
	void *state;
	char *source;
};

/* The backends, by name. */
static const struct vd_backend_ops *const backends[] = {
	&backend_nvml_ops,
	&backend_fixture_ops,
	&backend_demo_ops,
};

static const struct vd_backend_ops *backend_find(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(backends); i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	return NULL;
}

/* An environment variable, or NULL when it is unset or empty. */
static const char *env_nonempty(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

int vd_backend_open(struct vd_backend **out, const struct vd_backend_options *opts)
{
	static const struct vd_backend_options none;
	struct vd_backend *b = NULL;
	const char *fixture, *nvml_lib, *name, *path;
	int err;

	*out = NULL;
	if (!opts)
		opts = &none;
	fixture = opts->fixture;
	nvml_lib = opts->nvml_lib;
	if (opts->demo && fixture)
		return error_set(VD_EINVAL, "--demo and --fixture name two servers: choose one");
	if (opts->use_env && !opts->demo && !fixture && !nvml_lib) {
		fixture = env_nonempty("VISDEV_FIXTURE");
		if (!fixture)
			nvml_lib = env_nonempty("VISDEV_NVML_LIB");
	}
	if (opts->demo) {
		name = "demo";
		path = NULL;
	} else if (fixture) {
		name = "fixture";
		path = fixture;
	} else {
		name = "nvml";
		path = nvml_lib;
	}

	b = calloc(1, sizeof(*b));
	if (!b)
		return error_set(VD_ENOMEM, "out of memory");
	b->ops = backend_find(name);
	b->source = strdup(path ? path : opts->demo ? "(built in)" : "libnvidia-ml.so.1");
	if (!b->source) {
		err = error_set(VD_ENOMEM, "out of memory");
		goto out;
	}
	err = b->ops->open(&b->state, path);
	if (err < 0)
		goto out;
	*out = b;
	b = NULL;
out:
	if (b) {
		free(b->source);
		free(b);
	}
	return err;
}

int vd_backend_snapshot(struct vd_system **out, struct vd_backend *backend)
{
	*out = NULL;
	return backend->ops->snapshot(out, backend->state);
}

const char *vd_backend_name(const struct vd_backend *backend)
{
	return backend->ops->name;
}

const char *vd_backend_source(const struct vd_backend *backend)
{
	return backend->source;
}

void vd_backend_free(struct vd_backend *backend)
{
	if (!backend)
		return;
	backend->ops->close(backend->state);
	free(backend->source);
	free(backend);
}
