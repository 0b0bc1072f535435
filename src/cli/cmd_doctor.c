/*
 * cmd_doctor.c - `visdev doctor`: why a program does not see the GPUs it
 * should. The library checks the environment, start-up files and scripts
 * (doctor.c); this adds the machine: the driver's libraries and devices, a
 * container, the lease directory, and what a running process sees.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"

extern char **environ;

static const char usage[] =
	"usage: visdev doctor [--script FILE]... [--pid PID]... [--json]\n"
	"                     [--demo | --fixture FILE | --nvml-lib PATH]\n"
	"\n"
	"Finds why a program does not see the GPUs it should, and says the fix:\n"
	"CUDA_VISIBLE_DEVICES and its neighbours as CUDA reads them, misspelt names,\n"
	"the order trap, the shell's start-up files, the driver and its devices, a\n"
	"container, Slurm, the lease directory. --script reads a Python script (never\n"
	"runs it); --pid explains what a running process sees, and which GPUs it uses.\n"
	"Exit 1 when anything is an error, 0 otherwise.\n"
	"\n"
	"  --script FILE      check a Python script: the variable set too late, device\n"
	"                     numbers past what it will see (repeatable)\n"
	"  --pid PID          what a running process sees and uses (repeatable)\n" CLI_GLOBAL_USAGE;

/* Largest file read: start-up files and scripts are small; more is not one. */
#define FILE_MAX (4 << 20)

/* Reads a small regular file whole: 0, or -1 with errno (EFBIG: too large to be one). */
static int read_file(char **out, size_t *len, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	ssize_t n;

	*out = NULL;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > FILE_MAX) {
		close(fd);
		errno = S_ISDIR(st.st_mode) ? EISDIR : S_ISREG(st.st_mode) ? EFBIG : EINVAL;
		return -1;
	}
	*out = malloc((size_t)st.st_size + 1);
	if (!*out) {
		close(fd);
		errno = ENOMEM;
		return -1;
	}
	n = read(fd, *out, (size_t)st.st_size);
	close(fd);
	if (n < 0) {
		free(*out);
		*out = NULL;
		return -1;
	}
	(*out)[n] = '\0';
	*len = (size_t)n;
	return 0;
}

/* The driver's pieces: libcuda, the device files, and who may use them. */
static int check_driver(struct vd_findings *f, const struct vd_system *sys)
{
	const char *cuda = getenv("VISDEV_CUDA_LIB") ? getenv("VISDEV_CUDA_LIB") : "libcuda.so.1";
	void *h = dlopen(cuda, RTLD_NOW | RTLD_LOCAL);
	glob_t g;
	int err = 0;

	if (!h)
		err = vd_findings_add(
			f, "cuda-missing", VD_SEVERITY_ERROR, cuda,
			"install the NVIDIA driver's CUDA library (Debian: libcuda1), matching "
			"the driver",
			"the CUDA driver library '%s' cannot be loaded (%s): no program can use "
			"a GPU, whatever CUDA_VISIBLE_DEVICES says",
			cuda, dlerror());
	else
		dlclose(h);
	if (!err && sys)
		err = vd_findings_add(f, "driver", VD_SEVERITY_INFO, "NVML", "",
				      "driver %s, CUDA driver API %d.%d, %zu GPU%s",
				      sys->driver_version[0] ? sys->driver_version : "(unknown)",
				      sys->cuda_driver_version / 1000,
				      sys->cuda_driver_version % 1000 / 10, sys->ngpus,
				      sys->ngpus == 1 ? "" : "s");
	if (err || glob("/dev/nvidia[0-9]*", 0, NULL, &g) != 0) {
		return err ? err :
			     vd_findings_add(
				     f, "dev-missing", VD_SEVERITY_ERROR, "/dev",
				     "load the driver "
				     "(nvidia-modprobe, or reboot after installing it); in a container, "
				     "start it with the NVIDIA runtime (docker run --gpus all)",
				     "no /dev/nvidia0, /dev/nvidia1...: the GPUs' device files are missing");
	}
	for (size_t i = 0; i < g.gl_pathc && !err; i++)
		if (access(g.gl_pathv[i], R_OK | W_OK) < 0)
			err = vd_findings_add(
				f, "dev-permission", VD_SEVERITY_ERROR, g.gl_pathv[i],
				"ask an administrator to add you to the group that owns it "
				"(often video or render), then log in again",
				"%s cannot be opened by this user (%s): CUDA cannot use that GPU",
				g.gl_pathv[i], strerror(errno));
	globfree(&g);
	return err;
}

