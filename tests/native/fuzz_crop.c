/* libFuzzer harness for the batch plan's native crop (stack_crop.c), built with
 * AddressSanitizer and UndefinedBehaviorSanitizer by run_fuzz.sh. An input's first bytes
 * choose the images' shape and layout (channels-last or planes), the window's size, the
 * padding, the fill, uint8 or table output and the batch's rows, windows and flips; the
 * source and the output are allocated to their exact sizes, so that a read or a write past
 * either is a finding. Every output value is checked against the definition: the source
 * pixel under the (mirrored) window, or the fill outside the image. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/flowloader/vision/_native/stack_crop.h"

static size_t at;
static const uint8_t *input;
static size_t input_size;

static unsigned next_byte(void) { return at < input_size ? input[at++] : 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    input = data, input_size = size, at = 0;
    ptrdiff_t channels = 1 + next_byte() % 4, height = 1 + next_byte() % 12;
    ptrdiff_t width = 1 + next_byte() % 12, images = 1 + next_byte() % 4;
    ptrdiff_t out_height = 1 + next_byte() % 16, out_width = 1 + next_byte() % 16;
    ptrdiff_t pad_top = next_byte() % 9, pad_left = next_byte() % 9;
    int planar = next_byte() & 1, with_table = next_byte() & 1;
    size_t count = 1 + next_byte() % 6;
    unsigned char fill[4];
    for (int c = 0; c < 4; c++) fill[c] = (unsigned char)next_byte();
    size_t source_bytes = (size_t)(images * channels * height * width);
    unsigned char *pixels = malloc(source_bytes);
    for (size_t i = 0; i < source_bytes; i++) pixels[i] = (unsigned char)(i * 131 + 7);
    float *table = NULL;
    if (with_table) {
        table = malloc(sizeof(float) * 256 * (size_t)channels);
        for (int i = 0; i < 256 * channels; i++) table[i] = (float)i * 0.5f - 3.0f;
    }
    int64_t *rows = malloc(8 * count), *top = malloc(8 * count), *left = malloc(8 * count);
    uint8_t *flips = malloc(count);
    for (size_t k = 0; k < count; k++) {
        rows[k] = next_byte() % (unsigned)images;
        /* windows anywhere from wholly above/left of the image to wholly below/right */
        top[k] = (int64_t)(next_byte() % 48) - 20;
        left[k] = (int64_t)(next_byte() % 48) - 20;
        flips[k] = (uint8_t)(next_byte() & 3);
    }
    fl_crop_spec spec = {
        .pixels = pixels,
        .channels = channels,
        .height = height,
        .width = width,
        .out_height = out_height,
        .out_width = out_width,
        .pad_top = pad_top,
        .pad_left = pad_left,
        .fill = fill,
        .table = table,
    };
    ptrdiff_t image_bytes = channels * height * width;
    if (planar) { /* (N, C, H, W) */
        ptrdiff_t s[4] = {image_bytes, height * width, width, 1};
        memcpy(spec.strides, s, sizeof s);
    } else { /* (N, H, W, C), viewed as (N, C, H, W) */
        ptrdiff_t s[4] = {image_bytes, 1, width * channels, channels};
        memcpy(spec.strides, s, sizeof s);
    }
    size_t values = count * (size_t)(channels * out_height * out_width);
    void *out = malloc(values * (table ? sizeof(float) : 1));
    fl_crop_images(&spec, rows, top, left, flips, count, out);
    size_t v = 0;
    for (size_t k = 0; k < count; k++) {
        for (ptrdiff_t c = 0; c < channels; c++) {
            for (ptrdiff_t i = 0; i < out_height; i++) {
                for (ptrdiff_t j = 0; j < out_width; j++, v++) {
                    ptrdiff_t y = top[k] - pad_top + ((flips[k] & 2) ? out_height - 1 - i : i);
                    ptrdiff_t x = left[k] - pad_left + ((flips[k] & 1) ? out_width - 1 - j : j);
                    unsigned char want = fill[c];
                    if (y >= 0 && y < height && x >= 0 && x < width) {
                        const ptrdiff_t *s = spec.strides;
                        want = pixels[rows[k] * s[0] + c * s[1] + y * s[2] + x * s[3]];
                    }
                    if (table ? ((float *)out)[v] != table[256 * c + want]
                              : ((unsigned char *)out)[v] != want)
                        abort();
                }
            }
        }
    }
    free(pixels), free(table), free(rows), free(top), free(left), free(flips), free(out);
    return 0;
}
