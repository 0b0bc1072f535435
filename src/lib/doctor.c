/*
 * doctor.c - why a program does not see the GPUs it should: the checks of
 * `visdev doctor` that are pure, over an environment, a shell start-up
 * file or a Python script given as text. Each finding says where, what,
 * and the fix.
 */
#include <ctype.h>
#include <errno.h>
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

	if (array_grow(&f->items, &f->cap, f->n, sizeof(*f->items), 8))
		return VD_ENOMEM;
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
	enum env_flaw flaw = env_value_flaw(value);
	struct vd_resolution *res = NULL;
	size_t all = devices_unset(sys, order);
	char fix[160];
	int err;

	/* a blank after a comma in UUIDs: the engine says where CUDA stops, below */
	if (flaw == ENV_FLAW_QUOTES)
		return vd_findings_add(
			f, "visible-quotes", VD_SEVERITY_ERROR, where,
			"write the value without quotes: CUDA_VISIBLE_DEVICES=0,1",
			"CUDA_VISIBLE_DEVICES='%s' holds quote characters: CUDA reads them as part "
			"of the value, and sees no GPU",
			value);
	if (flaw == ENV_FLAW_BLANK_BEFORE_UUID)
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
			"CUDA_DEVICE_ORDER is %s on a server with more than one GPU model: "
			"CUDA numbers GPUs fastest first, not as nvidia-smi does",
			order ? order : "unset");
	for (size_t r = 0; r < sys->ngpus && len < sizeof(text); r++)
		for (size_t g = 0; g < sys->ngpus; g++)
			if (sys->gpus[g].cuda_rank == (unsigned)r && len < sizeof(text))
				len += (size_t)snprintf(text + len, sizeof(text) - len,
							"%sordinal %zu is GPU %zu (%s)",
							r ? ", " : "", r, g, sys->gpus[g].name);
	return vd_findings_add(
		f, "order-fastest-first", VD_SEVERITY_WARNING, where,
		"export CUDA_DEVICE_ORDER=PCI_BUS_ID, so that ordinals count as nvidia-smi's do",
		"CUDA_DEVICE_ORDER is %s on a server with more than one GPU model: CUDA "
		"counts ordinals fastest first, not in nvidia-smi's order: %s",
		order ? order : "unset", text);
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

/* Whether a list of ordinals is 0, 1, ..., n-1: Slurm's own renumbered under cgroups. */
static int counts_from_zero(const char *s)
{
	unsigned long want = 0;

	for (const char *p = s; *p; want++) {
		char *end;

		if (strtoul(p, &end, 10) != want || end == p || (*end && *end != ','))
			return 0;
		p = *end ? end + 1 : end;
	}
	return 1;
}

/* Slurm's GPUs for the job against what CUDA is told, and how it counts them. */
static int check_slurm(struct vd_findings *f, const struct vd_system *sys, char *const *env,
		       const char *value, const char *order, const char *where)
{
	const char *name = env_get(env, "SLURM_STEP_GPUS") ? "SLURM_STEP_GPUS" : "SLURM_JOB_GPUS";
	const char *gpus = env_get(env, name);
	int mixed = 0, err;

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
	/* the same GPUs, or Slurm's renumbering 0..n-1 under cgroups: anything else is not */
	if (strcmp(gpus, value) && !counts_from_zero(value)) {
		err = vd_findings_add(
			f, "slurm-disagree", VD_SEVERITY_WARNING, where,
			"leave CUDA_VISIBLE_DEVICES as Slurm set it",
			"Slurm gave this job GPUs %s (%s), but CUDA_VISIBLE_DEVICES='%s' "
			"names others",
			gpus, name, value);
		if (err)
			return err;
	}
	/* Slurm numbers GPUs as gres.conf lists them (by PCI bus), CUDA fastest first */
	for (size_t i = 1; sys && i < sys->ngpus; i++)
		mixed |= strcmp(sys->gpus[i].name, sys->gpus[0].name) != 0;
	if (mixed && (!order || strcmp(order, "PCI_BUS_ID")) && strncmp(value, "GPU-", 4) &&
	    strncmp(value, "MIG-", 4))
		return vd_findings_add(
			f, "slurm-order", VD_SEVERITY_ERROR, where,
			"export CUDA_DEVICE_ORDER=PCI_BUS_ID in the job (visdev queue --slurm does)",
			"in a Slurm job on a node with more than one GPU model, CUDA_DEVICE_ORDER is "
			"%s: Slurm's CUDA_VISIBLE_DEVICES=%s counts GPUs in the node's order, CUDA "
			"fastest first, so the job may run on GPUs Slurm gave another",
			order ? order : "unset", value);
	return 0;
}

