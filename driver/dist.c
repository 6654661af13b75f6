/*
 * dist.c - data-parallel training over MPI: `mpirun -np N attnc MODEL.g
 * --train` (or srun). Open MPI is the engine; attnc only decides what
 * goes where.
 *
 * Every rank compiles the same program, reads the same data and draws
 * the same order, and runs its slice of each global batch: the batch is
 * cut into ranks x shards shards (train.c, grad_fn.c), rank r running the
 * shards r*S .. r*S + S - 1. After a step each rank's shard gradients
 * (and losses) are gathered to every rank (MPI_Allgather, into one block
 * of all shards laid out in shard order), and every rank adds them in
 * shard order with the same code a single process uses for its shards,
 * then takes the same optimizer step. So the run's numbers are, to the
 * bit, those of one process with --shards ranks x shards; the price is
 * memory for every shard's gradient on every rank (docs/cluster.md).
 *
 * A plain `attnc` run calls no MPI function: MPI starts only when a
 * launcher's environment says this process is one of several ranks.
 * Rank 0 alone prints, writes --metrics, checkpoints and pictures (the
 * other ranks' stdout and stderr streams go to /dev/null); every rank's
 * diagnostics go to file descriptor 2 prefixed with "rank R: "; a rank
 * that fails ends the job with MPI_Abort, so no rank waits forever in a
 * collective. Failures that every rank learns of in one collective (a
 * rank that could not open its training, ranks given different ones:
 * train.c's ranks_agree) end every rank normally instead, after each
 * has said its own error: an abort could kill a rank before it had.
 */
#define _GNU_SOURCE /* fopencookie: the ranks' prefixed stderr */
#include "driver.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether a launcher started this process as one of several ranks. */
static bool is_launched(void)
{
	static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
					   "PMI_SIZE", "PMI_RANK"};
	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
		if (getenv(vars[i]))
			return true;
	return false;
}

/* stderr with "rank R: " before each line, through fopencookie. */
typedef struct prefixed {
	int rank;
	bool is_line_start;
} prefixed;

/* Each line, with its prefix, in one write(2), so that the ranks' lines
 * do not mix (the stream is line-buffered: a call holds whole lines). */
static ssize_t prefixed_write(void *cookie, const char *buf, size_t size)
{
	prefixed *p = cookie;
	char out[4096];
	size_t n = 0;
	for (size_t i = 0; i < size; i++) {
		if (p->is_line_start)
			n += (size_t)snprintf(out + n, sizeof out - n,
					      "rank %d: ", p->rank);
		out[n++] = buf[i];
		p->is_line_start = buf[i] == '\n';
		if (n > sizeof out - 32 || p->is_line_start || i + 1 == size) {
			if (write(STDERR_FILENO, out, n) < 0)
				return -1;
			n = 0;
		}
	}
	return (ssize_t)size;
}

bool drv_dist_init(drv_dist *d, int *argc, char ***argv)
{
	memset(d, 0, sizeof *d);
	d->n_ranks = 1;
	if (!is_launched())
		return true;
	int provided;
	if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) !=
	    MPI_SUCCESS) {
		fprintf(stderr, "attnc: error: MPI_Init failed\n");
		return false;
	}
	d->is_mpi = true;
	MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &d->n_ranks);
	static prefixed cookie;
	cookie = (prefixed){d->rank, true};
	cookie_io_functions_t io = {.write = prefixed_write};
	d->diag = fopencookie(&cookie, "w", io);
	if (d->diag)
		setvbuf(d->diag, NULL, _IOLBF, 0);
	if (d->rank != 0 && !freopen("/dev/null", "w", stdout))
		return false;
	/* Rank 0's stderr in whole lines: a line printed in parts (the
	 * data summary) went out in several writes, and another rank's
	 * error line, forwarded by the launcher, could land inside it. */
	if (d->rank == 0)
		setvbuf(stderr, NULL, _IOLBF, 0);
	/* The progress and data summaries go to stderr (train.c, nmt.c,
	 * ...): rank 0's alone are printed. The other ranks' stderr stream
	 * is /dev/null too, while their diagnostics still reach file
	 * descriptor 2 through d->diag (as Open MPI's own messages do). */
	if (d->rank != 0) {
		FILE *null = fopen("/dev/null", "w");
		if (!null)
			return false;
		stderr = null;
	}
	return true;
}

/* Whether every rank knows that the job fails (drv_dist_fail_together):
 * the state of the process, as MPI's own is. */
static bool failed_together;

void drv_dist_fail_together(void)
{
	failed_together = true;
}

void drv_dist_fini(drv_dist *d, int status)
{
	if (!d->is_mpi)
		return;
	if (d->diag)
		fflush(d->diag);
	fflush(stdout);
	fflush(stderr);
	/* the others may wait in a collective: end them */
	if (status != 0 && !failed_together)
		MPI_Abort(MPI_COMM_WORLD, status);
	MPI_Finalize();
	if (d->diag)
		fclose(d->diag);
}

void drv_dist_rank_options(const drv_dist *d, drv_options *o)
{
	o->n_ranks = d->n_ranks;
	o->rank = d->rank;
	if (d->rank == 0)
		return;
	o->metrics = NULL; /* rank 0 alone writes what the user keeps */
	o->save = NULL;
	o->save_every = 0;
	o->plot = NULL;
	o->heatmap = NULL;
	o->heatmap_output = NULL;
	o->outputs = NULL;
}

bool drv_dist_allgather(int n_ranks, void *buf, size_t bytes_per_rank)
{
	if (n_ranks <= 1)
		return true;
	/* in parts of at most 1 GiB a rank, as MPI counts in int */
	size_t part = (size_t)1 << 30;
	char *b = buf;
	for (size_t at = 0; at < bytes_per_rank; at += part) {
		size_t n = bytes_per_rank - at < part ? bytes_per_rank - at
						      : part;
		/* part [at, at + n) of every rank's slice, the slices
		 * bytes_per_rank apart: a type of n bytes whose extent is a
		 * slice */
		MPI_Datatype slice;
		MPI_Type_contiguous((int)n, MPI_BYTE, &slice);
		MPI_Datatype resized;
		MPI_Type_create_resized(slice, 0, (MPI_Aint)bytes_per_rank,
					&resized);
		MPI_Type_commit(&resized);
		int rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL,
				       b + at, 1, resized, MPI_COMM_WORLD);
		MPI_Type_free(&resized);
		MPI_Type_free(&slice);
		if (rc != MPI_SUCCESS)
			return false;
	}
	return true;
}
