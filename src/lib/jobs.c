/*
 * jobs.c - the jobs of a queue: the lines of a job file, or a template
 * expanded over a grid of values. Pure: text in, commands out.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* FNV-1a over len bytes, continuing from h. */
static uint64_t fnv1a(uint64_t h, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* A new list with room for n jobs, each to be set by the caller. */
static int jobs_new(struct vd_jobs **out, size_t n, int with_lines)
{
	struct vd_jobs *j = calloc(1, sizeof(*j));

	*out = NULL;
	if (!j)
		return error_set(VD_ENOMEM, "out of memory");
	j->commands = calloc(n ? n : 1, sizeof(*j->commands));
	j->lines = with_lines ? calloc(n ? n : 1, sizeof(*j->lines)) : NULL;
	if (!j->commands || (with_lines && !j->lines)) {
		vd_jobs_free(j);
		return error_set(VD_ENOMEM, "out of memory");
	}
	*out = j;
	return 0;
}

/* The digest of the commands, each with its terminating NUL so that "a b" differs from "a", "b". */
static void jobs_seal(struct vd_jobs *j)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < j->n; i++)
		h = fnv1a(h, j->commands[i], strlen(j->commands[i]) + 1);
	j->digest = h;
}

/* Whether a line holds a job: not blank, not a comment. */
static int is_job(const char *s, size_t len)
{
	size_t i = 0;

	while (i < len &&
	       (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\f' || s[i] == '\v'))
		i++;
	return i < len && s[i] != '#';
}

int vd_jobs_parse(struct vd_jobs **out, const char *text, size_t len)
{
	struct vd_jobs *j = NULL;
	const char *nul = memchr(text, '\0', len);
	size_t n = 0, line = 1;
	int err;

	*out = NULL;
	if (nul) {
		for (const char *p = text; p < nul; p++)
			line += *p == '\n';
		return error_set(VD_EPARSE, "line %zu: a NUL byte: this is not a text file", line);
	}
	for (const char *p = text, *end = text + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);

		n += is_job(p, l);
		p += l + 1;
	}
	if (n > VD_JOBS_MAX)
		return error_set(VD_EINVAL, "more than %d jobs: split the job file", VD_JOBS_MAX);
	err = jobs_new(&j, n, 1);
	if (err)
		return err;
	for (const char *p = text, *end = text + len; p < end; line++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (is_job(p, l)) {
			/* a file written on Windows: "\r\n" ends the line, the \r is no part of the
			 * job */
			size_t keep = l && p[l - 1] == '\r' ? l - 1 : l;

			j->commands[j->n] = strndup(p, keep);
			if (!j->commands[j->n]) {
				vd_jobs_free(j);
				return error_set(VD_ENOMEM, "out of memory");
			}
			j->lines[j->n++] = (unsigned)line;
		}
		p += l + 1;
	}
	jobs_seal(j);
	*out = j;
	return 0;
}

/* One axis of a grid: its name and values, cut out of a copy of "name=v1,v2". */
struct axis {
	char *name;
	char **values;
	size_t n;
	int used;
};

static int is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

/* Reads "name=v1,v2" into a (which owns the copy in a->name). */
static int axis_parse(struct axis *a, const char *grid)
{
	const char *eq = strchr(grid, '=');
	char *p;

	if (!eq || eq == grid)
		return error_set(VD_EINVAL, "--grid '%s': write it as NAME=VALUE,VALUE,...", grid);
	for (const char *c = grid; c < eq; c++)
		if (!is_name_char(*c))
			return error_set(VD_EINVAL,
					 "--grid '%s': a name is letters, digits and '_' only",
					 grid);
	a->name = strdup(grid);
	if (!a->name)
		return error_set(VD_ENOMEM, "out of memory");
	a->name[eq - grid] = '\0';
	p = a->name + (eq - grid) + 1;
	if (!*p)
		return error_set(VD_EINVAL, "--grid %s= has no values: give them as %s=A,B",
				 a->name, a->name);
	a->n = 1;
	for (char *c = p; *c; c++)
		a->n += *c == ',';
	a->values = calloc(a->n, sizeof(*a->values));
	if (!a->values)
		return error_set(VD_ENOMEM, "out of memory");
	for (size_t i = 0; i < a->n; i++) {
		a->values[i] = strsep(&p, ",");
		if (!*a->values[i])
			return error_set(VD_EINVAL, "--grid %s: value %zu is empty", a->name,
					 i + 1);
	}
	return 0;
}

/* A piece of a template: literal text, or a placeholder for an axis's value. */
struct piece {
	const char *text; /* NULL for a placeholder */
	size_t len;
	struct axis *axis;
};

struct pieces {
	struct piece *p;
	size_t n, cap;
};

static int pieces_push(struct pieces *ps, const char *text, size_t len, struct axis *axis)
{
	if (text && !len)
		return 0;
	if (array_grow(&ps->p, &ps->cap, ps->n, sizeof(*ps->p), 8))
		return VD_ENOMEM;
	ps->p[ps->n++] = (struct piece){ text, len, axis };
	return 0;
}

/* The axis named by the len bytes at name, marked used; NULL when none is. */
static struct axis *find_axis(struct axis *axes, size_t naxes, const char *name, size_t len)
{
	for (size_t i = 0; i < naxes; i++) {
		if (strlen(axes[i].name) == len && !strncmp(axes[i].name, name, len)) {
			axes[i].used = 1;
			return &axes[i];
		}
	}
	return NULL;
}

/* Cuts the template into pieces, or says what is wrong with it. */
static int template_pieces(struct pieces *ps, const char *templ, struct axis *axes, size_t naxes)
{
	const char *p = templ, *lit = templ;
	int err = 0;

	while (*p && !err) {
		if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
			err = pieces_push(ps, lit, (size_t)(p - lit), NULL);
			err = err ? err : pieces_push(ps, p, 1, NULL);
			p += 2;
			lit = p;
		} else if (p[0] == '$' && p[1] == '{') {
			/* the shell's ${...}: literal text, braces and all */
			const char *close = strchr(p, '}');

			p = close ? close + 1 : p + strlen(p);
		} else if (*p == '{') {
			const char *close = strchr(p, '}');
			struct axis *a;

			if (!close)
				return error_set(VD_EINVAL,
						 "the template has a '{' without its '}': "
						 "write {{ for a brace itself");
			a = find_axis(axes, naxes, p + 1, (size_t)(close - p - 1));
			if (!a)
				return error_set(
					VD_EINVAL,
					"the template uses {%.*s}, which no --grid gives: "
					"add --grid %.*s=VALUE,... (or write {{ for a brace)",
					(int)(close - p - 1), p + 1, (int)(close - p - 1), p + 1);
			err = pieces_push(ps, lit, (size_t)(p - lit), NULL);
			err = err ? err : pieces_push(ps, NULL, 0, a);
			p = close + 1;
			lit = p;
		} else if (*p == '}') {
			return error_set(VD_EINVAL, "the template has a '}' without its '{': write "
						    "}} for a brace itself");
		} else {
			p++;
		}
	}
	return err ? err : pieces_push(ps, lit, (size_t)(p - lit), NULL);
}

