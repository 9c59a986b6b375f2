/*
 * peak_probe.c
 *		The machine's own limits, which every kernel figure in bench/results
 *		is a fraction of: the int8 and fp32 multiply-accumulate peaks of each
 *		SIMD level, and the DRAM read bandwidth, at T threads.
 *
 * A compute peak is a loop of independent instructions of one kind
 * (ACCS accumulators, more than latency x throughput on any x86 core),
 * with nothing loaded: what the execution ports retire, per thread, times
 * the threads.  Each is counted in multiply-accumulates (MACs) per second:
 *   int8 avx512   vpdpbusd zmm: 64 u8 x s8 MACs an instruction (AVX512-VNNI)
 *   int8 avxvnni  vpdpbusd ymm: 32 (AVX-VNNI, the VEX form)
 *   int8 avx2     vpmaddubsw + vpmaddwd + vpaddd: 32 MACs per three
 *                 instructions (the AVX2 level without VNNI)
 *   fp32 avx512   vfmadd231ps zmm: 16
 *   fp32 avx2     vfmadd231ps ymm: 8
 *   int8 amx      tdpbssd: 16384 s8 x s8 MACs a tile instruction (AMX-INT8,
 *                 Sapphire Rapids and later, where Linux grants the tiles)
 * A level the processor lacks prints 0.  DRAM read: each thread sums its
 * share of a 1 GiB array (far larger than the caches); best of 5 passes.
 *
 *   peak_probe [THREADS]          every figure, one "name value unit" line each
 *   peak_probe --dram [THREADS]   the DRAM read bandwidth alone, in GB/s
 *
 * Built with plain -O2 (no -march): each probe carries its own target
 * attribute and runs only where the CPU has it.
 */
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <time.h>

#define PROBE_BYTES ((size_t) 1 << 30)
#define PROBE_PASSES 5
#define ACCS 12					/* independent accumulators of a compute probe */
#define COMPUTE_ITERS 20000000L /* loop trips of a compute probe, per thread */
#define MAX_THREADS 64

/* Seconds on the monotonic clock. */
static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- compute peaks: each returns a value built from its accumulators, so none is optimised away ---- */

/* The sum of the 8 int32 lanes of each of ACCS ymm accumulators. */
__attribute__((target("avx2")))
static double
sum_i32x8(const __m256i *acc)
{
	int32_t		out[8];
	double		s = 0;

	for (int i = 0; i < ACCS; i++)
	{
		_mm256_storeu_si256((__m256i *) out, acc[i]);
		for (int j = 0; j < 8; j++)
			s += out[j];
	}
	return s;
}

/* The sum of the 8 float lanes of each of ACCS ymm accumulators. */
__attribute__((target("avx2")))
static double
sum_f32x8(const __m256 *acc)
{
	float		out[8];
	double		s = 0;

	for (int i = 0; i < ACCS; i++)
	{
		_mm256_storeu_ps(out, acc[i]);
		for (int j = 0; j < 8; j++)
			s += out[j];
	}
	return s;
}

/* ACCS chains of vpdpbusd zmm, iters trips. */
__attribute__((target("avx512f,avx512bw,avx512vnni")))
static double
int8_avx512(long iters)
{
	__m512i		acc[ACCS];
	__m512i		a = _mm512_set1_epi8(3);
	__m512i		b = _mm512_set1_epi8(-2);
	int			s = 0;

	for (int i = 0; i < ACCS; i++)
		acc[i] = _mm512_set1_epi32(i);
	for (long it = 0; it < iters; it++)
	{
#pragma GCC unroll 16
		for (int i = 0; i < ACCS; i++)
			acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
		__asm__ volatile("" : "+v"(a));	/* one opaque input a trip: the loop is not folded */
	}
	for (int i = 0; i < ACCS; i++)
		s += _mm512_reduce_add_epi32(acc[i]);
	return s;
}

/* ACCS chains of vpdpbusd ymm (AVX-VNNI), iters trips. */
__attribute__((target("avx2,avxvnni")))
static double
int8_avxvnni(long iters)
{
	__m256i		acc[ACCS];
	__m256i		a = _mm256_set1_epi8(3);
	__m256i		b = _mm256_set1_epi8(-2);

	for (int i = 0; i < ACCS; i++)
		acc[i] = _mm256_set1_epi32(i);
	for (long it = 0; it < iters; it++)
	{
#pragma GCC unroll 16
		for (int i = 0; i < ACCS; i++)
			acc[i] = _mm256_dpbusd_avx_epi32(acc[i], a, b);
		__asm__ volatile("" : "+x"(a));
	}
	return sum_i32x8(acc);
}

