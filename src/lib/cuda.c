/*
 * cuda.c - asking the CUDA driver itself which devices it enumerates.
 *
 * libcuda.so.1 is loaded in a child process, never in the caller: CUDA's
 * state is per process and fixed by the first cuInit(), so the caller's
 * own CUDA_VISIBLE_DEVICES and its later use of CUDA stay untouched. The
 * child reports one line per device through a pipe and exits; the parent
 * waits at most CUDA_TIMEOUT_S for it, so a hung driver cannot hang us.
 *
 * The child does not exec (there is no helper program to exec: this is a
 * library), so it calls dlopen() and setenv() after fork(), which is safe
 * in a single-threaded caller; in a threaded one, a lock held by another
 * thread at the fork could hang the child. A caller with threads (the
 * Python module) names a helper program instead (vd_cuda_set_helper()):
 * the child then only execs it, and the helper asks the driver
 * (vd_cuda_helper_main()) in a process of its own.
 *
 * Environment: VISDEV_CUDA_LIB names the driver library to load when the
 * caller names none (the tests point it at the stand-in libcuda.so.1).
 *
 * cuInit() can take seconds on a large machine, so the fastest-first order,
 * which changes only with the driver or the GPUs, is kept in a per-user
 * cache ($XDG_CACHE_HOME or ~/.cache, visdev/cuda-order) for the current
 * boot, and asked of the driver only when the cache does not match.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define CUDA_TIMEOUT_S 20
#define CUDA_REPLY_MAX (1 << 20)

/* ---- The CUDA driver API: what is used of cuda.h ---------------------- */

typedef int CUresult;
typedef int CUdevice;
typedef struct {
	unsigned char bytes[16];
} CUuuid;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_NO_DEVICE = 100,
};