int vd_doctor_env(struct vd_findings *out, const struct vd_system *sys, char *const *env,
		  const char *where)
{
	const char *value = env_get(env, CVD), *order_text = env_get(env, CDO);
	enum vd_order order = VD_ORDER_FASTEST;
	int err = 0;

	for (size_t i = 0; env && env[i] && !err; i++) {
		char name[64];

		if (env_split(name, sizeof(name), env[i]))
			err = check_name(out, name, where);
	}
	if (!err && vd_order_parse(&order, order_text))
		err = vd_findings_add(out, "order-unknown", VD_SEVERITY_ERROR, where,
				      "export CUDA_DEVICE_ORDER=PCI_BUS_ID (or unset it)", "%s",
				      vd_error_last());
	if (!err && value)
		err = check_value(out, sys, value, order, where);
	if (!err && (!order_text || !vd_order_parse(&order, order_text)))
		err = check_order(out, sys, order_text, value, where);
	if (!err)
		err = check_container(out, sys, env_get(env, "NVIDIA_VISIBLE_DEVICES"), value,
				      where);
	if (!err)
		err = check_slurm(out, sys, env, value, order_text, where);
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

/* The length of the shell word at s (quotes kept together), up to a blank or an operator. */
static size_t word_len(const char *s)
{
	size_t i = 0;
	char quote = 0;

	for (; s[i]; i++) {
		if (quote) {
			quote = s[i] == quote ? 0 : quote;
			continue;
		}
		if (s[i] == '\'' || s[i] == '"')
			quote = s[i];
		else if (strchr(" \t;&|#()", s[i]))
			break;
	}
	return i;
}

/* The NAME of a NAME=value word, into name; 0 when the word is not an assignment. */
static size_t assignment(char *name, size_t n, const char *w, size_t len)
{
	size_t k = 0;

	while (k < len && k + 1 < n && (isalnum((unsigned char)w[k]) || w[k] == '_'))
		k++;
	if (!k || isdigit((unsigned char)w[0]) || k >= len || w[k] != '=')
		return 0;
	memcpy(name, w, k);
	name[k] = '\0';
	return k;
}

/* NAME=value set at every login: said, and the value checked. */
static int startup_set(struct vd_findings *out, const struct vd_system *sys, const char *name,
		       const char *value, size_t len, const char *where)
{
	char *v;
	int err;

	if (strcmp(name, CVD))
		return env_near_miss(name, NULL) ? check_name(out, name, where) : 0;
	v = shell_value(value, len);
	err = vd_findings_add(out, "startup-export", VD_SEVERITY_WARNING, where,
			      "remove it, and choose GPUs per job: 'visdev run -- CMD' or "
			      "'eval \"$(visdev pick)\"'",
			      "%s=%.*s is set at every login: a value fixed in a start-up file "
			      "applies to every job, long after the GPUs it names were free",
			      CVD, (int)len, value);
	if (!err && v)
		err = check_value(out, sys, v, VD_ORDER_FASTEST, where);
	free(v);
	return err;
}

/*
 * One simple command of a start-up file: `export A=1 B=2`, `declare -x A=1`,
 * `setenv A 1`, or plain assignments; not `A=1 command` (the command's own).
 */
static int startup_command(struct vd_findings *out, const struct vd_system *sys, const char *s,
			   const char *where)
{
	static const char *const keywords[] = { "then", "do", "else", "{", "!" };
	char name[64];
	int exported = 0, err = 0;
	size_t wl;

	s += strspn(s, " \t");
	for (size_t k = 0; k < ARRAY_SIZE(keywords); k++) {
		size_t kl = strlen(keywords[k]);

		if (!strncmp(s, keywords[k], kl) && (s[kl] == ' ' || s[kl] == '\t')) {
			s += kl + strspn(s + kl, " \t");
			k = (size_t)-1; /* `then {`: again */
		}
	}
	if (!strncmp(s, "setenv", 6) && (s[6] == ' ' || s[6] == '\t')) {
		s += 6 + strspn(s + 6, " \t");
		wl = word_len(s);
		if (!wl || wl >= sizeof(name))
			return 0;
		memcpy(name, s, wl);
		name[wl] = '\0';
		s += wl + strspn(s + wl, " \t");
		return startup_set(out, sys, name, s, word_len(s), where);
	}
	if (!strncmp(s, "export", 6) && (s[6] == ' ' || s[6] == '\t')) {
		s += 6;
		exported = 1;
	} else if ((!strncmp(s, "declare", 7) || !strncmp(s, "typeset", 7)) &&
		   (s[7] == ' ' || s[7] == '\t')) {
		s += 7;
		exported = 1;
	}
	for (;;) {
		size_t nl;

		s += strspn(s, " \t");
		wl = word_len(s);
		if (!wl)
			return err;
		nl = assignment(name, sizeof(name), s, wl);
		if (!nl) {
			/* `declare -x`'s options are words too; `A=1 cmd`: the command's own */
			if (exported && s[0] == '-') {
				s += wl;
				continue;
			}
			return err;
		}
		/* a plain assignment followed by a command word is that command's */
		if (!exported) {
			const char *next = s + wl + strspn(s + wl, " \t");
			size_t nwl = word_len(next);
			char other[64];

			if (nwl && !assignment(other, sizeof(other), next, nwl))
				return err;
		}
		err = startup_set(out, sys, name, s + nl + 1, wl - nl - 1, where);
		if (err)
			return err;
		s += wl;
	}
}

/* One line: its simple commands, split at ; && || | (outside quotes), a comment cut off. */
static int startup_line(struct vd_findings *out, const struct vd_system *sys, char *line,
			const char *where)
{
	char quote = 0, *start = line;
	int err = 0;

	for (char *p = line;; p++) {
		char c = *p;

		if (quote && c) {
			quote = c == quote ? 0 : quote;
			continue;
		}
		if (c == '\'' || c == '"') {
			quote = c;
			continue;
		}
		if (c == '#' && (p == line || p[-1] == ' ' || p[-1] == '\t' || p[-1] == ';'))
			c = *p = '\0';
		if (!c || c == ';' || c == '&' || c == '|') {
			*p = '\0';
			err = startup_command(out, sys, start, where);
			if (err || !c)
				return err;
			start = p + 1;
		}
	}
}

int vd_doctor_startup(struct vd_findings *out, const struct vd_system *sys, const char *text,
		      size_t len, const char *path)
{
	size_t line = 1;
	int err = 0;

	for (const char *p = text, *end = text + len; p < end && !err; line++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);

		/* a line ending "\r\n" (a file written on Windows): the \r is no part of it */
		if (l && p[l - 1] == '\r')
			l--;
		if (memmem(p, l, "=", 1) || memmem(p, l, "setenv", 6)) {
			/* a NUL in the line ends it early: no matter */
			char *copy = strndup(p, l), where[4096 + 32];

			if (!copy)
				return error_set(VD_ENOMEM, "out of memory");
			if (strcasestr(copy, "visible") || strcasestr(copy, "device")) {
				snprintf(where, sizeof(where), "%s:%zu", path, line);
				err = startup_line(out, sys, copy, where);
			}
			free(copy);
		}
		p = nl ? nl + 1 : end;
	}
	return err;
}

