/*
 * int_range.h
 *		A grammar rule for the integers of a range, written as JSON writes
 *		them, built without listing the values.
 *
 * The range's magnitudes split by their number of digits; the d-digit
 * strings from x to y, after the prefix they share, are x's first digit
 * then the strings above x's rest, the digits between x's and y's first
 * then any d - 1 digits, and y's first digit then the strings below y's
 * rest.  Each side recurses on one digit fewer, never branching again, so
 * a range of d-digit bounds makes O(d) rules of O(d) elements (the method
 * of regular expressions for numeric ranges, and of llama.cpp's
 * json-schema-to-grammar for "minimum" and "maximum").  The whole int64
 * range makes 73 rules of 805 elements, [-10^6, 10^9] 20 rules of 103;
 * a recognizer following one keeps about one stack per length the digits
 * so far may still reach (test_int_range.c sees at most 21).
 */
#ifndef LLM_INT_RANGE_H
#define LLM_INT_RANGE_H

#include <stdint.h>

#include "grammar.h"

/*
 * A new rule of b whose sentences are the integers lo..hi (lo <= hi) in
 * JSON's form: "-" only before a nonzero magnitude, no leading zeros.
 * Builder errors stay in b, as for its other rules.
 */
int			llm_int_range_rule(LlmGrammarBuilder *b, int64_t lo, int64_t hi);

#endif							/* LLM_INT_RANGE_H */
