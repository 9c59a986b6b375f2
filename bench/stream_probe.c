/*
 * stream_probe.c
 *		DRAM read bandwidth with T threads, for the roofline of batch-1
 *		decode: each thread sums its share of a 1 GiB array of floats (far
 *		larger than the caches), best of 5 passes.  Prints GB/s (10^9).
 *
 *   stream_probe [THREADS]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define PROBE_BYTES ((size_t) 1 << 30)
#define PROBE_PASSES 5

typedef struct Share
{
	const float *p;				/* (n) this thread's part */
	size_t		n;
	double		sum;			/* kept so the reads are not optimised away */
} Share;

/* Sum a share with eight independent accumulators (vectorised by the compiler). */
static void *
sum_share(void *arg)
{
	Share	   *s = arg;
	float		acc[8] = {0};

	for (size_t i = 0; i + 8 <= s->n; i += 8)
		for (int j = 0; j < 8; j++)
			acc[j] += s->p[i + j];
	s->sum = 0;
	for (int j = 0; j < 8; j++)
		s->sum += acc[j];
	return NULL;
}

/* Seconds on the monotonic clock. */
static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int
main(int argc, char **argv)
{
	int			nth = argc > 1 ? atoi(argv[1]) : 2;
	size_t		n = PROBE_BYTES / sizeof(float);
	float	   *a = malloc(PROBE_BYTES);
	pthread_t	th[64];
	Share		sh[64];
	double		best = 0;
	double		total = 0;

	if (a == NULL || nth < 1 || nth > 64)
	{
		fprintf(stderr, "stream_probe: bad thread count or out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		a[i] = (float) (i & 1023);
	for (int pass = 0; pass < PROBE_PASSES; pass++)
	{
		double		t0 = now();
		double		gbs;

		for (int t = 0; t < nth; t++)
		{
			sh[t].p = a + n / nth * t;
			sh[t].n = n / nth;
			pthread_create(&th[t], NULL, sum_share, &sh[t]);
		}
		for (int t = 0; t < nth; t++)
		{
			pthread_join(th[t], NULL);
			total += sh[t].sum;
		}
		gbs = PROBE_BYTES / (now() - t0) / 1e9;
		if (gbs > best)
			best = gbs;
	}
	printf("%.2f\n", best);
	fprintf(stderr, "stream_probe: %d threads, best of %d passes over 1 GiB (checksum %.0f)\n", nth, PROBE_PASSES,
			total);
	free(a);
	return 0;
}
