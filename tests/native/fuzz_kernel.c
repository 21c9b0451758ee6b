/* libFuzzer harness for the native JPEG kernel, built with AddressSanitizer and
 * UndefinedBehaviorSanitizer by run_fuzz.sh. The first 18 bytes of an input choose the
 * request (scale, filter, flips, output, pass order, portable or AVX2 passes, and both axes,
 * sometimes invalid, at times near INT_MAX); the rest is the JPEG. Any result is fine; a
 * sanitizer report, a crash or a hang is a finding.
 *
 * One input in EXTREME_ONE_IN (by a hash of the whole input) reads the axes' bytes as an
 * extreme geometry instead: each axis takes the whole decoded axis of the JPEG (up to 4096
 * pixels), a part of it, or 1 to 4 of its pixels, to an output of 1 to 4000 pixels, the two
 * axes independently, so that 3000 -> 1 shrinks and 1 -> 4000 upscales reach the resampling
 * (the seeds include JPEGs of 3000x2, 2x3000, 4000x1 and 1x4000). The kept region of the
 * output is then cut down until the passes' work fits WORK_BUDGET. Such a run costs several
 * normal ones (the kernel's work grows with the input's thousands of pixels), so a hash
 * rather than a bit of the prefix picks them: a mutation, which mostly lands in the JPEG,
 * draws the mode afresh, and extreme runs stay one in EXTREME_ONE_IN however many of the
 * corpus's inputs are extreme ones (with a bit of the prefix, 4 runs in 5 were).
 *
 * Inputs that only make libjpeg slow (too_slow) are skipped, in both modes. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/flowloader/vision/_native/jpeg_kernel.h"

#define PREFIX 18
#define EXTREME_ONE_IN 16     /* make_corpus.py has a copy: keep the two equal */
#define EXTREME_IN 4096       /* the most pixels an extreme axis takes from the decoded image */
#define EXTREME_OUT 4000      /* the largest output size an extreme axis asks for */
#define MAX_PIXELS (1 << 12)  /* kept output pixels of an extreme request, at most */
#define WORK_BUDGET (1 << 14) /* its passes' multiply-adds (per RGBX pixel) and the rest: */
#define ROW_COST 64           /* an output row's calls and loops, as multiply-adds */
#define PIXEL_COST 4          /* an output pixel's clipping and conversion */
#define SLOW_PIXELS (1LL << 20) /* too_slow: decoding costs more than this many pixels */
#define REFUSED_PIXELS (1LL << 29) /* multi-scan files above: libjpeg refuses them at once */
#define NORMAL_REACH 280 /* decoded rows: origin 63 + in_size 200 + the kernel's margin 16 */

/* `small`, or INT_MAX - `offset` when the high nibble of `selector` is all ones (one input
 * in 16): values whose sums overflow an int unless the kernel compares by subtraction. */
static int near_max(int small, uint8_t selector, uint8_t offset) {
    return selector >> 4 == 15 ? INT_MAX - offset : small;
}

static void axis_from(const uint8_t *b, fl_axis *a) {
    a->in_size = 1 + (int)((b[0] | b[1] << 8) % 200);
    a->out_size = 1 + b[3] % 120;
    a->out_start = b[4] % a->out_size;
    a->out_count = 1 + b[5] % (a->out_size - a->out_start);
    a->in0 = (b[6] % 16) / 8.0;
    a->in1 = a->in_size - (b[7] % 16) / 8.0;
    a->origin = near_max(b[2] % 64, b[6], b[2]);
    a->out_start = near_max(a->out_start, b[7], b[4]);
}

/* Whether decoding alone would take more than about SLOW_PIXELS pixels: milliseconds each,
 * up to a second, and the corpus would keep their mutants (unskipped, a 500,000-input run
 * at times spent its 120 s on mutants of a 10240x14336 progressive or a 65360x255 file).
 * libjpeg decodes whole rows, however narrow the crop: the width times the rows the request
 * can reach. A multi-scan file costs every pixel, a pass per scan (counted as 4), after
 * zeroing its coefficient arrays; unless these pass the kernel's 1 GiB cap (2 bytes a pixel
 * at least): libjpeg then refuses the file at once, and the fuzzer keeps that path. */