/* ---- Python scripts -------------------------------------------------------- */

/* A string literal of the script. */
struct literal {
	size_t quote;	   /* where its opening quote is */
	size_t start, end; /* its contents: text[start .. end) */
	size_t close;	   /* just past its closing quote(s) */
	int bytes, format; /* b"...", f"...": no value for the variable, no device */
};

/*
 * The script as code alone: comments blanked, the contents of string
 * literals replaced by '_' (line ends kept, so lines still count), where
 * each literal is, and where each line starts: a pattern is matched in
 * code only, and a value read from the text.
 */
struct code {
	char *c; /* the masked text, NUL-terminated */
	size_t len;
	struct literal *lits; /* in order */
	size_t nlits, caplits;
	size_t *lines; /* offsets of line starts */
	size_t nlines;
};

static int is_ident(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* The prefix letters before a quote at i (r, b, f, u, in any case and order): which. */
static void prefix(struct literal *l, const char *text, size_t i)
{
	size_t p = i;

	while (p > 0 && strchr("rRbBfFuU", text[p - 1]) && i - p < 3)
		p--;
	if (p > 0 && is_ident(text[p - 1]))
		return; /* the end of a name, not a prefix */
	for (; p < i; p++) {
		l->bytes |= text[p] == 'b' || text[p] == 'B';
		l->format |= text[p] == 'f' || text[p] == 'F';
	}
}

static int mask(struct code *k, const char *text, size_t len)
{
	size_t i = 0, n = 1;

	k->c = malloc(len + 1);
	for (size_t j = 0; j < len; j++)
		n += text[j] == '\n';
	k->lines = malloc(n * sizeof(*k->lines));
	if (!k->c || !k->lines)
		return error_set(VD_ENOMEM, "out of memory");
	k->lines[k->nlines++] = 0;
	for (size_t j = 0; j < len; j++)
		if (text[j] == '\n')
			k->lines[k->nlines++] = j + 1;
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
			struct literal l = { i, start, 0, 0, 0, 0 };

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
			if (j > len)
				j = len;
			for (size_t m = start; m < j; m++)
				if (k->c[m] != '\n')
					k->c[m] = '_';
			l.end = j;
			l.close = j < len && text[j] == q ? j + open : j;
			prefix(&l, text, i);
			if (array_grow(&k->lits, &k->caplits, k->nlits, sizeof(*k->lits), 16))
				return VD_ENOMEM;
			k->lits[k->nlits++] = l;
			i = l.close;
		} else {
			i++;
		}
	}
	return 0;
}

