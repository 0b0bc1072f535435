/*
 * test_visible.c - the CUDA_VISIBLE_DEVICES engine against the rules of docs/rules.md.
 *
 * Most cases are data: tests/unit/visible.jsonl (its header documents the
 * keys and the device notation), one cmocka test per line, named after the
 * file, the line and the value, so that a failure reads
 * "visible.jsonl:42 engine/pci \"0,2,-1,1\"". The path may be given as
 * argv[1] or in VISIBLE_CASES; fixtures are read from tests/fixtures (or
 * VISIBLE_FIXTURES), each once. Tests run from the repository root.
 *
 * The rest are written out: round trips through vd_visible_format() and
 * vd_visible_resolve(), and vd_order_parse().
 */
#include "harness.h"

#define G0 "GPU-7a3c1e52-0b4d-4e8f-9a61-2f5d8c7b1e03"
#define G2 "GPU-7a91d0c4-5e2b-4a77-8c3e-6b1f9d2a4c58"
#define M1 "MIG-5e1f7c8d-9e0f-5a1b-9c2d-3e4f5a6b7c8d"

/*
 * What every resolution must satisfy whatever the value: devices exist and
 * are distinct, a duplicate leaves nothing, a stop names an element.
 */
static void check_invariants(struct report *r, const struct vd_system *sys,
			     const struct vd_resolution *res)
{
	for (size_t i = 0; i < res->ndevices; i++) {
		const struct vd_device_ref *d = &res->devices[i];

		if (d->gpu >= sys->ngpus)
			report_add(r, "invariant: cuda:%zu is GPU %u, not in the table", i, d->gpu);
		else if (d->mig < -1 || (d->mig >= 0 && (size_t)d->mig >= sys->gpus[d->gpu].nmig))
			report_add(r, "invariant: cuda:%zu is MIG %d of GPU %u, not in the table",
				   i, d->mig, d->gpu);
		for (size_t j = 0; j < i; j++)
			if (res->devices[j].gpu == d->gpu && res->devices[j].mig == d->mig)
				report_add(r,
					   "invariant: cuda:%zu and cuda:%zu are the same device",
					   j, i);
	}
	if (res->duplicate && res->ndevices)
		report_add(r, "invariant: duplicate set but %zu devices visible", res->ndevices);
	if (res->stop != VD_STOP_NONE) {
		if (!res->stop_token)
			report_add(r, "invariant: stop set but stop_token is NULL");
		if (res->stop_position >= res->nelements)
			report_add(r, "invariant: stop_position %zu not below nelements %zu",
				   res->stop_position, res->nelements);
		if (!vd_stop_reason_name(res->stop))
			report_add(r, "invariant: stop %d has no name", (int)res->stop);
	}
	for (size_t i = 0; i < res->nwarnings; i++)
		if (!res->warnings[i])
			report_add(r, "invariant: warning %zu is NULL", i);
}

/* ---- the table --------------------------------------------------------- */

static const char *const known_keys[] = {
	"fixture",
	"order",
	"value",
	"devices",
	"stop",
	"duplicate",
	"duplicate_first",
	"duplicate_position",
	"order_assumed",
	"uuid_form",
	"nelements",
	"dropped",
	"warning_contains",
	"unverified",
	"verified",
	"assumed",
	"note",
};

/* A string, or an array of strings any one of which is accepted. */
static int string_matches(const json_t *expected, const char *actual)
{
	size_t i;
	json_t *v;

	if (json_is_string(expected))
		return actual && strcmp(json_string_value(expected), actual) == 0;
	json_array_foreach(expected, i, v) if (json_is_string(v) && actual &&
					       strcmp(json_string_value(v), actual) == 0) return 1;
	return 0;
}

