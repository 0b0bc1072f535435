/*
 * test_select.c - selection (vd_select) against DESIGN's leases and the
 * rules in select.c.
 *
 * The cases are data: tests/unit/select.jsonl (its header documents the
 * keys), one cmocka test per line, named after the file, the line and the
 * fixture, so that a failure reads "select.jsonl:42 select-basic". The path
 * may be given as argv[1] or in SELECT_CASES; fixtures are read from
 * tests/fixtures (or SELECT_FIXTURES). Tests run from the repository root.
 *
 * Every case is run twice and must give the same answer (determinism); a
 * choice must be n distinct devices none of which has a reason, and must
 * survive the round trip through vd_visible_format() and
 * vd_visible_resolve(). Lease start times are written "HH:MM" and read in
 * UTC (TZ is set to UTC here), so that reasons can be compared exactly.
 */
#include <time.h>

#include "harness.h"

#define DAY0 1700006400 /* 2023-11-15 00:00 UTC: "since" times are on this day */

/* The reasons, a "| " line each, to follow a message. */
static void describe_reasons(char *buf, size_t size, const struct vd_choice *c)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < c->nreasons && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "\n    | %s", c->reasons[i]);
}

static const char *device_uuid(const struct vd_system *sys, struct vd_device_ref d)
{
	return d.mig < 0 ? sys->gpus[d.gpu].uuid : sys->gpus[d.gpu].mig[d.mig].uuid;
}

/* The start of a device's reason line: "GPU 3: ", "GPU 0 MIG 3g.20gb (gi 1 ci 0): ". */
static void reason_prefix(char *buf, size_t size, const struct vd_system *sys,
			  struct vd_device_ref d)
{
	const struct vd_mig *m;

	if (d.mig < 0) {
		snprintf(buf, size, "GPU %u: ", d.gpu);
		return;
	}
	m = &sys->gpus[d.gpu].mig[d.mig];
	snprintf(buf, size, "GPU %u MIG %s%s(gi %u ci %u): ", d.gpu, m->profile,
		 m->profile[0] ? " " : "", m->gi, m->ci);
}

/* ---- the table --------------------------------------------------------- */

static const char *const known_keys[] = {
	"fixture",  "leases", "parent", "n",	   "min_free", "max_util", "model",
	"exclude",  "policy", "mem",	"devices", "nofit",    "reasons",  "lines",
	"nreasons", "last",   "error",	"note",	   "codes",
};

static const char *const lease_keys[] = {
	"device", "uuid", "mode", "mem_mib", "mem_unused_mib",
	"user",	  "uid",  "pid",  "command", "since",
};

static int key_known(const char *key, const char *const *keys, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(key, keys[i]) == 0)
			return 1;
	return 0;
}

