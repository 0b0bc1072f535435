/*
 * doctor.c - why a program does not see the GPUs it should: the checks of
 * `visdev doctor` that are pure, over an environment, a shell start-up
 * file or a Python script given as text. Each finding says where, what,
 * and the fix.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define CVD "CUDA_VISIBLE_DEVICES"
#define CDO "CUDA_DEVICE_ORDER"

const char *vd_severity_name(enum vd_severity severity)
{
	static const char *const names[] = { "info", "warning", "error" };

	if ((unsigned)severity >= ARRAY_SIZE(names))
		return NULL;
	return names[severity];
}

void vd_findings_release(struct vd_findings *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->items[i].message);
		free(f->items[i].where);
		free(f->items[i].fix);
	}
	free(f->items);
	memset(f, 0, sizeof(*f));
}

int vd_findings_add(struct vd_findings *f, const char *id, enum vd_severity severity,
		    const char *where, const char *fix, const char *fmt, ...)
{
	struct vd_finding *it;
	va_list ap;
	int len;

	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 8;
		struct vd_finding *more = realloc(f->items, cap * sizeof(*more));

		if (!more)
			return error_set(VD_ENOMEM, "out of memory");
		f->items = more;
		f->cap = cap;
	}
	it = &f->items[f->n];
	memset(it, 0, sizeof(*it));
	it->id = id;
	it->severity = severity;
	va_start(ap, fmt);
	len = vasprintf(&it->message, fmt, ap);
	va_end(ap);
	it->where = strdup(where ? where : "");
	it->fix = strdup(fix ? fix : "");
	if (len < 0 || !it->where || !it->fix) {
		if (len >= 0)
			free(it->message);
		free(it->where);
		free(it->fix);
		return error_set(VD_ENOMEM, "out of memory");
	}
	f->n++;
	return 0;
}

/* The value of NAME in env, or NULL. */
static const char *env_get(char *const *env, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; env && env[i]; i++)
		if (!strncmp(env[i], name, len) && env[i][len] == '=')
			return env[i] + len + 1;
	return NULL;
}

/* The devices CUDA sees with the variable unset, in its order. */
static size_t devices_unset(const struct vd_system *sys, enum vd_order order)
{
	struct vd_resolution *res = NULL;
	size_t n = 0;

	if (vd_visible_resolve(&res, sys, NULL, order) == 0)
		n = res->ndevices;
	vd_resolution_free(res);
	return n;
}

/*
 * A value of CUDA_VISIBLE_DEVICES, as CUDA will read it on sys in order:
 * what it cuts off, what makes nothing visible, what the driver drops.
 */
static int check_value(struct vd_findings *f, const struct vd_system *sys, const char *value,
		       enum vd_order order, const char *where)
{
	const char *first = value + strspn(value, " \t");
	struct vd_resolution *res = NULL;
	size_t all = devices_unset(sys, order);
	char fix[160];
	int err;

