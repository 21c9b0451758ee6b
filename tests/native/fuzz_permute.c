/* libFuzzer harness for the native keyed permutation (permute.c), built with AddressSanitizer
 * and UndefinedBehaviorSanitizer by run_fuzz.sh. An input is read as (j, n, key) triples of
 * 8 bytes each; n is sometimes cut to a small size so that whole permutations are checked.
 * Every value must lie in range(n) (0 for n <= 1); for a small n the whole pass must be a
 * bijection. A sanitizer report, a crash, a hang or an abort is a finding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/flowloader/_native/permute.h"

#define MAX_WHOLE 4096

static uint64_t word(const uint8_t *b) {
    uint64_t v;
    memcpy(&v, b, 8);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t count = size / 24;
    if (!count) return 0;
    int64_t *j = malloc(count * 8), *n = malloc(count * 8), *out = malloc(count * 8);
    uint64_t *keys = malloc(count * 8);
    for (size_t k = 0; k < count; k++) {
        const uint8_t *b = data + 24 * k;
        uint64_t size_word = word(b + 8);
        /* one size in four small, the rest anywhere up to 2**63 - 1 (and some negative) */
        int64_t s = (size_word & 3) == 0 ? (int64_t)(size_word >> 2) % 70 : (int64_t)size_word;
        n[k] = s;
        j[k] = s > 0 ? (int64_t)(word(b) % (uint64_t)s) : 0;
        keys[k] = word(b + 16);
    }
    fl_permute(j, n, keys, out, count);
    for (size_t k = 0; k < count; k++) {
        if (n[k] <= 1 ? out[k] != 0 : out[k] < 0 || out[k] >= n[k]) abort();
    }
    /* the first triple's whole pass, when small: every value exactly once */
    if (n[0] > 1 && n[0] <= MAX_WHOLE) {
        size_t m = (size_t)n[0];
        int64_t *all = malloc(m * 8), *sizes = malloc(m * 8), *seen = calloc(m, 8);
        int64_t *got = malloc(m * 8);
        uint64_t *same = malloc(m * 8);
        for (size_t i = 0; i < m; i++) {
            all[i] = (int64_t)i;
            sizes[i] = n[0];
            same[i] = keys[0];
        }
        fl_permute(all, sizes, same, got, m);
        for (size_t i = 0; i < m; i++) {
            if (got[i] < 0 || got[i] >= n[0] || seen[got[i]]++) abort();
        }
        free(all), free(sizes), free(seen), free(got), free(same);
    }
    free(j), free(n), free(out), free(keys);
    return 0;
}
