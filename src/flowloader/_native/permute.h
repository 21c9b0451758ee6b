/* The keyed permutation of flowloader/permutation.py, element by element (see its docstring
 * for the construction; both must give the same values for every input). */
#ifndef FL_PERMUTE_H
#define FL_PERMUTE_H

#include <stddef.h>
#include <stdint.h>

#define FL_PERMUTE_ROUNDS 6
/* Sizes up to this are ranked by a keyed hash instead of a Feistel network. */
#define FL_PERMUTE_SMALL 32

/* out[k] = where j[k] goes under the permutation of range(n[k]) named by keys[k]; an n[k]
 * of 1 or less gives 0. j[k] must lie in range(n[k]) (else out[k] is some value below n[k]
 * when j[k] < 2**bits, or j[k] itself). */
void fl_permute(const int64_t *j, const int64_t *n, const uint64_t *keys, int64_t *out,
                size_t count);

#endif
