/*
 * visible.c - CUDA's rules for CUDA_VISIBLE_DEVICES, and their reverse.
 *
 * This is the single place the rules live (docs/rules.md says each one and
 * what it rests on). Everything here is a pure function of a value, a
 * device table and an order: no I/O, no environment.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
 * Reads an ordinal the way the driver does, as observed on R580
 * (tests/gpu/check): strtoul in base 10 (blanks, a sign, digits, whatever
 * follows ignored; past ULONG_MAX it saturates; a '-' negates modulo 2^64),
 * then the low 32 bits as an int. So 4294967296 is 0 and 2^64 is -1, which
 * ends the list. Returns VD_STOP_NONE and the ordinal, or why the element
 * ends the list; *wrapped is set when the ordinal is not the number written.
 */
static enum vd_stop_reason read_ordinal(unsigned long *out, int *wrapped, const char *s, size_t len)
{
	size_t i = 0, end = len;
	int negative = 0, digits = 0, saturated = 0;
	unsigned long long v = 0;
	int ordinal;

	*wrapped = 0;
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

		if (v > (ULLONG_MAX - d) / 10)
			saturated = 1;
		else
			v = v * 10 + d;
	}
	if (!digits)
		return VD_STOP_NOT_A_NUMBER;
	if (saturated)
		v = ULLONG_MAX;
	else if (negative)
		v = 0 - v;
	ordinal = (int)(unsigned)(v & 0xffffffffu);
	if (ordinal < 0)
		return negative ? VD_STOP_NEGATIVE : VD_STOP_OUT_OF_RANGE;
	*wrapped = saturated || v != (unsigned long long)ordinal;
	*out = (unsigned long)ordinal;
	return VD_STOP_NONE;
}

/*
 * Finds the devices whose UUID starts with the element (GPU- or MIG- form),
 * as observed of the R580 driver (tests/gpu/check): the prefix GPU- or MIG-
 * as written, the hex digits after it in either case, blanks after the
 * element ignored, and a bare GPU- naming nothing (a bare MIG- is taken the
 * same way: assumed).
 */