	if (strpbrk(value, "'\""))
		return vd_findings_add(
			f, "visible-quotes", VD_SEVERITY_ERROR, where,
			"write the value without quotes: CUDA_VISIBLE_DEVICES=0,1",
			"CUDA_VISIBLE_DEVICES='%s' holds quote characters: CUDA reads them as part "
			"of the value, and sees no GPU",
			value);
	if (first != value && (!strncmp(first, "GPU-", 4) || !strncmp(first, "MIG-", 4)))
		return vd_findings_add(
			f, "visible-blank", VD_SEVERITY_ERROR, where,
			"remove the blank before the UUID",
			"CUDA_VISIBLE_DEVICES='%s' starts with a blank before a UUID: CUDA then "
			"reads it as ordinals, and sees no GPU",
			value);
	err = vd_visible_resolve(&res, sys, value, order);
	if (err)
		return err;
	snprintf(fix, sizeof(fix), "name GPUs 0 to %zu ('visdev list' shows them), or UUIDs",
		 all ? all - 1 : 0);
	if (!*value)
		err = vd_findings_add(
			f, "visible-empty", VD_SEVERITY_WARNING, where,
			"unset CUDA_VISIBLE_DEVICES to see every GPU, or name the ones to use",
			"CUDA_VISIBLE_DEVICES is empty: no GPU is visible, and programs run on the "
			"CPU");
	else if (res->duplicate)
		err = vd_findings_add(
			f, "visible-duplicate", VD_SEVERITY_ERROR, where, "name each GPU once",
			"CUDA_VISIBLE_DEVICES='%s' names one device twice (elements %zu and %zu): "
			"CUDA then sees no GPU at all",
			value, res->duplicate_first + 1, res->duplicate_position + 1);
	else if (res->stop == VD_STOP_OUT_OF_RANGE)
		err = vd_findings_add(
			f, "visible-out-of-range", VD_SEVERITY_ERROR, where, fix,
			"CUDA_VISIBLE_DEVICES='%s': element %zu ('%s') is past the last GPU, "
			"there being %zu; CUDA ignores it and all after it%s",
			value, res->stop_position + 1, res->stop_token, all,
			res->ndevices ? "" :
					", sees no GPU, and a program that asks for one fails "
					"with 'invalid device ordinal'");
	else if (res->stop == VD_STOP_NO_MATCH || res->stop == VD_STOP_AMBIGUOUS)
		err = vd_findings_add(
			f,
			res->stop == VD_STOP_NO_MATCH ? "visible-uuid-unknown" :
							"visible-uuid-ambiguous",
			VD_SEVERITY_ERROR, where,
			res->stop == VD_STOP_NO_MATCH ?
				"use a UUID this machine has ('visdev list' shows them)" :
				"write more of the UUID, enough to name one device",
			"CUDA_VISIBLE_DEVICES='%s': element %zu ('%s') %s; CUDA ignores it and "
			"all after it",
			value, res->stop_position + 1, res->stop_token,
			res->stop == VD_STOP_NO_MATCH ? "names no device here" :
							"names more than one device");
	else if (res->stop)
		err = vd_findings_add(
			f, "visible-cut", VD_SEVERITY_ERROR, where, fix,
			"CUDA_VISIBLE_DEVICES='%s': element %zu ('%s') is %s; CUDA ignores it "
			"and all after it",
			value, res->stop_position + 1, res->stop_token,
			res->stop == VD_STOP_NEGATIVE ? "negative" :
			res->stop == VD_STOP_EMPTY    ? "empty" :
			res->stop == VD_STOP_NOT_UUID ? "not a UUID, in a list of UUIDs" :
							"not a number");
	for (size_t i = 0; !err && i < res->ndropped; i++)
		if (res->dropped[i].position != VD_NO_POSITION)
			err = vd_findings_add(
				f, "visible-mig", VD_SEVERITY_WARNING, where,
				"name one MIG device per process (per GPU instance from driver "
				"R570), and start one process per device",
				"CUDA_VISIBLE_DEVICES='%s': element %zu names a device the driver "
				"does not enumerate beside the others (%s)",
				value, res->dropped[i].position + 1,
				vd_drop_reason_name(res->dropped[i].reason));
	vd_resolution_free(res);
	return err;
}

static int check_name(struct vd_findings *f, const char *name, const char *where)
{
	const char *meant = env_near_miss(name, NULL);
	char fix[128];

	if (!meant)
		return 0;
	snprintf(fix, sizeof(fix), "rename it %s", meant);
	return vd_findings_add(f, "name-near-miss", VD_SEVERITY_ERROR, where, fix,
			       "'%s' is set, but CUDA reads only '%s': this setting does nothing",
			       name, meant);
}

/* The order trap: fastest-first numbering on a server whose GPUs differ. */
static int check_order(struct vd_findings *f, const struct vd_system *sys, const char *order,
		       const char *value, const char *where)
{
	char text[512] = "";
	size_t len = 0;
	int mixed = 0;

	if (order && !strcmp(order, "PCI_BUS_ID"))
		return 0;
	for (size_t i = 1; i < sys->ngpus; i++)
		mixed |= strcmp(sys->gpus[i].name, sys->gpus[0].name) != 0;
	if (!mixed || (value && (!strncmp(value, "GPU-", 4) || !strncmp(value, "MIG-", 4))))
		return 0;
	if (!vd_system_fastest_known(sys))
		return vd_findings_add(
			f, "order-fastest-first", VD_SEVERITY_WARNING, where,
			"export CUDA_DEVICE_ORDER=PCI_BUS_ID",
			"CUDA_DEVICE_ORDER is unset on a server with more than one GPU model: "
			"CUDA numbers GPUs fastest first, not as nvidia-smi does");
	for (size_t r = 0; r < sys->ngpus && len < sizeof(text); r++)
		for (size_t g = 0; g < sys->ngpus; g++)
			if (sys->gpus[g].cuda_rank == (unsigned)r && len < sizeof(text))
				len += (size_t)snprintf(text + len, sizeof(text) - len,
							"%sordinal %zu is GPU %zu (%s)",
							r ? ", " : "", r, g, sys->gpus[g].name);
	return vd_findings_add(
		f, "order-fastest-first", VD_SEVERITY_WARNING, where,
		"export CUDA_DEVICE_ORDER=PCI_BUS_ID, so that ordinals count as nvidia-smi's do",
		"CUDA_DEVICE_ORDER is unset on a server with more than one GPU model: CUDA "
		"counts ordinals fastest first, not in nvidia-smi's order: %s",
		text);
}

