/*
 * utf8.h
 *		UTF-8 helpers shared by the tokenizers and the JSON reader.
 */
#ifndef LLM_UTF8_H
#define LLM_UTF8_H

#include <stddef.h>
#include <stdint.h>

/*
 * The length of the UTF-8 character at s (n bytes left): 2 to 4 for a
 * well-formed one, else 1 (so invalid bytes are taken one at a time).
 */
size_t		llm_utf8_len(const uint8_t *s, size_t n);

/*
 * The length of s[0..n) less a multibyte character cut off at its end: n,
 * or where the lead byte of a sequence too short for it stands.
 */
size_t		llm_utf8_whole_len(const uint8_t *s, size_t n);

/* Decode one valid UTF-8 character of length n into its code point. */
uint32_t	llm_utf8_decode(const uint8_t *s, size_t n);

/* Encode code point cp as UTF-8 at dst (4 bytes of room); returns the length. */
size_t		llm_utf8_encode(uint32_t cp, char *dst);

#endif							/* LLM_UTF8_H */