/* Reads the expected devices; returns -1 and reports on a malformed entry. */
static int expected_devices(struct report *r, const json_t *arr, struct vd_device_ref **out,
			    size_t *nout)
{
	struct vd_device_ref *devs;
	size_t i;
	json_t *v;

	*out = NULL;
	*nout = 0;
	if (!json_is_array(arr)) {
		report_add(r, "table: devices must be an array");
		return -1;
	}
	devs = calloc(json_array_size(arr) + 1, sizeof(*devs));
	assert_non_null(devs);
	json_array_foreach(arr, i, v)
	{
		/* a whole GPU is a number here, never a string */
		if (read_device(&devs[i], v) || (json_is_string(v) && devs[i].mig < 0)) {
			report_add(r, "table: device %zu is neither N nor \"N/migK\"", i);
			free(devs);
			return -1;
		}
	}
	*out = devs;
	*nout = json_array_size(arr);
	return 0;
}

static void check_bool(struct report *r, const json_t *obj, const char *key, int actual)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return;
	if (!json_is_boolean(v))
		report_add(r, "table: %s must be true or false", key);
	else if (json_is_true(v) != !!actual)
		report_add(r, "%s: expected %s, got %s", key, json_is_true(v) ? "true" : "false",
			   actual ? "true" : "false");
}

static void check_stop(struct report *r, const json_t *stop, const struct vd_resolution *res)
{
	const char *reason = vd_stop_reason_name(res->stop);
	json_t *pos, *tok, *why;
	char got[256];

	quote(got, sizeof(got), res->stop_token);
	if (json_is_null(stop)) {
		if (res->stop != VD_STOP_NONE)
			report_add(r, "stop: expected none, got %s at element %zu (%s)",
				   reason ? reason : "?", res->stop_position, got);
		return;
	}
	if (!json_is_object(stop)) {
		report_add(r, "table: stop must be null or an object");
		return;
	}
	pos = json_object_get(stop, "position");
	tok = json_object_get(stop, "token");
	why = json_object_get(stop, "reason");
	if (res->stop == VD_STOP_NONE) {
		report_add(r, "stop: expected one, the list did not stop");
		return;
	}
	if (pos &&
	    (!json_is_integer(pos) || json_integer_value(pos) != (json_int_t)res->stop_position))
		report_add(r, "stop position: expected %lld, got %zu",
			   (long long)json_integer_value(pos), res->stop_position);
	if (tok && !string_matches(tok, res->stop_token)) {
		char *want = json_dumps(tok, JSON_ENCODE_ANY);

		report_add(r, "stop token: expected %s, got %s", want ? want : "?", got);
		free(want);
	}
	if (why && !string_matches(why, reason)) {
		char *want = json_dumps(why, JSON_ENCODE_ANY);

		report_add(r, "stop reason: expected %s, got %s", want ? want : "?",
			   reason ? reason : "(none)");
		free(want);
	}
}

/*
 * The devices named but not enumerated: [{"device", "reason", "position"}],
 * in order; position null for the variable unset, absent for not checked.
 * An absent list means none.
 */
static void check_dropped(struct report *r, const json_t *want, const struct vd_resolution *res)
{
	size_t nwant = want ? json_array_size(want) : 0, i;
	json_t *v;

	if (want && !json_is_array(want)) {
		report_add(r, "table: dropped must be an array");
		return;
	}
	if (nwant != res->ndropped) {
		char got[512] = "";
		size_t len = 0;

		for (i = 0; i < res->ndropped && len < sizeof(got); i++)
			len += (size_t)snprintf(got + len, sizeof(got) - len, " %u/%d:%s",
						res->dropped[i].device.gpu,
						res->dropped[i].device.mig,
						vd_drop_reason_name(res->dropped[i].reason));
		report_add(r, "dropped: expected %zu, got %zu:%s", nwant, res->ndropped, got);
		return;
	}
	json_array_foreach(want, i, v)
	{
		const struct vd_dropped *d = &res->dropped[i];
		struct vd_device_ref dev;
		json_t *pos = json_object_get(v, "position");
		const char *reason = json_string_value(json_object_get(v, "reason"));

		if (read_device(&dev, json_object_get(v, "device")) || !reason) {
			report_add(r, "table: dropped %zu needs a device and a reason", i);
			continue;
		}
		if (dev.gpu != d->device.gpu || dev.mig != d->device.mig)
			report_add(r, "dropped %zu: expected %u/%d, got %u/%d", i, dev.gpu, dev.mig,
				   d->device.gpu, d->device.mig);
		if (strcmp(reason, vd_drop_reason_name(d->reason) ? vd_drop_reason_name(d->reason) :
								    "(none)"))
			report_add(r, "dropped %zu: expected reason %s, got %s", i, reason,
				   vd_drop_reason_name(d->reason));
		if (json_is_null(pos) && d->position != VD_NO_POSITION)
			report_add(r, "dropped %zu: expected no position, got %zu", i, d->position);
		if (json_is_integer(pos) && (size_t)json_integer_value(pos) != d->position)
			report_add(r, "dropped %zu: expected position %lld, got %zu", i,
				   (long long)json_integer_value(pos), d->position);
	}
}

