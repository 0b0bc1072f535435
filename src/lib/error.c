/*
 * error.c - the last error message of each thread.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Thread_local char last[512];

int error_set(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last, sizeof(last), fmt, ap);
	va_end(ap);
	return code;
}

const char *vd_error_last(void)
{
	return last[0] ? last : "no error";
}

const char *vd_error_name(int code)
{
	static const char *const names[] = {
		"OK",	 "EINVAL", "ENOMEM", "ENOTFOUND", "EIO",    "EPARSE", "ENODRIVER",
		"ENVML", "EBUSY",  "EPERM",  "ECUDA",	  "ENOFIT", "EINTR",
	};

	if (code > 0 || (size_t)-code >= ARRAY_SIZE(names))
		return "EUNKNOWN";
	return names[-code];
}

const char *vd_version(void)
{
	return VD_VERSION;
}