/* The literal whose opening quote is at offset at, by binary search; NULL if none. */
static const struct literal *literal_at(const struct code *k, size_t at)
{
	size_t lo = 0, hi = k->nlits;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->lits[mid].quote == at)
			return &k->lits[mid];
		if (k->lits[mid].quote < at)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Offset p past any blank, line ends included. */
static size_t skip_space(const struct code *k, size_t p)
{
	while (p < k->len && isspace((unsigned char)k->c[p]))
		p++;
	return p;
}

/* The literal that starts at offset at (blanks and prefix letters skipped); NULL if none. */
static const struct literal *literal_after(const struct code *k, size_t at)
{
	size_t p = skip_space(k, at);

	while (p < k->len && strchr("rRbBfFuU", k->c[p]) && p + 1 < k->len &&
	       (k->c[p + 1] == '\'' || k->c[p + 1] == '"' || strchr("rRbBfFuU", k->c[p + 1])))
		p++;
	return p < k->len ? literal_at(k, p) : NULL;
}

/* A literal's contents, copied. */
static char *contents(const char *text, const struct literal *l)
{
	return strndup(text + l->start, l->end - l->start);
}

/*
 * The value at offset at when it is a plain string literal standing alone
 * (not ",".join(...), not "0," + x, not an f-string), copied; else NULL.
 */
static char *value_after(const struct code *k, const char *text, size_t at)
{
	const struct literal *l = literal_after(k, at);
	size_t q;

	if (!l || l->bytes || l->format)
		return NULL;
	q = l->close;
	while (q < k->len && (k->c[q] == ' ' || k->c[q] == '\t'))
		q++;
	if (q < k->len && !strchr(",)}];\r\n", k->c[q]))
		return NULL;
	return contents(text, l);
}

/* The line (from 1) of offset at, by binary search. */
static size_t line_of(const struct code *k, size_t at)
{
	size_t lo = 0, hi = k->nlines;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->lines[mid] <= at)
			lo = mid;
		else
			hi = mid;
	}
	return lo + 1;
}

/* Whether the code at c is the word w, standing alone (not a part of a longer name). */
static int word_at(const char *c, const char *start, const char *w)
{
	size_t n = strlen(w);

	return strncmp(c, w, n) == 0 && (c == start || !(is_ident(c[-1]) || c[-1] == '.')) &&
	       !is_ident(c[n]);
}

#define TORCH_NAMES 8

/* What the scan of a script knows so far. */
struct script {
	struct vd_findings *out;
	const struct vd_system *sys;
	const char *path, *text;
	struct code k;
	size_t torch_at, cuda_at; /* offsets + 1 of `import torch`, and of CUDA's start; 0 none */
	char torch[TORCH_NAMES][64]; /* what torch is called: "torch", its aliases */
	size_t ntorch;
	char *value;	 /* the value the script sets, NULL none (yet) */
	int value_known; /* 0: set to something not a literal: how many GPUs is unknown */
	size_t value_line;
	enum vd_order order;
};

