/*
 * devices.h - lists of devices (struct vd_device_ref) in tests and fuzz
 * targets: compared, checked against a machine, written out.
 *
 * Needs nothing but the library's internal.h, so that a fuzz target, built
 * without cmocka, can include it as well as a unit test. All static inline:
 * an includer uses what it needs.
 */
#ifndef VISDEV_TESTS_DEVICES_H
#define VISDEV_TESTS_DEVICES_H

#include <stddef.h>
#include <stdio.h>

#include "internal.h"

/* Whether the two lists name the same devices in the same order. */
static inline int same_devices(const struct vd_device_ref *a, size_t na,
			       const struct vd_device_ref *b, size_t nb)
{
	if (na != nb)
		return 0;
	for (size_t i = 0; i < na; i++)
		if (a[i].gpu != b[i].gpu || a[i].mig != b[i].mig)
			return 0;
	return 1;
}

/* Whether d is a GPU of sys (mig -1) or one of that GPU's MIG instances. */
static inline int device_exists(const struct vd_system *sys, struct vd_device_ref d)
{
	return d.gpu < sys->ngpus && d.mig >= -1 &&
	       (d.mig < 0 || (size_t)d.mig < sys->gpus[d.gpu].nmig);
}

/* Writes "[2, 1/mig0]", the notation of the .jsonl tables, into buf. */
static inline void describe_devices(char *buf, size_t size, const struct vd_device_ref *devs,
				    size_t n)
{
	size_t len = (size_t)snprintf(buf, size, "[");

	for (size_t i = 0; i < n && len < size; i++) {
		const char *sep = i ? ", " : "";

		if (devs[i].mig < 0)
			len += (size_t)snprintf(buf + len, size - len, "%s%u", sep, devs[i].gpu);
		else
			len += (size_t)snprintf(buf + len, size - len, "%s%u/mig%d", sep,
						devs[i].gpu, devs[i].mig);
	}
	if (len < size)
		snprintf(buf + len, size - len, "]");
}

#endif