static size_t match_uuid(struct vd_device_ref *found, const struct vd_system *sys, const char *s,
			 size_t len)
{
	size_t n = 0;

	while (len > 4 && isspace((unsigned char)s[len - 1]))
		len--;
	if (len == 4)
		return 0;
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

			if (strncasecmp(gpu->uuid, s + 4, plen))
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
			if (!strncasecmp(gpu->uuid, s, len)) {
				if (n < 2)
					found[n] = (struct vd_device_ref){ (unsigned)g, -1 };
				n++;
			}
			continue;
		}
		for (size_t m = 0; m < gpu->nmig; m++) {
			if (strncasecmp(gpu->mig[m].uuid, s, len))
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

/* The devices a value names, before CUDA's MIG rules: each with the element naming it. */
struct named {
	struct vd_device_ref *devs;
	size_t *positions;
	size_t n;
};

const char *vd_drop_reason_name(enum vd_drop_reason reason)
{
	static const char *const names[] = {
		NULL, "mig-empty", "one-mig", "beside-mig", "same-gpu-instance",
	};

	if ((unsigned)reason >= ARRAY_SIZE(names))
		return NULL;
	return names[reason];
}

/*
 * The MIG rules of NVIDIA's MIG User Guide ("CUDA Device Enumeration"):
 * before R570 a process enumerates one MIG device in all, and once it
 * enumerates one, no whole GPU; from R570, one compute instance per GPU
 * instance. The guide does not say whether whole GPUs still give way to a
 * MIG device from R570 on; it lifts the one-device limit, so the reading
 * taken here is that they do not (unverified until tests/gpu/check meets a
 * mixed R570 machine). An unknown driver gets the older, stricter rule.
 */
enum vd_drop_reason visible_conflict(const struct vd_system *sys, struct vd_device_ref a,
				     struct vd_device_ref b)
{
	if (a.mig < 0 && b.mig < 0)
		return VD_DROP_NONE;
	if (system_driver_major(sys) < MIG_PER_GI_MAJOR)
		return a.mig >= 0 && b.mig >= 0 ? VD_DROP_ONE_MIG : VD_DROP_BESIDE_MIG;
	if (a.mig >= 0 && b.mig >= 0 && a.gpu == b.gpu &&
	    sys->gpus[a.gpu].mig[a.mig].gi == sys->gpus[b.gpu].mig[b.mig].gi)
		return VD_DROP_SAME_GI;
	return VD_DROP_NONE;
}

/* Adds a device to the candidates, once: a MIG device named on its own and through its GPU. */
static void add_candidate(struct vd_dropped *cand, size_t *n, struct vd_device_ref d, size_t pos)
{
	for (size_t j = 0; j < *n; j++)
		if (same_device(cand[j].device, d))
			return;
	cand[(*n)++] = (struct vd_dropped){ d, VD_DROP_NONE, pos };
}

/*
 * From the devices named, what CUDA enumerates and what it drops. A GPU in
 * MIG mode stands for its MIG devices, in the order the driver lists them:
 * so it is with the variable unset, and a GPU named whole is taken the same
 * way (the guide says neither how CUDA reads such a name nor in which order
 * it takes one GPU's MIG devices: both unverified). Then the MIG rules keep,
 * of each conflicting pair, the MIG device named first, and MIG devices
 * over whole GPUs.
 */
static int enumerate(struct vd_resolution *res, const struct vd_system *sys,
		     const struct named *named)
{
	struct vd_dropped *cand;
	size_t ncand = 0, cap = 1;
	int err = 0;

	for (size_t i = 0; i < named->n; i++)
		cap += sys->gpus[named->devs[i].gpu].nmig + 1;
	cand = calloc(cap, sizeof(*cand));
	res->devices = calloc(cap, sizeof(*res->devices));
	res->dropped = calloc(cap, sizeof(*res->dropped));
	if (!cand || !res->devices || !res->dropped) {
		err = error_set(VD_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < named->n; i++) {
		struct vd_device_ref d = named->devs[i];
		const struct vd_gpu *gpu = &sys->gpus[d.gpu];
		size_t pos = named->positions[i];

		if (d.mig >= 0 || !gpu->mig_mode) {
			add_candidate(cand, &ncand, d, pos);
			continue;
		}
		if (!gpu->nmig)
			cand[ncand++] = (struct vd_dropped){ d, VD_DROP_MIG_EMPTY, pos };
		for (d.mig = 0; (size_t)d.mig < gpu->nmig; d.mig++)
			add_candidate(cand, &ncand, d, pos);
	}
	/* MIG devices against the MIG devices kept before them, then whole GPUs against those */
	for (int whole = 0; whole < 2; whole++)
		for (size_t i = 0; i < ncand; i++) {
			if ((cand[i].device.mig < 0) != whole || cand[i].reason)
				continue;
			for (size_t j = 0; j < ncand && !cand[i].reason; j++)
				if (cand[j].device.mig >= 0 && !cand[j].reason && (whole || j < i))
					cand[i].reason = visible_conflict(sys, cand[j].device,
									  cand[i].device);
		}
	for (size_t i = 0; i < ncand; i++) {
		if (cand[i].reason)
			res->dropped[res->ndropped++] = cand[i];
		else
			res->devices[res->ndevices++] = cand[i].device;
	}
out:
	free(cand);
	return err;
}

/* Notes on what CUDA does with the devices named other than the value meant. */
static int explain_devices(struct vd_resolution *res, const struct vd_system *sys,
			   const struct named *named)
{
	unsigned major = system_driver_major(sys);
	size_t nmig = 0;
	int err = 0;

	for (size_t i = 0; i < res->ndevices && !err; i++)
		if (sys->gpus[res->devices[i].gpu].lost)
			err = strings_push(&res->warnings, &res->nwarnings,
					   "GPU %u has fallen off the bus: CUDA cannot use it as "
					   "cuda:%zu",
					   res->devices[i].gpu, i);
	for (size_t i = 0; res->set && i < named->n && !err; i++) {
		const struct vd_gpu *gpu = &sys->gpus[named->devs[i].gpu];

		if (named->devs[i].mig < 0 && gpu->mig_mode && gpu->nmig)
			err = strings_push(&res->warnings, &res->nwarnings,
					   "GPU %u is in MIG mode: CUDA cannot use it whole, and "
					   "is taken to see its MIG devices instead; name one by "
					   "its MIG- UUID to be sure",
					   gpu->index);
	}
	for (size_t i = 0; i < res->ndropped; i++)
		nmig += res->dropped[i].reason != VD_DROP_MIG_EMPTY;
	if (err || !nmig)
		return err;
	if (major >= MIG_PER_GI_MAJOR)
		return strings_push(&res->warnings, &res->nwarnings,
				    "driver %s lets a process use one compute instance per GPU "
				    "instance: CUDA enumerates %zu of the %zu devices %s",
				    sys->driver_version, res->ndevices, res->ndevices + nmig,
				    res->set ? "named" : "there are");
	return strings_push(&res->warnings, &res->nwarnings,
			    "driver %s lets a process use one MIG device in all, and no whole "
			    "GPU beside it (one per GPU instance from R%d): CUDA enumerates "
			    "%zu of the %zu devices %s",
			    major ? sys->driver_version : "(unknown)", MIG_PER_GI_MAJOR,
			    res->ndevices, res->ndevices + nmig, res->set ? "named" : "there are");
}

/* Adds one device to those named, or reports a duplicate. Returns 1 on a duplicate. */
static int add_named(struct vd_resolution *res, struct named *named, struct vd_device_ref d,
		     size_t pos)
{
	for (size_t i = 0; i < named->n; i++) {
		if (same_device(named->devs[i], d)) {
			res->duplicate = 1;
			res->duplicate_first = named->positions[i];
			res->duplicate_position = pos;
			return 1;
		}
	}
	named->positions[named->n] = pos;
	named->devs[named->n++] = d;
	return 0;
}

/* Walks the elements of a set value, naming devices until the list ends. */
static int resolve_list(struct vd_resolution *res, struct named *named, const struct vd_system *sys,
			const unsigned *order, const char *value)
{
	size_t pos = 0;
	const char *s = value;
	int err = 0;

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
			int wrapped;
			enum vd_stop_reason why = read_ordinal(&ordinal, &wrapped, s, len);

			if (why == VD_STOP_NONE && wrapped)
				err = strings_push(
					&res->warnings, &res->nwarnings,
					"element %zu, '%.*s', is ordinal %lu to CUDA: the "
					"driver keeps only the low 32 bits of a number",
					pos + 1, (int)len, s, ordinal);
			if (err)
				break;
			if (why == VD_STOP_NONE && ordinal >= sys->ngpus)
				why = VD_STOP_OUT_OF_RANGE;
			if (why != VD_STOP_NONE) {
				err = stop_at(res, why, pos, s, len);
				break;
			}
			d = (struct vd_device_ref){ order[ordinal], -1 };
		}
		if (add_named(res, named, d, pos)) {
			named->n = 0;
			break;
		}
		if (!comma)
			break;
		s = comma + 1;
	}
	return err;
}

