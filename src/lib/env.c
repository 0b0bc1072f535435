/*
 * env.c - the variables around CUDA_VISIBLE_DEVICES: the container
 * runtime's NVIDIA_VISIBLE_DEVICES, and the near misses that make a
 * setting "do nothing".
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

/*
 * NVIDIA_VISIBLE_DEVICES as the NVIDIA container runtime reads it: its Go
 * hook (nvidia-container-toolkit) splits the value on commas, trims each
 * element and drops empty ones; an empty list or "void" anywhere means no
 * GPU support at all; otherwise the first element that is exactly "all" or
 * "none" decides. What remains goes to nvidia-container-cli
 * (libnvidia-container), which takes "all" in any case, full GPU-/MIG-
 * UUIDs without regard to case, PCI bus ids, indices read with strtoumax
 * and "<gpu>:<mig>" MIG indices, drops duplicates, and fails on an element
 * that names no device: the container is then not started.
 */

/* Whether s names a PCI bus id, written as "domain:bus:device.0" in hex; *out is its usual form. */
static int pci_form(char *out, size_t n, const char *s)
{
	unsigned domain, bus, dev;

	if (sscanf(s, "%x:%2x:%2x.0", &domain, &bus, &dev) != 3)
		return 0;
	snprintf(out, n, "%08x:%02x:%02x.0", domain, bus, dev);
	return 1;
}

/* Finds the device one (trimmed) element names; 1 when found. */
static int container_element(struct vd_device_ref *out, const struct vd_system *sys, const char *s)
{
	char bus[VD_BUSID_MAX], *end;
	unsigned long g, m;
	uintmax_t n;

	for (size_t i = 0; i < sys->ngpus; i++) {
		const struct vd_gpu *gpu = &sys->gpus[i];

		if (!strncasecmp(s, "GPU-", 4) && !strcasecmp(gpu->uuid, s)) {
			*out = (struct vd_device_ref){ (unsigned)i, -1 };
			return 1;
		}
	}
	if (pci_form(bus, sizeof(bus), s)) {
		for (size_t i = 0; i < sys->ngpus; i++) {
			if (!strncasecmp(sys->gpus[i].pci_bus_id, bus, strlen(bus))) {
				*out = (struct vd_device_ref){ (unsigned)i, -1 };
				return 1;
			}
		}
	}
	n = strtoumax(s, &end, 10);
	if (!*end && n < UINTMAX_MAX && n < sys->ngpus) {
		*out = (struct vd_device_ref){ (unsigned)n, -1 };
		return 1;
	}
	for (size_t i = 0; i < sys->ngpus; i++) {
		for (size_t j = 0; j < sys->gpus[i].nmig; j++) {
			if (!strncasecmp(s, "MIG-", 4) &&
			    !strcasecmp(sys->gpus[i].mig[j].uuid, s)) {
				*out = (struct vd_device_ref){ (unsigned)i, (int)j };
				return 1;
			}
		}
	}
	/* "<gpu>:<mig>": the runtime's index form for a MIG device, read as sscanf does */
	if (sscanf(s, "%lu:%lu", &g, &m) == 2 && g < sys->ngpus && m < sys->gpus[g].nmig) {
		*out = (struct vd_device_ref){ (unsigned)g, (int)m };
		return 1;
	}
	return 0;
}

/* Whether s begins some device's UUID (CUDA takes prefixes; the container runtime does not). */
static int uuid_prefix(const struct vd_system *sys, const char *s)
{
	size_t len = strlen(s);

	for (size_t i = 0; len > 4 && i < sys->ngpus; i++) {
		if (!strncasecmp(sys->gpus[i].uuid, s, len))
			return 1;
		for (size_t m = 0; m < sys->gpus[i].nmig; m++)
			if (!strncasecmp(sys->gpus[i].mig[m].uuid, s, len))
				return 1;
	}
	return 0;
}

/* Adds d to the view's devices unless it is there already (the runtime drops duplicates). */
static void add_view_device(struct vd_container_view *v, struct vd_device_ref d)
{
	for (size_t i = 0; i < v->ndevices; i++)
		if (v->devices[i].gpu == d.gpu && v->devices[i].mig == d.mig)
			return;
	v->devices[v->ndevices++] = d;
}

