/*
 * fixture.c - simulated servers: the fixture JSON format of docs/fixture.md read
 * into a snapshot, and the "fixture" and "demo" backends that serve one.
 *
 * Every failure names the file, the line and the column of the value that
 * is wrong. jansson gives positions only for syntax errors, so semantic
 * errors find theirs with a small locator that walks the (by then known to
 * be valid) text along the path of the value: keys and array indices.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "internal.h"

#define FIXTURE_MAX_GPUS      1024
#define FIXTURE_MAX_MIG	      64   /* per GPU; real ones have at most 7 */
#define FIXTURE_MAX_PROCESSES 4096 /* per GPU */
#define FIXTURE_MAX_BYTES     (64 << 20)
#define PATH_DEPTH	      8

/* One step of the path from the top of the document to a value. */
struct step {
	const char *key; /* NULL: an index into an array */
	size_t index;
};

/* Where a UUID was first seen, to name both places of a duplicate. */
struct uuid_slot {
	const char *uuid; /* NULL: empty slot */
	size_t gpu;
	size_t mig; /* SIZE_MAX: the GPU itself */
};

struct parser {
	const char *text;
	size_t len;
	const char *name;
	struct step path[PATH_DEPTH];
	size_t depth;
	struct uuid_slot *uuids; /* open addressing, nuuids is a power of two */
	size_t nuuids;
	size_t gpu; /* the GPU being read, for the UUID table */
	struct vd_system *sys;
};

/* ---- Messages --------------------------------------------------------- */

/* error_set() with control characters (from file names or JSON) blanked, so the message is one
 * line. */
__attribute__((format(printf, 2, 3))) static int report(int code, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	for (char *s = buf; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = ' ';
	return error_set(code, "%s", buf);
}

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a real number";
	case JSON_TRUE:
		return "true";
	case JSON_FALSE:
		return "false";
	case JSON_NULL:
		return "null";
	}
	return "an unknown value";
}

/* Writes the path as "gpus[1].memory_total_mib", "" at the top. */
static void path_format(const struct parser *p, size_t depth, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < depth && used < size; i++) {
		const struct step *st = &p->path[i];
		int n;

		if (st->key)
			n = snprintf(buf + used, size - used, "%s%s", used ? "." : "", st->key);
		else
			n = snprintf(buf + used, size - used, "[%zu]", st->index);
		if (n < 0)
			break;
		used += (size_t)n;
	}
}

static void enter_key(struct parser *p, const char *key)
{
	assert(p->depth < PATH_DEPTH);
	p->path[p->depth].key = key;
	p->path[p->depth].index = 0;
	p->depth++;
}

static void enter_index(struct parser *p, size_t index)
{
	assert(p->depth < PATH_DEPTH);
	p->path[p->depth].key = NULL;
	p->path[p->depth].index = index;
	p->depth++;
}

static void leave(struct parser *p)
{
	assert(p->depth > 0);
	p->depth--;
}

/* ---- The locator: where a value starts in the text --------------------- */

struct cursor {
	const char *s;
	size_t len;
	size_t pos;
};

static int is_blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

static void skip_blank(struct cursor *c)
{
	while (c->pos < c->len && is_blank(c->s[c->pos]))
		c->pos++;
}

/* Moves past the string token that starts at pos (on its quote). */
static int skip_string(struct cursor *c)
{
	c->pos++;
	while (c->pos < c->len) {
		char ch = c->s[c->pos++];

		if (ch == '\\' && c->pos < c->len)
			c->pos++;
		else if (ch == '"')
			return 0;
	}
	return -1;
}

/* Moves past the value that starts at pos: a scalar, or a whole array or object. */
static void skip_value(struct cursor *c)
{
	size_t depth = 0;

	while (c->pos < c->len) {
		char ch = c->s[c->pos];

		if (ch == '"') {
			if (skip_string(c) < 0 || !depth)
				return;
			continue;
		}
		if (ch == '[' || ch == '{') {
			depth++;
		} else if (ch == ']' || ch == '}') {
			if (!depth)
				return; /* the end of the container around a scalar */
			c->pos++;
			if (!--depth)
				return;
			continue;
		} else if (!depth && (ch == ',' || ch == ':' || is_blank(ch))) {
			return;
		}
		c->pos++;
	}
}

static int expect(struct cursor *c, char ch)
{
	skip_blank(c);
	if (c->pos >= c->len || c->s[c->pos] != ch)
		return -1;
	c->pos++;
	return 0;
}

/* Whether the string token tok (quotes included) decodes to key. */
static int key_equal(const char *tok, size_t n, const char *key)
{
	json_t *decoded;
	int equal;

	if (n < 2)
		return 0;
	if (!memchr(tok, '\\', n))
		return n - 2 == strlen(key) && !memcmp(tok + 1, key, n - 2);
	decoded = json_loadb(tok, n, JSON_DECODE_ANY, NULL);
	equal = json_is_string(decoded) && json_string_length(decoded) == strlen(key) &&
		!strcmp(json_string_value(decoded), key);
	json_decref(decoded);
	return equal;
}

