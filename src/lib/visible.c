/*
 * visible.c - CUDA's rules for CUDA_VISIBLE_DEVICES, and their reverse.
 *
 * This is the single place the rules live (DESIGN.md, "The rules of
 * CUDA_VISIBLE_DEVICES"). Everything here is a pure function of a value, a
 * device table and an order: no I/O, no environment.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *vd_order_name(enum vd_order order)
{
	return order == VD_ORDER_PCI ? "pci" : "fastest";
}

int vd_order_parse(enum vd_order *out, const char *value)
{
	*out = VD_ORDER_FASTEST;
	if (!value || !*value || !strcmp(value, "FASTEST_FIRST"))
		return 0;
	if (!strcmp(value, "PCI_BUS_ID")) {
		*out = VD_ORDER_PCI;
		return 0;
	}
	return error_set(VD_EINVAL,
			 "CUDA_DEVICE_ORDER '%s' is neither FASTEST_FIRST nor PCI_BUS_ID: CUDA "
			 "uses its default, FASTEST_FIRST",
			 value);
}

const char *vd_stop_reason_name(enum vd_stop_reason reason)
{
	static const char *const names[] = {
		NULL,		"empty",    "not-a-number", "negative",
		"out-of-range", "not-uuid", "no-match",	    "ambiguous",
	};

	if ((unsigned)reason >= ARRAY_SIZE(names))
		return NULL;
	return names[reason];
}

/* The physical index of each CUDA ordinal: order[k] is the GPU counted k-th. */
static int enumeration_order(unsigned **out, const struct vd_system *sys, enum vd_order order)
{
	unsigned *idx = malloc((sys->ngpus ? sys->ngpus : 1) * sizeof(*idx));

	*out = NULL;
	if (!idx)
		return error_set(VD_ENOMEM, "out of memory");
	for (size_t i = 0; i < sys->ngpus; i++)
		idx[i] = (unsigned)i;
	if (order == VD_ORDER_FASTEST && vd_system_fastest_known(sys)) {
		for (size_t i = 0; i < sys->ngpus; i++)
			idx[sys->gpus[i].cuda_rank % sys->ngpus] = (unsigned)i;
	}
	*out = idx;
	return 0;
}

static int is_uuid_element(const char *s, size_t len)
{
	return len >= 4 && (!strncmp(s, "GPU-", 4) || !strncmp(s, "MIG-", 4));
}

/*
 * Reads an ordinal the way CUDA does (strtoul: blanks, a sign, digits, and
 * whatever follows ignored). Returns VD_STOP_NONE and the ordinal, or why
 * the element ends the list.
 */
static enum vd_stop_reason read_ordinal(unsigned long *out, const char *s, size_t len)
{
	size_t i = 0, end = len;
	int negative = 0, digits = 0;
	unsigned long v = 0;

	while (i < end && isspace((unsigned char)s[i]))
		i++;
	while (end > i && isspace((unsigned char)s[end - 1]))
		end--;
	if (i == end)
		return VD_STOP_EMPTY;
	if (s[i] == '+' || s[i] == '-')
		negative = s[i++] == '-';
	for (; i < end && isdigit((unsigned char)s[i]); i++, digits++) {
		unsigned d = (unsigned)(s[i] - '0');

		v = v > (unsigned long)-1 / 10 - 1 ? (unsigned long)-1 : v * 10 + d;
	}
	if (!digits)
		return VD_STOP_NOT_A_NUMBER;
	if (negative && v)
		return VD_STOP_NEGATIVE;
	*out = v;
	return VD_STOP_NONE;
}

