/*
 * Helpers shared by the fuzz harnesses.  A harness defines
 * LLVMFuzzerTestOneInput(); libFuzzer calls it in --enable-fuzzing builds,
 * replay.c in the others, so every corpus is also a regression test.
 */
#ifndef CORRAL_FUZZ_H
#define CORRAL_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant is a crash, so that libFuzzer keeps the input. */
#define FUZZ_CHECK(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,	\
		    __LINE__, #cond);					\
		abort();						\
	}								\
} while (0)

/*
 * A copy in a buffer of exactly n bytes, so that AddressSanitizer sees a
 * read one byte past what the code under test was given.
 */
static inline char *
fuzz_dup(const void *p, size_t n)
{
	char *b = malloc(n > 0 ? n : 1);

	FUZZ_CHECK(b != NULL);
	if (n > 0)
		memcpy(b, p, n);
	return b;
}

/*
 * Piece sizes for feeding a stream in parts, drawn from a seed that is
 * part of the input, so that libFuzzer mutates the split points too and a
 * crash replays the same way.
 */
struct fuzz_split {
	uint32_t state;
};

static inline void
fuzz_split_init(struct fuzz_split *s, uint8_t a, uint8_t b)
{
	s->state = 0x9e3779b9u ^ ((uint32_t)a << 8 | b);
}

/* The next piece: mostly short, sometimes everything that is left. */
static inline size_t
fuzz_split_next(struct fuzz_split *s, size_t left)
{
	uint32_t x = s->state;
	size_t n;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	s->state = x;
	if ((x & 7) == 0)
		return left;
	n = 1 + (x >> 3) % 48;
	return n < left ? n : left;
}

#endif