/* Moves into the object at pos, onto the value of key; *key_at is where the key starts. */
static int find_key(struct cursor *c, const char *key, size_t *key_at)
{
	if (expect(c, '{') < 0)
		return -1;
	for (;;) {
		size_t start, end;

		skip_blank(c);
		if (c->pos >= c->len || c->s[c->pos] != '"')
			return -1;
		start = c->pos;
		if (skip_string(c) < 0)
			return -1;
		end = c->pos;
		if (expect(c, ':') < 0)
			return -1;
		skip_blank(c);
		if (key_equal(c->s + start, end - start, key)) {
			*key_at = start;
			return 0;
		}
		skip_value(c);
		if (expect(c, ',') < 0)
			return -1;
	}
}

/* Moves into the array at pos, onto its element index. */
static int find_index(struct cursor *c, size_t index)
{
	if (expect(c, '[') < 0)
		return -1;
	for (size_t i = 0; i < index; i++) {
		skip_blank(c);
		skip_value(c);
		if (expect(c, ',') < 0)
			return -1;
	}
	skip_blank(c);
	return 0;
}

/*
 * The offset where the value at the first depth steps of the path starts
 * or, with at_key, where the key of the last step does. Should the text
 * not be what the path says, the start of the deepest value found.
 */
static size_t locate(const struct parser *p, size_t depth, int at_key)
{
	struct cursor c = { p->text, p->len, 0 };
	size_t found;

	skip_blank(&c);
	found = c.pos;
	for (size_t d = 0; d < depth; d++) {
		const struct step *st = &p->path[d];
		size_t key_at = 0;

		if (st->key) {
			if (find_key(&c, st->key, &key_at) < 0)
				return found;
			if (at_key && d + 1 == depth)
				return key_at;
		} else if (find_index(&c, st->index) < 0) {
			return found;
		}
		found = c.pos;
	}
	return found;
}

/* 1-based line and column of an offset; columns count characters, as jansson's do. */
static void line_col(const char *s, size_t pos, size_t *line, size_t *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < pos; i++) {
		if (s[i] == '\n') {
			(*line)++;
			*col = 1;
		} else if (((unsigned char)s[i] & 0xc0) != 0x80) {
			(*col)++;
		}
	}
}

/*
 * Records "file:line:col: path: what" for the value at the current path
 * (with at_key, for the key of its last step, which the path then omits).
 */
__attribute__((format(printf, 3, 0))) static int vfail(struct parser *p, int at_key,
						       const char *fmt, va_list ap)
{
	char what[256], where[160];
	size_t line, col, depth = p->depth - (at_key ? 1 : 0);

	vsnprintf(what, sizeof(what), fmt, ap);
	path_format(p, depth, where, sizeof(where));
	line_col(p->text, locate(p, p->depth, at_key), &line, &col);
	return report(VD_EPARSE, "%s:%zu:%zu: %s%s%s", p->name, line, col, where,
		      *where ? ": " : "", what);
}

/* A malformed value at the current path. Returns VD_EPARSE. */
__attribute__((format(printf, 2, 3))) static int fail(struct parser *p, const char *fmt, ...)
{
	va_list ap;
	int err;

	va_start(ap, fmt);
	err = vfail(p, 0, fmt, ap);
	va_end(ap);
	return err;
}

/* A fault of the object at the current path, shown at its key key. Returns VD_EPARSE. */
__attribute__((format(printf, 3, 4))) static int fail_key(struct parser *p, const char *key,
							  const char *fmt, ...)
{
	va_list ap;
	int err;

	enter_key(p, key);
	va_start(ap, fmt);
	err = vfail(p, 1, fmt, ap);
	va_end(ap);
	leave(p);
	return err;
}

/*
 * A key this version does not know. The format may grow keys (DESIGN:
 * "more keys may be added"), so one is passed over; but a near miss of a
 * known key is a misspelling, which would silently leave a field unknown,
 * so that is an error naming the key meant.
 */
static int check_unknown(struct parser *p, const char *key, const char *const *known)
{
	for (size_t i = 0; known[i]; i++)
		if (str_distance(key, known[i], 0) <= 2)
			return fail_key(p, key, "unknown key '%s' (did you mean '%s'?)", key,
					known[i]);
	return 0;
}

/* ---- Reading values --------------------------------------------------- */

