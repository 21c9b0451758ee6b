/* See jpeg_kernel.h. The resampling follows Pillow's Resample.c step for step (the same
 * double-precision coefficients, rounded to the same 22-bit fixed point, the same pass order:
 * horizontal first, or vertical first where `pillow_order` asks for Pillow 13's order and
 * the height shrinks much more than the width; 8-bit intermediate), so on the same decoded
 * pixels the result is Pillow's, bit for bit. The decode reads only the rows and columns the
 * resampling needs, plus a margin that keeps libjpeg's edge handling of a cropped decode
 * (fancy upsampling at the cut) outside the pixels used: the pixels used are those of a full
 * decode. */
#include "jpeg_kernel.h"

#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#define PRECISION_BITS 22
#define HALF (1 << (PRECISION_BITS - 1))
/* Decoded pixels kept on each side of the needed region: libjpeg's cropped and skipped
 * decodes differ from a full decode only within a few pixels of the cut. */
#define MARGIN 16
#define MAX_SIDE 65535
/* Two caps of 1 GiB each, on one call's largest allocations: libjpeg's memory up to and
 * including its whole-image coefficient arrays (2 bytes per sample, which a progressive or
 * multi-scan file needs: a header claiming a huge image would otherwise allocate them all),
 * and, separately, the decoded region. The resampling's coefficients and pass buffers (the
 * region's rows at the output's width) are not counted: one call can take more than 2 GiB. */
#define MAX_MEMORY ((size_t)1 << 30)

/* x86-64 builds carry AVX2 versions of the two resampling passes, chosen at run time; the
 * portable versions run elsewhere. Both give the same integers. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FL_AVX2 1
#define AVX2 __attribute__((target("avx2")))
#endif

typedef int32_t v4i __attribute__((vector_size(16)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint8_t v4u8 __attribute__((vector_size(4)));
typedef uint8_t v8u8 __attribute__((vector_size(8)));

#define STRINGIFY2(x) #x
#define STRINGIFY(x) STRINGIFY2(x)

const char *fl_jpeg_version(void) {
#ifdef LIBJPEG_TURBO_VERSION
    return "libjpeg-turbo " STRINGIFY(LIBJPEG_TURBO_VERSION);
#else
    return "libjpeg " STRINGIFY(JPEG_LIB_VERSION);
#endif
}

/* Errors ---------------------------------------------------------------------------------- */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
    int too_large; /* libjpeg needed more than MAX_MEMORY */
} error_mgr;

static void on_error(j_common_ptr cinfo) {
    error_mgr *err = (error_mgr *)cinfo->err;
    if (cinfo->err->msg_code == JERR_NO_BACKING_STORE) {
        err->too_large = 1;
        snprintf(err->message, sizeof(err->message), "libjpeg's buffers need more than 1 GiB");
    } else {
        (*cinfo->err->format_message)(cinfo, err->message);
    }
    longjmp(err->jump, 1);
}

/* Warnings about corrupt data are ignored, as Pillow ignores them; running out of data is
 * an error, as Pillow's "image file is truncated" is. */
static void on_message(j_common_ptr cinfo, int level) {
    if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
        on_error(cinfo);
    }
}

static void no_output(j_common_ptr cinfo) { (void)cinfo; }

static void set_error(char *error, size_t size, const char *message) {
    if (size > 0) {
        snprintf(error, size, "%s", message);
    }
}

static void init_errors(error_mgr *err, struct jpeg_decompress_struct *cinfo) {
    cinfo->err = jpeg_std_error(&err->pub);
    err->pub.error_exit = on_error;
    err->pub.emit_message = on_message;
    err->pub.output_message = no_output;
    err->message[0] = '\0';
    err->too_large = 0;
}

/* Header ---------------------------------------------------------------------------------- */

/* True when an EOI marker ends the file (within its last bytes: trailers are allowed). A
 * file without one is truncated; the caller's fallback then reports it as Pillow does. */
static int ends_with_eoi(const unsigned char *data, size_t size) {
    size_t start = size > 4096 ? size - 4096 : 0;
    for (size_t i = size; i >= start + 2; i--) {
        if (data[i - 2] == 0xFF && data[i - 1] == 0xD9) {
            return 1;
        }
    }
    return 0;
}

/* libjpeg's state for one header, on the heap as fl_decode_resize's job is: locals changed
 * between setjmp and longjmp would be indeterminate after the jump. */
typedef struct {
    struct jpeg_decompress_struct cinfo;
    error_mgr err;
} header_reader;