/* Reads the case's leases; -1 (reported) when malformed. */
static int read_leases(struct report *r, struct vd_leases *out, const struct vd_system *sys,
		       const json_t *arr)
{
	size_t i;
	json_t *l;

	out->holders = NULL;
	out->n = 0;
	if (!arr)
		return 0;
	if (!json_is_array(arr)) {
		report_add(r, "table: leases must be an array");
		return -1;
	}
	out->holders = calloc(json_array_size(arr) + 1, sizeof(*out->holders));
	assert_non_null(out->holders);
	json_array_foreach(arr, i, l)
	{
		struct vd_lease_holder *h = &out->holders[i];
		json_t *dev = json_object_get(l, "device"), *v;
		const char *key, *since, *mode;
		struct vd_device_ref d;
		unsigned hh, mm;
		int end = 0;

		json_object_foreach(l, key,
				    v) if (!key_known(key, lease_keys, ARRAY_SIZE(lease_keys)))
			report_add(r, "table: lease %zu: unknown key '%s'", i, key);
		if (dev) {
			if (read_device(&d, dev) || !device_exists(sys, d)) {
				report_add(r, "table: lease %zu: no such device", i);
				return -1;
			}
			str_copy(h->uuid, device_uuid(sys, d), sizeof(h->uuid));
		} else if (json_is_string(json_object_get(l, "uuid"))) {
			str_copy(h->uuid, json_string_value(json_object_get(l, "uuid")),
				 sizeof(h->uuid));
		} else {
			report_add(r, "table: lease %zu: device or uuid needed", i);
			return -1;
		}
		mode = json_string_value(json_object_get(l, "mode"));
		h->mode =
			mode && strcmp(mode, "shared") == 0 ? VD_LEASE_SHARED : VD_LEASE_EXCLUSIVE;
		h->mem_mib = (uint64_t)json_integer_value(json_object_get(l, "mem_mib"));
		h->mem_unused_mib =
			(uint64_t)json_integer_value(json_object_get(l, "mem_unused_mib"));
		if (json_is_string(json_object_get(l, "user")))
			str_copy(h->user, json_string_value(json_object_get(l, "user")),
				 sizeof(h->user));
		h->uid = (uint32_t)json_integer_value(json_object_get(l, "uid"));
		h->pid = (int32_t)json_integer_value(json_object_get(l, "pid"));
		h->pgid = h->pid;
		if (json_is_string(json_object_get(l, "command")))
			str_copy(h->command, json_string_value(json_object_get(l, "command")),
				 sizeof(h->command));
		since = json_string_value(json_object_get(l, "since"));
		if (since && sscanf(since, "%u:%u%n", &hh, &mm, &end) == 2 && !since[end])
			h->since = DAY0 + hh * 3600 + mm * 60;
		else if (since) {
			report_add(r, "table: lease %zu: since must be \"HH:MM\"", i);
			return -1;
		}
		out->n++;
	}
	return 0;
}

/* Reads the size under key, when there is one, into *out; -1 (reported) when malformed. */
static int read_size(struct report *r, uint64_t *out, const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	if (v && vd_parse_size_mib(out, json_string_value(v))) {
		report_add(r, "table: %s: %s", key, vd_error_last());
		return -1;
	}
	return 0;
}

/* Reads the options of a case; -1 (reported) when malformed. */
static int read_options(struct report *r, struct vd_select_options *opts, unsigned **exclude,
			const json_t *obj)
{
	json_t *v;
	size_t i;
	int rc;

	vd_select_options_init(opts);
	*exclude = NULL;
	if ((v = json_object_get(obj, "n")))
		opts->n = (unsigned)json_integer_value(v);
	if (read_size(r, &opts->min_free_mib, obj, "min_free") ||
	    read_size(r, &opts->mem_mib, obj, "mem"))
		return -1;
	if ((v = json_object_get(obj, "max_util")))
		opts->max_util = (int)json_integer_value(v);
	if ((v = json_object_get(obj, "model")))
		opts->model = json_string_value(v);
	if ((v = json_object_get(obj, "policy"))) {
		rc = vd_policy_parse(&opts->policy, json_string_value(v));
		if (rc) {
			report_add(r, "table: policy: %s", vd_error_last());
			return -1;
		}
	}
	if ((v = json_object_get(obj, "exclude"))) {
		json_t *e;

		*exclude = calloc(json_array_size(v) + 1, sizeof(**exclude));
		assert_non_null(*exclude);
		json_array_foreach(v, i, e)(*exclude)[i] = (unsigned)json_integer_value(e);
		opts->exclude = *exclude;
		opts->nexclude = json_array_size(v);
	}
	return 0;
}

static int same_choice(const struct vd_choice *a, const struct vd_choice *b)
{
	if (!same_devices(a->devices, a->ndevices, b->devices, b->ndevices) ||
	    a->nreasons != b->nreasons)
		return 0;
	for (size_t i = 0; i < a->nreasons; i++)
		if (strcmp(a->reasons[i], b->reasons[i]) != 0)
			return 0;
	return 1;
}

