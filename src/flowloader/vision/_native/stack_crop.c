/* See stack_crop.h. Each output row is split into the columns whose source lies left of
 * the image, inside it and right of it, so the inner loop has no bounds test. */
#include "stack_crop.h"

#include <string.h>

static inline ptrdiff_t max_of(ptrdiff_t a, ptrdiff_t b) { return a > b ? a : b; }
static inline ptrdiff_t min_of(ptrdiff_t a, ptrdiff_t b) { return a < b ? a : b; }

/* One output row: `width` values, the source columns x0 + j (or x0 + width - 1 - j when
 * mirrored) of `row` (NULL: a row outside the image) for j in [inside_from, inside_to),
 * the fill elsewhere. `table` NULL: bytes, else floats through it. */
static inline void crop_row(const unsigned char *row, ptrdiff_t step, ptrdiff_t x0,
                            int mirrored, ptrdiff_t width, ptrdiff_t inside_from,
                            ptrdiff_t inside_to, unsigned char fill, const float *table,
                            void *to) {
    if (!row) { /* a row above or below the image: all fill */
        if (table) {
            for (ptrdiff_t j = 0; j < width; j++) ((float *)to)[j] = table[fill];
        } else {
            memset(to, fill, (size_t)width);
        }
        return;
    }
    /* Source column x0 + j, or x0 + width - 1 - j mirrored: column `first` + `sign` * j
     * (indexed from `row` itself, so that no pointer leaves the image). */
    const ptrdiff_t first = mirrored ? x0 + width - 1 : x0, sign = mirrored ? -1 : 1;
    if (table) {
        float *out = to;
        float fill_value = table[fill];
        for (ptrdiff_t j = 0; j < inside_from; j++) out[j] = fill_value;
        for (ptrdiff_t j = inside_from; j < inside_to; j++)
            out[j] = table[row[(first + sign * j) * step]];
        for (ptrdiff_t j = inside_to; j < width; j++) out[j] = fill_value;
        return;
    }
    unsigned char *out = to;
    if (inside_from > 0) memset(out, fill, (size_t)inside_from);
    if (!mirrored && step == 1 && inside_to > inside_from) {
        memcpy(out + inside_from, row + x0 + inside_from, (size_t)(inside_to - inside_from));
    } else {
        for (ptrdiff_t j = inside_from; j < inside_to; j++) out[j] = row[(first + sign * j) * step];
    }
    if (inside_to < width) memset(out + inside_to, fill, (size_t)(width - inside_to));
}

/* One image of channels-last RGB (3 interleaved bytes a pixel): each source pixel read once
 * and its three bytes written to the three planes (three passes of crop_row would read each
 * row three times, a byte in three). */
