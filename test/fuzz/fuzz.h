/*
 * fuzz.h
 *		What the libFuzzer targets of test/fuzz share: an invariant check
 *		that stops the run with a report, and the paths of the real files
 *		(models, vocabularies) the targets load once at start-up.
 *
 * A failed FUZZ_CHECK is a finding like a sanitizer report: it prints the
 * invariant and traps, so libFuzzer writes the input as a crash artifact.
 * The harness may trap; the engine under test never may.
 */
#ifndef LLM_FUZZ_H
#define LLM_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Stop the run with a report when an invariant does not hold. */
#define FUZZ_CHECK(cond, ...) \
	do { \
		if (!(cond)) \
		{ \
			fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
			__builtin_trap(); \
		} \
	} while (0)

/* The shared/ folder beside the checkout (LLM_SHARED overrides), as the engine tests find it. */
static inline const char *
fuzz_shared_dir(void)
{
	const char *d = getenv("LLM_SHARED");

	return d != NULL ? d : "../shared";
}

/* dir/name into buf (size bytes); returns buf. */
static inline const char *
fuzz_path(char *buf, size_t size, const char *dir, const char *name)
{
	snprintf(buf, size, "%s/%s", dir, name);
	return buf;
}

/* libFuzzer's entry points (no header declares them). */
int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int			LLVMFuzzerInitialize(int *argc, char ***argv);

#endif							/* LLM_FUZZ_H */
