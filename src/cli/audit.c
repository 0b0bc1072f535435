/*
 * audit.c - the lease audit as the commands show it (leases, list, top):
 * made with this user's memory of earlier looks, told in words and JSON.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

int cli_parse_amount(double *out, const char *arg, double min, double max)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (*arg < '0' || *arg > '9' || *end || errno || !isfinite(v) || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int cli_parse_seconds(double *out, const char *option, const char *arg, double min, double max)
{
	if (cli_parse_amount(out, arg, min, max) == 0)
		return 0;
	cli_error("%s takes seconds, a number from %g to %g, not '%s'", option, min, max, arg);
	return -1;
}

int cli_parse_idle(double *minutes, const char *arg)
{
	if (cli_parse_amount(minutes, arg, 0, CLI_IDLE_MAX) == 0)
		return 0;
	cli_error("--idle takes minutes, a number from 0 to %d (%d is the default), not '%s'",
		  CLI_IDLE_MAX, CLI_IDLE_DEFAULT, arg);
	return -1;
}

/* Adds a line to a note of n bytes (lines apart by '\n'), cut when it is full. */
static void note_add(char *note, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void note_add(char *note, size_t n, const char *fmt, ...)
{
	size_t len = strlen(note);
	va_list ap;

	if (len && len + 1 < n)
		note[len++] = '\n';
	va_start(ap, fmt);
	vsnprintf(note + len, n - len, fmt, ap);
	va_end(ap);
}

/* The audit, its warnings added to note; the processes read kept in *procs when asked. */
static struct vd_audit *audit_noted(const struct vd_system *sys, const struct vd_leases *leases,
				    double idle_minutes, struct vd_procs **procs, char *note,
				    size_t n)
{
	struct vd_audit *a = NULL;
	char *warning = NULL;

	if (!sys || !leases)
		return NULL;
	if (vd_audit_now(&a, procs, sys, leases, (int64_t)(idle_minutes * 60 + 0.5), &warning))
		note_add(note, n, "the audit of the leases failed: %s", vd_error_last());
	if (warning)
		note_add(note, n, "%s", warning);
	free(warning);
	return a;
}

struct vd_audit *cli_audit(const struct vd_system *sys, const struct vd_leases *leases,
			   double idle_minutes)
{
	char note[1024] = "";
	struct vd_audit *a = audit_noted(sys, leases, idle_minutes, NULL, note, sizeof(note));

	cli_print_note(note);
	return a;
}

void cli_look_around(struct cli_look *l, const struct vd_system *sys, double idle_minutes,
		     char *note, size_t n)
{
	memset(l, 0, sizeof(*l));
	note[0] = '\0';
	if (vd_leases_read(&l->leases, cli_lease_dir(), sys)) {
		note_add(note, n, "leases unknown: %s", vd_error_last());
		return;
	}
	l->audit = audit_noted(sys, l->leases, idle_minutes, &l->procs, note, n);
	if (vd_line_read(&l->line, cli_lease_dir())) {
		note_add(note, n, "the line of waiting requests is unknown: %s", vd_error_last());
		return;
	}
	/* what the line holds shows as held, and only in the states: after the audit */
	if (vd_line_plan(l->line, sys, l->leases) || vd_line_holds(l->leases, l->line, sys))
		note_add(note, n, "what the waiting requests hold is unknown: %s", vd_error_last());
}

void cli_look_release(struct cli_look *l)
{
	vd_procs_free(l->procs);
	vd_audit_free(l->audit);
	vd_line_free(l->line);
	vd_leases_free(l->leases);
	memset(l, 0, sizeof(*l));
}

void cli_print_note(const char *note)
{
	for (const char *p = note; *p;) {
		size_t len = strcspn(p, "\n");

		cli_error("%.*s", (int)len, p);
		p += len + (p[len] == '\n');
	}
}

void cli_format_span(char *buf, size_t n, int64_t s)
{
	if (s < 0)
		snprintf(buf, n, "?");
	else if (s < 60)
		snprintf(buf, n, "%llds", (long long)s);
	else if (s < 3600)
		snprintf(buf, n, "%lldm", (long long)(s / 60));
	else if (s < 86400)
		snprintf(buf, n, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
	else
		snprintf(buf, n, "%lldd%02lldh", (long long)(s / 86400),
			 (long long)(s % 86400 / 3600));
}

void cli_lease_use(char *buf, size_t n, const struct vd_audit *a, size_t i)
{
	const struct vd_lease_audit *la = a && i < a->nleases ? &a->leases[i] : NULL;
	char span[32];

	if (!la) {
		snprintf(buf, n, "?");
		return;
	}
	cli_format_span(span, sizeof(span), la->quiet_s);
	if (la->nsquatters)
		snprintf(buf, n, "squatted");
	else if (la->use == VD_USE_IDLE || (la->use == VD_USE_QUIET && la->quiet_s >= 0))
		snprintf(buf, n, "%s %s", vd_lease_use_name(la->use), span);
	else
		snprintf(buf, n, "%s",
			 la->use == VD_USE_UNKNOWN ? "?" : vd_lease_use_name(la->use));
}

json_t *cli_json_lease_audit(const struct vd_audit *a, size_t i)
{
	const struct vd_lease_audit *la = a && i < a->nleases ? &a->leases[i] : NULL;

	if (!la)
		return json_null();
	return json_pack("{s:s, s:o, s:I, s:I}", "use", vd_lease_use_name(la->use), "quiet_s",
			 la->quiet_s >= 0 ? json_integer(la->quiet_s) : json_null(), "squatters",
			 (json_int_t)la->nsquatters, "unexplained_mib",
			 (json_int_t)la->unexplained_mib);
}

/* The GPU index of a device, or -1 when the snapshot lacks it. */
static int gpu_index(const struct vd_system *sys, const char *uuid)
{
	struct vd_device_ref d;

	return vd_system_find(&d, sys, uuid) ? -1 : (int)d.gpu;
}

json_t *cli_json_audit(const struct vd_audit *a, const struct vd_system *sys,
		       const struct vd_leases *leases)
{
	json_t *out;

	if (!a)
		return json_null();
	out = json_array();
	for (size_t i = 0; i < a->n; i++) {
		const struct vd_audit_finding *f = &a->findings[i];
		const struct vd_lease_holder *h = &leases->holders[f->lease];
		int index = gpu_index(sys, f->uuid);
		json_t *o = json_pack("{s:s, s:s, s:o, s:{s:s, s:I, s:o, s:I}}", "kind",
				      vd_audit_kind_name(f->kind), "uuid", f->uuid, "index",
				      index < 0 ? json_null() : json_integer(index), "lease",
				      "uuid", h->uuid, "pid", (json_int_t)h->pid, "user",
				      cli_json_str(h->user), "uid", (json_int_t)h->uid);

		if (f->kind == VD_AUDIT_SQUATTER) {
			json_object_set_new(o, "pid", json_integer(f->pid));
			json_object_set_new(o, "uid", json_integer(f->uid));
			json_object_set_new(o, "user", cli_json_str(f->user));
			json_object_set_new(o, "command", cli_json_str(f->command));
			json_object_set_new(o, "used_mib",
					    f->mib >= 0 ? json_integer(f->mib) : json_null());
		} else if (f->kind == VD_AUDIT_UNEXPLAINED) {
			json_object_set_new(o, "unexplained_mib", json_integer(f->mib));
		} else {
			json_object_set_new(o, "idle_s", json_integer(f->seconds));
		}
		json_array_append_new(out, o);
	}
	return out;
}

void cli_audit_text(char *buf, size_t n, const struct vd_audit *a, size_t i,
		    const struct vd_system *sys, const struct vd_leases *leases)
{
	const struct vd_audit_finding *f = &a->findings[i];
	const struct vd_lease_holder *h = &leases->holders[f->lease];
	char device[VD_UUID_MAX + 32], span[32], mem[32];
	struct vd_device_ref d;

	if (vd_system_find(&d, sys, f->uuid))
		snprintf(device, sizeof(device), "%s", f->uuid);
	else
		cli_device_short(device, sizeof(device), sys, d);
	switch (f->kind) {
	case VD_AUDIT_SQUATTER:
		if (f->mib >= 0)
			snprintf(mem, sizeof(mem), "%.1f GiB", f->mib / 1024.0);
		else
			snprintf(mem, sizeof(mem), "memory unknown");
		snprintf(buf, n, "squatter on %s, leased to %s: pid %d of %s (%s), %s", device,
			 h->user, (int)f->pid, f->user, mem, f->command);
		break;
	case VD_AUDIT_UNEXPLAINED:
		snprintf(buf, n,
			 "%.1f GiB in use on %s, leased to %s, that no listed process explains",
			 f->mib / 1024.0, device, h->user);
		break;
	default:
		cli_format_span(span, sizeof(span), f->seconds);
		snprintf(buf, n, "idle lease on %s: %s's pid %d has not used it for %s: %s", device,
			 f->user, (int)f->pid, span, f->command);
		break;
	}
}

void cli_print_audit(const struct vd_audit *a, const struct vd_system *sys,
		     const struct vd_leases *leases)
{
	char line[VD_COMMAND_MAX + 256], shown[CLI_COLUMNS + 8];

	for (size_t i = 0; a && i < a->n; i++) {
		cli_audit_text(line, sizeof(line), a, i, sys, leases);
		cli_printf("audit: %s\n", cli_cut(shown, sizeof(shown), line, CLI_COLUMNS - 7));
	}
}