/* What every successful choice must satisfy, and its round trip. */
static void check_chosen(struct report *r, const struct vd_system *sys, const struct vd_choice *c,
			 unsigned n)
{
	struct vd_resolution *res = NULL;
	char *value = NULL, pre[128];
	int rc;

	if (c->ndevices != (n ? n : 1))
		report_add(r, "invariant: %zu devices chosen, %u wanted", c->ndevices, n);
	for (size_t i = 0; i < c->ndevices; i++) {
		if (!device_exists(sys, c->devices[i])) {
			report_add(r, "invariant: device %zu is not in the fixture", i);
			return;
		}
		for (size_t j = 0; j < i; j++)
			if (c->devices[j].gpu == c->devices[i].gpu &&
			    c->devices[j].mig == c->devices[i].mig)
				report_add(r, "invariant: device chosen twice");
		reason_prefix(pre, sizeof(pre), sys, c->devices[i]);
		for (size_t j = 0; j < c->nreasons; j++)
			if (strncmp(c->reasons[j], pre, strlen(pre)) == 0)
				report_add(r, "invariant: chosen but has a reason: %s",
					   c->reasons[j]);
	}
	rc = vd_visible_format(&value, sys, c->devices, c->ndevices, VD_FORMAT_UUID);
	if (rc) {
		report_add(r, "round trip: format: %s", vd_error_last());
		return;
	}
	rc = vd_visible_resolve(&res, sys, value, VD_ORDER_PCI);
	if (rc) {
		report_add(r, "round trip: resolve: %s", vd_error_last());
	} else if (res->ndevices != c->ndevices || res->nwarnings) {
		report_add(r, "round trip: '%s' resolves to %zu devices (%s)", value, res->ndevices,
			   res->nwarnings ? res->warnings[0] : "no warning");
	} else {
		for (size_t i = 0; i < c->ndevices; i++)
			if (res->devices[i].gpu != c->devices[i].gpu ||
			    res->devices[i].mig != c->devices[i].mig)
				report_add(r, "round trip: '%s' resolves to other devices", value);
	}
	vd_resolution_free(res);
	free(value);
}

/* Each key of "reasons" names a device whose line must contain the text. */
static void check_reasons(struct report *r, const struct vd_system *sys, const struct vd_choice *c,
			  json_t *want)
{
	const char *key;
	json_t *v;

	json_object_foreach(want, key, v)
	{
		json_t *k = json_string(key);
		struct vd_device_ref d;
		char pre[128];
		size_t i;

		if (read_device(&d, k) || !device_exists(sys, d) || !json_is_string(v)) {
			report_add(r, "table: reasons: '%s' is not a device, or not a string", key);
			json_decref(k);
			continue;
		}
		json_decref(k);
		reason_prefix(pre, sizeof(pre), sys, d);
		for (i = 0; i < c->nreasons; i++)
			if (strncmp(c->reasons[i], pre, strlen(pre)) == 0)
				break;
		if (i == c->nreasons)
			report_add(r, "reasons: no line for '%s' (\"%s...\")", key, pre);
		else if (!strstr(c->reasons[i], json_string_value(v)))
			report_add(r, "reasons: '%s' should contain \"%s\", got \"%s\"", key,
				   json_string_value(v), c->reasons[i]);
	}
}

/*
 * Each reason is about the device its line names, and each key of "codes"
 * (a device, or "request" for the request as a whole) has that code.
 */
static void check_codes(struct report *r, const struct vd_system *sys, const struct vd_choice *c,
			json_t *want)
{
	const char *key;
	json_t *v;
	char pre[128];

	for (size_t i = 0; i < c->nreasons; i++) {
		if (!c->why[i].code || !*c->why[i].code)
			report_add(r, "invariant: reason %zu has no code", i);
		if (c->why[i].device.gpu == VD_NO_GPU)
			continue;
		reason_prefix(pre, sizeof(pre), sys, c->why[i].device);
		if (strncmp(c->reasons[i], pre, strlen(pre)) != 0)
			report_add(r, "invariant: reason %zu is about '%s' but says \"%s\"", i, pre,
				   c->reasons[i]);
	}
	json_object_foreach(want, key, v)
	{
		json_t *k = json_string(key);
		struct vd_device_ref d = { VD_NO_GPU, -1 };
		size_t i;

		if (strcmp(key, "request") != 0 && (read_device(&d, k) || !device_exists(sys, d))) {
			report_add(r, "table: codes: '%s' is not a device", key);
			json_decref(k);
			continue;
		}
		json_decref(k);
		for (i = 0; i < c->nreasons; i++)
			if (c->why[i].device.gpu == d.gpu && c->why[i].device.mig == d.mig)
				break;
		if (i == c->nreasons)
			report_add(r, "codes: no reason about '%s'", key);
		else if (strcmp(c->why[i].code, json_string_value(v)) != 0)
			report_add(r, "codes: '%s' should be %s, got %s", key, json_string_value(v),
				   c->why[i].code);
	}
}