/* Runs after setjmp: any libjpeg error jumps back to fl_read_header. */
static void read_fields(struct jpeg_decompress_struct *cinfo, const unsigned char *data,
                        size_t size, fl_header *header) {
    jpeg_create_decompress(cinfo);
    jpeg_mem_src(cinfo, data, (unsigned long)size);
    jpeg_read_header(cinfo, TRUE);
    header->width = (int)cinfo->image_width;
    header->height = (int)cinfo->image_height;
    header->components = cinfo->num_components;
    header->multi_scan = jpeg_has_multiple_scans(cinfo) ? 1 : 0;
    J_COLOR_SPACE space = cinfo->jpeg_color_space;
    int color_ok = (space == JCS_GRAYSCALE && cinfo->num_components == 1) ||
                   ((space == JCS_YCbCr || space == JCS_RGB) && cinfo->num_components == 3);
    header->supported = color_ok && ends_with_eoi(data, size) && header->width <= MAX_SIDE &&
                        header->height <= MAX_SIDE;
}

int fl_read_header(const unsigned char *data, size_t size, fl_header *header, char *error,
                   size_t error_size) {
    memset(header, 0, sizeof(*header));
    if (size < 4 || data[0] != 0xFF || data[1] != 0xD8) {
        set_error(error, error_size, "not a JPEG file");
        return FL_UNSUPPORTED;
    }
    header_reader *h = calloc(1, sizeof(header_reader));
    if (!h) {
        set_error(error, error_size, "out of memory");
        return FL_NO_MEMORY;
    }
    init_errors(&h->err, &h->cinfo);
    int status = FL_OK;
    if (setjmp(h->err.jump)) {
        set_error(error, error_size, h->err.message);
        status = FL_CORRUPT;
    } else {
        read_fields(&h->cinfo, data, size, header);
    }
    jpeg_destroy_decompress(&h->cinfo);
    free(h);
    return status;
}

/* Resampling coefficients ---------------------------------------------------------------- */

typedef struct {
    int need;     /* Pillow runs this pass (otherwise pixels pass through) */
    int ksize;    /* taps per output pixel */
    int *bounds;  /* per kept output pixel: first input pixel, tap count */
    int32_t *k;   /* per kept output pixel: ksize fixed-point weights */
    int lo, hi;   /* input pixels [lo, hi) read by the kept outputs */
    /* The horizontal pass's layout (x axis only, made by pad_taps): every kept output
     * reads the same number of taps (the most any reads), from `start`, its weights shifted
     * to match and the rest zero, each repeated for the 4 lanes of an RGBX pixel. The extra
     * taps add zero, so the sums are the same integers; a tap count that varies from pixel
     * to pixel would cost a mispredicted branch on most of them. */
    int taps;
    int *start;
    int32_t *k4;
} coeffs;

static double bilinear(double x) {
    if (x < 0.0) x = -x;
    if (x < 1.0) return 1.0 - x;
    return 0.0;
}