/* Every device: whole GPUs, and the MIG devices of GPUs in MIG mode. */
static void container_all(struct vd_container_view *v, const struct vd_system *sys)
{
	for (size_t i = 0; i < sys->ngpus; i++) {
		const struct vd_gpu *gpu = &sys->gpus[i];

		if (!gpu->mig_mode)
			add_view_device(v, (struct vd_device_ref){ (unsigned)i, -1 });
		for (size_t m = 0; gpu->mig_mode && m < gpu->nmig; m++)
			add_view_device(v, (struct vd_device_ref){ (unsigned)i, (int)m });
	}
}

/* The trimmed, non-empty elements of value, in order: a new array of pointers into *copy. */
static int container_elements(char ***out, size_t *n, char **copy, const char *value)
{
	char *save = NULL, **list;
	size_t cap = 1;

	*out = NULL;
	*n = 0;
	for (const char *p = value; *p; p++)
		cap += *p == ',';
	*copy = strdup(value);
	list = calloc(cap, sizeof(*list));
	if (!*copy || !list) {
		free(list);
		return error_set(VD_ENOMEM, "out of memory");
	}
	for (char *tok = strtok_r(*copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end = tok + strlen(tok);

		while (isspace((unsigned char)*tok))
			tok++;
		while (end > tok && isspace((unsigned char)end[-1]))
			*--end = '\0';
		if (*tok)
			list[(*n)++] = tok;
	}
	*out = list;
	return 0;
}

/* Decides the mode from the elements: void, then the first "all" or "none", then "all" in any case.
 */
static enum vd_container_mode container_mode(char *const *el, size_t n, size_t *decider)
{
	*decider = n;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(el[i], "void")) {
			*decider = i;
			return VD_CONTAINER_VOID;
		}
	if (!n)
		return VD_CONTAINER_VOID;
	for (size_t i = 0; i < n; i++) {
		*decider = i;
		if (!strcmp(el[i], "all"))
			return VD_CONTAINER_ALL;
		if (!strcmp(el[i], "none"))
			return VD_CONTAINER_NONE;
	}
	/* the Go hook passes "ALL" on; nvidia-container-cli reads it as all, wherever it is */
	for (size_t i = 0; i < n; i++) {
		*decider = i;
		if (!strcasecmp(el[i], "all"))
			return VD_CONTAINER_ALL;
	}
	*decider = n;
	return VD_CONTAINER_LIST;
}

