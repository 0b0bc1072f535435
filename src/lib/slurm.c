/*
 * slurm.c - the queue's second dispatcher, Slurm: what a sweep handed to
 * Slurm is (its state directory's queue.json: the frozen jobs, the arrays
 * submitted), how jobs become job arrays within MaxArraySize, and what
 * Slurm's commands say (scontrol's MaxArraySize, squeue's tasks). Pure but
 * for reading and writing queue.json; running sbatch and squeue is the
 * program's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define QUEUE_FILE "queue.json"
#define QUEUE_MAX  ((size_t)256 << 20)

/* ---- Jobs into arrays --------------------------------------------------------- */

int vd_slurm_indices(char **out, const size_t *jobs, size_t n, size_t offset)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	*out = NULL;
	if (!f)
		return error_set(VD_ENOMEM, "out of memory");
	for (size_t i = 0; i < n;) {
		size_t k = i;

		while (k + 1 < n && jobs[k + 1] == jobs[k] + 1)
			k++;
		if (k == i)
			fprintf(f, "%s%zu", i ? "," : "", jobs[i] - offset);
		else
			fprintf(f, "%s%zu-%zu", i ? "," : "", jobs[i] - offset, jobs[k] - offset);
		i = k + 1;
	}
	if (fclose(f) || !text) {
		free(text);
		return error_set(VD_ENOMEM, "out of memory");
	}
	*out = text;
	return 0;
}

int vd_slurm_split(struct vd_slurm_array **out, size_t *narrays, const size_t *jobs, size_t n,
		   size_t max_array)
{
	struct vd_slurm_array *a = NULL;
	size_t na = 0, cap = 0;

	*out = NULL;
	*narrays = 0;
	if (!max_array)
		return error_set(VD_EINVAL, "MaxArraySize is 0: Slurm takes no job arrays");
	/* jobs in windows of max_array numbers: in each, indices from 0 below MaxArraySize */
	for (size_t i = 0; i < n;) {
		size_t window = jobs[i] / max_array, k = i;
		struct vd_slurm_array *x;
		int err;

		while (k < n && jobs[k] / max_array == window)
			k++;
		if (array_grow(&a, &cap, na, sizeof(*a), 4)) {
			vd_slurm_arrays_free(a, na);
			return VD_ENOMEM;
		}
		x = &a[na];
		memset(x, 0, sizeof(*x));
		x->offset = window * max_array;
		x->njobs = k - i;
		err = vd_slurm_indices(&x->indices, jobs + i, k - i, x->offset);
		if (err) {
			vd_slurm_arrays_free(a, na);
			return err;
		}
		na++;
		i = k;
	}
	*out = a;
	*narrays = na;
	return 0;
}

void vd_slurm_arrays_free(struct vd_slurm_array *a, size_t n)
{
	for (size_t i = 0; a && i < n; i++) {
		free(a[i].indices);
		free(a[i].id);
	}
	free(a);
}

/* ---- What Slurm's commands say ---------------------------------------------------- */

int vd_slurm_max_array(size_t *out, const char *text)
{
	const char *p = text;

	while ((p = strstr(p, "MaxArraySize"))) {
		unsigned long long v;
		char *end;

		/* a line's start: "MaxArraySize            = 1001" */
		if (p != text && p[-1] != '\n') {
			p++;
			continue;
		}
		p += strlen("MaxArraySize");
		p += strspn(p, " \t");
		if (*p != '=')
			continue;
		p += 1 + strspn(p + 1, " \t");
		errno = 0;
		v = strtoull(p, &end, 10);
		if (end == p || errno || v > 4000001)
			return error_set(VD_EPARSE, "scontrol's MaxArraySize is not a number");
		*out = (size_t)v;
		return 0;
	}
	return error_set(VD_EPARSE, "scontrol show config names no MaxArraySize");
}

int vd_slurm_tasks_parse(struct vd_slurm_task **out, size_t *n, const char *text)
{
	struct vd_slurm_task *t = NULL;
	size_t nt = 0, cap = 0;

	*out = NULL;
	*n = 0;
	for (const char *line = text; *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[160], id[64], state[32];
		unsigned long long task;

		if (len && len < sizeof(buf)) {
			memcpy(buf, line, len);
			buf[len] = '\0';
			/* "123_4 R": an array's task and its state (squeue -h -r -o '%i %t') */
			if (sscanf(buf, "%63[0-9]_%llu %31s", id, &task, state) == 3) {
				if (array_grow(&t, &cap, nt, sizeof(*t), 16)) {
					free(t);
					return VD_ENOMEM;
				}
				memset(&t[nt], 0, sizeof(t[nt]));
				str_copy(t[nt].array, id, sizeof(t[nt].array));
				t[nt].task = (size_t)task;
				str_copy(t[nt].state, state, sizeof(t[nt].state));
				nt++;
			}
		}
		line += len + (nl ? 1 : 0);
	}
	*out = t;
	*n = nt;
	return 0;
}