static double bicubic(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static void free_coeffs(coeffs *c) {
    free(c->bounds);
    free(c->k);
    free(c->start);
    free(c->k4);
    c->bounds = NULL;
    c->k = NULL;
    c->start = NULL;
    c->k4 = NULL;
}

/* The horizontal pass's layout (see coeffs), made for the x axis only: the vertical pass
 * reads `bounds` and `k`, a row at a time, where a tap count that varies costs nothing per
 * pixel. Each output's window of `taps` pixels starts
 * at its first input pixel, or earlier where that window would pass `hi`; it never starts
 * before `lo`, since the output that reads the most taps lies within [lo, hi). */
static int pad_taps(coeffs *c, int count) {
    c->taps = 0;
    for (int i = 0; i < count; i++) {
        if (c->bounds[2 * i + 1] > c->taps) c->taps = c->bounds[2 * i + 1];
    }
    c->start = malloc(sizeof(int) * (size_t)count);
    c->k4 = calloc((size_t)count * (size_t)c->taps * 4 + 4, sizeof(int32_t));
    if (!c->start || !c->k4) {
        free_coeffs(c);
        return 0;
    }
    for (int i = 0; i < count; i++) {
        int first = c->bounds[2 * i], n = c->bounds[2 * i + 1];
        int start = first > c->hi - c->taps ? c->hi - c->taps : first;
        if (start < c->lo) start = c->lo; /* an output that reads nothing */
        c->start[i] = start;
        for (int t = 0; t < n; t++) {
            int32_t *w = c->k4 + ((size_t)i * c->taps + (size_t)(first - start + t)) * 4;
            for (int lane = 0; lane < 4; lane++) w[lane] = c->k[(size_t)i * c->ksize + t];
        }
    }
    return 1;
}

/* Pillow's precompute_coeffs + normalize_coeffs_8bpc, for the kept output pixels only. */
static int make_coeffs(const fl_axis *a, int filter, coeffs *c) {
    double (*f)(double) = filter == FL_BICUBIC ? bicubic : bilinear;
    double base_support = filter == FL_BICUBIC ? 2.0 : 1.0;
    double scale = (a->in1 - a->in0) / a->out_size;
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = base_support * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    memset(c, 0, sizeof(*c));
    c->need = a->out_size != a->in_size || a->in0 != 0.0 || a->in1 != (double)a->out_size;
    c->ksize = ksize;
    c->bounds = malloc(sizeof(int) * 2 * (size_t)a->out_count);
    c->k = calloc((size_t)a->out_count * (size_t)ksize, sizeof(int32_t));
    double *pre = malloc(sizeof(double) * (size_t)ksize);
    if (!c->bounds || !c->k || !pre) {
        free(pre);
        free_coeffs(c);
        return FL_NO_MEMORY;
    }
    c->lo = a->in_size;
    c->hi = 0;
    for (int i = 0; i < a->out_count; i++) {
        int xx = a->out_start + i;
        int xmin, xmax;
        int32_t *k = c->k + (size_t)i * ksize;
        if (!c->need) { /* the pixel itself */
            xmin = xx;
            xmax = 1;
            k[0] = 1 << PRECISION_BITS;
        } else {
            double center = a->in0 + (xx + 0.5) * scale;
            double ww = 0.0;
            double ss = 1.0 / filterscale;
            xmin = (int)(center - support + 0.5);
            if (xmin < 0) xmin = 0;
            xmax = (int)(center + support + 0.5);
            if (xmax > a->in_size) xmax = a->in_size;
            xmax -= xmin;
            if (xmax > ksize) xmax = ksize; /* cannot happen; keeps the reads in bounds */
            for (int x = 0; x < xmax; x++) {
                double w = f((x + xmin - center + 0.5) * ss);
                pre[x] = w;
                ww += w;
            }
            for (int x = 0; x < xmax; x++) {
                if (ww != 0.0) pre[x] /= ww;
                k[x] = pre[x] < 0 ? (int32_t)(-0.5 + pre[x] * (1 << PRECISION_BITS))
                                  : (int32_t)(0.5 + pre[x] * (1 << PRECISION_BITS));
            }
            if (xmax < 0) xmax = 0;
        }
        c->bounds[2 * i] = xmin;
        c->bounds[2 * i + 1] = xmax;
        if (xmax > 0) {
            if (xmin < c->lo) c->lo = xmin;
            if (xmin + xmax > c->hi) c->hi = xmin + xmax;
        }
    }
    free(pre);
    if (c->hi <= c->lo) { /* nothing read: keep one pixel so the region is not empty */
        c->lo = 0;
        c->hi = 1;
    }
    return FL_OK;
}

static inline uint8_t clip8(int32_t v) {
    v >>= PRECISION_BITS;
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

/* Passes ---------------------------------------------------------------------------------- */

/* Horizontal pass over `rows` RGBX rows: `src` rows of stride `src_stride`, where input
 * pixel x lies at column x + `shift`; `count` RGBX pixels out per row, each from c->taps
 * pixels. Two taps (two RGBX pixels, eight lanes) per step; integer sums, so the order does
 * not change the result. */
static void horizontal_portable(const uint8_t *src, size_t src_stride, int rows, int shift,
                                const coeffs *c, int count, uint8_t *dst) {
    const int taps = c->taps;
    for (int r = 0; r < rows; r++) {
        const uint8_t *s = src + (size_t)r * src_stride;
        uint8_t *d = dst + (size_t)r * count * 4;
        for (int i = 0; i < count; i++) {
            const uint8_t *p = s + (size_t)(c->start[i] + shift) * 4;
            const int32_t *w = c->k4 + (size_t)i * taps * 4;
            int t = 0;
            v8i pair = {0, 0, 0, 0, 0, 0, 0, 0};
            for (; t + 1 < taps; t += 2) {
                v8u8 px;
                v8i weights;
                memcpy(&px, p + 4 * t, 8);
                memcpy(&weights, w + 4 * t, 32);
                pair += __builtin_convertvector(px, v8i) * weights;
            }
            v4i acc = {HALF, HALF, HALF, HALF}, half;
            memcpy(&half, &pair, 16);
            acc += half;
            memcpy(&half, (const char *)&pair + 16, 16);
            acc += half;
            if (t < taps) {
                v4u8 px;
                v4i weights;
                memcpy(&px, p + 4 * t, 4);
                memcpy(&weights, w + 4 * t, 16);
                acc += __builtin_convertvector(px, v4i) * weights;
            }
            d[4 * i + 0] = clip8(acc[0]);
            d[4 * i + 1] = clip8(acc[1]);
            d[4 * i + 2] = clip8(acc[2]);
            d[4 * i + 3] = 255;
        }
    }
}

/* One row of the vertical pass: `taps` rows of `src` (row stride `stride` bytes) from row
 * `first`, weighted by `k`, over `width` RGBX pixels, into `row`. */
static void vertical_row_portable(const uint8_t *src, size_t stride, int width, int first,
                                  int taps, const int32_t *k, int32_t *acc, uint8_t *row) {
    size_t n = (size_t)width * 4;
    for (size_t l = 0; l < n; l++) acc[l] = HALF;
    for (int t = 0; t < taps; t++) {
        const uint8_t *s = src + (size_t)(first + t) * stride;
        int32_t w = k[t];
        for (size_t l = 0; l < n; l++) acc[l] += s[l] * w;
    }
    for (size_t l = 0; l < n; l++) row[l] = clip8(acc[l]);
}

#ifdef FL_AVX2
/* horizontal_portable's loop with the tap count `taps` a constant where the caller passes
 * one, so that the compiler unrolls the taps. */
AVX2 static inline __attribute__((always_inline)) void
horizontal_avx2_taps(const uint8_t *src, size_t src_stride, int rows, int shift, const coeffs *c,
                     int count, uint8_t *dst, const int taps) {
    const __m128i half = _mm_set1_epi32(HALF);
    for (int r = 0; r < rows; r++) {
        const uint8_t *s = src + (size_t)r * src_stride;
        uint8_t *d = dst + (size_t)r * count * 4;
        for (int i = 0; i < count; i++) {
            const uint8_t *p = s + (size_t)(c->start[i] + shift) * 4;
            const int32_t *w = c->k4 + (size_t)i * taps * 4;
            int t = 0;
            __m256i pair = _mm256_setzero_si256();
            for (; t + 1 < taps; t += 2) {
                __m256i px = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 4 * t)));
                __m256i weights = _mm256_loadu_si256((const __m256i *)(w + 4 * t));
                pair = _mm256_add_epi32(pair, _mm256_mullo_epi32(px, weights));
            }
            __m128i acc = _mm_add_epi32(_mm256_castsi256_si128(pair),
                                        _mm256_extracti128_si256(pair, 1));
            acc = _mm_add_epi32(acc, half);
            if (t < taps) {
                int32_t one;
                memcpy(&one, p + 4 * t, 4);
                __m128i px = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(one));
                __m128i weights = _mm_loadu_si128((const __m128i *)(w + 4 * t));
                acc = _mm_add_epi32(acc, _mm_mullo_epi32(px, weights));
            }
            /* >> 22, then clamp to 0..255 by saturating packs: clip8 on each lane */
            acc = _mm_srai_epi32(acc, PRECISION_BITS);
            __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(acc, acc), acc);
            int32_t out = _mm_cvtsi128_si32(bytes);
            memcpy(d + 4 * (size_t)i, &out, 4);
        }
    }
}

