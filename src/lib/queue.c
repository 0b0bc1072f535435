/*
 * queue.c - a queue's state: which job starts next, which runs again, how
 * each went. Pure: the dispatchers (visdev queue's event loop, Slurm) do
 * the running and tell it what happened.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct vd_queue {
	struct vd_queue_job *jobs;
	size_t njobs;
	unsigned retries;
	unsigned char *tries; /* this run's starts of each job (retries are at most 255) */
	size_t *pending;      /* jobs to start: pending[head .. head + npending) */
	size_t head, npending;
	size_t to_run, running, done, failed;
	int stopped;
};

int vd_queue_new(struct vd_queue **out, size_t njobs, const struct vd_journal *journal,
		 unsigned retries)
{
	struct vd_queue *q = calloc(1, sizeof(*q));

	*out = NULL;
	if (!q)
		return error_set(VD_ENOMEM, "out of memory");
	q->jobs = calloc(njobs ? njobs : 1, sizeof(*q->jobs));
	q->pending = calloc(njobs ? njobs : 1, sizeof(*q->pending));
	q->tries = calloc(njobs ? njobs : 1, 1);
	q->njobs = njobs;
	q->retries = retries > 254 ? 254 : retries;
	if (!q->jobs || !q->pending || !q->tries) {
		vd_queue_free(q);
		return error_set(VD_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < njobs; i++) {
		struct vd_queue_job *j = &q->jobs[i];
		const struct vd_journal_job *jj =
			journal && i < journal->njobs ? &journal->jobs[i] : NULL;

		j->seconds = -1;
		if (jj) {
			j->state = jj->state;
			j->status = jj->status;
			j->starts = jj->starts;
			if (jj->end_ms && jj->start_ms)
				j->seconds = (double)(jj->end_ms - jj->start_ms) / 1e3;
			if (jj->devices && !(j->uuids = strdup(jj->devices))) {
				vd_queue_free(q);
				return error_set(VD_ENOMEM, "out of memory");
			}
		}
		if (j->state != VD_JOB_DONE)
			q->pending[q->npending++] = i;
	}
	q->to_run = q->npending;
	*out = q;
	return 0;
}

/* "job 3 (line 5)", or "job 3" from a grid. */
static void job_label(char *buf, size_t n, const struct vd_jobs *jobs, size_t i)
{
	if (jobs->lines && i < jobs->n)
		snprintf(buf, n, "job %zu (line %u)", i, jobs->lines[i]);
	else
		snprintf(buf, n, "job %zu", i);
}

/* Says how jobs differ from the list the journal was written for. */
static int changed(const struct vd_jobs *jobs, const struct vd_journal *j)
{
	char label[64];

	for (size_t i = 0; i < j->njobs; i++) {
		const char *was = j->jobs[i].command;

		if (!was)
			continue;
		if (i >= jobs->n)
			return error_set(VD_EINVAL,
					 "the jobs changed since the journal was written: job %zu "
					 "('%s') is gone: %zu jobs now, %zu then",
					 i, was, jobs->n, j->njobs);
		if (strcmp(was, jobs->commands[i])) {
			job_label(label, sizeof(label), jobs, i);
			return error_set(VD_EINVAL,
					 "the jobs changed since the journal was written: %s was "
					 "'%s' and is now '%s'",
					 label, was, jobs->commands[i]);
		}
	}
	return error_set(VD_EINVAL,
			 "the jobs changed since the journal was written: %zu jobs now, %zu then, "
			 "and every job that ran is unchanged",
			 jobs->n, j->njobs);
}

int vd_queue_check(const struct vd_jobs *jobs, const struct vd_journal *journal, int resume,
		   int force)
{
	size_t unfinished = 0;

	if (resume && !journal)
		return error_set(VD_EINVAL, "no journal to resume");
	if (!journal || force)
		return 0;
	if (journal->digest != jobs->digest || journal->njobs != jobs->n)
		return resume ? changed(jobs, journal) : 0;
	if (resume)
		return 0;
	for (size_t i = 0; i < journal->njobs; i++)
		unfinished += journal->jobs[i].state == VD_JOB_RUNNING ||
			      journal->jobs[i].state == VD_JOB_PENDING;
	if (unfinished)
		return error_set(VD_EINVAL,
				 "the journal shows a run of these jobs cut short, %zu of %zu not "
				 "finished",
				 unfinished, journal->njobs);
	return 0;
}

long vd_queue_next(const struct vd_queue *q)
{
	return q->stopped || !q->npending ? -1 : (long)q->pending[q->head];
}

int vd_queue_started(struct vd_queue *q, size_t job, const char *uuids)
{
	struct vd_queue_job *j;
	char *copy;

	if (job >= q->njobs || !q->npending || q->pending[q->head] != job)
		return error_set(VD_EINVAL, "job %zu is not next", job);
	copy = strdup(uuids ? uuids : "");
	if (!copy)
		return error_set(VD_ENOMEM, "out of memory");
	j = &q->jobs[job];
	free(j->uuids);
	j->uuids = copy;
	j->state = VD_JOB_RUNNING;
	j->starts++;
	if (q->tries[job] < 255)
		q->tries[job]++;
	q->head++;
	q->npending--;
	q->running++;
	return 0;
}

int vd_queue_ended(struct vd_queue *q, size_t job, int status, double seconds)
{
	struct vd_queue_job *j;

	if (job >= q->njobs || q->jobs[job].state != VD_JOB_RUNNING)
		return error_set(VD_EINVAL, "job %zu is not running", job);
	j = &q->jobs[job];
	j->status = status;
	j->seconds = seconds;
	q->running--;
	if (status == 0) {
		j->state = VD_JOB_DONE;
		q->done++;
	} else if (!q->stopped && q->tries[job] <= q->retries) {
		/* again, before anything else: the head of the line it already had */
		j->state = VD_JOB_PENDING;
		q->pending[--q->head] = job;
		q->npending++;
	} else {
		j->state = VD_JOB_FAILED;
		q->failed++;
	}
	return 0;
}

void vd_queue_stop(struct vd_queue *q)
{
	q->stopped = 1;
}

const struct vd_queue_job *vd_queue_job(const struct vd_queue *q, size_t i)
{
	return i < q->njobs ? &q->jobs[i] : NULL;
}

void vd_queue_counts(const struct vd_queue *q, struct vd_queue_counts *out)
{
	out->to_run = q->to_run;
	out->pending = q->npending;
	out->running = q->running;
	out->done = q->done;
	out->failed = q->failed;
}

void vd_queue_free(struct vd_queue *q)
{
	if (!q)
		return;
	for (size_t i = 0; i < q->njobs; i++)
		free(q->jobs[i].uuids);
	free(q->jobs);
	free(q->pending);
	free(q->tries);
	free(q);
}