static void check_case(struct report *r, const struct table_case *c)
{
	json_t *obj = c->obj;
	json_t *jfixture = json_object_get(obj, "fixture"), *jorder = json_object_get(obj, "order");
	json_t *jvalue = json_object_get(obj, "value"), *v;
	const struct vd_system *sys;
	struct vd_resolution *res = NULL;
	struct vd_device_ref *want = NULL;
	size_t nwant = 0;
	const char *value, *why = NULL, *key;
	enum vd_order order;
	char a[512], b[512];
	int rc, dup;

	json_object_foreach(obj, key, v)
	{
		size_t i;

		for (i = 0; i < ARRAY_SIZE(known_keys); i++)
			if (strcmp(key, known_keys[i]) == 0)
				break;
		if (i == ARRAY_SIZE(known_keys))
			report_add(r, "table: unknown key '%s'", key);
	}
	if (json_object_get(obj, "verified") && json_object_get(obj, "unverified"))
		report_add(r, "table: a case is verified or unverified, not both");
	if (!json_is_string(jfixture) || !json_is_string(jorder) || !jvalue ||
	    !(json_is_string(jvalue) || json_is_null(jvalue))) {
		report_add(r,
			   "table: fixture, order (strings) and value (string or null) are needed");
		return;
	}
	if (strcmp(json_string_value(jorder), "pci") == 0) {
		order = VD_ORDER_PCI;
	} else if (strcmp(json_string_value(jorder), "fastest") == 0) {
		order = VD_ORDER_FASTEST;
	} else {
		report_add(r, "table: order must be \"pci\" or \"fastest\"");
		return;
	}
	if (expected_devices(r, json_object_get(obj, "devices"), &want, &nwant))
		return;
	sys = fixture_get(json_string_value(jfixture), &why);
	if (!sys) {
		report_add(r, "%s", why);
		goto out;
	}
	value = json_string_value(jvalue); /* NULL for null: unset */

	rc = vd_visible_resolve(&res, sys, value, order);
	if (rc || !res) {
		report_add(r, "vd_visible_resolve: %s (%s)", vd_error_name(rc), vd_error_last());
		goto out;
	}
	check_invariants(r, sys, res);
	if (!!res->set != (value != NULL))
		report_add(r, "set: expected %d, got %d", value != NULL, res->set);
	if (!same_devices(want, nwant, res->devices, res->ndevices)) {
		describe_devices(a, sizeof(a), want, nwant);
		describe_devices(b, sizeof(b), res->devices, res->ndevices);
		report_add(r, "devices: expected %s, got %s", a, b);
	}
	v = json_object_get(obj, "duplicate");
	dup = v ? json_is_true(v) : 0;
	if (!!res->duplicate != dup)
		report_add(r, "duplicate: expected %s, got %s", dup ? "true" : "false",
			   res->duplicate ? "true" : "false");
	if (res->duplicate && dup) {
		v = json_object_get(obj, "duplicate_first");
		if (v && json_integer_value(v) != (json_int_t)res->duplicate_first)
			report_add(r, "duplicate_first: expected %lld, got %zu",
				   (long long)json_integer_value(v), res->duplicate_first);
		v = json_object_get(obj, "duplicate_position");
		if (v && json_integer_value(v) != (json_int_t)res->duplicate_position)
			report_add(r, "duplicate_position: expected %lld, got %zu",
				   (long long)json_integer_value(v), res->duplicate_position);
	}
	v = json_object_get(obj, "stop");
	if (v)
		check_stop(r, v, res);
	check_bool(r, obj, "order_assumed", res->order_assumed);
	check_bool(r, obj, "uuid_form", res->uuid_form);
	if (!res->order_assumed && res->order != order)
		report_add(r, "order: expected %s, got %s", vd_order_name(order),
			   vd_order_name(res->order));
	v = json_object_get(obj, "nelements");
	if (v && json_integer_value(v) != (json_int_t)res->nelements)
		report_add(r, "nelements: expected %lld, got %zu", (long long)json_integer_value(v),
			   res->nelements);
	check_dropped(r, json_object_get(obj, "dropped"), res);
	check_warning_contains(r, json_object_get(obj, "warning_contains"), res->warnings,
			       res->nwarnings);
out:
	vd_resolution_free(res);
	free(want);
}