/* "train.py:12". */
static void where_at(char *buf, size_t n, const struct script *sc, size_t at)
{
	snprintf(buf, n, "%s:%zu", sc->path, line_of(&sc->k, at));
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
			line_of(&sc->k, sc->cuda_at - 1));
	else if (sc->torch_at && sc->torch_at - 1 < at)
		err = vd_findings_add(
			sc->out, "script-after-import", VD_SEVERITY_WARNING, where,
			"set it before 'import torch'",
			"CUDA_VISIBLE_DEVICES is set after 'import torch' (line %zu): it works only "
			"because PyTorch starts CUDA lazily, and stops working as soon as anything "
			"imported starts it",
			line_of(&sc->k, sc->torch_at - 1));
	if (!err && value)
		err = check_value(sc->out, sc->sys, value, sc->order, where);
	if (err || (sc->cuda_at && at >= sc->cuda_at - 1) || (weak && (sc->value || env_value)))
		return err;
	free(sc->value);
	sc->value = value ? strdup(value) : NULL;
	sc->value_known = value != NULL;
	sc->value_line = line_of(&sc->k, at);
	if (value && !sc->value)
		err = error_set(VD_ENOMEM, "out of memory");
	return err;
}

/* Past the item at p of a call or a dict: after its ',' (0 at the closing bracket or the end). */
static size_t next_item(const struct code *k, size_t p)
{
	int depth = 0;

	for (; p < k->len; p++) {
		char c = k->c[p];

		if (c == '(' || c == '[' || c == '{')
			depth++;
		else if ((c == ')' || c == ']' || c == '}') && depth-- == 0)
			return 0;
		else if (c == ',' && depth == 0)
			return p + 1;
	}
	return 0;
}

/* os.environ.update({"A": "v", ...}) or update(A="v", ...): every pair. */
static int scan_update(struct script *sc, size_t p, size_t at, const char *env_value)
{
	const char *c = sc->k.c;
	int dict, err = 0;

	p = skip_space(&sc->k, p);
	dict = c[p] == '{';
	p += dict;
	while (!err && p && p < sc->k.len) {
		char *name = NULL, *value = NULL;

		p = skip_space(&sc->k, p);
		if (dict) {
			const struct literal *l = literal_after(&sc->k, p);

			if (!l)
				break;
			name = contents(sc->text, l);
			p = skip_space(&sc->k, l->close);
			if (c[p] != ':') {
				free(name);
				break;
			}
			value = value_after(&sc->k, sc->text, p + 1);
		} else {
			size_t n = 0;

			while (is_ident(c[p + n]))
				n++;
			if (!n || c[skip_space(&sc->k, p + n)] != '=')
				break;
			name = strndup(c + p, n);
			value = value_after(&sc->k, sc->text, skip_space(&sc->k, p + n) + 1);
		}
		if (name)
			err = assigned(sc, name, value, at, 0, env_value);
		free(name);
		free(value);
		p = next_item(&sc->k, p);
	}
	return err;
}

/* Reads `os.environ[...] = ...`, setdefault, putenv and update at offset p of the code. */
static int scan_environ(struct script *sc, size_t p, const char *env_value)
{
	const char *c = sc->k.c;
	const struct literal *l;
	char *name = NULL, *value = NULL;
	int weak = 0, err = 0;

	if (!strncmp(c + p, "os.environ[", 11) || !strncmp(c + p, "environ[", 8)) {
		size_t q;

		l = literal_after(&sc->k, p + (c[p] == 'o' ? 11 : 8));
		if (!l)
			return 0;
		q = skip_space(&sc->k, l->close);
		if (c[q] != ']')
			return 0;
		q = skip_space(&sc->k, q + 1);
		if (c[q] != '=' || c[q + 1] == '=')
			return 0; /* read, not set */
		name = contents(sc->text, l);
		value = value_after(&sc->k, sc->text, q + 1);
	} else if (!strncmp(c + p, "os.environ.setdefault(", 22) ||
		   !strncmp(c + p, "os.putenv(", 10)) {
		size_t q;

		weak = c[p + 3] == 'e';
		l = literal_after(&sc->k, p + (weak ? 22 : 10));
		if (!l)
			return 0;
		q = skip_space(&sc->k, l->close);
		name = contents(sc->text, l);
		if (c[q] == ',')
			value = value_after(&sc->k, sc->text, q + 1);
	} else if (!strncmp(c + p, "os.environ.update(", 18)) {
		return scan_update(sc, p + 18, p, env_value);
	} else {
		return 0;
	}
	if (name)
		err = assigned(sc, name, value, p, weak, env_value);
	free(name);
	free(value);
	return err;
}