/* ACCS chains of vpmaddubsw, vpmaddwd by ones, vpaddd: the AVX2 int8 dot product without VNNI. */
__attribute__((target("avx2")))
static double
int8_avx2(long iters)
{
	__m256i		acc[ACCS];
	__m256i		a = _mm256_set1_epi8(3);
	__m256i		b = _mm256_set1_epi8(-2);
	const __m256i ones = _mm256_set1_epi16(1);

	for (int i = 0; i < ACCS; i++)
		acc[i] = _mm256_set1_epi32(i);
	for (long it = 0; it < iters; it++)
	{
#pragma GCC unroll 16
		for (int i = 0; i < ACCS; i++)
			acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
		__asm__ volatile("" : "+x"(a));
	}
	return sum_i32x8(acc);
}

/* ACCS chains of vfmadd231ps zmm. */
__attribute__((target("avx512f")))
static double
fp32_avx512(long iters)
{
	__m512		acc[ACCS];
	__m512		a = _mm512_set1_ps(1.0000001f);
	__m512		b = _mm512_set1_ps(1e-7f);
	double		s = 0;

	for (int i = 0; i < ACCS; i++)
		acc[i] = _mm512_set1_ps((float) i);
	for (long it = 0; it < iters; it++)
	{
#pragma GCC unroll 16
		for (int i = 0; i < ACCS; i++)
			acc[i] = _mm512_fmadd_ps(acc[i], a, b);
		__asm__ volatile("" : "+v"(a));
	}
	for (int i = 0; i < ACCS; i++)
		s += _mm512_reduce_add_ps(acc[i]);
	return s;
}

/* ACCS chains of vfmadd231ps ymm. */
__attribute__((target("avx2,fma")))
static double
fp32_avx2(long iters)
{
	__m256		acc[ACCS];
	__m256		a = _mm256_set1_ps(1.0000001f);
	__m256		b = _mm256_set1_ps(1e-7f);

	for (int i = 0; i < ACCS; i++)
		acc[i] = _mm256_set1_ps((float) i);
	for (long it = 0; it < iters; it++)
	{
#pragma GCC unroll 16
		for (int i = 0; i < ACCS; i++)
			acc[i] = _mm256_fmadd_ps(acc[i], a, b);
		__asm__ volatile("" : "+x"(a));
	}
	return sum_f32x8(acc);
}

/* AMX's tile configuration (palette 1) as ldtilecfg reads it. */
typedef struct TileConfig
{
	unsigned char palette;
	unsigned char start_row;
	unsigned char reserved[14];
	unsigned short colsb[16];
	unsigned char rows[16];
} TileConfig;

/*
 * Four chains of tdpbssd (AMX-INT8: 16 x 16 x 64 = 16384 s8 x s8 MACs an
 * instruction) into tiles 0-3 from tiles 4 and 5, ACCS a trip (three
 * rounds of four), iters trips; asks Linux for the tile state first.
 */
__attribute__((target("amx-tile,amx-int8")))
static double
int8_amx(long iters)
{
	_Alignas(64) TileConfig c;
	_Alignas(64) static signed char a[16 * 64];
	_Alignas(64) int out[16 * 16];

	memset(&c, 0, sizeof(c));
	c.palette = 1;
	for (int i = 0; i < 6; i++)
	{
		c.rows[i] = 16;
		c.colsb[i] = 64;
	}
	_tile_loadconfig(&c);
	_tile_zero(0);
	_tile_zero(1);
	_tile_zero(2);
	_tile_zero(3);
	_tile_loadd(4, a, 64);
	_tile_loadd(5, a, 64);
	for (long it = 0; it < iters; it++)
		for (int r = 0; r < ACCS / 4; r++)
		{
			_tile_dpbssd(0, 4, 5);
			_tile_dpbssd(1, 4, 5);
			_tile_dpbssd(2, 4, 5);
			_tile_dpbssd(3, 4, 5);
		}
	_tile_stored(0, out, 64);
	_tile_release();
	return out[0];
}

typedef struct Probe
{
	const char *name;
	const char *feature;		/* __builtin_cpu_supports name the probe needs */
	double		(*fn) (long iters);
	int			macs;			/* MACs per accumulator per trip */
} Probe;

