/*
 * utf8.c
 *		UTF-8: the length of a character, its code point, and back.
 */
#include "utf8.h"

/*
 * The length of the well-formed UTF-8 sequence at s (n > 0 bytes left), or 1
 * when the byte there does not start one (overlong forms, surrogates, code
 * points past U+10FFFF, stray continuation bytes, truncated sequences).
 */
size_t
llm_utf8_len(const uint8_t *s, size_t n)
{
	uint8_t		c = s[0];
	uint8_t		lo = 0x80,
				hi = 0xBF;
	size_t		need;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		need = 2;
	else if (c >= 0xE0 && c <= 0xEF)
	{
		need = 3;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F;
	}
	else if (c >= 0xF0 && c <= 0xF4)
	{
		need = 4;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	}
	else
		return 1;
	if (n < need || s[1] < lo || s[1] > hi)
		return 1;
	for (size_t i = 2; i < need; i++)
		if ((s[i] & 0xC0) != 0x80)
			return 1;
	return need;
}

/* The length of s[0..n) less a multibyte character cut off at its end. */
size_t
llm_utf8_whole_len(const uint8_t *s, size_t n)
{
	/* a cut-off character is a lead byte and at most two continuation bytes */
	for (size_t back = 1; back <= 3 && back <= n; back++)
	{
		uint8_t		c = s[n - back];
		size_t		need;

		if ((c & 0xC0) == 0x80)
			continue;
		need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
		return c >= 0xC2 && c <= 0xF4 && need > back ? n - back : n;
	}
	return n;
}

/* Decode one valid UTF-8 character of length n into its code point. */
uint32_t
llm_utf8_decode(const uint8_t *s, size_t n)
{
	switch (n)
	{
		case 1:
			return s[0];
		case 2:
			return ((uint32_t) (s[0] & 0x1F) << 6) | (s[1] & 0x3F);
		case 3:
			return ((uint32_t) (s[0] & 0x0F) << 12) | ((uint32_t) (s[1] & 0x3F) << 6) | (s[2] & 0x3F);
		default:
			return ((uint32_t) (s[0] & 0x07) << 18) | ((uint32_t) (s[1] & 0x3F) << 12) |
				((uint32_t) (s[2] & 0x3F) << 6) | (s[3] & 0x3F);
	}
}

/* Encode cp as UTF-8 at dst (4 bytes of room); returns the length. */
size_t
llm_utf8_encode(uint32_t cp, char *dst)
{
	if (cp < 0x80)
	{
		dst[0] = (char) cp;
		return 1;
	}
	if (cp < 0x800)
	{
		dst[0] = (char) (0xC0 | (cp >> 6));
		dst[1] = (char) (0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000)
	{
		dst[0] = (char) (0xE0 | (cp >> 12));
		dst[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
		dst[2] = (char) (0x80 | (cp & 0x3F));
		return 3;
	}
	dst[0] = (char) (0xF0 | (cp >> 18));
	dst[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
	dst[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
	dst[3] = (char) (0x80 | (cp & 0x3F));
	return 4;
}
