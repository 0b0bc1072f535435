/*
 * test_env.c - the variables around CUDA_VISIBLE_DEVICES (env.c): the
 * container runtime's NVIDIA_VISIBLE_DEVICES, and the near misses.
 *
 * NVIDIA_VISIBLE_DEVICES is data: tests/unit/container.jsonl (its header
 * documents the keys), one cmocka test per line; the path may be given as
 * argv[1] or in CONTAINER_CASES. The near misses are written out.
 */
#include "harness.h"

#define G2 "GPU-7a91d0c4-5e2b-4a77-8c3e-6b1f9d2a4c58"

/* ---- the table --------------------------------------------------------- */

static const char *const known_keys[] = {
	"fixture", "value", "mode", "devices", "refused", "warning_contains", "note",
};

static const char *const mode_names[] = { "unset", "all", "none", "void", "list" };

static void check_case(struct report *r, const struct table_case *c)
{
	json_t *obj = c->obj, *jvalue = json_object_get(obj, "value"), *v;
	const char *fixture = json_string_value(json_object_get(obj, "fixture"));
	const char *mode = json_string_value(json_object_get(obj, "mode")), *key, *why = NULL;
	struct vd_container_view *view = NULL;
	struct vd_device_ref *want = NULL;
	const struct vd_system *sys;
	size_t nwant, i;
	char a[512], b[512];

	json_object_foreach(obj, key, v)
	{
		for (i = 0; i < ARRAY_SIZE(known_keys); i++)
			if (!strcmp(key, known_keys[i]))
				break;
		if (i == ARRAY_SIZE(known_keys))
			report_add(r, "table: unknown key '%s'", key);
	}
	v = json_object_get(obj, "devices");
	if (!fixture || !mode || !jvalue || !(json_is_string(jvalue) || json_is_null(jvalue)) ||
	    !json_is_array(v)) {
		report_add(r,
			   "table: fixture, mode, value (string or null) and devices are needed");
		return;
	}
	nwant = json_array_size(v);
	want = calloc(nwant + 1, sizeof(*want));
	assert_non_null(want);
	for (i = 0; i < nwant; i++)
		if (read_device(&want[i], json_array_get(v, i))) {
			report_add(r, "table: device %zu is neither N nor \"N/migK\"", i);
			goto out;
		}
	sys = fixture_get(fixture, &why);
	if (!sys) {
		report_add(r, "%s", why);
		goto out;
	}
	if (vd_container_resolve(&view, sys, json_string_value(jvalue)) || !view) {
		report_add(r, "vd_container_resolve: %s", vd_error_last());
		goto out;
	}
	if (strcmp(mode_names[view->mode], mode))
		report_add(r, "mode: expected %s, got %s", mode, mode_names[view->mode]);
	if (!same_devices(want, nwant, view->devices, view->ndevices)) {
		describe_devices(a, sizeof(a), want, nwant);
		describe_devices(b, sizeof(b), view->devices, view->ndevices);
		report_add(r, "devices: expected %s, got %s", a, b);
	}
	if (!!view->refused != json_is_true(json_object_get(obj, "refused")))
		report_add(r, "refused: expected %s, got %s",
			   json_is_true(json_object_get(obj, "refused")) ? "true" : "false",
			   view->refused ? "true" : "false");
	check_warning_contains(r, json_object_get(obj, "warning_contains"), view->warnings,
			       view->nwarnings);
out:
	vd_container_view_free(view);
	free(want);
}

/* "engine \"0,2\"": the fixture and the value, for the test's name. */
static void describe_case(char *buf, size_t size, const json_t *obj)
{
	char val[256];

	quote(val, sizeof(val), json_string_value(json_object_get(obj, "value")));
	snprintf(buf, size, "%s %s", json_string_value(json_object_get(obj, "fixture")), val);
}

/* ---- near-miss spellings ------------------------------------------------ */