/* Finds the devices whose UUID starts with the element (GPU- or MIG- form). */
static size_t match_uuid(struct vd_device_ref *found, const struct vd_system *sys, const char *s,
			 size_t len)
{
	size_t n = 0;

	if (len > 8 && !strncmp(s, "MIG-GPU-", 8)) {
		/* MIG-GPU-<gpu uuid>/<gi>/<ci>, the form before driver R470 */
		const char *slash = memchr(s, '/', len);
		unsigned long gi, ci;
		char *end;

		if (!slash)
			return 0;
		errno = 0;
		gi = strtoul(slash + 1, &end, 10);
		if (errno || end == slash + 1 || *end != '/' || end >= s + len)
			return 0;
		{
			const char *cis = end + 1;

			ci = strtoul(cis, &end, 10);
			if (errno || end == cis || end != s + len)
				return 0;
		}
		for (size_t g = 0; g < sys->ngpus; g++) {
			const struct vd_gpu *gpu = &sys->gpus[g];
			size_t plen = (size_t)(slash - (s + 4));

			if (strncmp(gpu->uuid, s + 4, plen))
				continue;
			for (size_t m = 0; m < gpu->nmig; m++) {
				if (gpu->mig[m].gi != gi || gpu->mig[m].ci != ci)
					continue;
				if (n < 2)
					found[n] = (struct vd_device_ref){ (unsigned)g, (int)m };
				n++;
			}
		}
		return n;
	}
	for (size_t g = 0; g < sys->ngpus; g++) {
		const struct vd_gpu *gpu = &sys->gpus[g];

		if (s[0] == 'G') {
			if (!strncmp(gpu->uuid, s, len)) {
				if (n < 2)
					found[n] = (struct vd_device_ref){ (unsigned)g, -1 };
				n++;
			}
			continue;
		}
		for (size_t m = 0; m < gpu->nmig; m++) {
			if (strncmp(gpu->mig[m].uuid, s, len))
				continue;
			if (n < 2)
				found[n] = (struct vd_device_ref){ (unsigned)g, (int)m };
			n++;
		}
	}
	return n;
}

static int same_device(struct vd_device_ref a, struct vd_device_ref b)
{
	return a.gpu == b.gpu && a.mig == b.mig;
}

/* Records where and why the list ended. */
static int stop_at(struct vd_resolution *res, enum vd_stop_reason reason, size_t pos, const char *s,
		   size_t len)
{
	res->stop = reason;
	res->stop_position = pos;
	res->stop_token = strndup(s, len);
	return res->stop_token ? 0 : error_set(VD_ENOMEM, "out of memory");
}

/* Warnings about what CUDA will do with the devices the value names. */
static int explain_devices(struct vd_resolution *res, const struct vd_system *sys)
{
	size_t nmig = 0, ninstances = 0;
	unsigned major = system_driver_major(sys);
	int err;

	for (size_t i = 0; i < res->ndevices; i++) {
		const struct vd_device_ref *d = &res->devices[i];
		const struct vd_gpu *gpu = &sys->gpus[d->gpu];

		if (gpu->lost) {
			err = strings_push(&res->warnings, &res->nwarnings,
					   "GPU %u has fallen off the bus: CUDA cannot use it as "
					   "cuda:%zu",
					   gpu->index, i);
			if (err)
				return err;
		}
		if (d->mig < 0 && gpu->mig_mode) {
			err = strings_push(
				&res->warnings, &res->nwarnings,
				"GPU %u is in MIG mode: CUDA cannot use it whole; name one "
				"of its MIG devices by its MIG- UUID",
				gpu->index);
			if (err)
				return err;
		}
		if (d->mig < 0)
			continue;
		nmig++;
		/* a new GPU instance: no earlier MIG device shares its GPU and gi */
		size_t j;
		for (j = 0; j < i; j++) {
			const struct vd_device_ref *e = &res->devices[j];

			if (e->mig >= 0 && e->gpu == d->gpu &&
			    sys->gpus[e->gpu].mig[e->mig].gi == gpu->mig[d->mig].gi)
				break;
		}
		if (j == i)
			ninstances++;
	}
	if (nmig < 2)
		return 0;
	if (major >= MIG_PER_GI_MAJOR) {
		if (nmig > ninstances) {
			res->mig_limit = ninstances;
			return strings_push(
				&res->warnings, &res->nwarnings,
				"driver %s lets a process use one MIG device per GPU "
				"instance: %zu of the %zu MIG devices listed are usable",
				sys->driver_version, ninstances, nmig);
		}
		return 0;
	}
	res->mig_limit = 1;
	return strings_push(&res->warnings, &res->nwarnings,
			    "driver %s lets a process use one MIG device in all (one per GPU "
			    "instance from R%d): CUDA uses only the first MIG device listed",
			    major ? sys->driver_version : "(unknown)", MIG_PER_GI_MAJOR);
}