static void check_case(struct report *r, const struct table_case *sc)
{
	json_t *obj = sc->obj, *v, *want_devs = json_object_get(obj, "devices");
	const struct vd_system *sys;
	struct vd_leases leases = { 0 };
	struct vd_resolution *parent = NULL;
	struct vd_select_options opts;
	struct vd_choice *choice = NULL, *again = NULL;
	unsigned *exclude = NULL;
	const char *why = NULL, *key;
	int nofit = json_is_true(json_object_get(obj, "nofit")), rc, rc2;
	char a[512], b[4096];

	json_object_foreach(obj, key, v) if (!key_known(key, known_keys, ARRAY_SIZE(known_keys)))
		report_add(r, "table: unknown key '%s'", key);
	if (!json_is_string(json_object_get(obj, "fixture")) || (!want_devs && !nofit)) {
		report_add(r, "table: fixture, and devices or nofit, are needed");
		return;
	}
	sys = fixture_get(json_string_value(json_object_get(obj, "fixture")), &why);
	if (!sys) {
		report_add(r, "%s", why);
		return;
	}
	if (read_leases(r, &leases, sys, json_object_get(obj, "leases")) ||
	    read_options(r, &opts, &exclude, obj))
		goto out;
	v = json_object_get(obj, "parent");
	if (v) {
		rc = vd_visible_resolve(&parent, sys, json_string_value(v), VD_ORDER_PCI);
		if (rc) {
			report_add(r, "parent: %s", vd_error_last());
			goto out;
		}
	}

	rc = vd_select(&choice, sys, &leases, parent, &opts);
	rc2 = vd_select(&again, sys, &leases, parent, &opts);
	if (!choice || (rc && rc != VD_ENOFIT)) {
		report_add(r, "vd_select: %s (%s)", vd_error_name(rc), vd_error_last());
		goto out;
	}
	if (rc != rc2 || !again || !same_choice(choice, again))
		report_add(r, "determinism: a second run gave another answer");
	describe_devices(a, sizeof(a), choice->devices, choice->ndevices);
	describe_reasons(b, sizeof(b), choice);
	if (nofit) {
		if (rc != VD_ENOFIT)
			report_add(r, "expected no fit, got %s: %s%s", vd_error_name(rc), a, b);
		else if (choice->ndevices || choice->devices)
			report_add(r, "no fit, yet devices %s", a);
		if ((v = json_object_get(obj, "error")) && rc == VD_ENOFIT &&
		    !strstr(vd_error_last(), json_string_value(v)))
			report_add(r, "error: expected \"%s\", got \"%s\"", json_string_value(v),
				   vd_error_last());
	} else if (rc) {
		report_add(r, "expected devices, got %s (%s)%s", vd_error_name(rc), vd_error_last(),
			   b);
	} else {
		struct vd_device_ref *want = calloc(json_array_size(want_devs) + 1, sizeof(*want));
		size_t i, nwant = json_array_size(want_devs);
		int same = nwant == choice->ndevices;

		assert_non_null(want);
		json_array_foreach(want_devs, i, v)
		{
			if (read_device(&want[i], v))
				report_add(r, "table: device %zu is neither N nor \"N/migK\"", i);
			else if (same && (want[i].gpu != choice->devices[i].gpu ||
					  want[i].mig != choice->devices[i].mig))
				same = 0;
		}
		if (!same) {
			char w[512];

			describe_devices(w, sizeof(w), want, nwant);
			report_add(r, "devices: expected %s, got %s%s", w, a, b);
		}
		free(want);
		check_chosen(r, sys, choice, opts.n);
	}
	if ((v = json_object_get(obj, "reasons")))
		check_reasons(r, sys, choice, v);
	check_codes(r, sys, choice, json_object_get(obj, "codes"));
	if ((v = json_object_get(obj, "nreasons")) &&
	    json_integer_value(v) != (json_int_t)choice->nreasons)
		report_add(r, "nreasons: expected %lld, got %zu%s",
			   (long long)json_integer_value(v), choice->nreasons, b);
	if ((v = json_object_get(obj, "last")) &&
	    (!choice->nreasons ||
	     strcmp(choice->reasons[choice->nreasons - 1], json_string_value(v)) != 0))
		report_add(r, "last reason: expected \"%s\"%s", json_string_value(v), b);
	if ((v = json_object_get(obj, "lines"))) {
		size_t i;
		json_t *l;

		if (json_array_size(v) != choice->nreasons)
			report_add(r, "lines: expected %zu, got %zu%s", json_array_size(v),
				   choice->nreasons, b);
		json_array_foreach(v, i, l) if (i < choice->nreasons &&
						strcmp(json_string_value(l), choice->reasons[i]))
			report_add(r, "line %zu: expected \"%s\", got \"%s\"", i,
				   json_string_value(l), choice->reasons[i]);
	}
out:
	vd_choice_free(choice);
	vd_choice_free(again);
	vd_resolution_free(parent);
	free(leases.holders);
	free(exclude);
}