/* How many elements a comma-separated list has. */
static size_t count_elements(const char *s)
{
	size_t n = *s ? 1 : 0;

	for (; *s; s++)
		n += *s == ',';
	return n;
}

/* NVIDIA_VISIBLE_DEVICES: what the container has, against what CUDA is told to use in it. */
static int check_container(struct vd_findings *f, const struct vd_system *sys, const char *nvd,
			   const char *value, const char *where)
{
	struct vd_container_view *v = NULL;
	unsigned long max = 0;
	int err;

	if (!nvd || !value || !*value || !strncmp(value, "GPU-", 4) || !strncmp(value, "MIG-", 4))
		return 0;
	err = vd_container_resolve(&v, sys, nvd);
	if (err)
		return err;
	for (const char *p = value; v->mode == VD_CONTAINER_LIST && *p;) {
		unsigned long o = strtoul(p, NULL, 10);

		max = o > max ? o : max;
		p += strcspn(p, ",");
		p += *p == ',';
	}
	if (v->mode == VD_CONTAINER_LIST && !v->refused && max >= v->ndevices)
		err = vd_findings_add(
			f, "container-disagree", VD_SEVERITY_ERROR, where,
			"inside the container, count GPUs from 0 among the ones it was given",
			"NVIDIA_VISIBLE_DEVICES='%s' gives a container %zu GPU%s, numbered 0 to %zu "
			"inside it, but CUDA_VISIBLE_DEVICES='%s' names %lu",
			nvd, v->ndevices, v->ndevices == 1 ? "" : "s",
			v->ndevices ? v->ndevices - 1 : 0, value, max);
	vd_container_view_free(v);
	return err;
}

/* Slurm's GPUs for the job against what CUDA is told. */
static int check_slurm(struct vd_findings *f, char *const *env, const char *value,
		       const char *where)
{
	const char *name = env_get(env, "SLURM_STEP_GPUS") ? "SLURM_STEP_GPUS" : "SLURM_JOB_GPUS";
	const char *gpus = env_get(env, name);

	if (!gpus || !*gpus)
		return 0;
	if (!value)
		return vd_findings_add(
			f, "slurm-unset", VD_SEVERITY_WARNING, where,
			"let Slurm set CUDA_VISIBLE_DEVICES (gres with ConstrainDevices), or "
			"run the job through 'visdev run'",
			"Slurm gave this job GPUs %s (%s), but CUDA_VISIBLE_DEVICES is unset: "
			"unless the node's cgroups hide the others, CUDA sees every GPU of the node",
			gpus, name);
	if (count_elements(gpus) != count_elements(value))
		return vd_findings_add(
			f, "slurm-count", VD_SEVERITY_WARNING, where,
			"leave CUDA_VISIBLE_DEVICES as Slurm set it",
			"Slurm gave this job %zu GPU%s (%s=%s), but CUDA_VISIBLE_DEVICES='%s' "
			"names %zu",
			count_elements(gpus), count_elements(gpus) == 1 ? "" : "s", name, gpus,
			value, count_elements(value));
	return 0;
}