/* How many devices the script will see, and why; SIZE_MAX when that is not known. */
static size_t visible_count(const struct script *sc, const char *env_value, char *why, size_t n)
{
	struct vd_resolution *res = NULL;
	const char *value = sc->value ? sc->value : env_value;
	size_t count = 0;

	if (sc->value_line && !sc->value_known)
		return SIZE_MAX;
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

	if (count == SIZE_MAX || number < count)
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
		"%s, but the script will see %zu GPU%s (%s): CUDA numbers the visible "
		"GPUs from 0, and this fails with 'invalid device ordinal'",
		as, count, count == 1 ? "" : "s", why);
}

/* A whole number at s, at most a million; -1 if none. */
static long small_number(const char *s, char **end)
{
	unsigned long v;

	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoul(s, end, 10);
	return errno || v > 1000000 ? -1 : (long)v;
}

/* Device numbers: device_ids=[...], set_device(N), and "cuda:N" in any string. */
static int scan_devices(struct script *sc, const char *env_value)
{
	const char *c = sc->k.c;
	int err = 0;

	for (size_t i = 0; i < sc->k.nlits && !err; i++) {
		const struct literal *l = &sc->k.lits[i];
		char *end, as[64];
		long n;

		if (l->bytes || l->end - l->start < 6 || strncmp(sc->text + l->start, "cuda:", 5))
			continue;
		n = small_number(sc->text + l->start + 5, &end);
		if (n < 0 || end != sc->text + l->end)
			continue;
		snprintf(as, sizeof(as), "'cuda:%ld'", n);
		err = device_number(sc, env_value, (unsigned long)n, as, l->start);
	}
	for (const char *p = c; !err && (p = strstr(p, "device_ids")); p += 10) {
		const char *q = p + 10;
		long max = -1;
		char as[64];

		if (!word_at(p, c, "device_ids"))
			continue;
		q += strspn(q, " \t");
		if (*q++ != '=')
			continue;
		q += strspn(q, " \t");
		if (*q != '[' && *q != '(')
			continue;
		for (q++; *q && *q != ']' && *q != ')';) {
			char *end;
			long v;

			q += strspn(q, " \t\r\n");
			v = small_number(q, &end);
			if (v < 0) {
				max = -1; /* not a list of numbers */
				break;
			}
			max = v > max ? v : max;
			q = end + strspn(end, " ,\t\r\n");
		}
		snprintf(as, sizeof(as), "device_ids names device %ld", max);
		if (max >= 0)
			err = device_number(sc, env_value, (unsigned long)max, as, (size_t)(p - c));
	}
	for (const char *p = c; !err && (p = strstr(p, "set_device(")); p += 11) {
		char *end, as[64];
		long v = small_number(p + 11, &end);

		if (v < 0 || *end != ')')
			continue;
		snprintf(as, sizeof(as), "set_device(%ld)", v);
		err = device_number(sc, env_value, (unsigned long)v, as, (size_t)(p - c));
	}
	return err;
}

/* `import torch`, `import os, torch as th`, `from torch import nn`: where, and its names. */
static void scan_imports(struct script *sc)
{
	const char *c = sc->k.c;

	for (const char *p = c; *p; p++) {
		int from = word_at(p, c, "from");

		if (!from && !word_at(p, c, "import"))
			continue;
		p += from ? 4 : 6;
		for (;;) {
			const char *name;
			size_t n = 0;

			p += strspn(p, " \t");
			name = p;
			while (is_ident(p[n]) || p[n] == '.')
				n++;
			if (!n)
				break;
			p += n;
			if (n >= 5 && !strncmp(name, "torch", 5) && (n == 5 || name[5] == '.')) {
				sc->torch_at = sc->torch_at ? sc->torch_at : (size_t)(name - c) + 1;
				if (n == 5 && sc->ntorch < TORCH_NAMES) {
					const char *as = p + strspn(p, " \t");

					/* `import torch as th`: th.cuda is torch.cuda */
					if (!from && word_at(as, c, "as")) {
						as += 2;
						as += strspn(as, " \t");
						n = 0;
						while (is_ident(as[n]) &&
						       n + 1 < sizeof(sc->torch[0]))
							n++;
						if (n) {
							memcpy(sc->torch[sc->ntorch], as, n);
							sc->torch[sc->ntorch++][n] = '\0';
						}
					}
				}
			}
			if (from)
				break;
			p += strspn(p, " \t");
			if (word_at(p, c, "as")) {
				p += 2 + strspn(p + 2, " \t");
				while (is_ident(*p))
					p++;
				p += strspn(p, " \t");
			}
			if (*p != ',')
				break;
			p++;
		}
		if (!*p)
			break;
	}
}