/* CUresult names for messages; others are printed by number alone. */
static const char *cuda_error_name(int code)
{
	static const struct {
		int code;
		const char *name;
	} names[] = {
		{ 0, "CUDA_SUCCESS" },
		{ 1, "CUDA_ERROR_INVALID_VALUE" },
		{ 2, "CUDA_ERROR_OUT_OF_MEMORY" },
		{ 3, "CUDA_ERROR_NOT_INITIALIZED" },
		{ 4, "CUDA_ERROR_DEINITIALIZED" },
		{ 34, "CUDA_ERROR_STUB_LIBRARY" },
		{ 35, "CUDA_ERROR_INSUFFICIENT_DRIVER" },
		{ 100, "CUDA_ERROR_NO_DEVICE" },
		{ 101, "CUDA_ERROR_INVALID_DEVICE" },
		{ 304, "CUDA_ERROR_OPERATING_SYSTEM" },
		{ 801, "CUDA_ERROR_NOT_SUPPORTED" },
		{ 803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH" },
		{ 804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE" },
		{ 999, "CUDA_ERROR_UNKNOWN" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (names[i].code == code)
			return names[i].name;
	return "CUDA error";
}

/* ---- The child --------------------------------------------------------- */

/* Writes one formatted line to the parent. */
__attribute__((format(printf, 2, 3))) static void child_say(int fd, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (len < 0)
		return;
	if ((size_t)len >= sizeof(line))
		len = sizeof(line) - 1;
	for (const char *p = line; len > 0;) {
		ssize_t n = write(fd, p, (size_t)len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		p += n;
		len -= (int)n;
	}
}

/* Formats 16 bytes as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" with the prefix given. */
static void uuid_format(char *out, size_t size, const char *prefix, const CUuuid *u)
{
	const unsigned char *b = u->bytes;

	snprintf(out, size,
		 "%s%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", prefix,
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
}

/*
 * In the child: sets the environment CUDA reads, loads the driver and lists
 * its devices on fd, one "dev UUID" line each, then "done"; a failure is a
 * "load MESSAGE" or "fail CALL CODE" line. Never returns.
 */
__attribute__((noreturn)) static void child_run(int fd, const char *lib, const char *value,
						enum vd_order order)
{
	CUresult (*cuInit)(unsigned int);
	CUresult (*cuDeviceGetCount)(int *);
	CUresult (*cuDeviceGet)(CUdevice *, int);
	CUresult (*cuDeviceGetUuid)(CUuuid *, CUdevice);
	CUresult (*cuDeviceGetUuid_v2)(CUuuid *, CUdevice);
	void *dl;
	CUresult r;
	int count = 0;

	if (value)
		setenv("CUDA_VISIBLE_DEVICES", value, 1);
	else
		unsetenv("CUDA_VISIBLE_DEVICES");
	setenv("CUDA_DEVICE_ORDER", order == VD_ORDER_PCI ? "PCI_BUS_ID" : "FASTEST_FIRST", 1);

	dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		child_say(fd, "load %s\n", dlerror());
		_exit(0);
	}
	cuInit = (__typeof__(cuInit))dlsym(dl, "cuInit");
	cuDeviceGetCount = (__typeof__(cuDeviceGetCount))dlsym(dl, "cuDeviceGetCount");
	cuDeviceGet = (__typeof__(cuDeviceGet))dlsym(dl, "cuDeviceGet");
	cuDeviceGetUuid = (__typeof__(cuDeviceGetUuid))dlsym(dl, "cuDeviceGetUuid");
	cuDeviceGetUuid_v2 = (__typeof__(cuDeviceGetUuid_v2))dlsym(dl, "cuDeviceGetUuid_v2");
	if (!cuInit || !cuDeviceGetCount || !cuDeviceGet ||
	    (!cuDeviceGetUuid && !cuDeviceGetUuid_v2)) {
		child_say(fd, "load the library lacks the CUDA driver API\n");
		_exit(0);
	}

	r = cuInit(0);
	if (r != CUDA_SUCCESS) {
		child_say(fd, "fail cuInit %d\n", r);
		_exit(0);
	}
	r = cuDeviceGetCount(&count);
	if (r != CUDA_SUCCESS) {
		child_say(fd, "fail cuDeviceGetCount %d\n", r);
		_exit(0);
	}
	for (int i = 0; i < count; i++) {
		CUdevice dev;
		CUuuid v1, v2;
		char uuid[64];
		const char *prefix = "GPU-";

		r = cuDeviceGet(&dev, i);
		if (r != CUDA_SUCCESS) {
			child_say(fd, "fail cuDeviceGet %d\n", r);
			_exit(0);
		}
		/*
		 * _v2 gives a MIG device's own UUID, the plain call its GPU's:
		 * where they differ, the device is a MIG instance.
		 */
		if (cuDeviceGetUuid_v2) {
			r = cuDeviceGetUuid_v2(&v2, dev);
			if (r != CUDA_SUCCESS) {
				child_say(fd, "fail cuDeviceGetUuid_v2 %d\n", r);
				_exit(0);
			}
			if (cuDeviceGetUuid && cuDeviceGetUuid(&v1, dev) == CUDA_SUCCESS &&
			    memcmp(v1.bytes, v2.bytes, sizeof(v1.bytes)))
				prefix = "MIG-";
		} else {
			r = cuDeviceGetUuid(&v2, dev);
			if (r != CUDA_SUCCESS) {
				child_say(fd, "fail cuDeviceGetUuid %d\n", r);
				_exit(0);
			}
		}
		uuid_format(uuid, sizeof(uuid), prefix, &v2);
		child_say(fd, "dev %s\n", uuid);
	}
	child_say(fd, "done\n");
	_exit(0);
}

void vd_cuda_helper_main(const char *lib, const char *value, const char *order)
{
	enum vd_order o = order && !strcmp(order, "pci") ? VD_ORDER_PCI : VD_ORDER_FASTEST;

	/* the value comes as "=VALUE", or "unset" */
	child_run(STDOUT_FILENO, lib, value && value[0] == '=' ? value + 1 : NULL, o);
}

/* ---- The parent -------------------------------------------------------- */

/* The helper program's command line, when one is named; NULL-terminated. */
static char **helper;

int vd_cuda_set_helper(const char *const *argv)
{
	size_t n = 0;
	char **copy;

	while (argv && argv[n])
		n++;
	copy = calloc(n + 1, sizeof(*copy));
	if (!copy)
		return error_set(VD_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		if (!(copy[i] = strdup(argv[i]))) {
			vd_strings_free(copy, i);
			return error_set(VD_ENOMEM, "out of memory");
		}
	if (helper) {
		size_t old = 0;

		while (helper[old])
			old++;
		vd_strings_free(helper, old);
	}
	helper = n ? copy : (free(copy), NULL);
	return 0;
}

/* The helper's full command line: its own, then the library, the value and the order. */
static char **helper_argv(const char *lib, const char *value, enum vd_order order, char *value_arg)
{
	size_t n = 0;
	char **argv;

	while (helper[n])
		n++;
	argv = calloc(n + 4, sizeof(*argv));
	if (!argv)
		return NULL;
	memcpy(argv, helper, n * sizeof(*argv));
	argv[n] = (char *)(uintptr_t)lib;
	if (value)
		argv[n + 1] = value_arg;
	else
		argv[n + 1] = (char *)(uintptr_t) "unset";
	argv[n + 2] = (char *)(uintptr_t)vd_order_name(order);
	return argv;
}

/* Milliseconds left until deadline (CLOCK_MONOTONIC), at least 0. */
static int ms_left(const struct timespec *deadline)
{
	struct timespec now;
	long long ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (long long)(deadline->tv_sec - now.tv_sec) * 1000 +
	     (deadline->tv_nsec - now.tv_nsec) / 1000000;
	return ms < 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
}

/*
 * Reads everything the child writes on fd, until it closes the pipe or the
 * deadline passes. Returns 0, 1 on timeout, or VD_ENOMEM/VD_EIO.
 */
static int read_reply(char **out, int fd)
{
	struct timespec deadline;
	char *buf = NULL;
	size_t len = 0, cap = 0;

	*out = NULL;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += CUDA_TIMEOUT_S;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;
		int ready;

		if (cap - len < 4096) {
			char *grown;

			if (cap >= CUDA_REPLY_MAX) {
				free(buf);
				return error_set(VD_EIO, "the CUDA driver probe said too much");
			}
			cap = cap ? cap * 2 : 4096;
			grown = realloc(buf, cap);
			if (!grown) {
				free(buf);
				return error_set(VD_ENOMEM, "out of memory");
			}
			buf = grown;
		}
		ready = poll(&pfd, 1, ms_left(&deadline));
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready == 0) {
			free(buf);
			return 1;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

/* Waits for the child, retrying on EINTR. Returns its wait status, or -1. */
static int reap(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return status;
}

/*
 * Turns the child's lines into UUIDs. lib names the library in messages.
 * Errors: VD_ECUDA, VD_ENOMEM.
 */
static int parse_reply(char ***out, size_t *nout, char *reply, const char *lib, int status)
{
	char *line, *next;
	int done = 0, err;

	for (line = reply; line && *line; line = next) {
		char call[64];
		int code;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (!strncmp(line, "dev ", 4)) {
			err = strings_push(out, nout, "%s", line + 4);
			if (err < 0)
				return err;
		} else if (!strncmp(line, "load ", 5)) {
			return error_set(VD_ECUDA, "cannot load the CUDA driver '%s' (%s)", lib,
					 line + 5);
		} else if (sscanf(line, "fail %63s %d", call, &code) == 2) {
			/* A working driver with no device to show: nothing visible. */
			if (!strcmp(call, "cuInit") && code == CUDA_ERROR_NO_DEVICE)
				return 0;
			return error_set(VD_ECUDA, "%s failed: %s (%d)", call,
					 cuda_error_name(code), code);
		} else if (!strcmp(line, "done")) {
			done = 1;
		}
	}
	if (done)
		return 0;
	if (status != -1 && WIFSIGNALED(status))
		return error_set(VD_ECUDA, "the CUDA driver probe died of signal %d",
				 WTERMSIG(status));
	return error_set(VD_ECUDA, "the CUDA driver probe ended without an answer");
}

int vd_cuda_enumerate(char ***out, size_t *nout, const char *cuda_lib, const char *value,
		      enum vd_order order)
{
	const char *lib = cuda_lib;
	char *reply = NULL, *value_arg = NULL, **argv = NULL;
	int fds[2] = { -1, -1 };
	pid_t pid;
	int err, status;

	*out = NULL;
	*nout = 0;
	if (!lib) {
		lib = getenv("VISDEV_CUDA_LIB");
		if (!lib || !*lib)
			lib = "libcuda.so.1";
	}
	/* built before the fork: the child of a threaded caller may only exec */
	if (helper && (asprintf(&value_arg, "=%s", value ? value : "") < 0 ||
		       !(argv = helper_argv(lib, value, order, value_arg)))) {
		free(value_arg);
		return error_set(VD_ENOMEM, "out of memory");
	}
	if (pipe2(fds, O_CLOEXEC) < 0) {
		free(argv);
		free(value_arg);
		return error_set(VD_ECUDA, "cannot ask the CUDA driver: pipe: %s", strerror(errno));
	}
	pid = fork();
	if (pid < 0) {
		err = error_set(VD_ECUDA, "cannot ask the CUDA driver: fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		free(argv);
		free(value_arg);
		return err;
	}
	if (pid == 0 && argv) {
		/* async-signal-safe calls only: the helper asks the driver */
		if (dup2(fds[1], STDOUT_FILENO) >= 0)
			execv(argv[0], argv);
		_exit(127);
	}
	if (pid == 0) {
		close(fds[0]);
		child_run(fds[1], lib, value, order);
	}
	free(argv);
	free(value_arg);
	close(fds[1]);
	err = read_reply(&reply, fds[0]);
	close(fds[0]);
	if (err != 0)
		kill(pid, SIGKILL);
	status = reap(pid);
	if (err == 1)
		return error_set(VD_ECUDA, "the CUDA driver '%s' did not answer within %d s", lib,
				 CUDA_TIMEOUT_S);
	if (err < 0)
		return err;
	err = parse_reply(out, nout, reply, lib, status);
	free(reply);
	if (err < 0) {
		vd_strings_free(*out, *nout);
		*out = NULL;
		*nout = 0;
	}
	return err;
}

/* The per-user cache file of CUDA's order: $XDG_CACHE_HOME or ~/.cache, then visdev/. */
static int cache_path(char *out, size_t n, int make_dirs)
{
	return user_file(out, n, "XDG_CACHE_HOME", ".cache", "cuda-order", make_dirs);
}

/* The key of a cached order: this boot, and what the caller says identifies the machine. */
static int cache_key(char **out, const char *key)
{
	char boot[64] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	if (f) {
		if (!fgets(boot, sizeof(boot), f))
			boot[0] = '\0';
		fclose(f);
	}
	boot[strcspn(boot, "\n")] = '\0';
	return asprintf(out, "%s %s", boot, key) < 0 ? -1 : 0;
}

/* Reads a cached order written under the same key; 0 on a hit. */
static int cache_read(char ***out, size_t *nout, const char *want)
{
	char path[4200], line[VD_UUID_MAX + 2], *key = NULL;
	size_t keylen = strlen(want) + 2, n = 0;
	char **list = NULL;
	int hit = -1;
	FILE *f;

	if (cache_path(path, sizeof(path), 0) || !(f = fopen(path, "re")))
		return -1;
	key = malloc(keylen + 1);
	if (key && fgets(key, (int)keylen + 1, f) && !strncmp(key, want, keylen - 2) &&
	    key[keylen - 2] == '\n') {
		hit = 0;
		while (!hit && fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\n")] = '\0';
			if (strings_push(&list, &n, "%s", line))
				hit = -1;
		}
	}
	fclose(f);
	free(key);
	if (hit) {
		vd_strings_free(list, n);
		return -1;
	}
	*out = list;
	*nout = n;
	return 0;
}

/* Writes the order for others to read, whole or not at all. */
static void cache_write(char **uuids, size_t n, const char *key)
{
	char path[4200], *text = NULL;
	size_t len;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return;
	fprintf(f, "%s\n", key);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s\n", uuids[i]);
	if (fclose(f) == 0 && cache_path(path, sizeof(path), 1) == 0)
		file_replace(path, text, len);
	free(text);
}

int cuda_fastest_order(char ***out, size_t *nout, const char *key)
{
	char *full = NULL;
	int err;

	*out = NULL;
	*nout = 0;
	if (cache_key(&full, key))
		return error_set(VD_ENOMEM, "out of memory");
	if (cache_read(out, nout, full) == 0) {
		free(full);
		return 0;
	}
	err = vd_cuda_enumerate(out, nout, NULL, NULL, VD_ORDER_FASTEST);
	if (!err)
		cache_write(*out, *nout, full);
	free(full);
	return err;
}