/* "select-basic: note": the fixture and the note, for the test's name. */
static void describe_case(char *buf, size_t size, const json_t *obj)
{
	const char *fx = json_string_value(json_object_get(obj, "fixture"));
	const char *note = json_string_value(json_object_get(obj, "note"));

	snprintf(buf, size, "%s%s%.120s", fx ? fx : "?", note ? ": " : "", note ? note : "");
}

/* ---- written out --------------------------------------------------------- */

/* NULL leases and a NULL parent mean none; n 0 means 1. */
static void test_nulls(void **state)
{
	const struct vd_system *sys = need_fixture("select-islands");
	struct vd_select_options opts;
	struct vd_choice *c = NULL;

	(void)state;
	vd_select_options_init(&opts);
	opts.n = 0;
	assert_int_equal(vd_select(&c, sys, NULL, NULL, &opts), 0);
	assert_non_null(c);
	assert_int_equal(c->ndevices, 1);
	assert_int_equal(c->devices[0].gpu, 0);
	assert_int_equal(c->devices[0].mig, -1);
	assert_int_equal(c->nreasons, 0);
	vd_choice_free(c);
	vd_choice_free(NULL);
}

/* An empty machine: no fit, no reasons, a message. */
static void test_empty_system(void **state)
{
	struct vd_system *sys = NULL;
	struct vd_select_options opts;
	struct vd_choice *c = NULL;

	(void)state;
	assert_int_equal(system_new(&sys, 0), 0);
	vd_select_options_init(&opts);
	assert_int_equal(vd_select(&c, sys, NULL, NULL, &opts), VD_ENOFIT);
	assert_non_null(c);
	assert_int_equal(c->ndevices, 0);
	assert_null(c->devices);
	assert_int_equal(c->nreasons, 0);
	assert_string_equal(vd_error_last(), "no GPU fits: 1 wanted");
	vd_choice_free(c);
	vd_system_free(sys);
}

/* A huge n is no fit, not an allocation of n devices. */
static void test_huge_n(void **state)
{
	const struct vd_system *sys = need_fixture("select-islands");
	struct vd_select_options opts;
	struct vd_choice *c = NULL;

	(void)state;
	vd_select_options_init(&opts);
	opts.n = 4000000000u;
	assert_int_equal(vd_select(&c, sys, NULL, NULL, &opts), VD_ENOFIT);
	assert_int_equal(c->nreasons, 1);
	assert_string_equal(c->reasons[0], "8 GPUs fit, 4000000000 wanted");
	vd_choice_free(c);
}

/* A GPU to exclude that is not on the machine, or an empty model, is a mistake, not a no-op. */
static void test_bad_options(void **state)
{
	const struct vd_system *sys = need_fixture("select-islands");
	static const unsigned beyond[] = { 1, 8 };
	struct vd_select_options opts;
	struct vd_choice *c = NULL;

	(void)state;
	vd_select_options_init(&opts);
	opts.exclude = beyond;
	opts.nexclude = 2;
	assert_int_equal(vd_select(&c, sys, NULL, NULL, &opts), VD_EINVAL);
	assert_null(c);
	assert_non_null(strstr(vd_error_last(), "there is no GPU 8 to exclude"));
	vd_select_options_init(&opts);
	opts.model = "";
	assert_int_equal(vd_select(&c, sys, NULL, NULL, &opts), VD_EINVAL);
	assert_null(c);
	assert_non_null(strstr(vd_error_last(), "empty model pattern"));
}