/* "engine/pci \"0,2\"": the fixture, the order and the value, for the test's name. */
static void describe_case(char *buf, size_t size, const json_t *obj)
{
	char val[256];

	quote(val, sizeof(val), json_string_value(json_object_get(obj, "value")));
	snprintf(buf, size, "%s/%s %s%s", json_string_value(json_object_get(obj, "fixture")),
		 json_string_value(json_object_get(obj, "order")), val,
		 json_is_true(json_object_get(obj, "unverified")) ? " (unverified)" : "");
}

/* ---- round trips: format, then resolve, gives the same devices --------- */

/*
 * Formats devs in form, resolves the value in order, and reports (in r) any
 * difference, or any failure of either step.
 */
static void round_trip(struct report *r, const struct vd_system *sys,
		       const struct vd_device_ref *devs, size_t n, enum vd_format form,
		       enum vd_order order)
{
	struct vd_resolution *res = NULL;
	char *value = NULL, a[256], b[256], q[512];
	int rc;

	describe_devices(a, sizeof(a), devs, n);
	rc = vd_visible_format(&value, sys, devs, n, form);
	if (rc || !value) {
		report_add(r, "format %s %s: %s (%s)", a, form == VD_FORMAT_UUID ? "uuid" : "index",
			   vd_error_name(rc), vd_error_last());
		return;
	}
	rc = vd_visible_resolve(&res, sys, value, order);
	quote(q, sizeof(q), value);
	if (rc || !res) {
		report_add(r, "resolve %s (%s): %s", q, vd_order_name(order), vd_error_name(rc));
	} else if (!same_devices(devs, n, res->devices, res->ndevices) || res->duplicate ||
		   res->stop != VD_STOP_NONE) {
		describe_devices(b, sizeof(b), res->devices, res->ndevices);
		report_add(r, "%s -> %s -> %s under %s%s%s", a, q, b, vd_order_name(order),
			   res->duplicate ? " (duplicate)" : "",
			   res->stop != VD_STOP_NONE ? " (stopped)" : "");
	}
	vd_resolution_free(res);
	free(value);
}

/* Calls fn on every ordered selection of up to maxk distinct items of pool. */
static void selections(const struct vd_device_ref *pool, size_t npool, size_t maxk,
		       struct vd_device_ref *cur, size_t k, unsigned used,
		       void (*fn)(const struct vd_device_ref *, size_t, void *), void *arg)
{
	fn(cur, k, arg);
	if (k == maxk)
		return;
	for (size_t i = 0; i < npool; i++) {
		if (used & (1u << i))
			continue;
		cur[k] = pool[i];
		selections(pool, npool, maxk, cur, k + 1, used | (1u << i), fn, arg);
	}
}

struct rt_state {
	const struct vd_system *sys;
	struct report r;
	int count;
	int refused;	/* sets CUDA cannot enumerate together, which format refused */
	int index_form; /* also the index form (no MIG devices in the pool) */
};

/*
 * Whether CUDA enumerates all of devs together, by the MIG User Guide's
 * rules as the table's header states them (not the engine's code): no GPU
 * in MIG mode whole; before R570 a MIG device only alone; from R570 no two
 * compute instances of one GPU instance.
 */
