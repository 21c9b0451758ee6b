/* See philox.h. The round is Random123's (as NumPy's philox.h has it): the two products'
 * high words are xored with the other two words and the key, their low words kept. */
#include "philox.h"

#define PHILOX_M0 0xD2E7470EE14C6C93ull
#define PHILOX_M1 0xCA5A826395121157ull
#define PHILOX_W0 0x9E3779B97F4A7C15ull
#define PHILOX_W1 0xBB67AE8584CAA73Bull
#define PHILOX_ROUNDS 10

void fl_philox_blocks(uint64_t key0, const uint64_t *key1, uint64_t counter, uint64_t *out,
                      size_t count) {
    for (size_t k = 0; k < count; k++) {
        uint64_t x0 = counter, x1 = 0, x2 = 0, x3 = 0;
        uint64_t k0 = key0, k1 = key1[k];
        for (int round = 0; round < PHILOX_ROUNDS; round++) {
            if (round) {
                k0 += PHILOX_W0;
                k1 += PHILOX_W1;
            }
            __uint128_t p0 = (__uint128_t)PHILOX_M0 * x0;
            __uint128_t p1 = (__uint128_t)PHILOX_M1 * x2;
            uint64_t y0 = (uint64_t)(p1 >> 64) ^ x1 ^ k0;
            uint64_t y2 = (uint64_t)(p0 >> 64) ^ x3 ^ k1;
            x1 = (uint64_t)p1;
            x3 = (uint64_t)p0;
            x0 = y0;
            x2 = y2;
        }
        out[4 * k] = x0;
        out[4 * k + 1] = x1;
        out[4 * k + 2] = x2;
        out[4 * k + 3] = x3;
    }
}