/* A request no lease ending could satisfy says so; one that waiting could, does not. */
static void test_never(void **state)
{
	const struct vd_system *sys = need_fixture("select-islands");
	struct vd_select_options opts;
	struct vd_choice *c = NULL;
	struct vd_leases leases = { 0 };
	struct vd_lease_holder all[8];

	(void)state;
	vd_select_options_init(&opts);
	opts.n = 9; /* 8 GPUs */
	assert_int_equal(vd_select(&c, sys, NULL, NULL, &opts), VD_ENOFIT);
	assert_true(c->never);
	vd_choice_free(c);
	opts.n = 1;
	opts.min_free_mib = (uint64_t)1 << 30; /* a PiB */
	assert_int_equal(vd_select(&c, sys, NULL, NULL, &opts), VD_ENOFIT);
	assert_true(c->never);
	vd_choice_free(c);
	/* every GPU leased: it fits as soon as one lease ends */
	memset(all, 0, sizeof(all));
	for (size_t i = 0; i < 8; i++)
		str_copy(all[i].uuid, sys->gpus[i].uuid, sizeof(all[i].uuid));
	leases.holders = all;
	leases.n = 8;
	vd_select_options_init(&opts);
	assert_int_equal(vd_select(&c, sys, &leases, NULL, &opts), VD_ENOFIT);
	assert_false(c->never);
	vd_choice_free(c);
}

/* Processes: plural, two named, the rest counted, a nameless one by pid. */
static void test_busy_words(void **state)
{
	static const struct vd_process procs[] = {
		{ .pid = 100, .name = "python" },
		{ .pid = 101, .name = "" },
		{ .pid = 102, .name = "bash" },
	};
	const struct vd_system *base = need_fixture("select-basic");
	struct vd_system *sys = NULL;
	struct vd_select_options opts;
	struct vd_choice *c = NULL;
	struct vd_gpu *gpu;

	(void)state;
	assert_int_equal(system_copy(&sys, base), 0);
	gpu = &sys->gpus[3];
	free(gpu->processes);
	gpu->processes = calloc(3, sizeof(*gpu->processes));
	assert_non_null(gpu->processes);
	vd_select_options_init(&opts);
	opts.exclude = (const unsigned[]){ 0, 1, 2, 4 };
	opts.nexclude = 4;
	for (size_t n = 1; n <= 3; n++) {
		static const char *const want[] = {
			"GPU 3: busy with 1 process visdev did not start (pid 100 python)",
			"GPU 3: busy with 2 processes visdev did not start (pid 100 python, pid 101)",
			"GPU 3: busy with 3 processes visdev did not start (pid 100 python, pid 101 "
			"and 1 more)",
		};

		memcpy(gpu->processes, procs, n * sizeof(*procs));
		gpu->nprocesses = n;
		assert_int_equal(vd_select(&c, sys, NULL, NULL, &opts), VD_ENOFIT);
		assert_int_equal(c->nreasons, 6);
		assert_string_equal(c->reasons[3], want[n - 1]);
		vd_choice_free(c);
		c = NULL;
	}
	/* a process list that is unknown: the memory in use is what tells */
	gpu->fields &= ~(unsigned)VD_GPU_PROCESSES;
	assert_int_equal(vd_select(&c, sys, NULL, NULL, &opts), VD_ENOFIT);
	assert_string_equal(c->reasons[3], "GPU 3: busy: 2.0 GiB in use that no lease and no "
					   "process NVML lists explains (0% utilised)");
	vd_choice_free(c);
	gpu->memory_used_mib = 1024; /* a context, not a job */
	assert_int_equal(vd_select(&c, sys, NULL, NULL, &opts), 0);
	assert_int_equal(c->ndevices, 1);
	assert_int_equal(c->devices[0].gpu, 3);
	vd_choice_free(c);
	vd_system_free(sys);
}