/* A container: who sees the leases. */
static int check_container(struct vd_findings *f, const char *dir)
{
	/* Docker's and Podman's marks, or the variable the NVIDIA container runtime reads */
	int inside = access("/.dockerenv", F_OK) == 0 || access("/run/.containerenv", F_OK) == 0 ||
		     getenv("NVIDIA_VISIBLE_DEVICES");

	if (!inside)
		return 0;
	return vd_findings_add(
		f, "container-leases", VD_SEVERITY_WARNING, dir,
		"share one lease directory with the host and the other containers: mount "
		"it (docker run -v /dev/shm/visdev-leases:/dev/shm/visdev-leases), or set "
		"VISDEV_LEASE_DIR to a folder they all mount",
		"this is a container: unless its lease directory '%s' is shared with the "
		"host, visdev here never sees the leases of jobs outside it, nor they its own",
		dir);
}

/* The lease directory: safe, usable, no leftovers. */
static int check_leases(struct vd_findings *f, const struct vd_system *sys, const char *dir)
{
	struct vd_leases *leases = NULL;
	int err = vd_leases_read(&leases, dir, sys);
	size_t stale = 0;

	if (err == VD_ENOMEM)
		return -1;
	if (err)
		return vd_findings_add(f, "leases-unusable", VD_SEVERITY_ERROR, dir,
				       "see README, 'The lease directory (for administrators)'",
				       "%s", vd_error_last());
	vd_leases_free(leases);
	if (vd_lease_dir_stale(&stale, dir) == 0 && stale &&
	    vd_findings_add(f, "leases-stale", VD_SEVERITY_INFO, dir, "",
			    "%zu record%s of leases that have ended: harmless, tidied away by the "
			    "next lease taken here",
			    stale, stale == 1 ? "" : "s"))
		return -1;
	if (access(dir, W_OK) < 0)
		return vd_findings_add(
			f, "leases-unwritable", VD_SEVERITY_ERROR, dir,
			"ask its owner to make it mode 1777 (install -d -m 1777 DIR)",
			"the lease directory '%s' cannot be written by this user (%s): 'visdev "
			"run' cannot lease a GPU",
			dir, strerror(errno));
	return 0;
}

/* The shell's start-up files: a login's export of the variable. */
static int check_startup(struct vd_findings *f, const struct vd_system *sys)
{
	static const char *const own[] = { ".bashrc",	".bash_profile", ".profile", ".zshrc",
					   ".zprofile", ".cshrc",	 ".tcshrc" };
	const char *home = getenv("HOME");
	glob_t g = { 0 };
	int err = 0;

	for (size_t i = 0; home && i < sizeof(own) / sizeof(own[0]) && !err; i++) {
		char path[4096], shown[4096];
		char *text;
		size_t len;

		snprintf(path, sizeof(path), "%s/%s", home, own[i]);
		snprintf(shown, sizeof(shown), "~/%s", own[i]);
		if (read_file(&text, &len, path) == 0)
			err = vd_doctor_startup(f, sys, text, len, shown);
		free(text);
	}
	if (glob("/etc/profile.d/*.sh", 0, NULL, &g) != 0)
		g.gl_pathc = 0;
	for (size_t i = 0; i <= g.gl_pathc && !err; i++) {
		const char *path = i < g.gl_pathc ? g.gl_pathv[i] : "/etc/environment";
		char *text;
		size_t len;

		if (read_file(&text, &len, path) == 0)
			err = vd_doctor_startup(f, sys, text, len, path);
		free(text);
	}
	if (g.gl_pathc)
		globfree(&g);
	return err;
}