/* The common tap counts (a shrink by up to 3x, bilinear or bicubic) as constants. */
AVX2 static void horizontal_avx2(const uint8_t *src, size_t src_stride, int rows, int shift,
                                 const coeffs *c, int count, uint8_t *dst) {
#define FL_TAPS(n) horizontal_avx2_taps(src, src_stride, rows, shift, c, count, dst, n)
    switch (c->taps) {
    case 2: FL_TAPS(2); break;
    case 3: FL_TAPS(3); break;
    case 4: FL_TAPS(4); break;
    case 5: FL_TAPS(5); break;
    case 6: FL_TAPS(6); break;
    case 7: FL_TAPS(7); break;
    case 8: FL_TAPS(8); break;
    default: FL_TAPS(c->taps);
    }
#undef FL_TAPS
}

AVX2 static void vertical_row_avx2(const uint8_t *src, size_t stride, int width, int first,
                                   int taps, const int32_t *k, int32_t *acc, uint8_t *row) {
    size_t n = (size_t)width * 4, l = 0;
    const __m256i half = _mm256_set1_epi32(HALF);
    const uint8_t *top = src + (size_t)first * stride;
    for (; l + 8 <= n; l += 8) {
        __m256i sum = half;
        for (int t = 0; t < taps; t++) {
            __m256i px = _mm256_cvtepu8_epi32(
                _mm_loadl_epi64((const __m128i *)(top + (size_t)t * stride + l)));
            sum = _mm256_add_epi32(sum, _mm256_mullo_epi32(px, _mm256_set1_epi32(k[t])));
        }
        sum = _mm256_srai_epi32(sum, PRECISION_BITS);
        __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(sum),
                                        _mm256_extracti128_si256(sum, 1));
        _mm_storel_epi64((__m128i *)(row + l), _mm_packus_epi16(words, words));
    }
    if (l < n) { /* the last pixel of an odd width */
        vertical_row_portable(top + l, stride, (int)(n - l) / 4, 0, taps, k, acc, row + l);
    }
}
#endif

