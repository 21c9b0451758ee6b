/* Philox4x64-10 blocks for many keys at once: the words NumPy's Philox bit generator gives,
 * for flowloader/vision/transforms/batch_rng.py (see philox_block there). */
#ifndef FL_PHILOX_H
#define FL_PHILOX_H

#include <stddef.h>
#include <stdint.h>

/* out[4k .. 4k+3] = Philox4x64-10 of the counter (counter, 0, 0, 0) under the key
 * (key0, key1[k]), for k < count: the words of NumPy's Philox(key=[key0, key1[k]]) from
 * position 4 * (counter - 1) on. */
void fl_philox_blocks(uint64_t key0, const uint64_t *key1, uint64_t counter, uint64_t *out,
                      size_t count);

#endif