static int check_script(struct vd_findings *f, const struct vd_system *sys, const char *path)
{
	char *text;
	size_t len;
	int err;

	if (read_file(&text, &len, path) < 0)
		return vd_findings_add(f, "script-unreadable", VD_SEVERITY_ERROR, path,
				       "name a Python file that exists", "cannot read '%s': %s",
				       path,
				       errno == EFBIG  ? "too large to be a script" :
				       errno == EINVAL ? "not a regular file" :
							 strerror(errno));
	err = vd_doctor_script(f, sys, text, len, path, getenv("CUDA_VISIBLE_DEVICES"),
			       getenv("CUDA_DEVICE_ORDER"));
	free(text);
	return err;
}

/* Reads a file of no known size (/proc) whole, NUL-terminated: 0, or -1 with errno. */
static int read_stream(char **out, size_t *len, const char *path)
{
	FILE *in = fopen(path, "re");
	size_t cap = 0, got;
	char *buf = NULL;

	*out = NULL;
	*len = 0;
	if (!in)
		return -1;
	do {
		if (*len + 4096 > cap) {
			char *more = realloc(buf, cap = 2 * cap + 4096);

			if (!more || cap > FILE_MAX) {
				free(more ? more : buf);
				fclose(in);
				errno = more ? EFBIG : ENOMEM;
				return -1;
			}
			buf = more;
		}
		got = fread(buf + *len, 1, cap - *len - 1, in);
		*len += got;
	} while (got);
	if (ferror(in)) {
		free(buf);
		fclose(in);
		errno = EIO;
		return -1;
	}
	fclose(in);
	buf[*len] = '\0';
	*out = buf;
	return 0;
}

/* The environment of process pid, as NAME=value strings; NULL after a finding says why. */
static char **process_env(struct vd_findings *f, long pid, char **text)
{
	char path[64], where[32], **env;
	size_t len, n = 0;

	snprintf(path, sizeof(path), "/proc/%ld/environ", pid);
	snprintf(where, sizeof(where), "pid %ld", pid);
	if (read_stream(text, &len, path) < 0) {
		int gone = errno == ENOENT || errno == ESRCH;

		vd_findings_add(f, "pid-unreadable", VD_SEVERITY_ERROR, where,
				gone ? "give the pid of a running process (ps shows them)" :
				       "run visdev doctor as the process's owner, or as root",
				"cannot read the environment of pid %ld: %s", pid,
				gone ? "no such process" : strerror(errno));
		return NULL;
	}
	for (size_t i = 0; i < len; i++)
		n += (*text)[i] == '\0';
	env = calloc(n + 2, sizeof(*env));
	for (size_t i = 0, k = 0; env && i < len; i += strlen(*text + i) + 1)
		env[k++] = *text + i;
	return env;
}

/* The value of name in a process's environment. */
static const char *env_value(char **env, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; env && env[i]; i++)
		if (!strncmp(env[i], name, len) && env[i][len] == '=')
			return env[i] + len + 1;
	return NULL;
}