int fl_has_avx2(void) {
#ifdef FL_AVX2
    return __builtin_cpu_supports("avx2");
#else
    return 0;
#endif
}

/* Whether this call runs the AVX2 passes. */
static int use_avx2(const fl_request *r) { return !r->portable && fl_has_avx2(); }

static void horizontal(const uint8_t *src, size_t src_stride, int rows, int shift,
                       const coeffs *c, int count, uint8_t *dst, int avx2) {
#ifdef FL_AVX2
    if (avx2) {
        horizontal_avx2(src, src_stride, rows, shift, c, count, dst);
        return;
    }
#else
    (void)avx2;
#endif
    horizontal_portable(src, src_stride, rows, shift, c, count, dst);
}

static void vertical_row(const uint8_t *src, size_t stride, int width, int first, int taps,
                         const int32_t *k, int32_t *acc, uint8_t *row, int avx2) {
#ifdef FL_AVX2
    if (avx2) {
        vertical_row_avx2(src, stride, width, first, taps, k, acc, row);
        return;
    }
#else
    (void)avx2;
#endif
    vertical_row_portable(src, stride, width, first, taps, k, acc, row);
}

/* One finished RGBX row into the three planes of `out`, flipped and converted. */
static void write_row_portable(const uint8_t *row, int width, int height, int dest_row,
                               int hflip, int output, const float lut[3][256], void *out) {
    size_t plane = (size_t)width * height;
    for (int c = 0; c < 3; c++) {
        size_t base = (size_t)c * plane + (size_t)dest_row * width;
        if (output == FL_UINT8) {
            uint8_t *d = (uint8_t *)out + base;
            if (hflip) {
                for (int i = 0; i < width; i++) d[width - 1 - i] = row[4 * i + c];
            } else {
                for (int i = 0; i < width; i++) d[i] = row[4 * i + c];
            }
        } else {
            float *d = (float *)out + base;
            const float *table = lut[c];
            if (hflip) {
                for (int i = 0; i < width; i++) d[width - 1 - i] = table[row[4 * i + c]];
            } else {
                for (int i = 0; i < width; i++) d[i] = table[row[4 * i + c]];
            }
        }
    }
}

#ifdef FL_AVX2
/* write_row, 8 pixels a step: each channel is a byte of the pixel's 32-bit lane; the float
 * conversion runs the same float32 operations as the table (v / 255, - mean, / std). */
AVX2 static void write_row_avx2(const uint8_t *row, int width, int height, int dest_row,
                                int hflip, int output, const float mean[3], const float std[3],
                                void *out) {
    size_t plane = (size_t)width * height, base = (size_t)dest_row * width;
    const __m256i reverse = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    const __m256i low_byte = _mm256_set1_epi32(0xFF);
    int i = 0;
    for (; i + 8 <= width; i += 8) {
        /* output pixels i..i+7 read row pixels i..i+7, or mirrored ones when flipped */
        int from = hflip ? width - 8 - i : i;
        __m256i px = _mm256_loadu_si256((const __m256i *)(row + 4 * (size_t)from));
        if (hflip) px = _mm256_permutevar8x32_epi32(px, reverse);
        for (int c = 0; c < 3; c++) {
            __m256i level = _mm256_and_si256(_mm256_srli_epi32(px, 8 * c), low_byte);
            size_t at = (size_t)c * plane + base + (size_t)i;
            if (output == FL_UINT8) {
                __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(level),
                                                _mm256_extracti128_si256(level, 1));
                _mm_storel_epi64((__m128i *)((uint8_t *)out + at), _mm_packus_epi16(words, words));
            } else {
                __m256 x = _mm256_div_ps(_mm256_cvtepi32_ps(level), _mm256_set1_ps(255.0f));
                if (output == FL_NORMALIZED) {
                    x = _mm256_div_ps(_mm256_sub_ps(x, _mm256_set1_ps(mean[c])),
                                      _mm256_set1_ps(std[c]));
                }
                _mm256_storeu_ps((float *)out + at, x);
            }
        }
    }
    for (; i < width; i++) { /* the rest, one pixel at a time */
        int from = hflip ? width - 1 - i : i;
        for (int c = 0; c < 3; c++) {
            uint8_t level = row[4 * (size_t)from + c];
            size_t at = (size_t)c * plane + base + (size_t)i;
            if (output == FL_UINT8) {
                ((uint8_t *)out)[at] = level;
            } else {
                float x = (float)level / 255.0f;
                if (output == FL_NORMALIZED) x = (x - mean[c]) / std[c];
                ((float *)out)[at] = x;
            }
        }
    }
}
#endif

