/*
 * check.c - asks a real NVIDIA driver what visdev can only read about:
 * compares `visdev list --json` with nvidia-smi, and for each value of
 * CUDA_VISIBLE_DEVICES compares `visdev map --json` with the devices the
 * CUDA driver itself enumerates (libcuda.so.1 in a fresh process per value,
 * through vd_cuda_enumerate). Prints a table; exits 1 on any disagreement.
 *
 * usage: check VISDEV
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "visdev.h"

extern char **environ;

static int disagreements;

/* Runs argv (NULL-terminated, at most 15) and returns what it printed on stdout, or NULL. */
static char *capture(const char *const argv[])
{
	posix_spawn_file_actions_t fa;
	size_t len = 0, cap = 65536, argc = 0;
	char *buf = malloc(cap), *args[16];
	int fds[2], status, failed;
	ssize_t n;
	pid_t pid;

	if (!buf || pipe(fds))
		return NULL;
	for (; argv[argc] && argc < 15; argc++)
		args[argc] = strdup(argv[argc]);
	args[argc] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_addclose(&fa, fds[0]);
	failed = posix_spawnp(&pid, args[0], &fa, NULL, args, environ);
	posix_spawn_file_actions_destroy(&fa);
	for (size_t i = 0; i < argc; i++)
		free(args[i]);
	if (failed) {
		close(fds[0]);
		close(fds[1]);
		free(buf);
		return NULL;
	}
	close(fds[1]);
	while ((n = read(fds[0], buf + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (len + 1 == cap) {
			char *grown = realloc(buf, cap *= 2);

			if (!grown)
				break;
			buf = grown;
		}
	}
	close(fds[0]);
	buf[len] = '\0';
	waitpid(pid, &status, 0);
	return buf;
}

static void row(const char *what, const char *a, const char *b)
{
	int same = !strcmp(a, b);

	disagreements += !same;
	printf("%-50s | %-44s | %-44s | %s\n", what, a, b, same ? "agree" : "DISAGREE");
}

/* nvidia-smi's view against `visdev list --json`, field by field. */
static void check_list(const char *visdev)
{
	const char *const smi[] = { "nvidia-smi",
				    "--query-gpu=index,uuid,name,pci.bus_id,memory.total",
				    "--format=csv,noheader,nounits", NULL };
	const char *const list[] = { visdev, "list", "--json", NULL };
	char *csv = capture(smi), *js = capture(list), *save = NULL;
	json_t *root = js ? json_loads(js, 0, NULL) : NULL;
	json_t *gpus = json_object_get(root, "gpus");
	size_t seen = 0;

	printf("%-50s | %-44s | %-44s | %s\n", "list: field", "visdev list --json", "nvidia-smi",
	       "");
	if (!csv || !gpus) {
		row("list: nvidia-smi and visdev ran", csv ? "yes" : "no", gpus ? "yes" : "no");
		goto out;
	}
	for (char *line = strtok_r(csv, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		static const char *const keys[] = { "index", "uuid", "name", "pci_bus_id",
						    "memory_total_mib" };
		char *fsave = NULL, *field = strtok_r(line, ",", &fsave);
		json_t *gpu = json_array_get(gpus, seen++);

		for (size_t k = 0; k < 5 && field; k++, field = strtok_r(NULL, ",", &fsave)) {
			json_t *v = json_object_get(gpu, keys[k]);
			char mine[128], what[64];

			while (*field == ' ')
				field++;
			if (json_is_integer(v))
				snprintf(mine, sizeof(mine), "%lld",
					 (long long)json_integer_value(v));
			else
				snprintf(mine, sizeof(mine), "%s",
					 json_is_string(v) ? json_string_value(v) : "(missing)");
			snprintf(what, sizeof(what), "list: GPU %zu %s", seen - 1, keys[k]);
			row(what, mine, field);
		}
	}
	{
		char a[16], b[16];

		snprintf(a, sizeof(a), "%zu", json_array_size(gpus));
		snprintf(b, sizeof(b), "%zu", seen);
		row("list: GPU count", a, b);
	}
out:
	json_decref(root);
	free(csv);
	free(js);
}

/*
 * What stands for "a device named twice": visdev says CUDA sees nothing,
 * and the driver (R580) refuses to start, cuInit failing with
 * CUDA_ERROR_INVALID_DEVICE. Either way the program has no GPU.
 */
#define NAMED_TWICE "(named twice: no GPU)"

/* The UUIDs `visdev map` says CUDA sees, comma-joined. */
static void visdev_map(char *out, size_t n, const char *visdev, const char *value, int unset,
		       enum vd_order order)
{
	const char *const set[] = { visdev, "map", "--json", "--order", vd_order_name(order),
				    "--",   value, NULL };
	const char *const unset_argv[] = { visdev,    "map",	 "--json",
					   "--unset", "--order", vd_order_name(order),
					   NULL };
	char *js = capture(unset ? unset_argv : set);
	json_t *root = js ? json_loads(js, 0, NULL) : NULL,
	       *devs = json_object_get(root, "devices");
	size_t len = 0, i;
	json_t *d;

	out[0] = '\0';
	if (!devs)
		snprintf(out, n, "(visdev failed)");
	if (json_is_object(json_object_get(root, "duplicate"))) {
		snprintf(out, n, NAMED_TWICE);
		devs = NULL;
	}
	json_array_foreach(devs, i, d)
	{
		len += (size_t)snprintf(out + len, n > len ? n - len : 0, "%s%s", i ? "," : "",
					json_string_value(json_object_get(d, "uuid")));
	}
	json_decref(root);
	free(js);
}

static void check_value(const char *visdev, const char *value, enum vd_order order)
{
	char mine[1024], theirs[1024], what[80];
	char **uuids = NULL;
	size_t n = 0, len = 0;

	visdev_map(mine, sizeof(mine), visdev, value, value == NULL, order);
	if (vd_cuda_enumerate(&uuids, &n, NULL, value, order)) {
		if (strstr(vd_error_last(), "cuInit failed: CUDA_ERROR_INVALID_DEVICE"))
			snprintf(theirs, sizeof(theirs), NAMED_TWICE);
		else
			snprintf(theirs, sizeof(theirs), "(driver: %s)", vd_error_last());
	} else {
		theirs[0] = '\0';
		for (size_t i = 0; i < n; i++)
			len += (size_t)snprintf(theirs + len,
						sizeof(theirs) > len ? sizeof(theirs) - len : 0,
						"%s%s", i ? "," : "", uuids[i]);
		vd_strings_free(uuids, n);
	}
	if (value)
		snprintf(what, sizeof(what), "map %s '%s'", vd_order_name(order), value);
	else
		snprintf(what, sizeof(what), "map %s (unset)", vd_order_name(order));
	row(what, mine, theirs);
}

/*
 * On a machine with a GPU in MIG mode, the MIG rules: which devices CUDA
 * enumerates for MIG devices together, beside whole GPUs, through their
 * GPU's index or UUID, and with the variable unset. Nothing without MIG.
 */
static void check_mig(const char *visdev, const struct vd_system *sys)
{
	const struct vd_gpu *mig = NULL, *whole = NULL;
	char v[8][3 * VD_UUID_MAX + 8];
	size_t nv = 0;

	for (size_t i = 0; i < sys->ngpus; i++) {
		if (sys->gpus[i].mig_mode && sys->gpus[i].nmig && !mig)
			mig = &sys->gpus[i];
		else if (!sys->gpus[i].mig_mode && !whole)
			whole = &sys->gpus[i];
	}
	if (!mig) {
		printf("(no GPU in MIG mode here: the MIG rules stay unverified)\n");
		return;
	}
	snprintf(v[nv++], sizeof(v[0]), "%s", mig->mig[0].uuid);
	snprintf(v[nv++], sizeof(v[0]), "%u", mig->index);
	snprintf(v[nv++], sizeof(v[0]), "%s", mig->uuid);
	if (mig->nmig > 1) {
		snprintf(v[nv++], sizeof(v[0]), "%s,%s", mig->mig[0].uuid, mig->mig[1].uuid);
		snprintf(v[nv++], sizeof(v[0]), "%s,%s", mig->mig[1].uuid, mig->mig[0].uuid);
	}
	if (whole) {
		snprintf(v[nv++], sizeof(v[0]), "%s,%s", mig->mig[0].uuid, whole->uuid);
		snprintf(v[nv++], sizeof(v[0]), "%s,%s", whole->uuid, mig->mig[0].uuid);
	}
	check_value(visdev, NULL, VD_ORDER_PCI);
	for (size_t i = 0; i < nv; i++)
		check_value(visdev, v[i], VD_ORDER_PCI);
}

int main(int argc, char **argv)
{
	struct vd_backend_options opts = { .use_env = 1 };
	struct vd_backend *b = NULL;
	struct vd_system *sys = NULL;
	char prefix[16], upper[VD_UUID_MAX], blank[VD_UUID_MAX + 4], mixed[VD_UUID_MAX + 4];
	char mixed2[VD_UUID_MAX + 4], spaced[2 * VD_UUID_MAX + 4], lower[VD_UUID_MAX];
	char cut[3 * VD_UUID_MAX], tab[VD_UUID_MAX + 4], upprefix[16], bareblank[8];
	char trailing[24], commablank[VD_UUID_MAX + 24];

	if (argc != 2) {
		fprintf(stderr, "usage: check VISDEV\n");
		return 2;
	}
	if (vd_backend_open(&b, &opts) || vd_backend_snapshot(&sys, b) || !sys->ngpus) {
		fprintf(stderr, "check: no GPU to ask: %s\n", sys ? "none found" : vd_error_last());
		return 77;
	}
	check_list(argv[1]);

	const char *uuid = sys->gpus[0].uuid;
	snprintf(prefix, sizeof(prefix), "%.12s", uuid);
	for (size_t i = 0; i <= strlen(uuid); i++)
		upper[i] =
			(char)(i >= 4 && uuid[i] >= 'a' && uuid[i] <= 'f' ? uuid[i] - 32 : uuid[i]);
	snprintf(blank, sizeof(blank), " %s", uuid);
	snprintf(mixed, sizeof(mixed), "0,%s", uuid);
	snprintf(mixed2, sizeof(mixed2), "%s,0", uuid);
	snprintf(spaced, sizeof(spaced), "%s ", uuid);
	for (size_t i = 0; i <= strlen(uuid); i++)
		lower[i] = (char)(uuid[i] >= 'A' && uuid[i] <= 'Z' ? uuid[i] + 32 : uuid[i]);
	/* a duplicate after the list was cut: does CUDA still read past the cut? */
	snprintf(cut, sizeof(cut), "%s,GPU-ffff,%s", uuid, uuid);
	/* blanks after a UUID: only at the end of the value, or before a comma too? */
	snprintf(tab, sizeof(tab), "%s\t", uuid);
	snprintf(upprefix, sizeof(upprefix), "%.12s", upper);
	snprintf(bareblank, sizeof(bareblank), "GPU- ");
	snprintf(trailing, sizeof(trailing), "%s x", prefix);
	snprintf(commablank, sizeof(commablank), "%s ,%s", prefix, uuid);
	const char *values[] = {
		"0",
		"1",
		"-1",
		"",
		"0,0",
		prefix,
		uuid,
		"GPU-ffff",
		" 0",
		"0abc",
		"+0",
		"-0",
		"0,9,0",
		"0,",
		",0",
		"0x1",
		"1gpu2",
		"abc",
		" ",
		"0 ,",
		upper,
		blank,
		spaced,
		mixed,
		mixed2,
		"GPU-",
		"MIG-",
		"9",
		"0,1",
		"1,0",
		lower,
		cut,
		"08",
		"+",
		"-",
		"+,0",
		"0,,1",
		"4294967296",
		"4294967296,0",
		"18446744073709551616",
		/* strtoul or strtol before the cut to 32 bits: these two tell them apart */
		"9223372036854775808",
		"-18446744073709551615",
		"4294967295",
		"2147483648",
		"-4294967296",
		"-0,0",
		tab,
		upprefix,
		bareblank,
		trailing,
		commablank,
	};

	printf("\n%-50s | %-44s | %-44s | %s\n", "map: order and value", "visdev map --json",
	       "CUDA driver (cuDeviceGetUuid)", "");
	check_value(argv[1], NULL, VD_ORDER_PCI);
	check_value(argv[1], NULL, VD_ORDER_FASTEST);
	check_value(argv[1], "0", VD_ORDER_FASTEST);
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
		check_value(argv[1], values[i], VD_ORDER_PCI);
	check_mig(argv[1], sys);
	printf("\n%d disagreement%s\n", disagreements, disagreements == 1 ? "" : "s");
	vd_system_free(sys);
	vd_backend_free(b);
	return disagreements ? 1 : 0;
}