/* Adds one device to the result, or reports a duplicate. Returns 1 on a duplicate. */
static int add_device(struct vd_resolution *res, size_t *positions, struct vd_device_ref d,
		      size_t pos)
{
	for (size_t i = 0; i < res->ndevices; i++) {
		if (same_device(res->devices[i], d)) {
			res->duplicate = 1;
			res->duplicate_first = positions[i];
			res->duplicate_position = pos;
			return 1;
		}
	}
	positions[res->ndevices] = pos;
	res->devices[res->ndevices++] = d;
	return 0;
}

/* Walks the elements of a set value, filling devices until the list ends. */
static int resolve_list(struct vd_resolution *res, const struct vd_system *sys,
			const unsigned *order, const char *value)
{
	size_t cap = 1, pos = 0;
	size_t *positions;
	const char *s = value;
	int err = 0;

	for (const char *p = value; *p; p++)
		cap += *p == ',';
	res->nelements = cap;
	res->devices = calloc(cap, sizeof(*res->devices));
	positions = calloc(cap, sizeof(*positions));
	if (!res->devices || !positions) {
		err = error_set(VD_ENOMEM, "out of memory");
		goto out;
	}
	res->uuid_form = is_uuid_element(value, strlen(value));

	for (;; pos++) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		struct vd_device_ref d;

		if (res->uuid_form) {
			struct vd_device_ref found[2];
			size_t n;

			if (!len) {
				err = stop_at(res, VD_STOP_EMPTY, pos, s, len);
				break;
			}
			if (!is_uuid_element(s, len)) {
				err = stop_at(res, VD_STOP_NOT_UUID, pos, s, len);
				break;
			}
			n = match_uuid(found, sys, s, len);
			if (n != 1) {
				err = stop_at(res, n ? VD_STOP_AMBIGUOUS : VD_STOP_NO_MATCH, pos, s,
					      len);
				break;
			}
			d = found[0];
		} else {
			unsigned long ordinal = 0;
			enum vd_stop_reason why = read_ordinal(&ordinal, s, len);

			if (why == VD_STOP_NONE && ordinal >= sys->ngpus)
				why = VD_STOP_OUT_OF_RANGE;
			if (why != VD_STOP_NONE) {
				err = stop_at(res, why, pos, s, len);
				break;
			}
			d = (struct vd_device_ref){ order[ordinal], -1 };
		}
		if (add_device(res, positions, d, pos)) {
			res->ndevices = 0;
			break;
		}
		if (!comma)
			break;
		s = comma + 1;
	}
out:
	free(positions);
	return err;
}

/* Says when ordinals mean other GPUs to CUDA than to nvidia-smi. */
static int explain_order(struct vd_resolution *res, const struct vd_system *sys,
			 const unsigned *order)
{
	int counted = res->set && !res->uuid_form && res->ndevices;

	if (res->order_assumed && (counted || (!res->set && sys->ngpus > 1)))
		return strings_push(
			&res->warnings, &res->nwarnings,
			"CUDA_DEVICE_ORDER is FASTEST_FIRST (the default) and CUDA's "
			"fastest-first order is unknown here: PCI bus order was assumed; "
			"set CUDA_DEVICE_ORDER=PCI_BUS_ID to make it so");
	if (res->order != VD_ORDER_FASTEST || res->order_assumed || (res->set && res->uuid_form))
		return 0;
	/* the first ordinal the value uses (every one when unset) that nvidia-smi reads otherwise
	 */
	for (size_t i = 0; i < (res->set ? res->ndevices : sys->ngpus); i++) {
		size_t k = i;

		if (res->set)
			for (k = 0; order[k] != res->devices[i].gpu; k++)
				;
		if (order[k] != k)
			return strings_push(
				&res->warnings, &res->nwarnings,
				"CUDA_DEVICE_ORDER is FASTEST_FIRST (the default): "
				"ordinal %zu is GPU %u, not GPU %zu as nvidia-smi numbers "
				"them; set CUDA_DEVICE_ORDER=PCI_BUS_ID for nvidia-smi's "
				"numbering",
				k, order[k], k);
	}
	return 0;
}

