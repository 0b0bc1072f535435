/*
 * env.c - the variables around CUDA_VISIBLE_DEVICES: the container
 * runtime's NVIDIA_VISIBLE_DEVICES, and the near misses that make a
 * setting "do nothing".
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Finds the device one element of NVIDIA_VISIBLE_DEVICES names. */
static int container_element(struct vd_device_ref *out, const struct vd_system *sys, const char *s)
{
	char *end;
	unsigned long g, m;

	if (!strncmp(s, "GPU-", 4) || !strncmp(s, "MIG-", 4)) {
		for (size_t i = 0; i < sys->ngpus; i++) {
			if (!strcmp(sys->gpus[i].uuid, s)) {
				*out = (struct vd_device_ref){ (unsigned)i, -1 };
				return 1;
			}
			for (size_t j = 0; j < sys->gpus[i].nmig; j++) {
				if (!strcmp(sys->gpus[i].mig[j].uuid, s)) {
					*out = (struct vd_device_ref){ (unsigned)i, (int)j };
					return 1;
				}
			}
		}
		return 0;
	}
	if (!isdigit((unsigned char)*s))
		return 0;
	g = strtoul(s, &end, 10);
	if (g >= sys->ngpus)
		return 0;
	if (!*end) {
		*out = (struct vd_device_ref){ (unsigned)g, -1 };
		return 1;
	}
	/* "<gpu>:<mig>": the runtime's index form for a MIG device */
	if (*end != ':' || !isdigit((unsigned char)end[1]))
		return 0;
	m = strtoul(end + 1, &end, 10);
	if (*end || m >= sys->gpus[g].nmig)
		return 0;
	*out = (struct vd_device_ref){ (unsigned)g, (int)m };
	return 1;
}

/* Fills a LIST view from a comma-separated value. */
static int container_list(struct vd_container_view *v, const struct vd_system *sys,
			  const char *value)
{
	char *copy = strdup(value), *save = NULL;
	size_t cap = 1;
	int err = 0;

	if (!copy)
		return error_set(VD_ENOMEM, "out of memory");
	for (const char *p = value; *p; p++)
		cap += *p == ',';
	v->devices = calloc(cap, sizeof(*v->devices));
	if (!v->devices) {
		err = error_set(VD_ENOMEM, "out of memory");
		goto out;
	}
	for (char *tok = strtok_r(copy, ",", &save); tok && !err;
	     tok = strtok_r(NULL, ",", &save)) {
		struct vd_device_ref d;

		if (container_element(&d, sys, tok))
			v->devices[v->ndevices++] = d;
		else
			err = strings_push(
				&v->warnings, &v->nwarnings,
				"NVIDIA_VISIBLE_DEVICES names '%s', which is no GPU here: "
				"the container runtime refuses to start the container",
				tok);
	}
out:
	free(copy);
	return err;
}

int vd_container_resolve(struct vd_container_view **out, const struct vd_system *sys,
			 const char *value)
{
	struct vd_container_view *v;
	int err = 0;

	*out = NULL;
	v = calloc(1, sizeof(*v));
	if (!v)
		return error_set(VD_ENOMEM, "out of memory");
	if (!value) {
		v->mode = VD_CONTAINER_UNSET;
	} else if (!*value || !strcmp(value, "void")) {
		v->mode = VD_CONTAINER_VOID;
	} else if (!strcmp(value, "none")) {
		v->mode = VD_CONTAINER_NONE;
	} else if (!strcmp(value, "all")) {
		v->mode = VD_CONTAINER_ALL;
		v->devices = calloc(sys->ngpus ? sys->ngpus : 1, sizeof(*v->devices));
		if (!v->devices)
			err = error_set(VD_ENOMEM, "out of memory");
		for (size_t i = 0; !err && i < sys->ngpus; i++)
			v->devices[v->ndevices++] = (struct vd_device_ref){ (unsigned)i, -1 };
	} else {
		v->mode = VD_CONTAINER_LIST;
		err = container_list(v, sys, value);
	}
	if (err) {
		vd_container_view_free(v);
		return err;
	}
	*out = v;
	return 0;
}

void vd_container_view_free(struct vd_container_view *view)
{
	if (!view)
		return;
	free(view->devices);
	vd_strings_free(view->warnings, view->nwarnings);
	free(view);
}

/* The variables whose near misses are worth a word. */
static const char *const watched[] = {
	"CUDA_VISIBLE_DEVICES",
	"CUDA_DEVICE_ORDER",
	"NVIDIA_VISIBLE_DEVICES",
};

/* Checks one NAME=value entry for a near-miss name. */
static int check_name(char ***out, size_t *n, const char *name)
{
	for (size_t w = 0; w < ARRAY_SIZE(watched); w++) {
		size_t d;

		if (!strcmp(name, watched[w]))
			return 0;
		d = str_distance(name, watched[w], 1);
		if (d == 0)
			return strings_push(out, n,
					    "'%s' is set, but CUDA reads only '%s' (upper case): "
					    "rename it",
					    name, watched[w]);
		if (d <= 2)
			return strings_push(out, n,
					    "'%s' is set: a misspelling of '%s'? CUDA ignores it",
					    name, watched[w]);
	}
	return 0;
}

/* Checks the value of CUDA_VISIBLE_DEVICES for characters that do not belong. */
static int check_value(char ***out, size_t *n, const char *value)
{
	const char *first = value + strspn(value, " \t");

	if (strpbrk(value, "'\""))
		return strings_push(out, n,
				    "CUDA_VISIBLE_DEVICES holds quote characters (%s): CUDA reads "
				    "them as part of the value; remove them",
				    value);
	if (first != value && (!strncmp(first, "GPU-", 4) || !strncmp(first, "MIG-", 4)))
		return strings_push(
			out, n,
			"CUDA_VISIBLE_DEVICES starts with a blank before a UUID: CUDA "
			"then reads it as ordinals and sees no device; remove the blank");
	if (strstr(value, ", GPU-") || strstr(value, ", MIG-"))
		return strings_push(
			out, n,
			"CUDA_VISIBLE_DEVICES has a blank after a comma in a UUID list: "
			"CUDA stops the list there; remove the blanks");
	return 0;
}

int vd_env_check(char ***out, size_t *nout, char *const *env)
{
	char **list = NULL;
	size_t n = 0;
	int err = 0;

	*out = NULL;
	*nout = 0;
	for (size_t i = 0; env && env[i] && !err; i++) {
		const char *eq = strchr(env[i], '=');
		char name[64];

		if (!eq || (size_t)(eq - env[i]) >= sizeof(name))
			continue;
		memcpy(name, env[i], (size_t)(eq - env[i]));
		name[eq - env[i]] = '\0';
		if (!strcmp(name, "CUDA_VISIBLE_DEVICES"))
			err = check_value(&list, &n, eq + 1);
		else if (!strcmp(name, "CUDA_DEVICE_ORDER")) {
			enum vd_order order;

			if (vd_order_parse(&order, eq + 1))
				err = strings_push(&list, &n, "%s", vd_error_last());
		} else
			err = check_name(&list, &n, name);
	}
	if (err) {
		vd_strings_free(list, n);
		return err;
	}
	*out = list;
	*nout = n;
	return 0;
}
