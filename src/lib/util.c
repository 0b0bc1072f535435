/*
 * util.c - small string helpers shared by the modules.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

void str_copy(char *dst, const char *src, size_t n)
{
	size_t len = strlen(src);

	if (len >= n)
		len = n - 1;
	memcpy(dst, src, len);
	dst[len] = '\0';
}

/*
 * "alice", or "uid 1234", for the user uid. The last answer is kept: a
 * line of many waiters is mostly a few users, and each getpwuid() reads
 * the password database again.
 */
void user_name(char *out, size_t n, uid_t uid)
{
	static _Thread_local char name[48];
	static _Thread_local uid_t known = (uid_t)-1;
	struct passwd *pw;

	if (uid != known || !name[0]) {
		pw = getpwuid(uid);
		if (pw)
			snprintf(name, sizeof(name), "%s", pw->pw_name);
		else
			snprintf(name, sizeof(name), "uid %u", (unsigned)uid);
		known = uid;
	}
	snprintf(out, n, "%s", name);
}

int array_grow(void *items_ptr, size_t *cap, size_t n, size_t size, size_t first)
{
	void *items, *more;
	size_t c;

	if (n < *cap)
		return 0;
	c = *cap ? 2 * *cap : first;
	memcpy(&items, items_ptr, sizeof(items));
	more = realloc(items, c * size);
	if (!more)
		return error_set(VD_ENOMEM, "out of memory");
	memcpy(items_ptr, &more, sizeof(more));
	*cap = c;
	return 0;
}

int strings_push(char ***list, size_t *n, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	char **grown;
	int len;

	va_start(ap, fmt);
	len = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (len < 0)
		return error_set(VD_ENOMEM, "out of memory");
	grown = realloc(*list, (*n + 2) * sizeof(*grown));
	if (!grown) {
		free(s);
		return error_set(VD_ENOMEM, "out of memory");
	}
	grown[(*n)++] = s;
	grown[*n] = NULL;
	*list = grown;
	return 0;
}

size_t str_distance(const char *a, const char *b, int fold_case)
{
	size_t la = strlen(a), lb = strlen(b), row[64];

	if (la >= 64 || lb >= 64)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			int ca = (unsigned char)a[i - 1], cb = (unsigned char)b[j - 1];
			size_t up = row[j], best;

			if (fold_case) {
				ca = toupper(ca);
				cb = toupper(cb);
			}
			best = diag + (ca != cb);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb];
}

/* The length of the valid UTF-8 sequence at s, or 0 when none begins there. */
static size_t utf8_sequence(const unsigned char *s)
{
	size_t len;
	unsigned char lo = 0x80, hi = 0xBF;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xC2 && s[0] <= 0xDF)
		len = 2;
	else if (s[0] >= 0xE0 && s[0] <= 0xEF)
		len = 3;
	else if (s[0] >= 0xF0 && s[0] <= 0xF4)
		len = 4;
	else
		return 0;
	/* no overlong forms, no surrogates, nothing past U+10FFFF */
	if (s[0] == 0xE0)
		lo = 0xA0;
	else if (s[0] == 0xED)
		hi = 0x9F;
	else if (s[0] == 0xF0)
		lo = 0x90;
	else if (s[0] == 0xF4)
		hi = 0x8F;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return 0;
	return len;
}

size_t vd_utf8_copy(char *dst, const char *src, size_t n)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t len = 0;

	while (*s) {
		size_t k = utf8_sequence(s);

		if (len + (k ? k : 1) >= n)
			break;
		if (k) {
			memcpy(dst + len, s, k);
			len += k;
			s += k;
		} else {
			dst[len++] = '?';
			s++;
		}
	}
	dst[len] = '\0';
	return len;
}

void vd_format_time(char *buf, size_t n, int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;
	size_t len;

	if (!n)
		return;
	if (t <= 0)
		snprintf(buf, n, "unknown");
	else if (!localtime_r(&tt, &tm) || !(len = strftime(buf, n, "%Y-%m-%dT%H:%M:%S%z", &tm)))
		snprintf(buf, n, "%lld", (long long)t);
	else if (len + 1 < n) { /* ISO 8601's extended form: +01:00, where strftime gives +0100 */
		memmove(buf + len - 1, buf + len - 2, 3);
		buf[len - 2] = ':';
	}
}

void vd_strings_free(char **strings, size_t n)
{
	if (!strings)
		return;
	for (size_t i = 0; i < n; i++)
		free(strings[i]);
	free(strings);
}

long vd_nearest_word(const char *word, const char *const *words, size_t n)
{
	size_t len = strlen(word), best_d = SIZE_MAX, prefixed = 0;
	long best = -1, prefix = -1;

	for (size_t i = 0; i < n; i++) {
		size_t d = str_distance(word, words[i], 0);

		if (d < best_d) {
			best_d = d;
			best = (long)i;
		}
		if (len && !strncmp(word, words[i], len)) {
			prefixed++;
			prefix = (long)i;
		}
	}
	if (best >= 0 && best_d <= 2 && best_d <= len / 2)
		return best;
	return prefixed == 1 ? prefix : -1;
}

int user_file(char *out, size_t n, const char *xdg_var, const char *under_home, const char *name,
	      int make_dirs)
{
	const char *xdg = getenv(xdg_var), *home = getenv("HOME");
	int len;

	if (xdg && *xdg)
		len = snprintf(out, n, "%s/visdev/%s", xdg, name);
	else if (home && *home)
		len = snprintf(out, n, "%s/%s/visdev/%s", home, under_home, name);
	else
		return -1;
	if (len < 0 || (size_t)len >= n)
		return -1;
	/* mkdir -p of its folder: each on the way, made the user's own when missing */
	for (char *slash = out + 1; make_dirs && (slash = strchr(slash, '/')); slash++) {
		*slash = '\0';
		mkdir(out, 0700);
		*slash = '/';
	}
	return 0;
}

int file_replace(const char *path, const char *text, size_t len)
{
	char tmp[4200];
	int fd, whole;
	size_t done = 0;

	/* a name nobody could have planted: mkstemp makes it, never through a link */
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= sizeof(tmp))
		return -1;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -1;
	while (done < len) {
		ssize_t n = write(fd, text + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	whole = done == len && fchmod(fd, 0644) == 0;
	if (close(fd) == 0 && whole && rename(tmp, path) == 0)
		return 0;
	unlink(tmp);
	return -1;
}