/* What a running process sees, which GPUs it uses, and whether that is what was meant. */
static int check_pid(struct vd_findings *f, const struct vd_system *sys, const char *arg)
{
	char *end, *text = NULL, **env, where[32], used[256] = "";
	long pid = strtol(arg, &end, 10);
	struct vd_resolution *res = NULL, *pci = NULL;
	const char *value, *order_text;
	enum vd_order order = VD_ORDER_FASTEST;
	size_t nused = 0, len = 0;
	unsigned first = 0;
	int err;

	if (end == arg || *end || pid <= 0)
		return vd_findings_add(f, "pid-invalid", VD_SEVERITY_ERROR, arg,
				       "give a process id: --pid 4242", "'%s' is not a process id",
				       arg);
	snprintf(where, sizeof(where), "pid %ld", pid);
	env = process_env(f, pid, &text);
	if (!env)
		return 0;
	err = vd_doctor_env(f, sys, env, where);
	value = env_value(env, "CUDA_VISIBLE_DEVICES");
	order_text = env_value(env, "CUDA_DEVICE_ORDER");
	vd_order_parse(&order, order_text);
	for (size_t g = 0; sys && g < sys->ngpus; g++)
		for (size_t p = 0; p < sys->gpus[g].nprocesses; p++)
			if (sys->gpus[g].processes[p].pid == (uint32_t)pid && len < sizeof(used)) {
				len += (size_t)snprintf(used + len, sizeof(used) - len,
							"%sGPU %zu (%s)", nused ? ", " : "", g,
							sys->gpus[g].name);
				first = nused++ ? first : (unsigned)g;
			}
	if (!err && !nused)
		err = vd_findings_add(
			f, "pid-gpus", VD_SEVERITY_INFO, where, "",
			"pid %ld uses no GPU, as NVML sees it (CUDA_VISIBLE_DEVICES %s%s%s)", pid,
			value ? "'" : "unset", value ? value : "", value ? "'" : "");
	else if (!err)
		err = vd_findings_add(f, "pid-gpus", VD_SEVERITY_INFO, where, "", "pid %ld uses %s",
				      pid, used);
	/* ordinals counted fastest first where nvidia-smi's order was likely meant */
	if (!err && nused && order == VD_ORDER_FASTEST && value &&
	    vd_visible_resolve(&res, sys, value, VD_ORDER_FASTEST) == 0 &&
	    vd_visible_resolve(&pci, sys, value, VD_ORDER_PCI) == 0 && res->ndevices &&
	    pci->ndevices && res->devices[0].gpu == first && pci->devices[0].gpu != first)
		err = vd_findings_add(
			f, "pid-wrong-gpu", VD_SEVERITY_WARNING, where,
			"start it with CUDA_DEVICE_ORDER=PCI_BUS_ID (visdev run sets it)",
			"pid %ld runs on GPU %u, not GPU %u: its CUDA_VISIBLE_DEVICES='%s' is "
			"counted fastest first, since its CUDA_DEVICE_ORDER is %s; counted as "
			"nvidia-smi counts, it would be GPU %u",
			pid, first, pci->devices[0].gpu, value, order_text ? order_text : "unset",
			pci->devices[0].gpu);
	vd_resolution_free(res);
	vd_resolution_free(pci);
	free(env);
	free(text);
	return err;
}

static void print_text(const struct vd_findings *f)
{
	size_t count[3] = { 0 };

	for (size_t i = 0; i < f->n; i++) {
		const struct vd_finding *it = &f->items[i];

		count[it->severity]++;
		cli_printf("%s: %s: %s\n", vd_severity_name(it->severity), it->where, it->message);
		if (it->fix[0])
			cli_printf("  fix: %s\n", it->fix);
	}
	if (!count[VD_SEVERITY_ERROR] && !count[VD_SEVERITY_WARNING])
		cli_printf("doctor: nothing wrong found\n");
	else
		cli_printf("doctor: %zu error%s, %zu warning%s\n", count[VD_SEVERITY_ERROR],
			   count[VD_SEVERITY_ERROR] == 1 ? "" : "s", count[VD_SEVERITY_WARNING],
			   count[VD_SEVERITY_WARNING] == 1 ? "" : "s");
}

static int print_json(const struct vd_findings *f)
{
	json_t *a = json_array();

	for (size_t i = 0; i < f->n; i++) {
		const struct vd_finding *it = &f->items[i];

		json_array_append_new(a, json_pack("{s:s, s:s, s:o, s:o, s:o}", "id", it->id,
						   "severity", vd_severity_name(it->severity),
						   "message", cli_json_str(it->message), "where",
						   cli_json_str(it->where), "fix",
						   cli_json_str(it->fix)));
	}
	return cli_print_json(json_pack("{s:o}", "findings", a));
}

