/*
 * queue_slurm.h - `visdev queue --slurm`: the queue's jobs handed to Slurm as
 * job arrays, each task run by `visdev queue --task`, followed, resumed and
 * cancelled through the state directory (queue_slurm.c).
 */
#ifndef VISDEV_QUEUE_SLURM_H
#define VISDEV_QUEUE_SLURM_H

#include "visdev.h"

/* What `queue --slurm` was told, besides the jobs. */
struct slurm_options {
	const char *dir;       /* --state DIR, or NULL for the default beside the job file */
	const char *file;      /* the job file ("-" stdin); NULL for a grid */
	const char *partition; /* --partition, --time, --account; NULL: Slurm's default */
	const char *time;
	const char *account;
	const char **sbatch_args; /* --sbatch-arg, each as given */
	size_t nargs;
	unsigned gpus;	   /* -n: GPUs per job (default 1) */
	long max_parallel; /* --max-parallel: %K of each array; 0 none */
	long retries;	   /* --retries: a failed job submitted again, up to R more times */
	int detach, quiet, json, force;
};

/*
 * Reads a job file (cmd_queue.c; "-" is standard input): 0, or an exit code
 * after saying what is wrong (2 for no such file or one that is no job file).
 */
int queue_read_job_file(struct vd_jobs **out, const char *file);

/* Submits jobs to Slurm, then follows them unless detached. Returns the exit code. */
int slurm_submit(const struct slurm_options *o, const struct vd_jobs *jobs);

/* Submits again the jobs of DIR that did not finish successfully, then follows them. */
int slurm_resume(const struct slurm_options *o, const char *dir);

/* Runs job id of the sweep in dir, as Slurm's array task (the batch script calls it). */
int slurm_task(const char *id, const char *dir);

/* Where the sweep in dir stands (text or JSON). */
int slurm_status(const char *dir, int json);

/* Cancels the sweep's arrays (scancel). */
int slurm_cancel(const char *dir);

/* Whether dir holds a sweep handed to Slurm. */
int slurm_is_dir(const char *dir);

#endif