static int too_slow(const fl_header *h, int scale_denom, int extreme) {
    long long pixels = (long long)h->width * h->height;
    if (h->multi_scan) return pixels * 4 > SLOW_PIXELS && pixels <= REFUSED_PIXELS;
    long long reach = (long long)(extreme ? EXTREME_IN + 16 : NORMAL_REACH) * scale_denom;
    return h->width * (h->height < reach ? h->height : reach) > SLOW_PIXELS;
}

/* Whether the input asks for an extreme geometry: a 64-bit hash of all its bytes, 8 at a
 * time, is a multiple of EXTREME_ONE_IN (make_corpus.py's is_extreme is the same). */
static int is_extreme(const uint8_t *data, size_t size) {
    const uint64_t k = 0x9E3779B97F4A7C15ull;
    uint64_t h = k ^ size;
    size_t i = 0;
    for (; i + 8 <= size; i += 8) {
        uint64_t w;
        memcpy(&w, data + i, 8);
        h = ((h << 23 | h >> 41) ^ w) * k;
    }
    for (; i < size; i++) h = ((h << 23 | h >> 41) ^ data[i]) * k;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return h % EXTREME_ONE_IN == 0;
}

/* An extreme axis of an image whose decoded axis is `decoded` pixels (0: unknown, when the
 * header does not read; a size from the bytes then stands in for it).
 *   b[0], b[1]: the input: the top 2 bits pick the whole axis (0, 1), 1 to 4 pixels of it
 *       (2), or any part of it (3), sized by the other 14 bits;
 *   b[2]: the origin, as a fraction of the room left in the first EXTREME_IN pixels (a
 *       region further on would only cost libjpeg's decoding of the rows before it);
 *   b[3], b[4]: the output size, 1 + (v >> e), v the low 12 bits (below 4000), e the top 4
 *       (12 to 15: no shift), so that sizes spread from 1 to 4000;
 *   b[5]: the kept region: even, the whole output; odd, from (b[5] >> 1) / 127 of it...
 *   b[6]: ...for b[6] / 255 of the rest;
 *   b[7]: the box: under 128, the whole input; else cut by (b[7] & 7) / 64 of the input at
 *       the start and ((b[7] >> 3) & 7) / 64 at the end. */
static void extreme_axis_from(const uint8_t *b, int decoded, fl_axis *a) {
    int v = b[0] | (b[1] & 0x3F) << 8;
    if (decoded <= 0) decoded = 1 + v % EXTREME_IN;
    int cap = decoded < EXTREME_IN ? decoded : EXTREME_IN;
    switch (b[1] >> 6) {
    case 2: a->in_size = 1 + v % (cap < 4 ? cap : 4); break;
    case 3: a->in_size = 1 + v % cap; break;
    default: a->in_size = cap;
    }
    a->origin = b[2] * (cap - a->in_size) / 255;
    int out = ((b[3] | b[4] << 8) & 0xFFF) % EXTREME_OUT, shift = b[4] >> 4;
    a->out_size = 1 + (shift < 12 ? out >> shift : out);
    a->out_start = 0;
    a->out_count = a->out_size;
    if (b[5] & 1) {
        a->out_start = (b[5] >> 1) * (a->out_size - 1) / 127;
        a->out_count = 1 + b[6] * (a->out_size - a->out_start - 1) / 255;
    }
    a->in0 = 0.0;
    a->in1 = a->in_size;
    if (b[7] & 0x80) {
        a->in0 = a->in_size * (b[7] & 7) / 64.0;
        a->in1 = a->in_size - a->in_size * (b[7] >> 3 & 7) / 64.0;
    }
}

/* The taps per output pixel (at most) and the input pixels the kept outputs read (about),
 * as the kernel's make_coeffs counts them. */