int vd_doctor_env(struct vd_findings *out, const struct vd_system *sys, char *const *env,
		  const char *where)
{
	const char *value = env_get(env, CVD), *order_text = env_get(env, CDO);
	enum vd_order order = VD_ORDER_FASTEST;
	int err = 0;

	for (size_t i = 0; env && env[i] && !err; i++) {
		const char *eq = strchr(env[i], '=');
		char name[64];

		if (!eq || (size_t)(eq - env[i]) >= sizeof(name))
			continue;
		memcpy(name, env[i], (size_t)(eq - env[i]));
		name[eq - env[i]] = '\0';
		err = check_name(out, name, where);
	}
	if (!err && vd_order_parse(&order, order_text))
		err = vd_findings_add(out, "order-unknown", VD_SEVERITY_ERROR, where,
				      "export CUDA_DEVICE_ORDER=PCI_BUS_ID (or unset it)", "%s",
				      vd_error_last());
	if (!err && value)
		err = check_value(out, sys, value, order, where);
	if (!err)
		err = check_order(out, sys, order_text, value, where);
	if (!err)
		err = check_container(out, sys, env_get(env, "NVIDIA_VISIBLE_DEVICES"), value,
				      where);
	if (!err)
		err = check_slurm(out, env, value, where);
	return err;
}

/* ---- start-up files ------------------------------------------------------ */

/* A shell word's value: its quotes taken off; NULL when it expands something ($, `). */
static char *shell_value(const char *s, size_t len)
{
	char *v = malloc(len + 1), *w = v;
	char quote = 0;

	if (!v)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!quote && (c == '\'' || c == '"'))
			quote = c;
		else if (quote && c == quote)
			quote = 0;
		else if (quote != '\'' && (c == '$' || c == '`'))
			return free(v), NULL;
		else
			*w++ = c;
	}
	*w = '\0';
	return v;
}

/* The end of a shell word that starts at s (quotes kept together). */
static size_t word_len(const char *s, size_t max)
{
	size_t i = 0;
	char quote = 0;

	for (; i < max; i++) {
		if (quote) {
			quote = s[i] == quote ? 0 : quote;
			continue;
		}
		if (s[i] == '\'' || s[i] == '"')
			quote = s[i];
		else if (s[i] == ' ' || s[i] == '\t' || s[i] == ';' || s[i] == '#' || s[i] == '&')
			break;
	}
	return i;
}

/* One line of a start-up file (s, terminated): an assignment of the variable, or a misspelling. */
static int startup_line(struct vd_findings *out, const struct vd_system *sys, const char *s,
			const char *where)
{
	char name[64], *value;
	size_t n = 0, wl;
	int setenv_form = 0, err;
	const char *after;

	s += strspn(s, " \t");
	if (!strncmp(s, "export ", 7))
		s += 7;
	else if (!strncmp(s, "setenv ", 7))
		s += 7, setenv_form = 1;
	s += strspn(s, " \t");
	while (n + 1 < sizeof(name) && (isalnum((unsigned char)s[n]) || s[n] == '_'))
		n++;
	if (!n || (setenv_form ? (s[n] != ' ' && s[n] != '\t') : s[n] != '='))
		return 0;
	memcpy(name, s, n);
	name[n] = '\0';
	if (strcmp(name, CVD))
		return env_near_miss(name, NULL) ? check_name(out, name, where) : 0;
	s += n + 1;
	if (setenv_form)
		s += strspn(s, " \t");
	wl = word_len(s, strlen(s));
	/* "CUDA_VISIBLE_DEVICES=0 python x.py": the variable of one command, not the login's */
	after = s + wl + strspn(s + wl, " \t");
	if (!setenv_form && after != s + wl && *after && *after != '#' && *after != ';' &&
	    *after != '&')
		return 0;
	value = shell_value(s, wl);
	err = vd_findings_add(
		out, "startup-export", VD_SEVERITY_WARNING, where,
		"remove it, and choose GPUs per job: 'visdev run -- CMD' or "
		"'eval \"$(visdev pick)\"'",
		"%s=%.*s is set at every login: a value fixed in a start-up file applies to "
		"every job, long after the GPUs it names were free",
		CVD, (int)wl, s);
	if (!err && value)
		err = check_value(out, sys, value, VD_ORDER_FASTEST, where);
	free(value);
	return err;
}