static int enumerable(const struct vd_system *sys, const struct vd_device_ref *devs, size_t n)
{
	int r570 = atoi(sys->driver_version) >= 570;
	size_t nmig = 0;

	for (size_t i = 0; i < n; i++) {
		if (devs[i].mig < 0 && sys->gpus[devs[i].gpu].mig_mode)
			return 0;
		nmig += devs[i].mig >= 0;
		for (size_t j = 0; j < i; j++)
			if (devs[i].mig >= 0 && devs[j].mig >= 0 && devs[i].gpu == devs[j].gpu &&
			    sys->gpus[devs[i].gpu].mig[devs[i].mig].gi ==
				    sys->gpus[devs[j].gpu].mig[devs[j].mig].gi)
				return 0;
	}
	return r570 || !nmig || n == 1;
}

static void rt_one(const struct vd_device_ref *devs, size_t n, void *arg)
{
	struct rt_state *st = arg;

	st->count++;
	if (!enumerable(st->sys, devs, n)) {
		/* no value makes CUDA see all of them: none may be written */
		char *value = NULL, a[256];
		int rc = vd_visible_format(&value, st->sys, devs, n, VD_FORMAT_UUID);

		if (rc != VD_EINVAL || value) {
			describe_devices(a, sizeof(a), devs, n);
			report_add(&st->r,
				   "%s: CUDA cannot enumerate them together, yet "
				   "format gave %s (%s)",
				   a, value ? value : "NULL", vd_error_name(rc));
		}
		free(value);
		st->refused++;
		return;
	}
	round_trip(&st->r, st->sys, devs, n, VD_FORMAT_UUID, VD_ORDER_PCI);
	round_trip(&st->r, st->sys, devs, n, VD_FORMAT_UUID, VD_ORDER_FASTEST);
	if (st->index_form)
		round_trip(&st->r, st->sys, devs, n, VD_FORMAT_INDEX, VD_ORDER_PCI);
}

static void rt_finish(struct rt_state *st, const char *what)
{
	print_message("# %s: %d device lists, %d of them refused\n", what, st->count, st->refused);
	if (st->r.nerrors)
		fail_msg("%s: %d round trips failed:%s", what, st->r.nerrors, st->r.text);
}

/* Every ordered selection of whole GPUs (0 to 4 of them), both forms. */
static void test_roundtrip_gpus(void **state)
{
	static const struct vd_device_ref pool[] = { { 0, -1 }, { 1, -1 }, { 2, -1 }, { 3, -1 } };
	struct vd_device_ref cur[4];
	struct rt_state st = { .index_form = 1 };

	(void)state;
	st.sys = need_fixture("engine");
	selections(pool, ARRAY_SIZE(pool), 4, cur, 0, 0, rt_one, &st);
	assert_int_equal(st.count, 65);
	assert_int_equal(st.refused, 49); /* every list with GPU 1, which is in MIG mode */
	rt_finish(&st, "engine, whole GPUs");
}

/* Fastest-first unknown: index form still means PCI order. */
static void test_roundtrip_norank(void **state)
{
	static const struct vd_device_ref pool[] = { { 0, -1 }, { 1, -1 }, { 2, -1 }, { 3, -1 } };
	struct vd_device_ref cur[4];
	struct rt_state st = { .index_form = 1 };

	(void)state;
	st.sys = need_fixture("engine-norank");
	selections(pool, ARRAY_SIZE(pool), 4, cur, 0, 0, rt_one, &st);
	rt_finish(&st, "engine-norank, whole GPUs");
}

/* Up to three of GPUs and MIG instances, UUID form, both orders. */
static void test_roundtrip_mig(void **state)
{
	static const struct vd_device_ref pool[] = {
		{ 0, -1 }, { 1, -1 }, { 2, -1 }, { 3, -1 }, { 1, 0 }, { 1, 1 },
	};
	struct vd_device_ref cur[3];
	struct rt_state st = { .index_form = 0 };

	(void)state;
	st.sys = need_fixture("engine");
	selections(pool, ARRAY_SIZE(pool), 3, cur, 0, 0, rt_one, &st);
	rt_finish(&st, "engine, GPUs and MIG instances");
}