/* A device's state agrees with what a request could have of it. */
static void test_status(void **state)
{
	const struct vd_system *sys = need_fixture("select-basic");
	const struct vd_system *mig = need_fixture("select-mig");
	struct vd_lease_holder h[3] = { 0 };
	struct vd_leases leases = { h, 0 };
	struct vd_device_status st;

	(void)state;
	/* nothing: GPU 0 is free with NVML's free memory, GPU 3 busy, GPU 5 lost */
	assert_int_equal(vd_device_status(&st, sys, NULL, (struct vd_device_ref){ 0, -1 }), 0);
	assert_int_equal(st.state, VD_STATE_FREE);
	assert_int_equal(st.free_mib, 81920 - 1024);
	assert_int_equal(vd_device_status(&st, sys, NULL, (struct vd_device_ref){ 3, -1 }), 0);
	assert_int_equal(st.state, VD_STATE_BUSY);
	assert_int_equal(st.nforeign, 1);
	assert_int_equal(vd_device_status(&st, sys, NULL, (struct vd_device_ref){ 5, -1 }), 0);
	assert_int_equal(st.state, VD_STATE_LOST);
	/* a shared lease: what is left to reserve is less what it has not used yet */
	strcpy(h[0].uuid, sys->gpus[0].uuid);
	h[0].mode = VD_LEASE_SHARED;
	h[0].mem_mib = 8192;
	h[0].mem_unused_mib = 4096;
	h[0].pid = 5000;
	leases.n = 1;
	assert_int_equal(vd_device_status(&st, sys, &leases, (struct vd_device_ref){ 0, -1 }), 0);
	assert_int_equal(st.state, VD_STATE_SHARED);
	assert_int_equal(st.free_mib, 81920 - 1024 - 4096);
	assert_int_equal(st.nleases, 1);
	/* an exclusive lease beside it, then a hold for the line */
	h[1] = h[0];
	h[1].mode = VD_LEASE_EXCLUSIVE;
	leases.n = 2;
	assert_int_equal(vd_device_status(&st, sys, &leases, (struct vd_device_ref){ 0, -1 }), 0);
	assert_int_equal(st.state, VD_STATE_LEASED);
	strcpy(h[2].uuid, sys->gpus[2].uuid);
	h[2].mode = VD_LEASE_HELD;
	h[2].pid = 6000;
	leases.n = 3;
	assert_int_equal(vd_device_status(&st, sys, &leases, (struct vd_device_ref){ 2, -1 }), 0);
	assert_int_equal(st.state, VD_STATE_HELD);
	/* a GPU in MIG mode, whole, and one of its MIG devices */
	assert_int_equal(vd_device_status(&st, mig, NULL, (struct vd_device_ref){ 0, -1 }), 0);
	assert_int_equal(st.state, VD_STATE_MIG);
	assert_int_equal(vd_device_status(&st, mig, NULL, (struct vd_device_ref){ 0, 0 }), 0);
	assert_int_not_equal(st.state, VD_STATE_MIG);
	/* no such device */
	assert_int_equal(vd_device_status(&st, sys, NULL, (struct vd_device_ref){ 6, -1 }),
			 VD_EINVAL);
	assert_int_equal(vd_device_status(&st, mig, NULL, (struct vd_device_ref){ 0, 9 }),
			 VD_EINVAL);
	assert_string_equal(vd_state_name(VD_STATE_SHARED), "shared");
	assert_null(vd_state_name((enum vd_state)99));
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest fixed[] = {
		cmocka_unit_test(test_nulls),  cmocka_unit_test(test_empty_system),
		cmocka_unit_test(test_huge_n), cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_never),  cmocka_unit_test(test_busy_words),
		cmocka_unit_test(test_status),
	};
	static const struct table table = {
		.group = "select",
		.cases_env = "SELECT_CASES",
		.cases_path = "tests/unit/select.jsonl",
		.fixtures_env = "SELECT_FIXTURES",
		.describe = describe_case,
		.check = check_case,
	};

	setenv("TZ", "UTC", 1);
	tzset();
	return table_run(&table, fixed, ARRAY_SIZE(fixed), argc, argv);
}
