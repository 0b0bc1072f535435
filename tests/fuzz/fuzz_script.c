/*
 * fuzz_script.c - libFuzzer target for what the doctor reads as text: a
 * Python script and a shell start-up file, which may be anything. Whatever
 * the bytes, reading them must not crash, and every finding must be whole.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static struct vd_system *sys;

static void check(const struct vd_findings *f)
{
	for (size_t i = 0; i < f->n; i++)
		if (!f->items[i].id || !vd_severity_name(f->items[i].severity) ||
		    !f->items[i].message || !f->items[i].where || !f->items[i].fix)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vd_findings f = { 0 };

	if (!sys && fixture_parse(&sys, demo_json, strlen(demo_json), "demo"))
		abort();
	if (vd_doctor_script(&f, sys, (const char *)data, size, "fuzz.py", "0,1", NULL) == 0)
		check(&f);
	vd_findings_release(&f);
	if (vd_doctor_startup(&f, sys, (const char *)data, size, "~/.bashrc") == 0)
		check(&f);
	vd_findings_release(&f);
	return 0;
}