/* The command of the combination whose value indices are pick[]. */
static char *expand(const struct piece *pieces, size_t npieces, const struct axis *axes,
		    const size_t *pick)
{
	size_t len = 1;
	char *s, *w;

	for (size_t i = 0; i < npieces; i++)
		len += pieces[i].text ? pieces[i].len :
					strlen(pieces[i].axis->values[pick[pieces[i].axis - axes]]);
	s = malloc(len);
	if (!s)
		return NULL;
	w = s;
	for (size_t i = 0; i < npieces; i++) {
		const char *t = pieces[i].text ?
					pieces[i].text :
					pieces[i].axis->values[pick[pieces[i].axis - axes]];
		size_t l = pieces[i].text ? pieces[i].len : strlen(t);

		memcpy(w, t, l);
		w += l;
	}
	*w = '\0';
	return s;
}

static void axes_free(struct axis *axes, size_t n)
{
	for (size_t i = 0; axes && i < n; i++) {
		free(axes[i].name);
		free(axes[i].values);
	}
	free(axes);
}

int vd_jobs_grid(struct vd_jobs **out, const char *templ, const char *const *grids, size_t ngrids)
{
	struct axis *axes = calloc(ngrids ? ngrids : 1, sizeof(*axes));
	struct pieces ps = { 0 };
	struct vd_jobs *j = NULL;
	size_t total = 1, *pick = NULL;
	int err = 0;

	*out = NULL;
	if (!axes)
		return error_set(VD_ENOMEM, "out of memory");
	for (size_t i = 0; i < ngrids && !err; i++) {
		err = axis_parse(&axes[i], grids[i]);
		for (size_t k = 0; k < i && !err; k++)
			if (!strcmp(axes[k].name, axes[i].name))
				err = error_set(VD_EINVAL, "--grid %s is given twice",
						axes[i].name);
		if (!err && total > VD_JOBS_MAX / axes[i].n)
			err = error_set(VD_EINVAL, "the grid makes more than %d jobs", VD_JOBS_MAX);
		if (!err)
			total *= axes[i].n;
	}
	if (!err)
		err = template_pieces(&ps, templ, axes, ngrids);
	for (size_t i = 0; i < ngrids && !err; i++)
		if (!axes[i].used)
			err = error_set(VD_EINVAL,
					"--grid %s is not used: the template has no {%s}",
					axes[i].name, axes[i].name);
	if (!err)
		err = jobs_new(&j, total, 0);
	pick = err ? NULL : calloc(ngrids ? ngrids : 1, sizeof(*pick));
	if (!err && !pick)
		err = error_set(VD_ENOMEM, "out of memory");
	for (size_t k = 0; !err && k < total; k++) {
		/* the first axis varies slowest: the last is the innermost loop */
		size_t rest = k;

		for (size_t i = ngrids; i-- > 0;) {
			pick[i] = rest % axes[i].n;
			rest /= axes[i].n;
		}
		j->commands[k] = expand(ps.p, ps.n, axes, pick);
		if (!j->commands[k])
			err = error_set(VD_ENOMEM, "out of memory");
		else
			j->n++;
	}
	free(pick);
	free(ps.p);
	axes_free(axes, ngrids);
	if (err) {
		vd_jobs_free(j);
		return err;
	}
	jobs_seal(j);
	*out = j;
	return 0;
}

void vd_jobs_free(struct vd_jobs *jobs)
{
	if (!jobs)
		return;
	for (size_t i = 0; i < jobs->n; i++)
		free(jobs->commands[i]);
	free(jobs->commands);
	free(jobs->lines);
	free(jobs);
}
