/*
 * fuzz_visible.c - libFuzzer target for the CUDA_VISIBLE_DEVICES engine.
 *
 * The input, as a NUL-terminated string, is resolved on a built-in machine
 * (the GPUs of tests/fixtures/engine.json, built here so that the target
 * needs no file) in both orders, with and without a known fastest-first
 * order; the unranked machine has driver R570 and its two MIG devices in
 * one GPU instance, so that both drivers' MIG rules are met. Every
 * resolution must be well formed, and the devices it enumerates,
 * written back with vd_visible_format(), must resolve to the same devices:
 * any other outcome abort()s. The input also goes through the container,
 * CUDA_DEVICE_ORDER and environment parsers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "devices.h" /* tests/unit: shared with the unit tests */
#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct mig_spec {
	const char *uuid;
	unsigned gi, ci;
};

struct gpu_spec {
	const char *uuid, *name, *bus;
	unsigned rank;
	size_t nmig;
	struct mig_spec mig[2];
};

/* tests/fixtures/engine.json: ranks differ from PCI order, prefixes clash. */
static const struct gpu_spec specs[] = {
	{ "GPU-7a3c1e52-0b4d-4e8f-9a61-2f5d8c7b1e03",
	  "NVIDIA T4",
	  "00000000:18:00.0",
	  3,
	  0,
	  { { 0 } } },
	{ "GPU-e4b2d9f0-6a1c-4f3e-8d27-5c9b0a1e6f34",
	  "NVIDIA A100 80GB PCIe",
	  "00000000:3B:00.0",
	  2,
	  2,
	  { { "MIG-5e1f0a2b-3c4d-5e6f-8a9b-0c1d2e3f4a5b", 1, 0 },
	    { "MIG-5e1f7c8d-9e0f-5a1b-9c2d-3e4f5a6b7c8d", 2, 0 } } },
	{ "GPU-7a91d0c4-5e2b-4a77-8c3e-6b1f9d2a4c58",
	  "NVIDIA H100 80GB HBM3",
	  "00000000:86:00.0",
	  0,
	  0,
	  { { 0 } } },
	{ "GPU-3f0e8b6a-2d4c-4b1a-9e7f-0a5c3d2b1e69",
	  "NVIDIA H100 PCIe",
	  "00000000:AF:00.0",
	  1,
	  0,
	  { { 0 } } },
};

/* The built-in machine; ranked says whether cuda_rank is known (else: R570, one GPU instance). */
static struct vd_system *machine(int ranked)
{
	struct vd_system *sys = NULL;

	if (system_new(&sys, sizeof(specs) / sizeof(specs[0])))
		abort();
	str_copy(sys->driver_version, ranked ? "550.54.15" : "570.86.15",
		 sizeof(sys->driver_version));
	sys->cuda_driver_version = 12040;
	for (size_t i = 0; i < sys->ngpus; i++) {
		struct vd_gpu *g = &sys->gpus[i];
		const struct gpu_spec *s = &specs[i];

		str_copy(g->uuid, s->uuid, sizeof(g->uuid));
		str_copy(g->name, s->name, sizeof(g->name));
		str_copy(g->pci_bus_id, s->bus, sizeof(g->pci_bus_id));
		g->fields = VD_GPU_MEMORY | VD_GPU_PROCESSES;
		g->memory_total_mib = 81559;
		if (ranked) {
			g->fields |= VD_GPU_CUDA_RANK;
			g->cuda_rank = s->rank;
		}
		if (s->nmig) {
			g->mig_mode = 1;
			g->mig = calloc(s->nmig, sizeof(*g->mig));
			if (!g->mig)
				abort();
			g->nmig = s->nmig;
			for (size_t k = 0; k < s->nmig; k++) {
				str_copy(g->mig[k].uuid, s->mig[k].uuid, sizeof(g->mig[k].uuid));
				g->mig[k].gi = ranked ? s->mig[k].gi : 1;
				g->mig[k].ci = s->mig[k].ci;
				str_copy(g->mig[k].profile, "3g.40gb", sizeof(g->mig[k].profile));
			}
		}
	}
	return sys;
}