/* Every ordered selection of the R570 fixture's three MIG instances. */
static void test_roundtrip_mig_r570(void **state)
{
	static const struct vd_device_ref pool[] = { { 1, 0 }, { 1, 1 }, { 1, 2 }, { 3, -1 } };
	struct vd_device_ref cur[4];
	struct rt_state st = { .index_form = 0 };

	(void)state;
	st.sys = need_fixture("engine-r570");
	selections(pool, ARRAY_SIZE(pool), 4, cur, 0, 0, rt_one, &st);
	rt_finish(&st, "engine-r570, MIG instances");
}

/* The forms as the header documents them: indices, and full UUIDs. */
static void test_format_text(void **state)
{
	static const struct vd_device_ref two[] = { { 2, -1 }, { 0, -1 } };
	static const struct vd_device_ref mig[] = { { 1, 1 } };
	const struct vd_system *sys = need_fixture("engine");
	char *s = NULL;

	(void)state;
	assert_int_equal(vd_visible_format(&s, sys, two, 2, VD_FORMAT_INDEX), 0);
	assert_string_equal(s, "2,0");
	free(s);
	assert_int_equal(vd_visible_format(&s, sys, two, 2, VD_FORMAT_UUID), 0);
	assert_string_equal(s, G2 "," G0);
	free(s);
	assert_int_equal(vd_visible_format(&s, sys, mig, 1, VD_FORMAT_UUID), 0);
	assert_string_equal(s, M1);
	free(s);
}

/* The empty set is "", which is set and makes nothing visible. */
static void test_format_empty(void **state)
{
	static const struct vd_device_ref none[1] = { { 0, -1 } };
	const struct vd_system *sys = need_fixture("engine");
	struct vd_resolution *res = NULL;
	char *s = NULL;

	(void)state;
	assert_int_equal(vd_visible_format(&s, sys, none, 0, VD_FORMAT_INDEX), 0);
	assert_non_null(s);
	assert_string_equal(s, "");
	free(s);
	s = NULL;
	assert_int_equal(vd_visible_format(&s, sys, none, 0, VD_FORMAT_UUID), 0);
	assert_non_null(s);
	assert_string_equal(s, "");
	assert_int_equal(vd_visible_resolve(&res, sys, s, VD_ORDER_PCI), 0);
	assert_non_null(res);
	assert_true(res->set);
	assert_int_equal(res->ndevices, 0);
	assert_false(res->duplicate);
	vd_resolution_free(res);
	free(s);
}

/* Expects VD_EINVAL and *out NULL. */
static void format_fails(const struct vd_system *sys, const struct vd_device_ref *devs, size_t n,
			 enum vd_format form, const char *what)
{
	static char untouched[] = "untouched";
	char *s = untouched;
	int rc = vd_visible_format(&s, sys, devs, n, form);

	if (rc != VD_EINVAL || s != NULL)
		fail_msg("format %s: expected EINVAL and NULL, got %s and %s", what,
			 vd_error_name(rc), s ? s : "NULL");
}

static void test_format_errors(void **state)
{
	static const struct vd_device_ref mig_index[] = { { 0, -1 }, { 1, 0 } };
	static const struct vd_device_ref twice[] = { { 2, -1 }, { 3, -1 }, { 2, -1 } };
	static const struct vd_device_ref mig_twice[] = { { 1, 1 }, { 1, 1 } };
	static const struct vd_device_ref no_gpu[] = { { 0, -1 }, { 4, -1 } };
	static const struct vd_device_ref no_mig[] = { { 1, 2 } };
	static const struct vd_device_ref not_mig_mode[] = { { 0, 0 } };
	const struct vd_system *sys = need_fixture("engine");

	(void)state;
	format_fails(sys, mig_index, 2, VD_FORMAT_INDEX, "a MIG instance in index form");
	format_fails(sys, twice, 3, VD_FORMAT_INDEX, "GPU 2 twice, index");
	format_fails(sys, twice, 3, VD_FORMAT_UUID, "GPU 2 twice, uuid");
	format_fails(sys, mig_twice, 2, VD_FORMAT_UUID, "MIG 1/1 twice");
	format_fails(sys, no_gpu, 2, VD_FORMAT_INDEX, "GPU 4 of 4, index");
	format_fails(sys, no_gpu, 2, VD_FORMAT_UUID, "GPU 4 of 4, uuid");
	format_fails(sys, no_mig, 1, VD_FORMAT_UUID, "MIG 2 of GPU 1 (it has 2)");
	format_fails(sys, not_mig_mode, 1, VD_FORMAT_UUID, "MIG 0 of GPU 0 (no MIG)");
}