/* Reads the integer at key, from min to max, into *out. */
static int read_int(struct parser *p, const char *key, json_t *v, long long min, long long max,
		    long long *out)
{
	char want[96];
	long long n;
	int err = 0;

	enter_key(p, key);
	/* Small ranges are spelt out; a large bound is named only when exceeded. */
	if (max <= 1000)
		snprintf(want, sizeof(want), "an integer from %lld to %lld", min, max);
	else
		snprintf(want, sizeof(want), "%s",
			 min > 0  ? "a positive integer" :
			 min == 0 ? "a non-negative integer" :
				    "an integer");
	if (!json_is_integer(v)) {
		err = fail(p, "expected %s, got %s", want, type_name(v));
		goto out;
	}
	n = json_integer_value(v);
	if (n < min || (n > max && max <= 1000))
		err = fail(p, "expected %s, got %lld", want, n);
	else if (n > max)
		err = fail(p, "expected %s no larger than %lld, got %lld", want, max, n);
	else
		*out = n;
out:
	leave(p);
	return err;
}

/* Reads the string at key into dst of size bytes; nonempty refuses "". */
static int read_string(struct parser *p, const char *key, json_t *v, char *dst, size_t size,
		       int nonempty)
{
	size_t len;
	int err = 0;

	enter_key(p, key);
	if (!json_is_string(v)) {
		err = fail(p, "expected a%s string, got %s", nonempty ? " non-empty" : "",
			   type_name(v));
		goto out;
	}
	len = json_string_length(v);
	if (nonempty && !len)
		err = fail(p, "expected a non-empty string, got \"\"");
	else if (len >= size)
		err = fail(p, "too long: %zu bytes, at most %zu", len, size - 1);
	else if (memchr(json_string_value(v), '\0', len))
		err = fail(p, "a NUL character is not allowed");
	else
		memcpy(dst, json_string_value(v), len + 1);
out:
	leave(p);
	return err;
}

static int read_bool(struct parser *p, const char *key, json_t *v, int *out)
{
	int err = 0;

	enter_key(p, key);
	if (!json_is_boolean(v))
		err = fail(p, "expected true or false, got %s", type_name(v));
	else
		*out = json_is_true(v);
	leave(p);
	return err;
}

/* Checks the array at key and its length, at most max. */
static int check_array(struct parser *p, const char *key, json_t *v, size_t max)
{
	int err = 0;

	enter_key(p, key);
	if (!json_is_array(v))
		err = fail(p, "expected an array, got %s", type_name(v));
	else if (json_array_size(v) > max)
		err = fail(p, "%zu entries, at most %zu", json_array_size(v), max);
	leave(p);
	return err;
}

