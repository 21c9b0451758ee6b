/* One JPEG -> one finished sample: decode only the region a resize reads (at a reduced DCT
 * scale when asked), resample it with Pillow's antialiased filters, flip, and convert into
 * the caller's CHW slot. Pure C (no Python), no global state: safe from many threads. */
#ifndef FL_JPEG_KERNEL_H
#define FL_JPEG_KERNEL_H

#include <stddef.h>

enum { FL_OK = 0, FL_UNSUPPORTED = 1, FL_CORRUPT = 2, FL_BAD_REQUEST = 3, FL_NO_MEMORY = 4 };

/* Pillow's numbers for its resampling filters. */
enum { FL_BILINEAR = 2, FL_BICUBIC = 3 };

/* What is written: uint8 as is, float32 / 255, or float32 (v / 255 - mean) / std. */
enum { FL_UINT8 = 0, FL_FLOAT = 1, FL_NORMALIZED = 2 };

typedef struct {
    int width, height, components;
    int supported; /* grey, YCbCr or RGB, ending in an EOI marker: the kernel can take it */
    /* progressive, or a scan per component: libjpeg then keeps the whole image's DCT
     * coefficients, 2 bytes per sample (see MAX_MEMORY in jpeg_kernel.c) */
    int multi_scan;
} fl_header;

/* One axis of the resize, as Pillow sees it: an image of `in_size` pixels whose pixel 0 is
 * pixel `origin` of the decoded (scaled) image; the box [in0, in1) of it is resized to
 * `out_size` pixels, of which pixels [out_start, out_start + out_count) are kept. */
typedef struct {
    int in_size;
    double in0, in1;
    int out_size, out_start, out_count;
    int origin;
} fl_axis;

typedef struct {
    int scale_denom; /* 1, 2, 4 or 8: libjpeg's DCT scaling */
    fl_axis x, y;
    int filter;
    int hflip, vflip;
    int output;
    /* 1: Pillow 13's pass order (vertical first when the height shrinks by more than twice
     * the pixels the width does); 0: older Pillow's (always horizontal first). */
    int pillow_order;
    /* 1: run the portable passes even where the CPU has AVX2 (the same integers; the tests
     * compare them, since x86-64 machines would otherwise never run them). */
    int portable;
    float mean[3], std[3];
} fl_request;

/* The header of `data`; FL_OK, or FL_UNSUPPORTED (not a JPEG), FL_CORRUPT or FL_NO_MEMORY
 * with `error` filled. */
int fl_read_header(const unsigned char *data, size_t size, fl_header *header, char *error,
                   size_t error_size);

/* Decode, resample, flip and convert `data` into `out`: 3 planes of y.out_count rows of
 * x.out_count values (uint8 or float32 by `output`). FL_OK, or a code with `error` filled. */
int fl_decode_resize(const unsigned char *data, size_t size, const fl_request *request,
                     void *out, char *error, size_t error_size);

/* 1 when this build has the AVX2 passes and the CPU runs them (unless `portable`). */
int fl_has_avx2(void);

/* "libjpeg-turbo X.Y.Z" */
const char *fl_jpeg_version(void);

#endif