static void crop_rgb(const fl_crop_spec *spec, const unsigned char *image, ptrdiff_t x0,
                     ptrdiff_t y0, int mirrored, int upside_down, ptrdiff_t from,
                     ptrdiff_t until, char *to) {
    const ptrdiff_t height = spec->out_height, width = spec->out_width;
    const ptrdiff_t plane = height * width;
    const float *table = spec->table;
    for (ptrdiff_t i = 0; i < height; i++) {
        ptrdiff_t y = y0 + (upside_down ? height - 1 - i : i);
        int inside = y >= 0 && y < spec->height;
        ptrdiff_t a = inside ? from : width, b = inside ? until : width;
        const unsigned char *row = inside ? image + y * spec->strides[2] : NULL;
        if (table) {
            float *o[3] = {(float *)to + i * width, (float *)to + plane + i * width,
                           (float *)to + 2 * plane + i * width};
            for (int c = 0; c < 3; c++) {
                float fill = table[256 * c + spec->fill[c]];
                for (ptrdiff_t j = 0; j < a; j++) o[c][j] = fill;
                for (ptrdiff_t j = b; j < width; j++) o[c][j] = fill;
            }
            const float *t0 = table, *t1 = table + 256, *t2 = table + 512;
            for (ptrdiff_t j = a; j < b; j++) {
                const unsigned char *p = row + 3 * (mirrored ? x0 + width - 1 - j : x0 + j);
                o[0][j] = t0[p[0]];
                o[1][j] = t1[p[1]];
                o[2][j] = t2[p[2]];
            }
        } else {
            unsigned char *o0 = (unsigned char *)to + i * width, *o1 = o0 + plane,
                          *o2 = o1 + plane;
            unsigned char *o[3] = {o0, o1, o2};
            for (int c = 0; c < 3; c++) {
                if (a > 0) memset(o[c], spec->fill[c], (size_t)a);
                if (b < width) memset(o[c] + b, spec->fill[c], (size_t)(width - b));
            }
            /* Source column x0 + j, or x0 + width - 1 - j mirrored: from `start` by `step`. */
            const ptrdiff_t start = mirrored ? x0 + width - 1 : x0, step = mirrored ? -1 : 1;
            for (ptrdiff_t j = a; j < b; j++) {
                const unsigned char *p = row + 3 * (start + step * j);
                o0[j] = p[0];
                o1[j] = p[1];
                o2[j] = p[2];
            }
        }
    }
}

void fl_crop_images(const fl_crop_spec *spec, const int64_t *rows, const int64_t *top,
                    const int64_t *left, const uint8_t *flips, size_t count, void *out) {
    const ptrdiff_t *s = spec->strides;
    const ptrdiff_t height = spec->out_height, width = spec->out_width;
    const size_t item = spec->table ? sizeof(float) : 1;
    /* The bytes an image spans, where its strides are positive (else nothing is fetched
     * ahead). */
    ptrdiff_t span = 0;
    if ((s[1] > 0 || spec->channels == 1) && s[2] > 0 && s[3] > 0)
        span = (spec->channels - 1) * s[1] + (spec->height - 1) * s[2] +
               (spec->width - 1) * s[3] + 1;
    const int rgb = spec->channels == 3 && s[1] == 1 && s[3] == 3;
    char *to = out;
    for (size_t k = 0; k < count; k++) {
        const unsigned char *image = spec->pixels + rows[k] * s[0];
        const int mirrored = flips[k] & 1, upside_down = (flips[k] >> 1) & 1;
        const ptrdiff_t x0 = (ptrdiff_t)left[k] - spec->pad_left;
        const ptrdiff_t y0 = (ptrdiff_t)top[k] - spec->pad_top;
        /* Output columns whose source column lies in [0, spec->width). */
        ptrdiff_t from, until;
        if (mirrored) {
            from = max_of(0, x0 + width - spec->width);
            until = min_of(width, x0 + width);
        } else {
            from = max_of(0, -x0);
            until = min_of(width, spec->width - x0);
        }
        from = min_of(from, width); /* a window wholly left or right of the image */
        if (until < from) until = from;
        if (k + 1 < count) { /* images picked at random are cold: ask for the next one */
            const unsigned char *next = spec->pixels + rows[k + 1] * s[0];
            for (ptrdiff_t at = 0; at < span; at += 64) __builtin_prefetch(next + at);
        }
        if (rgb) {
            crop_rgb(spec, image, x0, y0, mirrored, upside_down, from, until, to);
            to += 3 * height * width * item;
            continue;
        }
        for (ptrdiff_t c = 0; c < spec->channels; c++) {
            const float *table = spec->table ? spec->table + 256 * c : NULL;
            for (ptrdiff_t i = 0; i < height; i++, to += width * item) {
                ptrdiff_t y = y0 + (upside_down ? height - 1 - i : i);
                const unsigned char *row =
                    y >= 0 && y < spec->height ? image + c * s[1] + y * s[2] : NULL;
                crop_row(row, s[3], x0, mirrored, width, from, until, spec->fill[c], table, to);
            }
        }
    }
}