/* Says when ordinals mean other GPUs to CUDA than to nvidia-smi. */
static int explain_order(struct vd_resolution *res, const struct vd_system *sys,
			 const unsigned *order, const struct named *named)
{
	int counted = res->set && !res->uuid_form && named->n;

	if (res->order_assumed && (counted || (!res->set && sys->ngpus > 1)))
		return strings_push(
			&res->warnings, &res->nwarnings,
			"CUDA_DEVICE_ORDER is FASTEST_FIRST (the default) and CUDA's "
			"fastest-first order is unknown here: PCI bus order was assumed; "
			"set CUDA_DEVICE_ORDER=PCI_BUS_ID to make it so");
	if (res->order != VD_ORDER_FASTEST || res->order_assumed || (res->set && res->uuid_form))
		return 0;
	/* the first ordinal named (every one when unset) that nvidia-smi reads otherwise */
	for (size_t i = 0; i < named->n; i++) {
		size_t k;

		for (k = 0; order[k] != named->devs[i].gpu; k++)
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
	struct named named = { 0 };
	unsigned *idx = NULL;
	size_t cap = sys->ngpus + 1;
	int err;

	*out = NULL;
	res = calloc(1, sizeof(*res));
	if (!res)
		return error_set(VD_ENOMEM, "out of memory");
	res->set = value != NULL;
	res->order = order;
	res->order_assumed =
		order == VD_ORDER_FASTEST && sys->ngpus > 1 && !vd_system_fastest_known(sys);
	err = enumeration_order(&idx, sys, order);
	if (err)
		goto out;
	if (value) {
		cap = 1;
		for (const char *p = value; *p; p++)
			cap += *p == ',';
		res->nelements = cap;
	}
	named.devs = calloc(cap, sizeof(*named.devs));
	named.positions = calloc(cap, sizeof(*named.positions));
	if (!named.devs || !named.positions) {
		err = error_set(VD_ENOMEM, "out of memory");
		goto out;
	}
	if (!value) {
		for (size_t k = 0; k < sys->ngpus; k++) {
			named.devs[k] = (struct vd_device_ref){ idx[k], -1 };
			named.positions[k] = VD_NO_POSITION;
		}
		named.n = sys->ngpus;
	} else if (*value) {
		err = resolve_list(res, &named, sys, idx, value);
	}
	if (!err)
		err = enumerate(res, sys, &named);
	if (!err)
		err = explain_order(res, sys, idx, &named);
	if (!err)
		err = explain_devices(res, sys, &named);
out:
	free(idx);
	free(named.devs);
	free(named.positions);
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
	free(res->dropped);
	free(res->stop_token);
	vd_strings_free(res->warnings, res->nwarnings);
	free(res);
}

int vd_resolution_cuda(const struct vd_resolution *res, struct vd_device_ref d)
{
	for (size_t i = 0; i < res->ndevices; i++)
		if (same_device(res->devices[i], d))
			return (int)i;
	return -1;
}

const struct vd_dropped *vd_resolution_dropped(const struct vd_resolution *res,
					       struct vd_device_ref d)
{
	for (size_t i = 0; i < res->ndropped; i++)
		if (same_device(res->dropped[i].device, d))
			return &res->dropped[i];
	return NULL;
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
		if (d->mig < 0 && sys->gpus[d->gpu].mig_mode)
			return error_set(VD_EINVAL,
					 "GPU %u is in MIG mode: CUDA cannot use it whole; name "
					 "one of its MIG devices",
					 d->gpu);
		for (size_t j = 0; j < i; j++) {
			enum vd_drop_reason why = visible_conflict(sys, devs[j], *d);

			if (same_device(devs[j], *d))
				return error_set(VD_EINVAL,
						 "GPU %u is named twice: CUDA would see no device",
						 d->gpu);
			if (!why)
				why = visible_conflict(sys, *d, devs[j]);
			if (why)
				return error_set(
					VD_EINVAL,
					"driver %s does not let a process use %s and %s "
					"together (%s): CUDA would drop one",
					sys->driver_version[0] ? sys->driver_version : "(unknown)",
					system_device_uuid(sys, devs[j]),
					system_device_uuid(sys, *d), vd_drop_reason_name(why));
		}
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
		else
			len += (size_t)snprintf(s + len, cap - len, "%s%s", sep,
						system_device_uuid(sys, *d));
	}
	*out = s;
	return 0;
}

int vd_child_value(char **out, const struct vd_system *sys, const struct vd_resolution *parent,
		   const struct vd_device_ref *devs, size_t n, int format)
{
	struct vd_resolution *back = NULL;
	int mig = 0, same, err;

	*out = NULL;
	for (size_t i = 0; i < n; i++)
		mig |= devs[i].mig >= 0;
	if (format < 0)
		format = mig || (parent && parent->set) ? VD_FORMAT_UUID : VD_FORMAT_INDEX;
	err = vd_visible_format(out, sys, devs, n, (enum vd_format)format);
	if (err)
		return err;
	/* the round trip: CUDA must read the value as exactly these devices */
	err = vd_visible_resolve(&back, sys, *out, VD_ORDER_PCI);
	if (err) {
		free(*out);
		*out = NULL;
		return err;
	}
	same = back->ndevices == n && !back->duplicate;
	for (size_t i = 0; same && i < n; i++)
		same = back->devices[i].gpu == devs[i].gpu && back->devices[i].mig == devs[i].mig;
	vd_resolution_free(back);
	if (!same) {
		err = error_set(VD_EINVAL,
				"internal error: '%s' would not make CUDA see the devices "
				"chosen",
				*out);
		free(*out);
		*out = NULL;
	}
	return err;
}
