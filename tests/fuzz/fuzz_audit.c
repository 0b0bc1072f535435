/*
 * fuzz_audit.c - libFuzzer target for what the audit remembers between
 * looks, a file in the user's home that anything may have damaged: reading
 * it must not crash, and an audit with what was read must hold together.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char machine[] = "{\"gpus\": [{\"uuid\": \"GPU-1\", \"name\": \"A\", \"pci_bus_id\": "
			      "\"0\", \"utilization_gpu\": 0, \"processes\": []}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct vd_system *sys;
	struct vd_lease_holder h = { .uuid = "GPU-1", .pid = 100, .since = 1000 };
	struct vd_leases leases = { &h, 1 };
	struct vd_audit_memory *m = NULL;
	struct vd_audit *a = NULL;

	if (!sys && fixture_parse(&sys, machine, strlen(machine), "machine"))
		abort();
	if (vd_audit_memory_parse(&m, (const char *)data, size) == 0) {
		if (vd_audit(&a, sys, &leases, NULL, m, 6000, 600))
			abort();
		/* quiet now: since whenever the memory says, or this look */
		if (a->leases[0].use != VD_USE_QUIET && a->leases[0].use != VD_USE_IDLE)
			abort();
		if ((a->leases[0].use == VD_USE_IDLE) != (a->n == 1))
			abort();
		vd_audit_free(a);
	}
	vd_audit_memory_free(m);
	return 0;
}