/* ---- queue.json: the sweep as handed to Slurm --------------------------------------- */

/* Whether an index list ("3,7,19-21") counted from offset holds job. */
static int indices_hold(const char *list, size_t offset, size_t job)
{
	if (job < offset)
		return 0;
	job -= offset;
	for (const char *p = list; *p;) {
		char *end;
		unsigned long long a = strtoull(p, &end, 10), b = a;

		if (end == p)
			return 0;
		if (*end == '-')
			b = strtoull(end + 1, &end, 10);
		if (job >= a && job <= b)
			return 1;
		p = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return 0;
	}
	return 0;
}

size_t vd_slurm_submissions(const struct vd_slurm_queue *q, size_t job)
{
	size_t n = 0;

	for (size_t i = 0; i < q->narrays; i++)
		n += q->arrays[i].id &&
		     indices_hold(q->arrays[i].indices, q->arrays[i].offset, job);
	return n;
}

void vd_slurm_queue_free(struct vd_slurm_queue *q)
{
	if (!q)
		return;
	vd_strings_free(q->commands, q->njobs);
	vd_strings_free(q->sbatch_args, q->nargs);
	vd_slurm_arrays_free(q->arrays, q->narrays);
	free(q->dir);
	free(q->source);
	free(q->name);
	free(q->job_name);
	free(q);
}

/* The strings of a JSON array into a new list: 0, or -1 when it is not one of strings. */
static int string_list(char ***out, size_t *n, json_t *a)
{
	json_t *v;
	size_t i;

	*out = NULL;
	*n = 0;
	if (!json_is_array(a))
		return -1;
	*out = calloc(json_array_size(a) + 1, sizeof(**out));
	if (!*out)
		return -1;
	json_array_foreach(a, i, v)
	{
		if (!json_is_string(v) || !((*out)[i] = strdup(json_string_value(v)))) {
			vd_strings_free(*out, i);
			*out = NULL;
			return -1;
		}
		*n = i + 1;
	}
	return 0;
}

int vd_slurm_queue_parse(struct vd_slurm_queue **out, const char *text, size_t len)
{
	struct vd_slurm_queue *q = calloc(1, sizeof(*q));
	json_error_t e;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e), *arrays, *a;
	const char *digest, *name, *source, *job_name;
	size_t i;

	*out = NULL;
	if (!q) {
		json_decref(root);
		return error_set(VD_ENOMEM, "out of memory");
	}
	if (!root) {
		free(q);
		return error_set(VD_EPARSE, "line %d: %s", e.line, e.text);
	}
	arrays = json_object_get(root, "arrays");
	digest = json_string_value(json_object_get(root, "digest"));
	name = json_string_value(json_object_get(root, "name"));
	source = json_string_value(json_object_get(root, "source"));
	job_name = json_string_value(json_object_get(root, "slurm_name"));
	if (json_integer_value(json_object_get(root, "visdev_slurm_queue")) != 1 || !digest ||
	    !name || !job_name ||
	    string_list(&q->commands, &q->njobs, json_object_get(root, "jobs")) ||
	    string_list(&q->sbatch_args, &q->nargs, json_object_get(root, "sbatch")) ||
	    !json_is_array(arrays) || q->njobs > VD_JOBS_MAX ||
	    json_integer_value(json_object_get(root, "gpus")) < 0 ||
	    json_integer_value(json_object_get(root, "gpus")) > 64)
		goto bad;
	q->gpus = (unsigned)json_integer_value(json_object_get(root, "gpus"));
	q->cancelled = json_is_true(json_object_get(root, "cancelled"));
	q->digest = strtoull(digest, NULL, 16);
	q->name = strdup(name);
	q->job_name = strdup(job_name);
	q->source = source ? strdup(source) : NULL;
	if (!q->name || !q->job_name || (source && !q->source))
		goto nomem;
	q->arrays = calloc(json_array_size(arrays) + 1, sizeof(*q->arrays));
	if (!q->arrays)
		goto nomem;
	json_array_foreach(arrays, i, a)
	{
		struct vd_slurm_array *x = &q->arrays[i];
		const char *id = json_string_value(json_object_get(a, "id"));
		const char *indices = json_string_value(json_object_get(a, "indices"));
		json_int_t offset = json_integer_value(json_object_get(a, "offset"));
		json_int_t njobs = json_integer_value(json_object_get(a, "jobs"));

		if (!indices || offset < 0 || (size_t)offset > VD_JOBS_MAX || njobs < 0 ||
		    (size_t)njobs > q->njobs)
			goto bad;
		x->offset = (size_t)offset;
		x->njobs = (size_t)njobs;
		x->indices = strdup(indices);
		x->id = id ? strdup(id) : NULL;
		q->narrays = i + 1;
		if (!x->indices || (id && !x->id))
			goto nomem;
	}
	json_decref(root);
	*out = q;
	return 0;