int vd_doctor_startup(struct vd_findings *out, const struct vd_system *sys, const char *text,
		      size_t len, const char *path)
{
	size_t line = 1;
	int err = 0;

	for (const char *p = text, *end = text + len; p < end && !err; line++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char where[4096 + 32];

		if (memmem(p, l, "VISIBLE", 7) || memmem(p, l, "visible", 7) ||
		    memmem(p, l, "DEVICE", 6) || memmem(p, l, "device", 6)) {
			char *copy = strndup(p, l); /* a NUL in it ends the line early: no matter */

			if (!copy)
				return error_set(VD_ENOMEM, "out of memory");
			snprintf(where, sizeof(where), "%s:%zu", path, line);
			err = startup_line(out, sys, copy, where);
			free(copy);
		}
		p += l + 1;
	}
	return err;
}

/* ---- Python scripts -------------------------------------------------------- */

/* A string literal of the script: where its contents are in the text. */
struct literal {
	size_t start, end; /* contents: text[start .. end) */
};

/*
 * The script as code alone: comments blanked, the contents of string
 * literals replaced by '_' (line ends kept, so lines still count), and
 * where each literal is, so that a pattern is matched in code only and a
 * value read from the text.
 */
struct code {
	char *c; /* the masked text, NUL-terminated */
	size_t len;
	struct literal *lits;
	size_t nlits, caplits;
};

static int mask(struct code *k, const char *text, size_t len)
{
	size_t i = 0;

	k->c = malloc(len + 1);
	if (!k->c)
		return error_set(VD_ENOMEM, "out of memory");
	memcpy(k->c, text, len);
	k->c[len] = '\0';
	k->len = len;
	while (i < len) {
		char q = text[i];

		if (q == '#') {
			while (i < len && text[i] != '\n')
				k->c[i++] = ' ';
		} else if (q == '\'' || q == '"') {
			int triple = i + 2 < len && text[i + 1] == q && text[i + 2] == q;
			size_t open = triple ? 3 : 1, start = i + open, j = start;

			while (j < len) {
				if (text[j] == '\\' && j + 1 < len) {
					j += 2;
					continue;
				}
				if (!triple && text[j] == '\n')
					break; /* an unclosed string ends with its line */
				if (text[j] == q && (!triple || (j + 2 < len && text[j + 1] == q &&
								 text[j + 2] == q)))
					break;
				j++;
			}
			for (size_t m = start; m < j && m < len; m++)
				if (k->c[m] != '\n')
					k->c[m] = '_';
			if (k->nlits == k->caplits) {
				size_t cap = k->caplits ? 2 * k->caplits : 16;
				struct literal *more = realloc(k->lits, cap * sizeof(*more));

				if (!more)
					return error_set(VD_ENOMEM, "out of memory");
				k->lits = more;
				k->caplits = cap;
			}
			k->lits[k->nlits++] = (struct literal){ start, j < len ? j : len };
			i = j < len && text[j] == q ? j + open : j;
		} else {
			i++;
		}
	}
	return 0;
}

/* The literal whose contents start right after the quote at code offset at; NULL if none. */
static const struct literal *literal_at(const struct code *k, size_t at)
{
	for (size_t i = 0; i < k->nlits; i++)
		if (k->lits[i].start == at + 1 || k->lits[i].start == at + 3)
			return &k->lits[i];
	return NULL;
}

/* The literal that starts at or after the code offset at (blanks skipped), copied; NULL if none. */
static char *literal_after(const struct code *k, const char *text, size_t at, size_t *end)
{
	const struct literal *lit;
	size_t p = at;

	while (k->c[p] == ' ' || k->c[p] == '\t')
		p++;
	/* string prefixes: r"...", b'...' */
	while (isalpha((unsigned char)k->c[p]) &&
	       (k->c[p + 1] == '\'' || k->c[p + 1] == '"' || isalpha((unsigned char)k->c[p + 1])))
		p++;
	if (k->c[p] != '\'' && k->c[p] != '"')
		return NULL;
	lit = literal_at(k, p);
	if (!lit)
		return NULL;
	if (end) /* past the closing quote, or at the end of an unclosed string */
		*end = lit->end < k->len ? lit->end + 1 : k->len;
	return strndup(text + lit->start, lit->end - lit->start);
}

/* The line (from 1) of offset at. */
static size_t line_of(const char *text, size_t at)
{
	size_t line = 1;

	for (size_t i = 0; i < at; i++)
		line += text[i] == '\n';
	return line;
}