static const Probe probes[] = {
	{"int8_avx512", "avx512vnni", int8_avx512, 64},
	{"int8_avxvnni", "avxvnni", int8_avxvnni, 32},
	{"int8_avx2", "avx2", int8_avx2, 32},
	{"fp32_avx512", "avx512f", fp32_avx512, 16},
	{"fp32_avx2", "fma", fp32_avx2, 8},
	{"int8_amx", "amx-int8", int8_amx, 16384},
};

typedef struct Job
{
	const Probe *p;
	long		iters;
	double		sink;
} Job;

/* One thread's run of a compute probe. */
static void *
compute_thread(void *arg)
{
	Job		   *j = arg;

	j->sink = j->p->fn(j->iters);
	return NULL;
}

/* Whether CPUID reports AMX-TILE and AMX-INT8 and Linux grants this process the tile state. */
static int
amx_granted(void)
{
#if defined(__linux__)
	unsigned int eax,
				ebx,
				ecx,
				edx;

	if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || (edx & (3u << 24)) != (3u << 24))
		return 0;
	return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */ , 18 /* XTILEDATA */ ) == 0;
#else
	return 0;
#endif
}

/* Whether this processor has what probe p needs (avxvnni: asked of the compiler's CPU model). */
static int
probe_supported(const Probe *p)
{
	if (strcmp(p->feature, "avx512vnni") == 0)
		return __builtin_cpu_supports("avx512vnni");
	if (strcmp(p->feature, "avxvnni") == 0)
		return __builtin_cpu_supports("avxvnni");
	if (strcmp(p->feature, "amx-int8") == 0)
		return amx_granted();
	if (strcmp(p->feature, "avx512f") == 0)
		return __builtin_cpu_supports("avx512f");
	if (strcmp(p->feature, "avx2") == 0)
		return __builtin_cpu_supports("avx2");
	return __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
}

/* GMAC/s of probe p on nth threads: best of three runs; 0 where the processor lacks it. */
static double
compute_peak(const Probe *p, int nth)
{
	pthread_t	th[MAX_THREADS];
	Job			jobs[MAX_THREADS];
	double		best = 0;
	double		sink = 0;

	if (!probe_supported(p))
		return 0;
	for (int run = 0; run < 3; run++)
	{
		double		t0 = now();
		double		g;

		for (int t = 0; t < nth; t++)
		{
			jobs[t] = (Job) {p, COMPUTE_ITERS / 4, 0};
			pthread_create(&th[t], NULL, compute_thread, &jobs[t]);
		}
		for (int t = 0; t < nth; t++)
		{
			pthread_join(th[t], NULL);
			sink += jobs[t].sink;
		}
		g = (double) nth * (COMPUTE_ITERS / 4) * ACCS * p->macs / (now() - t0) / 1e9;
		if (g > best)
			best = g;
	}
	if (sink == 0.5)			/* never: keeps the sums alive */
		fprintf(stderr, "%g\n", sink);
	return best;
}

/* ---- DRAM read bandwidth ---- */

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

/* GB/s (10^9) of nth threads reading 1 GiB once: best of PROBE_PASSES; -1 when out of memory. */
static double
dram_read(int nth)
{
	size_t		n = PROBE_BYTES / sizeof(float);
	float	   *a = malloc(PROBE_BYTES);
	pthread_t	th[MAX_THREADS];
	Share		sh[MAX_THREADS];
	double		best = 0;
	double		total = 0;

	if (a == NULL)
		return -1;
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
	fprintf(stderr, "peak_probe: DRAM read, %d threads, best of %d passes over 1 GiB (checksum %.0f)\n", nth,
			PROBE_PASSES, total);
	free(a);
	return best;
}

int
main(int argc, char **argv)
{
	int			dram_only = argc > 1 && strcmp(argv[1], "--dram") == 0;
	int			nth = argc > 1 + dram_only ? atoi(argv[1 + dram_only]) : 2;
	double		bw;

	if (nth < 1 || nth > MAX_THREADS)
	{
		fprintf(stderr, "usage: peak_probe [--dram] [THREADS (1 to %d)]\n", MAX_THREADS);
		return 2;
	}
	__builtin_cpu_init();
	if (!dram_only)
		for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
			printf("%s %.1f GMAC/s\n", probes[i].name, compute_peak(&probes[i], nth));
	if ((bw = dram_read(nth)) < 0)
	{
		fprintf(stderr, "peak_probe: out of memory for the 1 GiB read\n");
		return 1;
	}
	if (dram_only)
		printf("%.2f\n", bw);
	else
		printf("dram_read %.2f GB/s\n", bw);
	return 0;
}