/* One finished RGBX row into the three planes of `out`, flipped and converted. */
static void write_row(const uint8_t *row, int width, int height, int dest_row,
                      const fl_request *r, const float lut[3][256], void *out) {
#ifdef FL_AVX2
    if (use_avx2(r)) {
        write_row_avx2(row, width, height, dest_row, r->hflip, r->output, r->mean, r->std, out);
        return;
    }
#endif
    write_row_portable(row, width, height, dest_row, r->hflip, r->output, lut, out);
}

/* The float32 value of each level: the operations NumPy runs for ToTensor (v / 255) and
 * Normalize ((v - mean) / std), each rounded to float32 in the same order. */
static void make_lut(const fl_request *r, float lut[3][256]) {
    for (int c = 0; c < 3; c++) {
        for (int v = 0; v < 256; v++) {
            float x = (float)v / 255.0f;
            if (r->output == FL_NORMALIZED) {
                x = x - r->mean[c];
                x = x / r->std[c];
            }
            lut[c][v] = x;
        }
    }
}

/* Checks ---------------------------------------------------------------------------------- */

/* The axis lies in the decoded image and its kept outputs in its output. The ints come
 * unchecked from the caller: each is bounded first (by MAX_SIDE, which the sums below stay
 * far from), and the extents are compared by subtraction, so nothing here overflows. */
static int axis_ok(const fl_axis *a, int decoded) {
    int bounded = a->in_size > 0 && a->in_size <= MAX_SIDE && a->origin >= 0 &&
                  a->origin <= MAX_SIDE && a->out_size > 0 && a->out_size <= MAX_SIDE &&
                  a->out_count > 0 && a->out_count <= MAX_SIDE && a->out_start >= 0 &&
                  a->out_start <= MAX_SIDE;
    int box_ok = isfinite(a->in0) && isfinite(a->in1) && a->in0 >= 0.0 && a->in1 > a->in0 &&
                 a->in1 <= (double)a->in_size;
    return bounded && box_ok && a->origin <= decoded - a->in_size &&
           a->out_start <= a->out_size - a->out_count;
}

static int request_ok(const fl_request *r) {
    int scale_ok = r->scale_denom == 1 || r->scale_denom == 2 || r->scale_denom == 4 ||
                   r->scale_denom == 8;
    int filter_ok = r->filter == FL_BILINEAR || r->filter == FL_BICUBIC;
    int output_ok = r->output == FL_UINT8 || r->output == FL_FLOAT || r->output == FL_NORMALIZED;
    return scale_ok && filter_ok && output_ok;
}

/* Decode + resample ----------------------------------------------------------------------- */

typedef struct {
    struct jpeg_decompress_struct cinfo;
    error_mgr err;
    coeffs cx, cy;
    uint8_t *decoded;  /* the decoded region, RGBX */
    uint8_t *middle;   /* after the horizontal pass, RGBX */
    uint8_t *row;      /* one output row, RGBX */
    int32_t *acc;
    int created;
} job;

static void free_job(job *j) {
    if (j->created) jpeg_destroy_decompress(&j->cinfo);
    free_coeffs(&j->cx);
    free_coeffs(&j->cy);
    free(j->decoded);
    free(j->middle);
    free(j->row);
    free(j->acc);
    free(j);
}

/* The decoded pixels: Pillow's pixel (x, y) is at column x + shift_x, row y + shift_y. */
typedef struct {
    const uint8_t *pixels;
    size_t stride;
    int shift_x, shift_y;
} region;

static const uint8_t *row_at(const region *g, int y) {
    return g->pixels + (size_t)(y + g->shift_y) * g->stride;
}

static const uint8_t *at(const region *g, int x, int y) {
    return row_at(g, y) + (size_t)(x + g->shift_x) * 4;
}