/* Where CUDA starts: a torch.cuda call, .cuda(, or .to() of a "cuda" string. */
static size_t cuda_start(const struct script *sc)
{
	const char *c = sc->k.c;

	for (const char *p = c; *p; p++) {
		for (size_t t = 0; t < sc->ntorch; t++) {
			size_t n = strlen(sc->torch[t]);

			if (word_at(p, c, sc->torch[t]) && !strncmp(p + n, ".cuda.", 6)) {
				const char *q = p + n + 6;

				while (is_ident(*q))
					q++;
				if (*q == '(')
					return (size_t)(p - c) + 1;
			}
		}
		if (!strncmp(p, ".cuda(", 6))
			return (size_t)(p - c) + 1;
		if (!strncmp(p, ".to(", 4)) {
			size_t q = skip_space(&sc->k, (size_t)(p - c) + 4);
			const struct literal *l;

			/* .to(device="cuda") */
			if (!strncmp(c + q, "device", 6) && c[skip_space(&sc->k, q + 6)] == '=')
				q = skip_space(&sc->k, q + 6) + 1;
			l = literal_after(&sc->k, q);
			if (l && !l->bytes && l->end - l->start >= 4 &&
			    !strncmp(sc->text + l->start, "cuda", 4))
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

/* Whether the script is Python: a .py name, or a #! line naming python. */
static int is_python(const char *text, size_t len, const char *path)
{
	size_t plen = strlen(path);
	const char *nl = memchr(text, '\n', len);

	if (plen > 3 && !strcmp(path + plen - 3, ".py"))
		return 1;
	return len > 2 && !strncmp(text, "#!", 2) &&
	       memmem(text, nl ? (size_t)(nl - text) : len, "python", 6);
}

int vd_doctor_script(struct vd_findings *out, const struct vd_system *sys, const char *text,
		     size_t len, const char *path, const char *env_value, const char *env_order)
{
	struct script sc;
	const char *c;
	int err;

	if (memchr(text, '\0', len))
		return vd_findings_add(out, "script-not-text", VD_SEVERITY_WARNING, path,
				       "give --script a Python file",
				       "'%s' is not text (it has NUL bytes): not read", path);
	if (!is_utf8(text, len))
		return vd_findings_add(out, "script-not-utf8", VD_SEVERITY_WARNING, path,
				       "save it as UTF-8, as Python 3 expects",
				       "'%s' is not UTF-8: not read", path);
	if (!is_python(text, len, path))
		return vd_findings_add(
			out, "script-not-python", VD_SEVERITY_INFO, path,
			"give --script a Python file (.py, or #! naming python)",
			"'%s' does not look like Python (no .py, no python #!): not read", path);
	memset(&sc, 0, sizeof(sc));
	sc.out = out;
	sc.sys = sys;
	sc.path = path;
	sc.text = text;
	sc.order = VD_ORDER_FASTEST;
	snprintf(sc.torch[sc.ntorch++], sizeof(sc.torch[0]), "torch");
	vd_order_parse(&sc.order, env_order);
	err = mask(&sc.k, text, len);
	c = sc.k.c;
	if (!err) {
		scan_imports(&sc);
		sc.cuda_at = cuda_start(&sc);
	}
	for (const char *p = c; !err && *p; p++)
		if ((p == c || !(is_ident(p[-1]) || p[-1] == '.')) &&
		    (!strncmp(p, "os.", 3) || !strncmp(p, "environ[", 8)))
			err = scan_environ(&sc, (size_t)(p - c), env_value);
	if (!err)
		err = scan_devices(&sc, env_value);
	free(sc.k.c);
	free(sc.k.lits);
	free(sc.k.lines);
	free(sc.value);
	return err;
}