/* Whether the code at p is the word w, standing alone. */
static int word_at(const char *c, const char *start, const char *w)
{
	size_t n = strlen(w);

	return strncmp(c, w, n) == 0 &&
	       (c == start || !(isalnum((unsigned char)c[-1]) || c[-1] == '_' || c[-1] == '.')) &&
	       !(isalnum((unsigned char)c[n]) || c[n] == '_');
}

/* What the scan of a script knows so far. */
struct script {
	struct vd_findings *out;
	const struct vd_system *sys;
	const char *path, *text;
	struct code k;
	size_t torch_at, cuda_at; /* offsets + 1 of `import torch`, and of CUDA's start; 0 none */
	char *value;		  /* the value the script sets, NULL none (yet) */
	size_t value_line;
	enum vd_order order;
};

/* "train.py:12". */
static void where_at(char *buf, size_t n, const struct script *sc, size_t at)
{
	snprintf(buf, n, "%s:%zu", sc->path, line_of(sc->text, at));
}

/*
 * The script sets name to value (NULL: not a literal) at offset at; weak:
 * only when it is not set yet (setdefault), as env_value says it is not.
 */
static int assigned(struct script *sc, const char *name, const char *value, size_t at, int weak,
		    const char *env_value)
{
	char where[4200];
	int err = 0;

	where_at(where, sizeof(where), sc, at);
	if (env_near_miss(name, NULL))
		return check_name(sc->out, name, where);
	if (!strcmp(name, CDO) && value)
		vd_order_parse(&sc->order, value);
	if (strcmp(name, CVD))
		return 0;
	if (sc->cuda_at && sc->cuda_at - 1 < at)
		err = vd_findings_add(
			sc->out, "script-too-late", VD_SEVERITY_ERROR, where,
			"set it before anything touches CUDA: first thing in the script, or "
			"outside it ('visdev run -- python script.py')",
			"CUDA_VISIBLE_DEVICES is set after CUDA has started (line %zu): CUDA read the "
			"variable then, and this has no effect",
			line_of(sc->text, sc->cuda_at - 1));
	else if (sc->torch_at && sc->torch_at - 1 < at)
		err = vd_findings_add(
			sc->out, "script-after-import", VD_SEVERITY_WARNING, where,
			"set it before 'import torch'",
			"CUDA_VISIBLE_DEVICES is set after 'import torch' (line %zu): it works only "
			"because PyTorch starts CUDA lazily, and stops working as soon as anything "
			"imported starts it",
			line_of(sc->text, sc->torch_at - 1));
	if (!err && value)
		err = check_value(sc->out, sc->sys, value, sc->order, where);
	if (!err && value && (!sc->cuda_at || at < sc->cuda_at - 1) &&
	    !(weak && (sc->value || env_value))) {
		free(sc->value);
		sc->value = strdup(value);
		sc->value_line = line_of(sc->text, at);
		if (!sc->value)
			err = error_set(VD_ENOMEM, "out of memory");
	}
	return err;
}

/* Reads `os.environ[...] = ...`, setdefault, putenv and update at offset p of the code. */
static int scan_environ(struct script *sc, size_t p, const char *env_value)
{
	const char *c = sc->k.c;
	char *name = NULL, *value = NULL;
	size_t after = 0;
	int err = 0;

	if (!strncmp(c + p, "os.environ[", 11) || !strncmp(c + p, "environ[", 8)) {
		size_t q = p + (c[p] == 'o' ? 11 : 8);

		name = literal_after(&sc->k, sc->text, q, &after);
		if (name) {
			while (c[after] == ' ' || c[after] == ']')
				after++;
			if (c[after] == '=' && c[after + 1] != '=')
				value = literal_after(&sc->k, sc->text, after + 1, NULL);
			else
				goto out; /* read, not set */
		}
	} else if (!strncmp(c + p, "os.environ.setdefault(", 22) ||
		   !strncmp(c + p, "os.putenv(", 10)) {
		size_t q = p + (c[p + 3] == 'e' ? 22 : 10);

		name = literal_after(&sc->k, sc->text, q, &after);
		if (name) {
			while (c[after] == ' ')
				after++;
			if (c[after] == ',')
				value = literal_after(&sc->k, sc->text, after + 1, NULL);
		}
	} else if (!strncmp(c + p, "os.environ.update(", 18)) {
		/* update({"NAME": "v"}) or update(NAME="v") */
		size_t q = p + 18;

		while (c[q] == ' ' || c[q] == '{')
			q++;
		name = literal_after(&sc->k, sc->text, q, &after);
		if (name) {
			while (c[after] == ' ')
				after++;
			if (c[after] == ':')
				value = literal_after(&sc->k, sc->text, after + 1, NULL);
		} else {
			size_t n = 0;

			while (isalnum((unsigned char)c[q + n]) || c[q + n] == '_')
				n++;
			if (n && c[q + n] == '=' && (name = strndup(c + q, n)))
				value = literal_after(&sc->k, sc->text, q + n + 1, NULL);
		}
	}
	if (name)
		err = assigned(sc, name, value, p, !strncmp(c + p, "os.environ.setdefault(", 22),
			       env_value);
out:
	free(name);
	free(value);
	return err;
}