int vd_visible_resolve(struct vd_resolution **out, const struct vd_system *sys, const char *value,
		       enum vd_order order)
{
	struct vd_resolution *res;
	unsigned *idx = NULL;
	int err;

	*out = NULL;
	res = calloc(1, sizeof(*res));
	if (!res)
		return error_set(VD_ENOMEM, "out of memory");
	res->order = order;
	res->order_assumed =
		order == VD_ORDER_FASTEST && sys->ngpus > 1 && !vd_system_fastest_known(sys);
	err = enumeration_order(&idx, sys, order);
	if (err)
		goto out;

	if (!value) {
		res->devices = calloc(sys->ngpus ? sys->ngpus : 1, sizeof(*res->devices));
		if (!res->devices) {
			err = error_set(VD_ENOMEM, "out of memory");
			goto out;
		}
		for (size_t k = 0; k < sys->ngpus; k++)
			res->devices[k] = (struct vd_device_ref){ idx[k], -1 };
		res->ndevices = sys->ngpus;
	} else {
		res->set = 1;
		err = *value ? resolve_list(res, sys, idx, value) : 0;
		if (err)
			goto out;
	}
	err = explain_order(res, sys, idx);
	if (!err)
		err = explain_devices(res, sys);
out:
	free(idx);
	if (err) {
		vd_resolution_free(res);
		return err;
	}
	*out = res;
	return 0;
}

void vd_resolution_free(struct vd_resolution *res)
{
	if (!res)
		return;
	free(res->devices);
	free(res->stop_token);
	vd_strings_free(res->warnings, res->nwarnings);
	free(res);
}

int vd_visible_format(char **out, const struct vd_system *sys, const struct vd_device_ref *devs,
		      size_t ndevs, enum vd_format format)
{
	size_t cap = 1, len = 0;
	char *s;

	*out = NULL;
	for (size_t i = 0; i < ndevs; i++) {
		const struct vd_device_ref *d = &devs[i];

		if (d->gpu >= sys->ngpus ||
		    (d->mig >= 0 && (size_t)d->mig >= sys->gpus[d->gpu].nmig))
			return error_set(VD_EINVAL, "device %u/%d is not on this machine", d->gpu,
					 d->mig);
		if (d->mig >= 0 && format == VD_FORMAT_INDEX)
			return error_set(VD_EINVAL,
					 "MIG device %s has no index: name it by its UUID",
					 sys->gpus[d->gpu].mig[d->mig].uuid);
		for (size_t j = 0; j < i; j++)
			if (same_device(devs[j], *d))
				return error_set(VD_EINVAL,
						 "GPU %u is named twice: CUDA would see no device",
						 d->gpu);
		cap += VD_UUID_MAX + 1;
	}
	s = malloc(cap);
	if (!s)
		return error_set(VD_ENOMEM, "out of memory");
	s[0] = '\0';
	for (size_t i = 0; i < ndevs; i++) {
		const struct vd_device_ref *d = &devs[i];
		const char *sep = i ? "," : "";

		if (format == VD_FORMAT_INDEX)
			len += (size_t)snprintf(s + len, cap - len, "%s%u", sep, d->gpu);
		else if (d->mig >= 0)
			len += (size_t)snprintf(s + len, cap - len, "%s%s", sep,
						sys->gpus[d->gpu].mig[d->mig].uuid);
		else
			len += (size_t)snprintf(s + len, cap - len, "%s%s", sep,
						sys->gpus[d->gpu].uuid);
	}
	*out = s;
	return 0;
}
