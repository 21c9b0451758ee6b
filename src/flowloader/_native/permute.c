/* See permute.h and flowloader/permutation.py. */
#include "permute.h"

static const uint64_t ROUND_CONSTANTS[FL_PERMUTE_ROUNDS] = {
    0xD6E8FEB86659FD93ull, 0xA0761D6478BD642Full, 0xE7037ED1A0B428DBull,
    0x8EBC6AF09C88C6E3ull, 0x589965CC75374CC3ull, 0x1D8E4E27C47D124Full};

static inline uint64_t mix64(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The bit length of n - 1, at least 2. */
static inline unsigned bits_of(uint64_t n) {
    uint64_t value = n - 1;
    unsigned length = 0;
    while (value) {
        length++;
        value >>= 1;
    }
    return length < 2 ? 2 : length;
}

/* A small n: j's rank among the keyed hashes of range(n) (ties broken by index). */
static int64_t ranked(uint64_t j, uint64_t n, uint64_t key0) {
    uint64_t mine = mix64(key0 ^ j);
    int64_t rank = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t other = mix64(key0 ^ i);
        rank += other < mine || (other == mine && i < j);
    }
    return rank;
}

static int64_t feistel(uint64_t x, uint64_t n, const uint64_t *round_keys) {
    unsigned bits = bits_of(n);
    unsigned high0 = bits - bits / 2;
    do {
        unsigned high = high0, low = bits - high0;
        for (int r = 0; r < FL_PERMUTE_ROUNDS; r++) {
            uint64_t hi = x >> low, lo = x & ((1ull << low) - 1);
            uint64_t f = mix64(lo ^ round_keys[r]) >> (64 - high);
            x = (lo << high) | (hi ^ f);
            unsigned swap = high;
            high = low;
            low = swap;
        }
    } while (x >= n);
    return (int64_t)x;
}

void fl_permute(const int64_t *j, const int64_t *n, const uint64_t *keys, int64_t *out,
                size_t count) {
    for (size_t k = 0; k < count; k++) {
        if (n[k] <= 1) {
            out[k] = 0;
            continue;
        }
        uint64_t size = (uint64_t)n[k], at = (uint64_t)j[k];
        if (at >= size) { /* outside the domain: left as it is (the caller checks ranges) */
            out[k] = j[k];
            continue;
        }
        uint64_t round_keys[FL_PERMUTE_ROUNDS];
        for (int r = 0; r < FL_PERMUTE_ROUNDS; r++) round_keys[r] = mix64(keys[k] ^ ROUND_CONSTANTS[r]);
        out[k] = size <= FL_PERMUTE_SMALL ? ranked(at, size, round_keys[0])
                                          : feistel(at, size, round_keys);
    }
}