/* Runs vd_env_check on env; returns the findings, count in *n. */
static char **env_check(char *const *env, size_t *n)
{
	char **found = NULL;

	*n = 99;
	assert_int_equal(vd_env_check(&found, n, env), 0);
	assert_true(*n < 99);
	if (*n)
		assert_null(found[*n]);
	return found;
}

/* Expects at least one finding, one of them mentioning needle. */
static void env_expect(char *const *env, const char *needle)
{
	size_t n, i;
	char **found = env_check(env, &n);

	for (i = 0; i < n; i++)
		if (strstr(found[i], needle))
			break;
	if (n == 0 || i == n)
		fail_msg("%s: %zu findings, none mentions %s%s%s", env[0], n, needle,
			 n ? "; first: " : "", n ? found[0] : "");
	vd_strings_free(found, n);
}

/* A writable copy of a NULL-terminated list of "NAME=value" strings. */
static char **env_make(const char *const *src)
{
	size_t n = 0;
	char **env;

	while (src[n])
		n++;
	env = calloc(n + 1, sizeof(*env));
	assert_non_null(env);
	for (size_t i = 0; i < n; i++) {
		env[i] = strdup(src[i]);
		assert_non_null(env[i]);
	}
	return env;
}

static void env_free(char **env)
{
	for (size_t i = 0; env[i]; i++)
		free(env[i]);
	free(env);
}

/* Expects at least one finding in src, one of them mentioning needle. */
static void env_finds(const char *const *src, const char *needle)
{
	char **env = env_make(src);

	env_expect(env, needle);
	env_free(env);
}

/* Expects no finding in src. */
static void env_clean(const char *const *src)
{
	char **env = env_make(src), **found;
	size_t n;

	found = env_check(env, &n);
	if (n)
		fail_msg("%s: %zu findings in a clean environment, first: %s",
			 src[0] ? src[0] : "{}", n, found[0]);
	vd_strings_free(found, n);
	env_free(env);
}

static void test_env_check(void **state)
{
	static const char *const misspelt[] = { "PATH=/usr/bin", "CUDA_VISBLE_DEVICES=0", NULL };
	static const char *const lower[] = { "cuda_visible_devices=0", NULL };
	static const char *const singular[] = { "CUDA_VISIBLE_DEVICE=1", NULL };
	static const char *const quoted[] = { "CUDA_VISIBLE_DEVICES='0,1'", NULL };
	static const char *const dquoted[] = { "CUDA_VISIBLE_DEVICES=\"0,1\"", NULL };
	static const char *const clean[] = { "PATH=/usr/bin", "HOME=/root",
					     "CUDA_VISIBLE_DEVICES=0,1",
					     "CUDA_DEVICE_ORDER=PCI_BUS_ID", NULL };
	static const char *const clean_uuid[] = { "CUDA_VISIBLE_DEVICES=" G2, "LANG=C", NULL };
	static const char *const empty[] = { NULL };

	(void)state;
	env_finds(misspelt + 1, "CUDA_VISIBLE_DEVICES");
	env_finds(misspelt, "CUDA_VISIBLE_DEVICES");
	env_finds(lower, "CUDA_VISIBLE_DEVICES");
	env_finds(singular, "CUDA_VISIBLE_DEVICES");
	env_finds(quoted, "CUDA_VISIBLE_DEVICES");
	env_finds(dquoted, "CUDA_VISIBLE_DEVICES");
	env_clean(clean);
	env_clean(clean_uuid);
	env_clean(empty);
}

/* ---- main --------------------------------------------------------------- */

int main(int argc, char **argv)
{
	static const struct CMUnitTest fixed[] = {
		cmocka_unit_test(test_env_check),
	};
	static const struct table table = {
		.group = "env",
		.cases_env = "CONTAINER_CASES",
		.cases_path = "tests/unit/container.jsonl",
		.fixtures_env = "VISIBLE_FIXTURES",
		.describe = describe_case,
		.check = check_case,
	};

	return table_run(&table, fixed, ARRAY_SIZE(fixed), argc, argv);
}