/* Devices that exist, each once. */
static void check_devices(const struct vd_system *sys, const struct vd_device_ref *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!device_exists(sys, d[i]))
			abort();
		for (size_t j = 0; j < i; j++)
			if (d[j].gpu == d[i].gpu && d[j].mig == d[i].mig)
				abort();
	}
}

/* Formats devs in form and checks that the value resolves to devs in order. */
static void round_trip(const struct vd_system *sys, const struct vd_device_ref *devs, size_t n,
		       enum vd_format form, enum vd_order order)
{
	struct vd_resolution *res = NULL;
	char *value = NULL;
	int err;

	err = vd_visible_format(&value, sys, devs, n, form);
	if (err == VD_ENOMEM)
		return;
	if (err || !value)
		abort();
	err = vd_visible_resolve(&res, sys, value, order);
	if (err == VD_ENOMEM) {
		free(value);
		return;
	}
	if (err || !res || !same_devices(devs, n, res->devices, res->ndevices) || res->duplicate ||
	    res->stop != VD_STOP_NONE)
		abort();
	vd_resolution_free(res);
	free(value);
}

static void resolve_one(const struct vd_system *sys, const char *value, enum vd_order order)
{
	struct vd_resolution *res = NULL;
	int has_mig = 0;

	if (vd_visible_resolve(&res, sys, value, order)) {
		if (res)
			abort();
		return; /* VD_ENOMEM, the only error */
	}
	if (!res || !res->set)
		abort();
	check_devices(sys, res->devices, res->ndevices);
	if (res->duplicate && (res->ndevices || res->ndropped))
		abort();
	if (res->stop != VD_STOP_NONE &&
	    (!res->stop_token || res->stop_position >= res->nelements ||
	     !vd_stop_reason_name(res->stop)))
		abort();
	for (size_t i = 0; i < res->nwarnings; i++)
		if (!res->warnings[i])
			abort();
	/* a device dropped is named by an element, and is not also enumerated */
	for (size_t i = 0; i < res->ndropped; i++) {
		const struct vd_dropped *d = &res->dropped[i];

		check_devices(sys, &d->device, 1);
		if (d->position >= res->nelements || !vd_drop_reason_name(d->reason) ||
		    vd_resolution_cuda(res, d->device) >= 0)
			abort();
	}
	for (size_t i = 0; i < res->ndevices; i++)
		has_mig |= res->devices[i].mig >= 0;
	/* What CUDA enumerates can always be written, and must resolve to itself. */
	round_trip(sys, res->devices, res->ndevices, VD_FORMAT_UUID, VD_ORDER_PCI);
	round_trip(sys, res->devices, res->ndevices, VD_FORMAT_UUID, VD_ORDER_FASTEST);
	if (!has_mig)
		round_trip(sys, res->devices, res->ndevices, VD_FORMAT_INDEX, VD_ORDER_PCI);
	vd_resolution_free(res);
}

static void other_parsers(const struct vd_system *sys, char *value)
{
	struct vd_container_view *view = NULL;
	enum vd_order order;
	char *env[2] = { value, NULL }, **found = NULL;
	size_t nfound = 0;
	int err;

	if (vd_container_resolve(&view, sys, value) == 0) {
		if (!view)
			abort();
		/* The container runtime gives each device once. */
		check_devices(sys, view->devices, view->ndevices);
		if (view->mode != VD_CONTAINER_LIST && view->mode != VD_CONTAINER_ALL &&
		    view->ndevices)
			abort();
		vd_container_view_free(view);
	}
	err = vd_order_parse(&order, value);
	if ((err && err != VD_EINVAL) || (order != VD_ORDER_PCI && order != VD_ORDER_FASTEST))
		abort();
	if (strchr(value, '=') && vd_env_check(&found, &nfound, env) == 0) {
		if (nfound && found[nfound])
			abort();
		vd_strings_free(found, nfound);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct vd_system *ranked, *unranked;
	char *value;

	if (!ranked) {
		ranked = machine(1);
		unranked = machine(0);
	}
	value = malloc(size + 1);
	if (!value)
		return 0;
	memcpy(value, data, size);
	value[size] = '\0';
	resolve_one(ranked, value, VD_ORDER_PCI);
	resolve_one(ranked, value, VD_ORDER_FASTEST);
	resolve_one(unranked, value, VD_ORDER_FASTEST);
	other_parsers(ranked, value);
	free(value);
	return 0;
}