static int allocate_passes(job *j, size_t middle_bytes, int lanes) {
    j->middle = malloc(middle_bytes + 4);
    j->row = malloc((size_t)lanes * 4 + 4);
    j->acc = malloc(sizeof(int32_t) * (size_t)lanes * 4);
    return j->middle && j->row && j->acc;
}

/* Horizontal pass over the rows the vertical pass reads, then the vertical pass row by row
 * (Pillow's order before 13, and 13's for most shapes). */
static void horizontal_first(job *j, const region *g, const fl_request *r, const float lut[3][256],
                             void *out) {
    int width = r->x.out_count, height = r->y.out_count;
    int first = j->cy.lo, rows = j->cy.hi - j->cy.lo;
    if (j->cx.need) {
        horizontal(row_at(g, first), g->stride, rows, g->shift_x, &j->cx, width, j->middle,
                   use_avx2(r));
    } else {
        for (int y = 0; y < rows; y++) {
            memcpy(j->middle + (size_t)y * width * 4, at(g, r->x.out_start, first + y),
                   (size_t)width * 4);
        }
    }
    for (int yy = 0; yy < height; yy++) {
        const uint8_t *row = j->middle + (size_t)(j->cy.bounds[2 * yy] - first) * width * 4;
        if (j->cy.need) {
            vertical_row(j->middle, (size_t)width * 4, width, j->cy.bounds[2 * yy] - first,
                         j->cy.bounds[2 * yy + 1], j->cy.k + (size_t)yy * j->cy.ksize, j->acc,
                         j->row, use_avx2(r));
            row = j->row;
        }
        write_row(row, width, height, r->vflip ? height - 1 - yy : yy, r, lut, out);
    }
}

/* Vertical pass over the columns the horizontal pass reads, then the horizontal pass row by
 * row (Pillow 13's order when the height shrinks much more than the width). */
static void vertical_first(job *j, const region *g, const fl_request *r, const float lut[3][256],
                           void *out) {
    int width = r->x.out_count, height = r->y.out_count;
    int first = j->cx.lo, columns = j->cx.hi - j->cx.lo;
    for (int yy = 0; yy < height; yy++) {
        vertical_row(at(g, first, j->cy.bounds[2 * yy]), g->stride, columns, 0,
                     j->cy.bounds[2 * yy + 1], j->cy.k + (size_t)yy * j->cy.ksize, j->acc,
                     j->middle + (size_t)yy * columns * 4, use_avx2(r));
    }
    for (int yy = 0; yy < height; yy++) {
        horizontal(j->middle + (size_t)yy * columns * 4, 0, 1, -first, &j->cx, width, j->row,
                   use_avx2(r));
        write_row(j->row, width, height, r->vflip ? height - 1 - yy : yy, r, lut, out);
    }
}

/* Pillow 13 (python-pillow/Pillow#9549) resamples vertically first when the height shrinks
 * by more than twice as many pixels as the width does. */
static int pillow_vertical_first(const fl_request *r, const job *j) {
    return r->pillow_order && j->cx.need && j->cy.need && r->y.out_size < r->y.in_size &&
           r->y.in_size - r->y.out_size > 2 * (r->x.in_size - r->x.out_size);
}

static int resample(job *j, const region *g, const fl_request *r, void *out, char *error,
                    size_t error_size) {
    int width = r->x.out_count, height = r->y.out_count;
    int columns = j->cx.hi - j->cx.lo, rows = j->cy.hi - j->cy.lo;
    int flip_order = pillow_vertical_first(r, j);
    size_t middle = flip_order ? (size_t)height * columns * 4 : (size_t)rows * width * 4;
    int lanes = flip_order ? (columns > width ? columns : width) : width;
    if (!allocate_passes(j, middle, lanes)) {
        set_error(error, error_size, "out of memory");
        return FL_NO_MEMORY;
    }
    float lut[3][256];
    if (r->output != FL_UINT8 && !use_avx2(r)) make_lut(r, lut); /* the portable writer's */
    if (flip_order) {
        vertical_first(j, g, r, (const float(*)[256])lut, out);
    } else {
        horizontal_first(j, g, r, (const float(*)[256])lut, out);
    }
    return FL_OK;
}