int cmd_doctor(int argc, char **argv)
{
	enum {
		OPT_SCRIPT = 256,
		OPT_PID,
	};
	static const struct option options[] = { { "script", required_argument, NULL, OPT_SCRIPT },
						 { "pid", required_argument, NULL, OPT_PID },
						 CLI_GLOBAL_OPTIONS };
	struct cli_globals g = { 0 };
	struct vd_findings f = { 0 };
	struct vd_backend *b = NULL;
	struct vd_system *sys = NULL;
	const char **scripts = calloc((size_t)argc + 1, sizeof(*scripts));
	const char **pids = calloc((size_t)argc + 1, sizeof(*pids));
	size_t nscripts = 0, npids = 0;
	int opt, rc = -1, err = 0, simulated;

	if (!scripts || !pids) {
		cli_error("out of memory");
		rc = EXIT_FAIL;
		goto out;
	}
	while (rc < 0 && (opt = cli_getopt(argc, argv, "h", options)) != -1) {
		if (opt == OPT_SCRIPT)
			scripts[nscripts++] = optarg;
		else if (opt == OPT_PID)
			pids[npids++] = optarg;
		else if (!cli_global_option(&g, opt, optarg))
			rc = EXIT_USAGE;
	}
	if (rc >= 0)
		goto out;
	if (cli_wants_help(&g, usage)) {
		rc = EXIT_OK;
		goto out;
	}
	if (optind < argc) {
		rc = cli_usage("doctor",
			       "doctor takes no arguments ('%s' given): --script FILE, "
			       "--pid PID",
			       argv[optind]);
		goto out;
	}
	simulated = g.backend.demo || g.backend.fixture || getenv("VISDEV_FIXTURE");
	{
		struct vd_backend_options bopts = g.backend;

		bopts.use_env = 1;
		err = vd_backend_open(&b, &bopts);
		if (!err)
			err = vd_backend_snapshot(&sys, b);
	}
	if (err == VD_ENOMEM)
		goto oom;
	if (err)
		err = vd_findings_add(
			&f, err == VD_ENODRIVER ? "nvml-missing" : "nvml-error", VD_SEVERITY_ERROR,
			"NVML",
			err == VD_ENODRIVER ?
				"install the NVIDIA driver (or, to try visdev, use --demo)" :
				"check the driver with nvidia-smi; reload it if that fails too",
			"%s", vd_error_last());
	if (!err && !simulated)
		err = check_driver(&f, sys);
	else if (!err)
		err = vd_findings_add(
			&f, "simulated", VD_SEVERITY_INFO, "--demo/--fixture", "",
			"a simulated server: the driver, its libraries and device files are "
			"not checked");
	if (!err && !simulated)
		err = check_container(&f, vd_lease_dir());
	if (!err)
		err = check_leases(&f, sys, vd_lease_dir());
	if (!err && sys)
		err = vd_doctor_env(&f, sys, environ, "the environment");
	if (!err && sys)
		err = check_startup(&f, sys);
	for (size_t i = 0; !err && sys && i < nscripts; i++)
		err = check_script(&f, sys, scripts[i]);
	for (size_t i = 0; !err && sys && i < npids; i++)
		err = check_pid(&f, sys, pids[i]);
	if (err)
		goto oom;
	rc = g.json ? print_json(&f) : (print_text(&f), EXIT_OK);
	for (size_t i = 0; rc == EXIT_OK && i < f.n; i++)
		if (f.items[i].severity == VD_SEVERITY_ERROR)
			rc = EXIT_FAIL;
	goto out;
oom:
	cli_error("out of memory");
	rc = EXIT_FAIL;
out:
	vd_findings_release(&f);
	vd_system_free(sys);
	vd_backend_free(b);
	free(scripts);
	free(pids);
	return rc;
}