int vd_container_resolve(struct vd_container_view **out, const struct vd_system *sys,
			 const char *value)
{
	struct vd_container_view *v;
	char *copy = NULL, **el = NULL;
	size_t n = 0, decider, cap = system_units(sys) + sys->ngpus + 1;
	int err = 0;

	*out = NULL;
	v = calloc(1, sizeof(*v));
	if (!v)
		return error_set(VD_ENOMEM, "out of memory");
	if (!value)
		goto out;
	err = container_elements(&el, &n, &copy, value);
	v->devices = calloc(cap, sizeof(*v->devices));
	if (!err && !v->devices)
		err = error_set(VD_ENOMEM, "out of memory");
	if (err)
		goto out;
	v->mode = container_mode(el, n, &decider);
	if (decider < n && n > 1)
		err = strings_push(&v->warnings, &v->nwarnings,
				   "'%s' decides the whole value: the container runtime passes "
				   "over the other elements",
				   el[decider]);
	if (v->mode == VD_CONTAINER_ALL)
		container_all(v, sys);
	for (size_t i = 0; !err && v->mode == VD_CONTAINER_LIST && i < n; i++) {
		struct vd_device_ref d;

		if (container_element(&d, sys, el[i])) {
			add_view_device(v, d);
			continue;
		}
		/* nvidia-container-cli stops at the first element it cannot place */
		v->refused = 1;
		err = strings_push(
			&v->warnings, &v->nwarnings,
			"NVIDIA_VISIBLE_DEVICES names '%s', which is no device here: the "
			"container runtime refuses to start the container "
			"('%s: unknown device')%s",
			el[i], el[i],
			uuid_prefix(sys, el[i]) ? "; it takes whole UUIDs, not prefixes" : "");
		break;
	}
out:
	free(el);
	free(copy);
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

const char *env_split(char *name, size_t n, const char *entry)
{
	const char *eq = strchr(entry, '=');

	if (!eq || (size_t)(eq - entry) >= n)
		return NULL;
	memcpy(name, entry, (size_t)(eq - entry));
	name[eq - entry] = '\0';
	return eq + 1;
}

/* Other vendors' variables, as near to the watched ones as a misspelling: not one. */
static const char *const others[] = {
	"MUSA_VISIBLE_DEVICES", /* Moore Threads' GPUs */
};

const char *env_near_miss(const char *name, int *case_only)
{
	for (size_t o = 0; o < ARRAY_SIZE(others); o++)
		if (!strcmp(name, others[o]))
			return NULL;
	for (size_t w = 0; w < ARRAY_SIZE(watched); w++) {
		size_t d;

		if (!strcmp(name, watched[w]))
			return NULL;
		d = str_distance(name, watched[w], 1);
		if (d <= 2) {
			if (case_only)
				*case_only = d == 0;
			return watched[w];
		}
	}
	return NULL;
}

/* Checks one NAME=value entry for a near-miss name. */
static int check_name(char ***out, size_t *n, const char *name)
{
	int case_only = 0;
	const char *meant = env_near_miss(name, &case_only);

	if (!meant)
		return 0;
	if (case_only)
		return strings_push(out, n,
				    "'%s' is set, but CUDA reads only '%s' (upper case): rename it",
				    name, meant);
	return strings_push(out, n, "'%s' is set: a misspelling of '%s'? CUDA ignores it", name,
			    meant);
}

/* Checks the value of CUDA_VISIBLE_DEVICES for characters that do not belong. */
enum env_flaw env_value_flaw(const char *value)
{
	const char *first = value + strspn(value, " \t");

	if (strpbrk(value, "'\""))
		return ENV_FLAW_QUOTES;
	if (first != value && (!strncmp(first, "GPU-", 4) || !strncmp(first, "MIG-", 4)))
		return ENV_FLAW_BLANK_BEFORE_UUID;
	if (strstr(value, ", GPU-") || strstr(value, ", MIG-"))
		return ENV_FLAW_BLANK_IN_UUIDS;
	return ENV_FLAW_NONE;
}

static int check_value(char ***out, size_t *n, const char *value)
{
	switch (env_value_flaw(value)) {
	case ENV_FLAW_QUOTES:
		return strings_push(out, n,
				    "CUDA_VISIBLE_DEVICES holds quote characters (%s): CUDA reads "
				    "them as part of the value; remove them",
				    value);
	case ENV_FLAW_BLANK_BEFORE_UUID:
		return strings_push(
			out, n,
			"CUDA_VISIBLE_DEVICES starts with a blank before a UUID: CUDA "
			"then reads it as ordinals and sees no device; remove the blank");
	case ENV_FLAW_BLANK_IN_UUIDS:
		return strings_push(
			out, n,
			"CUDA_VISIBLE_DEVICES has a blank after a comma in a UUID list: "
			"CUDA stops the list there; remove the blanks");
	default:
		return 0;
	}
}

int vd_env_check(char ***out, size_t *nout, char *const *env)
{
	char **list = NULL;
	size_t n = 0;
	int err = 0;

	*out = NULL;
	*nout = 0;
	for (size_t i = 0; env && env[i] && !err; i++) {
		char name[64];
		const char *value = env_split(name, sizeof(name), env[i]);

		if (!value)
			continue;
		if (!strcmp(name, "CUDA_VISIBLE_DEVICES"))
			err = check_value(&list, &n, value);
		else if (!strcmp(name, "CUDA_DEVICE_ORDER")) {
			enum vd_order order;

			if (vd_order_parse(&order, value))
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