static int clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Runs after setjmp: any libjpeg error jumps back to fl_decode_resize. */
static int run(job *j, const unsigned char *data, size_t size, const fl_request *r, void *out,
               char *error, size_t error_size) {
    struct jpeg_decompress_struct *cinfo = &j->cinfo;
    jpeg_create_decompress(cinfo);
    j->created = 1;
    jpeg_mem_src(cinfo, data, (unsigned long)size);
    jpeg_read_header(cinfo, TRUE);
    J_COLOR_SPACE space = cinfo->jpeg_color_space;
    if (!((space == JCS_GRAYSCALE && cinfo->num_components == 1) ||
          ((space == JCS_YCbCr || space == JCS_RGB) && cinfo->num_components == 3))) {
        set_error(error, error_size, "colour space not handled by the kernel");
        return FL_UNSUPPORTED;
    }
    cinfo->mem->max_memory_to_use = (long)MAX_MEMORY; /* beyond it: "no backing store" */
    cinfo->scale_num = 1;
    cinfo->scale_denom = (unsigned int)r->scale_denom;
    cinfo->out_color_space = JCS_EXT_RGBX;
    cinfo->dct_method = JDCT_ISLOW;
    cinfo->do_fancy_upsampling = TRUE;
    jpeg_calc_output_dimensions(cinfo);
    int width = (int)cinfo->output_width, height = (int)cinfo->output_height;
    if (!axis_ok(&r->x, width) || !axis_ok(&r->y, height)) {
        set_error(error, error_size, "the geometry does not fit the decoded image");
        return FL_BAD_REQUEST;
    }
    if (make_coeffs(&r->x, r->filter, &j->cx) || make_coeffs(&r->y, r->filter, &j->cy) ||
        !pad_taps(&j->cx, r->x.out_count)) {
        set_error(error, error_size, "out of memory");
        return FL_NO_MEMORY;
    }
    /* The decoded region: what the kept outputs read, plus the margin. */
    int x0 = clamp(r->x.origin + j->cx.lo - MARGIN, 0, width);
    int x1 = clamp(r->x.origin + j->cx.hi + MARGIN, 0, width);
    int y0 = clamp(r->y.origin + j->cy.lo - MARGIN, 0, height);
    int y1 = clamp(r->y.origin + j->cy.hi + MARGIN, 0, height);
    jpeg_start_decompress(cinfo);
    JDIMENSION xoff = (JDIMENSION)x0, xwidth = (JDIMENSION)(x1 - x0);
    if (x0 > 0 || x1 < width) {
        jpeg_crop_scanline(cinfo, &xoff, &xwidth);
    }
    size_t stride = (size_t)cinfo->output_width * 4;
    int rows = y1 - y0;
    if (stride * (size_t)rows > MAX_MEMORY) {
        set_error(error, error_size, "the region to decode is larger than 1 GiB");
        return FL_NO_MEMORY;
    }
    j->decoded = malloc(stride * (size_t)rows + 4);
    if (!j->decoded) {
        set_error(error, error_size, "out of memory");
        return FL_NO_MEMORY;
    }
    if (y0 > 0 && jpeg_skip_scanlines(cinfo, (JDIMENSION)y0) != (JDIMENSION)y0) {
        set_error(error, error_size, "could not skip to the region");
        return FL_CORRUPT;
    }
    while ((int)cinfo->output_scanline < y1) {
        JSAMPROW lines[16];
        int want = y1 - (int)cinfo->output_scanline;
        if (want > 16) want = 16;
        for (int i = 0; i < want; i++) {
            lines[i] = j->decoded + stride * (size_t)((int)cinfo->output_scanline - y0 + i);
        }
        if (jpeg_read_scanlines(cinfo, lines, (JDIMENSION)want) == 0) {
            set_error(error, error_size, "the decoder stopped before the region's end");
            return FL_CORRUPT;
        }
    }
    region r_ = {j->decoded, stride, r->x.origin - (int)xoff, r->y.origin - y0};
    return resample(j, &r_, r, out, error, error_size);
}

int fl_decode_resize(const unsigned char *data, size_t size, const fl_request *request,
                     void *out, char *error, size_t error_size) {
    if (!request_ok(request)) {
        set_error(error, error_size, "unknown scale, filter or output");
        return FL_BAD_REQUEST;
    }
    if (size < 4 || data[0] != 0xFF || data[1] != 0xD8) {
        set_error(error, error_size, "not a JPEG file");
        return FL_UNSUPPORTED;
    }
    job *j = calloc(1, sizeof(job));
    if (!j) {
        set_error(error, error_size, "out of memory");
        return FL_NO_MEMORY;
    }
    init_errors(&j->err, &j->cinfo);
    if (setjmp(j->err.jump)) {
        int status = j->err.too_large ? FL_NO_MEMORY : FL_CORRUPT;
        set_error(error, error_size, j->err.message);
        free_job(j);
        return status;
    }
    int status = run(j, data, size, request, out, error, error_size);
    free_job(j);
    return status;
}