static size_t hash(const char *s)
{
	size_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/*
 * Enters a UUID, already stored in the snapshot, into the table of those
 * seen; a duplicate is an error at the current path.
 */
static int uuid_add(struct parser *p, const char *uuid, size_t mig)
{
	size_t i = hash(uuid) & (p->nuuids - 1);

	while (p->uuids[i].uuid) {
		const struct uuid_slot *seen = &p->uuids[i];

		if (!strcmp(seen->uuid, uuid)) {
			if (seen->mig == SIZE_MAX)
				return fail(p, "'%s' is already the UUID of gpus[%zu]", uuid,
					    seen->gpu);
			return fail(p, "'%s' is already the UUID of gpus[%zu].mig[%zu]", uuid,
				    seen->gpu, seen->mig);
		}
		i = (i + 1) & (p->nuuids - 1);
	}
	p->uuids[i].uuid = uuid;
	p->uuids[i].gpu = p->gpu;
	p->uuids[i].mig = mig;
	return 0;
}

/*
 * Reads the UUID at key, which must start with prefix and be fit to name in
 * CUDA_VISIBLE_DEVICES, and enters it into the table of those seen.
 */
static int read_uuid(struct parser *p, const char *key, json_t *v, char *dst, size_t size,
		     const char *prefix, size_t mig)
{
	size_t plen = strlen(prefix);
	int err;

	err = read_string(p, key, v, dst, size, 1);
	if (err)
		return err;
	enter_key(p, key);
	if (strncmp(dst, prefix, plen) || !dst[plen]) {
		err = fail(p, "expected a UUID that starts with '%s', got '%s'", prefix, dst);
		goto out;
	}
	for (const unsigned char *s = (const unsigned char *)dst; *s; s++) {
		if (*s <= ' ' || *s >= 0x7f || *s == ',') {
			err = fail(p,
				   "'%s' cannot be named in CUDA_VISIBLE_DEVICES: a UUID is "
				   "printable ASCII without blanks or ','",
				   dst);
			goto out;
		}
	}
	err = uuid_add(p, dst, mig);
out:
	leave(p);
	return err;
}

/* ---- The objects of the format ----------------------------------------- */

static const char *const process_keys[] = { "pid", "used_mib", "name", "user", NULL };

static int parse_process(struct parser *p, struct vd_process *proc, json_t *obj)
{
	const char *key;
	json_t *v;
	long long n = 0;
	int err = 0, have_pid = 0;

	if (!json_is_object(obj))
		return fail(p, "expected an object, got %s", type_name(obj));
	json_object_foreach(obj, key, v)
	{
		if (!strcmp(key, "pid")) {
			err = read_int(p, key, v, 1, UINT32_MAX, &n);
			proc->pid = (uint32_t)n;
			have_pid = 1;
		} else if (!strcmp(key, "used_mib")) {
			err = read_int(p, key, v, 0, LLONG_MAX, &n);
			proc->used_mib = (uint64_t)n;
			proc->used_known = 1;
		} else if (!strcmp(key, "name")) {
			err = read_string(p, key, v, proc->name, sizeof(proc->name), 0);
		} else if (!strcmp(key, "user")) {
			err = read_string(p, key, v, proc->user, sizeof(proc->user), 0);
		} else {
			err = check_unknown(p, key, process_keys);
		}
		if (err)
			return err;
	}
	if (!have_pid)
		return fail(p, "missing required key 'pid'");
	return 0;
}

/* Reads memory_used_mib and memory_total_mib, which come together or not at all. */
static int check_memory(struct parser *p, int have_total, int have_used, uint64_t total,
			uint64_t used)
{
	int err;

	if (have_total && !have_used)
		return fail_key(p, "memory_total_mib",
				"memory_total_mib without memory_used_mib: give both or neither");
	if (have_used && !have_total)
		return fail_key(p, "memory_used_mib",
				"memory_used_mib without memory_total_mib: give both or neither");
	if (!have_used || used <= total)
		return 0;
	enter_key(p, "memory_used_mib");
	err = fail(p, "%llu is more than memory_total_mib, %llu", (unsigned long long)used,
		   (unsigned long long)total);
	leave(p);
	return err;
}

static const char *const mig_keys[] = {
	"uuid", "gi", "ci", "profile", "memory_total_mib", "memory_used_mib", NULL,
};

static int parse_mig(struct parser *p, struct vd_mig *mig, size_t index, json_t *obj)
{
	const char *key;
	json_t *v;
	long long n = 0;
	int err = 0, have_uuid = 0, have_gi = 0, have_ci = 0, have_total = 0, have_used = 0;

	if (!json_is_object(obj))
		return fail(p, "expected an object, got %s", type_name(obj));
	json_object_foreach(obj, key, v)
	{
		if (!strcmp(key, "uuid")) {
			err = read_uuid(p, key, v, mig->uuid, sizeof(mig->uuid), "MIG-", index);
			have_uuid = 1;
		} else if (!strcmp(key, "gi")) {
			err = read_int(p, key, v, 0, UINT32_MAX, &n);
			mig->gi = (unsigned)n;
			have_gi = 1;
		} else if (!strcmp(key, "ci")) {
			err = read_int(p, key, v, 0, UINT32_MAX, &n);
			mig->ci = (unsigned)n;
			have_ci = 1;
		} else if (!strcmp(key, "profile")) {
			err = read_string(p, key, v, mig->profile, sizeof(mig->profile), 0);
		} else if (!strcmp(key, "memory_total_mib")) {
			err = read_int(p, key, v, 0, LLONG_MAX, &n);
			mig->memory_total_mib = (uint64_t)n;
			have_total = 1;
		} else if (!strcmp(key, "memory_used_mib")) {
			err = read_int(p, key, v, 0, LLONG_MAX, &n);
			mig->memory_used_mib = (uint64_t)n;
			have_used = 1;
		} else {
			err = check_unknown(p, key, mig_keys);
		}
		if (err)
			return err;
	}
	if (!have_uuid)
		return fail(p, "missing required key 'uuid'");
	if (!have_gi)
		return fail(p, "missing required key 'gi'");
	if (!have_ci)
		return fail(p, "missing required key 'ci'");
	err = check_memory(p, have_total, have_used, mig->memory_total_mib, mig->memory_used_mib);
	if (err)
		return err;
	if (have_total)
		mig->fields |= VD_GPU_MEMORY;
	return 0;
}

/* Reads the array of key into a new array of n elements of size bytes, each by parse_one. */
static int parse_list(struct parser *p, const char *key, json_t *list, size_t max, size_t size,
		      void **out, size_t *n,
		      int (*parse_one)(struct parser *p, void *elem, size_t index, json_t *obj))
{
	char *elems = NULL;
	size_t count;
	int err;

	*out = NULL;
	*n = 0;
	err = check_array(p, key, list, max);
	if (err)
		return err;
	count = json_array_size(list);
	if (count) {
		elems = calloc(count, size);
		if (!elems)
			return error_set(VD_ENOMEM, "out of memory");
	}
	/* The caller owns the array from here, even when an element fails. */
	*out = elems;
	*n = count;
	enter_key(p, key);
	for (size_t i = 0; i < count; i++) {
		enter_index(p, i);
		err = parse_one(p, elems + i * size, i, json_array_get(list, i));
		leave(p);
		if (err)
			break;
	}
	leave(p);
	return err;
}

static int parse_one_process(struct parser *p, void *elem, size_t index, json_t *obj)
{
	(void)index;
	return parse_process(p, elem, obj);
}

static int parse_one_mig(struct parser *p, void *elem, size_t index, json_t *obj)
{
	return parse_mig(p, elem, index, obj);
}

/* Two MIG instances of one GPU cannot share a GPU and a compute instance. */
static int check_mig_ids(struct parser *p, const struct vd_gpu *gpu)
{
	int err = 0;

	for (size_t i = 1; i < gpu->nmig; i++) {
		for (size_t j = 0; j < i; j++) {
			if (gpu->mig[i].gi != gpu->mig[j].gi || gpu->mig[i].ci != gpu->mig[j].ci)
				continue;
			enter_key(p, "mig");
			enter_index(p, i);
			err = fail(p, "gi %u ci %u is already mig[%zu]", gpu->mig[i].gi,
				   gpu->mig[i].ci, j);
			leave(p);
			leave(p);
			return err;
		}
	}
	return 0;
}

static const char *const gpu_keys[] = {
	"uuid",
	"name",
	"pci_bus_id",
	"memory_total_mib",
	"memory_used_mib",
	"utilization_gpu",
	"temperature_c",
	"power_w",
	"numa_node",
	"cuda_rank",
	"processes",
	"mig",
	"mig_mode",
	"lost",
	NULL,
};

/* Reads power_w, in watts (a number), as milliwatts. */
static int read_power(struct parser *p, const char *key, json_t *v, unsigned *out)
{
	double w;
	int err = 0;

	enter_key(p, key);
	if (!json_is_number(v)) {
		err = fail(p, "expected a non-negative number, got %s", type_name(v));
		goto out;
	}
	w = json_number_value(v);
	if (!(w >= 0 && w <= UINT_MAX / 1000.0))
		err = fail(p, "expected a number of watts from 0 to %u, got %g", UINT_MAX / 1000,
			   w);
	else
		*out = (unsigned)(w * 1000.0 + 0.5);
out:
	leave(p);
	return err;
}

static int parse_gpu(struct parser *p, struct vd_gpu *gpu, json_t *obj)
{
	const char *key;
	json_t *v;
	void *list = NULL;
	long long n = 0;
	int err = 0, have_uuid = 0, have_name = 0, have_bus = 0, have_total = 0, have_used = 0;
	int have_mig_mode = 0;

	if (!json_is_object(obj))
		return fail(p, "expected an object, got %s", type_name(obj));
	json_object_foreach(obj, key, v)
	{
		if (!strcmp(key, "uuid")) {
			err = read_uuid(p, key, v, gpu->uuid, sizeof(gpu->uuid), "GPU-", SIZE_MAX);
			have_uuid = 1;
		} else if (!strcmp(key, "name")) {
			err = read_string(p, key, v, gpu->name, sizeof(gpu->name), 1);
			have_name = 1;
		} else if (!strcmp(key, "pci_bus_id")) {
			err = read_string(p, key, v, gpu->pci_bus_id, sizeof(gpu->pci_bus_id), 1);
			have_bus = 1;
		} else if (!strcmp(key, "memory_total_mib")) {
			err = read_int(p, key, v, 0, LLONG_MAX, &n);
			gpu->memory_total_mib = (uint64_t)n;
			have_total = 1;
		} else if (!strcmp(key, "memory_used_mib")) {
			err = read_int(p, key, v, 0, LLONG_MAX, &n);
			gpu->memory_used_mib = (uint64_t)n;
			have_used = 1;
		} else if (!strcmp(key, "utilization_gpu")) {
			err = read_int(p, key, v, 0, 100, &n);
			gpu->utilization_gpu = (unsigned)n;
			gpu->fields |= VD_GPU_UTILIZATION;
		} else if (!strcmp(key, "temperature_c")) {
			err = read_int(p, key, v, 0, INT_MAX, &n);
			gpu->temperature_c = (int)n;
			gpu->fields |= VD_GPU_TEMPERATURE;
		} else if (!strcmp(key, "power_w")) {
			err = read_power(p, key, v, &gpu->power_mw);
			gpu->fields |= VD_GPU_POWER;
		} else if (!strcmp(key, "numa_node")) {
			err = read_int(p, key, v, 0, INT_MAX, &n);
			gpu->numa_node = (int)n;
			gpu->fields |= VD_GPU_NUMA;
		} else if (!strcmp(key, "cuda_rank")) {
			/* Checked to be a permutation once every GPU is read. */
			err = read_int(p, key, v, 0, INT_MAX, &n);
			gpu->cuda_rank = (unsigned)n;
			gpu->fields |= VD_GPU_CUDA_RANK;
		} else if (!strcmp(key, "processes")) {
			err = parse_list(p, key, v, FIXTURE_MAX_PROCESSES, sizeof(*gpu->processes),
					 &list, &gpu->nprocesses, parse_one_process);
			gpu->processes = list;
			gpu->fields |= VD_GPU_PROCESSES;
		} else if (!strcmp(key, "mig")) {
			err = parse_list(p, key, v, FIXTURE_MAX_MIG, sizeof(*gpu->mig), &list,
					 &gpu->nmig, parse_one_mig);
			gpu->mig = list;
		} else if (!strcmp(key, "mig_mode")) {
			err = read_bool(p, key, v, &gpu->mig_mode);
			have_mig_mode = 1;
		} else if (!strcmp(key, "lost")) {
			err = read_bool(p, key, v, &gpu->lost);
		} else {
			err = check_unknown(p, key, gpu_keys);
		}
		if (err)
			return err;
	}
	if (!have_uuid)
		return fail(p, "missing required key 'uuid'");
	if (!have_name)
		return fail(p, "missing required key 'name'");
	if (!have_bus)
		return fail(p, "missing required key 'pci_bus_id'");
	err = check_memory(p, have_total, have_used, gpu->memory_total_mib, gpu->memory_used_mib);
	if (err)
		return err;
	if (have_total)
		gpu->fields |= VD_GPU_MEMORY;
	if (!have_mig_mode)
		gpu->mig_mode = gpu->nmig > 0;
	else if (!gpu->mig_mode && gpu->nmig)
		return fail_key(p, "mig_mode", "mig_mode is false, but the GPU has MIG instances");
	return check_mig_ids(p, gpu);
}

/*
 * The GPUs that carry a cuda_rank must hold each rank from 0 to their
 * count less one exactly once: CUDA's fastest-first order among them.
 */
static int check_ranks(struct parser *p)
{
	const struct vd_system *sys = p->sys;
	size_t *holder = NULL, nranked = 0;
	int err = 0;

	for (size_t i = 0; i < sys->ngpus; i++)
		nranked += !!(sys->gpus[i].fields & VD_GPU_CUDA_RANK);
	if (!nranked)
		return 0;
	holder = malloc(nranked * sizeof(*holder));
	if (!holder)
		return error_set(VD_ENOMEM, "out of memory");
	for (size_t r = 0; r < nranked; r++)
		holder[r] = SIZE_MAX;
	enter_key(p, "gpus");
	for (size_t i = 0; i < sys->ngpus && !err; i++) {
		unsigned rank = sys->gpus[i].cuda_rank;

		if (!(sys->gpus[i].fields & VD_GPU_CUDA_RANK))
			continue;
		enter_index(p, i);
		enter_key(p, "cuda_rank");
		if (rank >= nranked)
			err = fail(p,
				   "%u is out of range: %zu GPU(s) have a cuda_rank, so the ranks "
				   "are 0 to %zu, each once",
				   rank, nranked, nranked - 1);
		else if (holder[rank] != SIZE_MAX)
			err = fail(p, "%u is already the cuda_rank of gpus[%zu]", rank,
				   holder[rank]);
		else
			holder[rank] = i;
		leave(p);
		leave(p);
	}
	leave(p);
	free(holder);
	return err;
}

static int parse_gpus(struct parser *p, json_t *gpus)
{
	size_t ngpus, nuuids;
	int err;

	err = check_array(p, "gpus", gpus, FIXTURE_MAX_GPUS);
	if (err)
		return err;
	ngpus = json_array_size(gpus);
	err = system_new(&p->sys, ngpus);
	if (err)
		return err;
	/* Room for every UUID, GPU and MIG, at most half full. */
	nuuids = ngpus;
	for (size_t i = 0; i < ngpus; i++) {
		json_t *mig = json_object_get(json_array_get(gpus, i), "mig");

		nuuids += json_is_array(mig) ? json_array_size(mig) : 0;
	}
	for (p->nuuids = 16; p->nuuids < 2 * nuuids; p->nuuids *= 2)
		;
	p->uuids = calloc(p->nuuids, sizeof(*p->uuids));
	if (!p->uuids)
		return error_set(VD_ENOMEM, "out of memory");
	enter_key(p, "gpus");
	for (size_t i = 0; i < ngpus && !err; i++) {
		enter_index(p, i);
		p->gpu = i;
		err = parse_gpu(p, &p->sys->gpus[i], json_array_get(gpus, i));
		leave(p);
	}
	leave(p);
	return err ? err : check_ranks(p);
}

static const char *const link_keys[] = { "a", "b", "level", NULL };

/* Reads one end of a link, a GPU's index. */
static int read_end(struct parser *p, const char *key, json_t *v, unsigned *out)
{
	long long n = 0;
	int err;

	err = read_int(p, key, v, 0, LLONG_MAX, &n);
	if (err)
		return err;
	if ((unsigned long long)n >= p->sys->ngpus) {
		enter_key(p, key);
		err = fail(p, "there is no GPU %lld: the fixture has %zu", n, p->sys->ngpus);
		leave(p);
		return err;
	}
	*out = (unsigned)n;
	return 0;
}

static int read_level(struct parser *p, const char *key, json_t *v, enum vd_link_level *out)
{
	int err = 0;

	enter_key(p, key);
	if (!json_is_string(v)) {
		err = fail(p, "expected a link level (nvlink, pix, pxb, phb, node or sys), got %s",
			   type_name(v));
		goto out;
	}
	for (int level = VD_LINK_NVLINK; level <= VD_LINK_SYS; level++) {
		if (!strcmp(json_string_value(v), vd_link_level_name(level))) {
			*out = level;
			goto out;
		}
	}
	err = fail(p, "expected a link level (nvlink, pix, pxb, phb, node or sys), got '%s'",
		   json_string_value(v));
out:
	leave(p);
	return err;
}

static int parse_link(struct parser *p, struct vd_link *link, json_t *obj)
{
	const char *key;
	json_t *v;
	int err = 0, have_a = 0, have_b = 0, have_level = 0;

	if (!json_is_object(obj))
		return fail(p, "expected an object, got %s", type_name(obj));
	json_object_foreach(obj, key, v)
	{
		if (!strcmp(key, "a")) {
			err = read_end(p, key, v, &link->a);
			have_a = 1;
		} else if (!strcmp(key, "b")) {
			err = read_end(p, key, v, &link->b);
			have_b = 1;
		} else if (!strcmp(key, "level")) {
			err = read_level(p, key, v, &link->level);
			have_level = 1;
		} else {
			err = check_unknown(p, key, link_keys);
		}
		if (err)
			return err;
	}
	if (!have_a)
		return fail(p, "missing required key 'a'");
	if (!have_b)
		return fail(p, "missing required key 'b'");
	if (!have_level)
		return fail(p, "missing required key 'level'");
	if (link->a == link->b)
		return fail_key(p, "b", "a link joins two GPUs, not GPU %u with itself", link->a);
	if (link->a > link->b) {
		unsigned t = link->a;

		link->a = link->b;
		link->b = t;
	}
	return 0;
}

static int parse_links(struct parser *p, json_t *links)
{
	struct vd_system *sys = p->sys;
	unsigned char *linked = NULL; /* a bit per pair of GPUs */
	size_t n;
	int err;

	err = check_array(p, "links", links, SIZE_MAX);
	if (err)
		return err;
	n = json_array_size(links);
	if (!n)
		return 0;
	sys->links = calloc(n, sizeof(*sys->links));
	linked = calloc(sys->ngpus * sys->ngpus / 8 + 1, 1);
	if (!sys->links || !linked) {
		free(linked);
		return error_set(VD_ENOMEM, "out of memory");
	}
	sys->nlinks = n;
	enter_key(p, "links");
	for (size_t i = 0; i < n && !err; i++) {
		struct vd_link *link = &sys->links[i];
		size_t bit;

		enter_index(p, i);
		err = parse_link(p, link, json_array_get(links, i));
		if (!err) {
			bit = (size_t)link->a * sys->ngpus + link->b;
			if (linked[bit / 8] & (1u << (bit % 8))) {
				size_t first = 0;

				while (sys->links[first].a != link->a ||
				       sys->links[first].b != link->b)
					first++;
				err = fail(p, "GPUs %u and %u are already linked by links[%zu]",
					   link->a, link->b, first);
			}
			linked[bit / 8] |= (unsigned char)(1u << (bit % 8));
		}
		leave(p);
	}
	leave(p);
	free(linked);
	return err;
}

static const char *const top_keys[] = {
	"driver_version", "cuda_driver_version", "gpus", "links", NULL,
};

static int parse_top(struct parser *p, json_t *root)
{
	json_t *gpus = NULL, *links = NULL, *driver = NULL, *cuda = NULL, *v;
	const char *key;
	long long n = 0;
	int err = 0;

	if (!json_is_object(root))
		return fail(p, "expected a JSON object with a 'gpus' array, got %s",
			    type_name(root));
	/* Unknown keys first; the rest once the GPUs, which links need, are read. */
	json_object_foreach(root, key, v)
	{
		if (!strcmp(key, "gpus"))
			gpus = v;
		else if (!strcmp(key, "links"))
			links = v;
		else if (!strcmp(key, "driver_version"))
			driver = v;
		else if (!strcmp(key, "cuda_driver_version"))
			cuda = v;
		else if ((err = check_unknown(p, key, top_keys)))
			return err;
	}
	if (!gpus)
		return fail(p, "missing required key 'gpus'");
	err = parse_gpus(p, gpus);
	if (!err && driver)
		err = read_string(p, "driver_version", driver, p->sys->driver_version,
				  sizeof(p->sys->driver_version), 0);
	if (!err && cuda) {
		err = read_int(p, "cuda_driver_version", cuda, 0, INT_MAX, &n);
		p->sys->cuda_driver_version = (int)n;
	}
	if (!err && links)
		err = parse_links(p, links);
	return err;
}

/* ---- Entry points ------------------------------------------------------ */

int fixture_parse(struct vd_system **out, const char *text, size_t len, const char *name)
{
	struct parser p = { 0 };
	json_error_t jerr;
	json_t *root = NULL;
	size_t line, col, blank = 0;
	int err;

	*out = NULL;
	p.text = text ? text : "";
	p.len = text ? len : 0;
	p.name = name ? name : "(fixture)";
	while (blank < p.len && is_blank(p.text[blank]))
		blank++;
	if (blank == p.len) {
		line_col(p.text, blank, &line, &col);
		return report(
			VD_EPARSE,
			"%s:%zu:%zu: empty fixture: expected a JSON object with a 'gpus' array",
			p.name, line, col);
	}
	root = json_loadb(p.text, p.len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!root) {
		if (json_error_code(&jerr) == json_error_out_of_memory)
			return error_set(VD_ENOMEM, "out of memory");
		if (jerr.line < 1)
			return report(VD_EPARSE, "%s: %s", p.name, jerr.text);
		return report(VD_EPARSE, "%s:%d:%d: %s", p.name, jerr.line,
			      jerr.column < 1 ? 1 : jerr.column, jerr.text);
	}
	err = parse_top(&p, root);
	json_decref(root);
	free(p.uuids);
	if (err) {
		vd_system_free(p.sys);
		return err;
	}
	*out = p.sys;
	return 0;
}

/* The message and code for a fixture file that cannot be read. */
static int read_failure(const char *path, int errnum)
{
	return report(errnum == ENOENT ? VD_ENOTFOUND :
		      errnum == ENOMEM ? VD_ENOMEM :
					 VD_EIO,
		      "cannot read fixture '%s': %s", path, strerror(errnum));
}

/* Reads a whole file, at most FIXTURE_MAX_BYTES of it, into *out (not terminated). */
static int read_file(char **out, size_t *len, const char *path)
{
	struct stat st;
	char *buf = NULL;
	size_t size = 0, used = 0;
	int fd, err = 0;

	*out = NULL;
	*len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return read_failure(path, errno);
	if (fstat(fd, &st) < 0) {
		err = read_failure(path, errno);
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		err = read_failure(path, EISDIR);
		goto out;
	}
	for (;;) {
		ssize_t n;

		if (used == size) {
			char *grown;

			if (size >= FIXTURE_MAX_BYTES) {
				err = report(VD_EIO, "cannot read fixture '%s': larger than %d MiB",
					     path, FIXTURE_MAX_BYTES >> 20);
				goto out;
			}
			size = size ? 2 * size : 64 * 1024;
			grown = realloc(buf, size);
			if (!grown) {
				err = error_set(VD_ENOMEM, "out of memory");
				goto out;
			}
			buf = grown;
		}
		n = read(fd, buf + used, size - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = read_failure(path, errno);
			goto out;
		}
		if (!n)
			break;
		used += (size_t)n;
	}
	*out = buf;
	*len = used;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return err;
}

int fixture_load(struct vd_system **out, const char *path)
{
	char *text = NULL;
	size_t len = 0;
	int err;

	*out = NULL;
	err = read_file(&text, &len, path);
	if (err)
		return err;
	err = fixture_parse(out, text, len, path);
	free(text);
	return err;
}

/* ---- The backends: state is the parsed snapshot, served as copies ------- */

static int fixture_open(void **state, const char *path)
{
	struct vd_system *sys = NULL;
	int err;

	*state = NULL;
	if (!path)
		return error_set(VD_EINVAL, "the fixture backend needs a file");
	err = fixture_load(&sys, path);
	if (err)
		return err;
	*state = sys;
	return 0;
}

static int demo_open(void **state, const char *path)
{
	struct vd_system *sys = NULL;
	int err;

	(void)path;
	*state = NULL;
	err = fixture_parse(&sys, demo_json, strlen(demo_json), "src/lib/demo.json");
	if (err)
		return err;
	*state = sys;
	return 0;
}

static int fixture_snapshot(struct vd_system **out, void *state)
{
	return system_copy(out, state);
}

static void fixture_close(void *state)
{
	vd_system_free(state);
}

const struct vd_backend_ops backend_fixture_ops = {
	.name = "fixture",
	.open = fixture_open,
	.snapshot = fixture_snapshot,
	.close = fixture_close,
};

const struct vd_backend_ops backend_demo_ops = {
	.name = "demo",
	.open = demo_open,
	.snapshot = fixture_snapshot,
	.close = fixture_close,
};
