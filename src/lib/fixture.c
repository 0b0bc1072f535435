/* fixture.c - STUB, being written */
#include "internal.h"
int fixture_parse(struct vd_system **out, const char *text, size_t len, const char *name)
{
	(void)text; (void)len; (void)name; *out = NULL;
	return error_set(VD_EPARSE, "not yet");
}
int fixture_load(struct vd_system **out, const char *path)
{
	(void)path; *out = NULL;
	return error_set(VD_EPARSE, "not yet");
}
static int fx_open(void **state, const char *path) { (void)state; (void)path; return VD_EPARSE; }
static int fx_snapshot(struct vd_system **out, void *state) { (void)out; (void)state; return VD_EPARSE; }
static void fx_close(void *state) { (void)state; }
const struct vd_backend_ops backend_fixture_ops = { "fixture", fx_open, fx_snapshot, fx_close };
const struct vd_backend_ops backend_demo_ops = { "demo", fx_open, fx_snapshot, fx_close };