/* ---- CUDA_DEVICE_ORDER and names ---------------------------------------- */

static void test_order_parse(void **state)
{
	enum vd_order o;

	(void)state;
	o = VD_ORDER_PCI;
	assert_int_equal(vd_order_parse(&o, NULL), 0);
	assert_int_equal(o, VD_ORDER_FASTEST);
	o = VD_ORDER_FASTEST;
	assert_int_equal(vd_order_parse(&o, "PCI_BUS_ID"), 0);
	assert_int_equal(o, VD_ORDER_PCI);
	o = VD_ORDER_PCI;
	assert_int_equal(vd_order_parse(&o, "FASTEST_FIRST"), 0);
	assert_int_equal(o, VD_ORDER_FASTEST);
	o = VD_ORDER_PCI;
	assert_int_equal(vd_order_parse(&o, "pci_bus_id"), VD_EINVAL);
	assert_int_equal(o, VD_ORDER_FASTEST);
	o = VD_ORDER_PCI;
	assert_int_equal(vd_order_parse(&o, "bogus"), VD_EINVAL);
	assert_int_equal(o, VD_ORDER_FASTEST);
	o = VD_ORDER_PCI;
	assert_int_equal(vd_order_parse(&o, "PCI_BUS_ID "), VD_EINVAL);
	assert_int_equal(o, VD_ORDER_FASTEST);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(vd_order_name(VD_ORDER_PCI), "pci");
	assert_string_equal(vd_order_name(VD_ORDER_FASTEST), "fastest");
	assert_null(vd_stop_reason_name(VD_STOP_NONE));
	assert_string_equal(vd_stop_reason_name(VD_STOP_EMPTY), "empty");
	assert_string_equal(vd_stop_reason_name(VD_STOP_NOT_A_NUMBER), "not-a-number");
	assert_string_equal(vd_stop_reason_name(VD_STOP_NEGATIVE), "negative");
	assert_string_equal(vd_stop_reason_name(VD_STOP_OUT_OF_RANGE), "out-of-range");
	assert_string_equal(vd_stop_reason_name(VD_STOP_NOT_UUID), "not-uuid");
	assert_string_equal(vd_stop_reason_name(VD_STOP_NO_MATCH), "no-match");
	assert_string_equal(vd_stop_reason_name(VD_STOP_AMBIGUOUS), "ambiguous");
}

/* ---- main --------------------------------------------------------------- */

int main(int argc, char **argv)
{
	static const struct CMUnitTest fixed[] = {
		cmocka_unit_test(test_names),	       cmocka_unit_test(test_order_parse),
		cmocka_unit_test(test_roundtrip_gpus), cmocka_unit_test(test_roundtrip_norank),
		cmocka_unit_test(test_roundtrip_mig),  cmocka_unit_test(test_roundtrip_mig_r570),
		cmocka_unit_test(test_format_text),    cmocka_unit_test(test_format_empty),
		cmocka_unit_test(test_format_errors),
	};
	static const struct table table = {
		.group = "visible",
		.cases_env = "VISIBLE_CASES",
		.cases_path = "tests/unit/visible.jsonl",
		.fixtures_env = "VISIBLE_FIXTURES",
		.describe = describe_case,
		.check = check_case,
	};

	return table_run(&table, fixed, ARRAY_SIZE(fixed), argc, argv);
}
