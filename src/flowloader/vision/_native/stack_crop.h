/* A batch of small images cropped (with constant padding) and flipped, each by its own
 * parameters, written as (N, C, height, width) planes in one pass: the batch plan's
 * RandomCrop / CenterCrop and flips (flowloader/vision/stack_plan.py), then PILToTensor's
 * bytes or a conversion table's floats. */
#ifndef FL_STACK_CROP_H
#define FL_STACK_CROP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const unsigned char *pixels; /* image n, channel c, row y, column x at the strides */
    ptrdiff_t strides[4];
    ptrdiff_t channels, height, width; /* of the source images */
    ptrdiff_t out_height, out_width;
    ptrdiff_t pad_top, pad_left; /* where the source lies in the padded image */
    const unsigned char *fill;   /* the padding's value, one per channel */
    const float *table;          /* (channels, 256): float32 out; NULL: uint8 out */
} fl_crop_spec;

/* Image k of out: the (out_height, out_width) window at (top[k], left[k]) of the padded
 * image rows[k] (0 <= rows[k] < N), mirrored left-right where flips[k] & 1 and top-bottom
 * where flips[k] & 2. Pixels outside the source take the fill. */
void fl_crop_images(const fl_crop_spec *spec, const int64_t *rows, const int64_t *top,
                    const int64_t *left, const uint8_t *flips, size_t count, void *out);

#endif