/* How many devices the script will see, and why; 0 when nothing is known to be visible. */
static size_t visible_count(const struct script *sc, const char *env_value, char *why, size_t n)
{
	struct vd_resolution *res = NULL;
	const char *value = sc->value ? sc->value : env_value;
	size_t count = 0;

	if (vd_visible_resolve(&res, sc->sys, value, sc->order) == 0)
		count = res->ndevices;
	vd_resolution_free(res);
	if (sc->value)
		snprintf(why, n, "CUDA_VISIBLE_DEVICES='%s', set at line %zu", sc->value,
			 sc->value_line);
	else if (env_value)
		snprintf(why, n, "CUDA_VISIBLE_DEVICES='%s' in the environment", env_value);
	else
		snprintf(why, n, "every GPU of this machine");
	return count;
}

/* A device number the script uses at offset at: past what it will see is an error. */
static int device_number(struct script *sc, const char *env_value, unsigned long number,
			 const char *as, size_t at)
{
	char where[4200], why[256], fix[128];
	size_t count = visible_count(sc, env_value, why, sizeof(why));

	if (number < count)
		return 0;
	where_at(where, sizeof(where), sc, at);
	if (count)
		snprintf(fix, sizeof(fix),
			 "number devices within the visible ones, from 0: at most %zu here",
			 count - 1);
	else
		snprintf(fix, sizeof(fix), "make GPUs visible, or run on the CPU");
	return vd_findings_add(
		sc->out, "script-device-ordinal", VD_SEVERITY_ERROR, where, fix,
		"%s, but the script will see %zu GPU%s (%s): CUDA numbers the visible GPUs from "
		"0, and this fails with 'invalid device ordinal'",
		as, count, count == 1 ? "" : "s", why);
}

/* Device numbers: device_ids=[...], set_device(N), and "cuda:N" in any string. */
static int scan_devices(struct script *sc, const char *env_value)
{
	const char *c = sc->k.c;
	int err = 0;

	for (size_t i = 0; i < sc->k.nlits && !err; i++) {
		const struct literal *l = &sc->k.lits[i];
		char *end, as[64];
		unsigned long n;

		if (l->end - l->start < 6 || strncmp(sc->text + l->start, "cuda:", 5) ||
		    !isdigit((unsigned char)sc->text[l->start + 5]))
			continue;
		n = strtoul(sc->text + l->start + 5, &end, 10);
		if (end != sc->text + l->end)
			continue;
		snprintf(as, sizeof(as), "'cuda:%lu'", n);
		err = device_number(sc, env_value, n, as, l->start);
	}
	for (const char *p = c; !err && (p = strstr(p, "device_ids")); p += 10) {
		const char *q = p + 10;
		unsigned long max = 0;
		int any = 0;
		char as[64];

		q += strspn(q, " ");
		if (*q++ != '=')
			continue;
		q += strspn(q, " ");
		if (*q != '[' && *q != '(')
			continue;
		for (q++; *q && *q != ']' && *q != ')';) {
			char *end;
			unsigned long v = strtoul(q, &end, 10);

			if (end == q) {
				any = 0; /* not a list of numbers */
				break;
			}
			any = 1;
			max = v > max ? v : max;
			q = end + strspn(end, " ,");
		}
		snprintf(as, sizeof(as), "device_ids names device %lu", max);
		if (any)
			err = device_number(sc, env_value, max, as, (size_t)(p - c));
	}
	for (const char *p = c; !err && (p = strstr(p, "set_device(")); p += 11) {
		char *end, as[64];
		unsigned long v = strtoul(p + 11, &end, 10);

		if (end == p + 11 || *end != ')')
			continue;
		snprintf(as, sizeof(as), "set_device(%lu)", v);
		err = device_number(sc, env_value, v, as, (size_t)(p - c));
	}
	return err;
}