bad:
	json_decref(root);
	vd_slurm_queue_free(q);
	return error_set(VD_EPARSE, "not a visdev Slurm queue");
nomem:
	json_decref(root);
	vd_slurm_queue_free(q);
	return error_set(VD_ENOMEM, "out of memory");
}

int vd_slurm_queue_read(struct vd_slurm_queue **out, const char *dir)
{
	char path[4200];
	struct stat st;
	char *text;
	ssize_t got = 0;
	int fd, err;

	*out = NULL;
	snprintf(path, sizeof(path), "%s/" QUEUE_FILE, dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT ?
			       error_set(VD_ENOTFOUND, "'%s' holds no Slurm queue (no %s)", dir,
					 QUEUE_FILE) :
			       error_set(VD_EIO, "cannot open '%s': %s", path, strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (size_t)st.st_size > QUEUE_MAX) {
		close(fd);
		return error_set(VD_EIO, "'%s' is not a file visdev wrote", path);
	}
	text = malloc((size_t)st.st_size + 1);
	while (text && got < st.st_size) {
		ssize_t n = read(fd, text + got, (size_t)(st.st_size - got));

		if (n <= 0)
			break;
		got += n;
	}
	close(fd);
	if (!text)
		return error_set(VD_ENOMEM, "out of memory");
	err = vd_slurm_queue_parse(out, text, (size_t)got);
	free(text);
	if (err == VD_EPARSE) {
		char why[256];

		snprintf(why, sizeof(why), "%s", vd_error_last());
		return error_set(VD_EPARSE, "%s: %s", path, why);
	}
	if (!err && !((*out)->dir = strdup(dir))) {
		vd_slurm_queue_free(*out);
		*out = NULL;
		return error_set(VD_ENOMEM, "out of memory");
	}
	return err;
}

int vd_slurm_queue_write(const struct vd_slurm_queue *q)
{
	json_t *root = json_object(), *jobs = json_array(), *args = json_array(),
	       *arrays = json_array();
	char path[4200], digest[32];
	char *text;
	int err;

	for (size_t i = 0; i < q->njobs; i++)
		json_array_append_new(jobs, json_string(q->commands[i]));
	for (size_t i = 0; i < q->nargs; i++)
		json_array_append_new(args, json_string(q->sbatch_args[i]));
	for (size_t i = 0; i < q->narrays; i++)
		json_array_append_new(
			arrays,
			json_pack("{s:o, s:I, s:I, s:s}", "id",
				  q->arrays[i].id ? json_string(q->arrays[i].id) : json_null(),
				  "offset", (json_int_t)q->arrays[i].offset, "jobs",
				  (json_int_t)q->arrays[i].njobs, "indices", q->arrays[i].indices));
	snprintf(digest, sizeof(digest), "%016llx", (unsigned long long)q->digest);
	json_object_set_new(root, "visdev_slurm_queue", json_integer(1));
	json_object_set_new(root, "name", json_string(q->name));
	json_object_set_new(root, "slurm_name", json_string(q->job_name));
	json_object_set_new(root, "source", q->source ? json_string(q->source) : json_null());
	json_object_set_new(root, "digest", json_string(digest));
	json_object_set_new(root, "gpus", json_integer(q->gpus));
	json_object_set_new(root, "cancelled", json_boolean(q->cancelled));
	json_object_set_new(root, "sbatch", args);
	json_object_set_new(root, "arrays", arrays);
	json_object_set_new(root, "jobs", jobs);
	text = json_dumps(root, JSON_INDENT(1));
	json_decref(root);
	if (!text)
		return error_set(VD_ENOMEM, "out of memory");
	snprintf(path, sizeof(path), "%s/" QUEUE_FILE, q->dir);
	err = file_replace(path, text, strlen(text)) ?
		      error_set(VD_EIO, "cannot write '%s': %s", path, strerror(errno)) :
		      0;
	free(text);
	return err;
}