static long long taps_of(const fl_axis *a, int filter) {
    double scale = (a->in1 - a->in0) / a->out_size;
    double support = (filter == FL_BICUBIC ? 2.0 : 1.0) * (scale < 1.0 ? 1.0 : scale);
    long long ksize = (long long)ceil(support) * 2 + 1;
    return ksize < a->in_size ? ksize : a->in_size;
}

static long long span_of(const fl_axis *a, int filter) {
    double scale = (a->in1 - a->in0) / a->out_size;
    long long span = (long long)(a->out_count * scale) + taps_of(a, filter) + 2;
    return span < a->in_size ? span : a->in_size;
}

/* The passes' multiply-adds, in the order the kernel takes (its pillow_vertical_first), and
 * what each output row and pixel costs besides (calls, clipping, conversion). */
static long long work_of(const fl_request *r) {
    const fl_axis *x = &r->x, *y = &r->y;
    long long wx = x->out_count, hy = y->out_count;
    long long tx = taps_of(x, r->filter), ty = taps_of(y, r->filter);
    long long rest = ROW_COST * hy + PIXEL_COST * hy * wx;
    int need_x = x->out_size != x->in_size || x->in0 != 0.0 || x->in1 != x->out_size;
    int need_y = y->out_size != y->in_size || y->in0 != 0.0 || y->in1 != y->out_size;
    if (r->pillow_order && need_x && need_y && y->out_size < y->in_size &&
        y->in_size - y->out_size > 2 * (x->in_size - x->out_size)) {
        return hy * span_of(x, r->filter) * ty + hy * wx * tx + rest;
    }
    return span_of(y, r->filter) * wx * tx + hy * wx * ty + rest;
}

/* Halves the larger kept region until the output and the work fit (or both are a pixel:
 * the work is then about the input's, which EXTREME_IN bounds). */
static void bound_work(fl_request *r) {
    while ((long long)r->x.out_count * r->y.out_count > MAX_PIXELS || work_of(r) > WORK_BUDGET) {
        fl_axis *a = r->x.out_count >= r->y.out_count ? &r->x : &r->y;
        if (a->out_count == 1) a = a == &r->x ? &r->y : &r->x;
        if (a->out_count == 1) break;
        a->out_count = (a->out_count + 1) / 2;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < PREFIX) return 0;
    fl_request r;
    memset(&r, 0, sizeof(r));
    r.scale_denom = 1 << (data[0] % 4);
    r.filter = FL_BILINEAR + (data[1] & 1);
    r.hflip = data[1] >> 1 & 1;
    r.vflip = data[1] >> 2 & 1;
    r.output = (data[1] >> 3) % 3;
    r.pillow_order = data[1] >> 5 & 1;
    r.portable = data[0] >> 2 & 1; /* the AVX2 and the portable passes alike */
    for (int c = 0; c < 3; c++) {
        r.mean[c] = 0.5f;
        r.std[c] = 0.25f;
    }
    char error[256];
    fl_header header;
    int read = fl_read_header(data + PREFIX, size - PREFIX, &header, error, sizeof(error));
    int extreme = is_extreme(data, size);
    if (read == FL_OK && too_slow(&header, r.scale_denom, extreme)) return 0;
    if (extreme) {
        /* libjpeg's decoded size at 1 / scale_denom: the size divided, rounded up */
        int width = 0, height = 0;
        if (read == FL_OK) {
            width = (header.width + r.scale_denom - 1) / r.scale_denom;
            height = (header.height + r.scale_denom - 1) / r.scale_denom;
        }
        extreme_axis_from(data + 2, width, &r.x);
        extreme_axis_from(data + 10, height, &r.y);
        bound_work(&r);
    } else {
        axis_from(data + 2, &r.x);
        axis_from(data + 10, &r.y);
    }
    size_t item = r.output == FL_UINT8 ? 1 : 4;
    size_t bytes = 3 * item * (size_t)r.x.out_count * (size_t)r.y.out_count;
    void *out = malloc(bytes);
    fl_decode_resize(data + PREFIX, size - PREFIX, &r, out, error, sizeof(error));
    free(out);
    return 0;
}