/* Where CUDA starts: a torch.cuda call, .cuda(, or .to() of a "cuda" string. */
static size_t cuda_start(const struct script *sc)
{
	const char *c = sc->k.c;

	for (const char *p = c; *p; p++) {
		if (!strncmp(p, "torch.cuda.", 11)) {
			const char *q = p + 11;

			while (isalnum((unsigned char)*q) || *q == '_')
				q++;
			if (*q == '(')
				return (size_t)(p - c) + 1;
		}
		if (!strncmp(p, ".cuda(", 6))
			return (size_t)(p - c) + 1;
		if (!strncmp(p, ".to(", 4)) {
			char *s = literal_after(&sc->k, sc->text, (size_t)(p - c) + 4, NULL);
			int cuda = s && !strncmp(s, "cuda", 4);

			free(s);
			if (cuda)
				return (size_t)(p - c) + 1;
		}
	}
	return 0;
}

/* Whether text (len bytes, no NUL among them) is valid UTF-8. */
static int is_utf8(const char *text, size_t len)
{
	char *src = strndup(text, len), *copy = malloc(len + 1);
	int ok = 1;

	if (src && copy)
		ok = vd_utf8_copy(copy, src, len + 1) == len && !memcmp(copy, text, len);
	free(src);
	free(copy);
	return ok;
}

int vd_doctor_script(struct vd_findings *out, const struct vd_system *sys, const char *text,
		     size_t len, const char *path, const char *env_value, const char *env_order)
{
	struct script sc = { out, sys, path, text, { 0 }, 0, 0, NULL, 0, VD_ORDER_FASTEST };
	size_t plen = strlen(path);
	int err = 0;

	if (memchr(text, '\0', len))
		return vd_findings_add(out, "script-not-text", VD_SEVERITY_WARNING, path,
				       "give --script a Python file",
				       "'%s' is not text (it has NUL bytes): not read", path);
	if (!is_utf8(text, len))
		return vd_findings_add(out, "script-not-utf8", VD_SEVERITY_WARNING, path,
				       "save it as UTF-8, as Python 3 expects",
				       "'%s' is not UTF-8: not read", path);
	if (!(plen > 3 && !strcmp(path + plen - 3, ".py")) &&
	    !(len > 2 && !strncmp(text, "#!", 2) &&
	      memmem(text,
		     memchr(text, '\n', len) ?
			     (size_t)((const char *)memchr(text, '\n', len) - text) :
			     len,
		     "python", 6)))
		return vd_findings_add(
			out, "script-not-python", VD_SEVERITY_INFO, path,
			"give --script a Python file (.py, or #! naming python)",
			"'%s' does not look like Python (no .py, no python #!): not read", path);
	vd_order_parse(&sc.order, env_order);
	err = mask(&sc.k, text, len);
	for (const char *p = sc.k.c; !err && *p; p++) {
		if ((word_at(p, sc.k.c, "import") && p[6] == ' ' &&
		     word_at(p + 7 + strspn(p + 7, " "), sc.k.c, "torch")) ||
		    (word_at(p, sc.k.c, "from") && p[4] == ' ' &&
		     word_at(p + 5 + strspn(p + 5, " "), sc.k.c, "torch")))
			sc.torch_at = sc.torch_at ? sc.torch_at : (size_t)(p - sc.k.c) + 1;
	}
	if (!err)
		sc.cuda_at = cuda_start(&sc);
	for (const char *p = sc.k.c; !err && *p; p++)
		if ((p == sc.k.c ||
		     !(isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '.')) &&
		    (!strncmp(p, "os.", 3) || !strncmp(p, "environ[", 8)))
			err = scan_environ(&sc, (size_t)(p - sc.k.c), env_value);
	if (!err)
		err = scan_devices(&sc, env_value);
	free(sc.k.c);
	free(sc.k.lits);
	free(sc.value);
	return err;
}
