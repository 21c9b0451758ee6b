/* libFuzzer harness for the native JPEG kernel, built with AddressSanitizer and
 * UndefinedBehaviorSanitizer by run_fuzz.sh. The first 18 bytes of an input choose the
 * request (scale, filter, flips, output, pass order, portable or AVX2 passes, and both axes,
 * sometimes invalid, at times near INT_MAX); the rest is the JPEG. Any result is fine; a
 * sanitizer report, a crash or a hang is a finding. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/flowloader/vision/_native/jpeg_kernel.h"

#define PREFIX 18

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
    axis_from(data + 2, &r.x);
    axis_from(data + 10, &r.y);
    size_t item = r.output == FL_UINT8 ? 1 : 4;
    size_t bytes = 3 * item * (size_t)r.x.out_count * (size_t)r.y.out_count;
    void *out = malloc(bytes);
    char error[256];
    fl_header header;
    fl_read_header(data + PREFIX, size - PREFIX, &header, error, sizeof(error));
    fl_decode_resize(data + PREFIX, size - PREFIX, &r, out, error, sizeof(error));
    free(out);
    return 0;
}
