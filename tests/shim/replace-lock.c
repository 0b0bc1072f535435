/*
 * replace-lock.c - a stand-in for a neighbour who removes a lock file and
 * lets a new one take its place in the moment between visdev opening it
 * and locking it: a race no test could win on purpose, made certain.
 *
 * Preloaded (LD_PRELOAD) into visdev, it wraps flock(): before the first
 * REPLACE_LOCK_TIMES (default 1) locks of a file named REPLACE_LOCK_NAME,
 * a new file is renamed over that name, so that the file visdev opened is
 * no longer the one the directory has.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

int flock(int fd, int op)
{
	static int (*real)(int, int);
	static int replaced;
	const char *name = getenv("REPLACE_LOCK_NAME");
	const char *times = getenv("REPLACE_LOCK_TIMES");
	char link[64], path[4096], fresh[4200];
	const char *base;
	ssize_t n;
	int nfd;

	if (!real)
		real = (int (*)(int, int))dlsym(RTLD_NEXT, "flock");
	if (!name || (op & LOCK_UN) || replaced >= (times ? atoi(times) : 1))
		return real(fd, op);
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return real(fd, op);
	path[n] = '\0';
	base = strrchr(path, '/');
	if (!base || strcmp(base + 1, name))
		return real(fd, op);
	snprintf(fresh, sizeof(fresh), "%s.new", path);
	nfd = open(fresh, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (nfd >= 0) {
		close(nfd);
		if (rename(fresh, path) == 0)
			replaced++;
	}
	return real(fd, op);
}
