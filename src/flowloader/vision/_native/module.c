/* flowloader.vision._jpeg_kernel: the Python face of jpeg_kernel.c (and of read_files.c,
 * which reads a batch's files for it). The GIL is released for each decode (decode_into: one
 * image; decode_batch: a batch's images, one after the other); the caller's bytes and output
 * buffer are held for its duration. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "jpeg_kernel.h"
#include "read_files.h"
#include "stack_crop.h"

static PyObject *UnsupportedError;

static int parse_axis(PyObject *tuple, fl_axis *axis) {
    return PyArg_ParseTuple(tuple, "iddiiii;an axis is (in_size, in0, in1, out_size, out_start, "
                                   "out_count, origin)",
                            &axis->in_size, &axis->in0, &axis->in1, &axis->out_size,
                            &axis->out_start, &axis->out_count, &axis->origin);
}

/* An exception object for `status` (not raised): decode_batch hands it back with the
 * position of the job that failed, so that Python can say which sample it was. */
static PyObject *error_for(int status, const char *message) {
    PyObject *type = PyExc_OSError;
    PyObject *text;
    switch (status) {
    case FL_UNSUPPORTED:
        type = UnsupportedError;
        text = PyUnicode_FromString(message);
        break;
    case FL_BAD_REQUEST:
        type = PyExc_ValueError;
        text = PyUnicode_FromString(message);
        break;
    case FL_NO_MEMORY:
        type = PyExc_MemoryError;
        text = PyUnicode_FromString(message);
        break;
    default:
        text = PyUnicode_FromFormat("broken JPEG data: %s", message);
    }
    if (!text) return NULL;
    PyObject *error = PyObject_CallOneArg(type, text);
    Py_DECREF(text);
    return error;
}

static PyObject *raise_status(int status, const char *message) {
    PyObject *error = error_for(status, message);
    if (error) {
        PyErr_SetObject((PyObject *)Py_TYPE(error), error);
        Py_DECREF(error);
    }
    return NULL;
}

static PyObject *header(PyObject *self, PyObject *args) {
    Py_buffer data;
    fl_header h;
    char error[256] = "";
    (void)self;
    if (!PyArg_ParseTuple(args, "y*:header", &data)) return NULL;
    /* A microsecond's work: the GIL stays held, since releasing it would invite another
     * thread to take it and leave this one waiting for it to come back. */
    int status = fl_read_header(data.buf, (size_t)data.len, &h, error, sizeof(error));
    PyBuffer_Release(&data);
    if (status != FL_OK) return raise_status(status, error);
    return Py_BuildValue("(iiiOO)", h.width, h.height, h.components,
                         h.supported ? Py_True : Py_False, h.multi_scan ? Py_True : Py_False);
}

static PyObject *decode_into(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"data", "out", "scale", "x", "y", "filter", "hflip", "vflip",
                               "output", "pillow_order", "mean", "std", "portable", NULL};
    Py_buffer data, out;
    PyObject *x, *y;
    fl_request r;
    char error[256] = "";
    (void)self;
    memset(&r, 0, sizeof(r));
    r.std[0] = r.std[1] = r.std[2] = 1.0f;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*w*iO!O!ippip|(fff)(fff)p:decode_into",
                                     keywords, &data, &out, &r.scale_denom, &PyTuple_Type, &x,
                                     &PyTuple_Type, &y, &r.filter, &r.hflip, &r.vflip, &r.output, &r.pillow_order,
                                     &r.mean[0], &r.mean[1], &r.mean[2], &r.std[0], &r.std[1],
                                     &r.std[2], &r.portable)) {
        return NULL;
    }
    PyObject *result = NULL;
    if (!parse_axis(x, &r.x) || !parse_axis(y, &r.y)) goto done;
    Py_ssize_t item = r.output == FL_UINT8 ? 1 : 4;
    if (r.x.out_count <= 0 || r.y.out_count <= 0 ||
        out.len != 3 * item * (Py_ssize_t)r.x.out_count * r.y.out_count) {
        PyErr_Format(PyExc_ValueError, "out has %zd bytes; the sample needs 3 x %d x %d x %zd",
                     out.len, r.y.out_count, r.x.out_count, item);
        goto done;
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = fl_decode_resize(data.buf, (size_t)data.len, &r, out.buf, error, sizeof(error));
    Py_END_ALLOW_THREADS
    if (status != FL_OK) {
        raise_status(status, error);
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    return result;
}

typedef struct {
    Py_buffer data;
    Py_ssize_t slot;
    fl_request r;
} batch_job;

/* One job of decode_batch: (data, slot, scale, x, y, filter, hflip, vflip); the batch's
 * output, normalisation and pass order are copied from `shared`. */
static int parse_job(PyObject *item, const fl_request *shared, batch_job *job) {
    PyObject *x, *y;
    job->r = *shared;
    if (!PyArg_ParseTuple(item, "y*niO!O!ipp;a job is (data, slot, scale, x, y, filter, hflip, "
                                "vflip)",
                          &job->data, &job->slot, &job->r.scale_denom, &PyTuple_Type, &x,
                          &PyTuple_Type, &y, &job->r.filter, &job->r.hflip, &job->r.vflip)) {
        return 0;
    }
    if (parse_axis(x, &job->r.x) && parse_axis(y, &job->r.y)) return 1;
    PyBuffer_Release(&job->data);
    return 0;
}

static PyObject *decode_batch(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"jobs", "out", "output", "pillow_order", "mean", "std",
                               "portable", NULL};
    PyObject *list;
    Py_buffer out;
    fl_request shared;
    char error[256] = "";
    (void)self;
    memset(&shared, 0, sizeof(shared));
    shared.std[0] = shared.std[1] = shared.std[2] = 1.0f;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!w*ip|(fff)(fff)p:decode_batch", keywords,
                                     &PyList_Type, &list, &out, &shared.output,
                                     &shared.pillow_order, &shared.mean[0], &shared.mean[1],
                                     &shared.mean[2], &shared.std[0], &shared.std[1],
                                     &shared.std[2], &shared.portable)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t count = PyList_GET_SIZE(list), parsed = 0;
    batch_job *jobs = PyMem_Calloc((size_t)(count ? count : 1), sizeof(batch_job));
    if (!jobs) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t item = shared.output == FL_UINT8 ? 1 : 4, slot_bytes = 0;
    for (; parsed < count; parsed++) {
        batch_job *job = &jobs[parsed];
        if (!parse_job(PyList_GET_ITEM(list, parsed), &shared, job)) goto done;
        Py_ssize_t bytes = 3 * item * (Py_ssize_t)job->r.x.out_count * job->r.y.out_count;
        if (parsed == 0) slot_bytes = bytes;
        if (job->r.x.out_count <= 0 || job->r.y.out_count <= 0 || bytes != slot_bytes ||
            out.len % slot_bytes != 0 || job->slot < 0 || job->slot >= out.len / slot_bytes) {
            PyErr_Format(PyExc_ValueError,
                         "job %zd: a 3 x %d x %d x %zd sample in slot %zd does not fit out "
                         "(%zd bytes, every job the same shape)",
                         parsed, job->r.y.out_count, job->r.x.out_count, item, job->slot,
                         out.len);
            PyBuffer_Release(&job->data);
            goto done;
        }
    }
    int status = FL_OK;
    Py_ssize_t failed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; failed < count; failed++) {
        batch_job *job = &jobs[failed];
        char *slot = (char *)out.buf + job->slot * slot_bytes;
        status = fl_decode_resize(job->data.buf, (size_t)job->data.len, &job->r, slot, error,
                                  sizeof(error));
        if (status != FL_OK) break;
    }
    Py_END_ALLOW_THREADS
    if (status == FL_OK) {
        result = Py_None;
        Py_INCREF(result);
    } else {
        PyObject *exception = error_for(status, error);
        if (exception) {
            result = Py_BuildValue("(nN)", failed, exception);
        }
    }
done:
    for (Py_ssize_t k = 0; k < parsed; k++) PyBuffer_Release(&jobs[k].data);
    PyMem_Free(jobs);
    PyBuffer_Release(&out);
    return result;
}

/* table[row[x]] for the `count` bytes of row, into `to`; returns the end of what it wrote.
 * Eight bytes are read as one word (a byte load each costs more than the shifts). */
static float *lookup_run(const unsigned char *row, const float *table, float *to,
                         Py_ssize_t count) {
    Py_ssize_t x = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; x + 8 <= count; x += 8, to += 8) {
        uint64_t word;
        memcpy(&word, row + x, 8);
        to[0] = table[word & 255];
        to[1] = table[(word >> 8) & 255];
        to[2] = table[(word >> 16) & 255];
        to[3] = table[(word >> 24) & 255];
        to[4] = table[(word >> 32) & 255];
        to[5] = table[(word >> 40) & 255];
        to[6] = table[(word >> 48) & 255];
        to[7] = table[word >> 56];
    }
#endif
    for (; x < count; x++) *to++ = table[row[x]];
    return to;
}

/* lookup(pixels, table, out[, rows]): out[n, c, y, x] = table[c, pixels[n, c, y, x]] (with
 * rows, an int64 array, image k of out from image rows[k] of pixels: the gather and the
 * conversion in one pass, each index checked and a negative one counted from the end, as
 * NumPy does), for uint8
 * pixels (N, C, H, W) of any strides, a C-contiguous float32 table (C, 256) and a
 * C-contiguous float32 out of the pixels' shape: a conversion (ToTensor, Normalize) whose
 * 256 values per channel NumPy computed once, so that every pixel is NumPy's bits. */
static PyObject *lookup(PyObject *self, PyObject *args) {
    PyObject *pixels_obj, *table_obj, *out_obj, *rows_obj = Py_None;
    Py_buffer pixels, table, out, picked = {0};
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO|O:lookup", &pixels_obj, &table_obj, &out_obj, &rows_obj))
        return NULL;
    if (PyObject_GetBuffer(pixels_obj, &pixels, PyBUF_STRIDES | PyBUF_FORMAT) < 0) return NULL;
    if (PyObject_GetBuffer(table_obj, &table, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&pixels);
        return NULL;
    }
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) <
        0) {
        PyBuffer_Release(&pixels);
        PyBuffer_Release(&table);
        return NULL;
    }
    PyObject *result = NULL;
    if (rows_obj != Py_None &&
        PyObject_GetBuffer(rows_obj, &picked, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        goto done;
    const int64_t *picks = picked.buf;
    Py_ssize_t count = rows_obj == Py_None ? pixels.shape[0] : picked.len / 8;
    if (rows_obj != Py_None &&
        !(picked.ndim == 1 && picked.itemsize == 8 &&
          (strcmp(picked.format, "l") == 0 || strcmp(picked.format, "q") == 0))) {
        PyErr_SetString(PyExc_ValueError, "lookup's rows are a 1-D int64 array");
        goto done;
    }
    for (Py_ssize_t k = 0; rows_obj != Py_None && k < count; k++) {
        if (picks[k] < -pixels.shape[0] || picks[k] >= pixels.shape[0]) {
            PyErr_Format(PyExc_IndexError, "index %lld is out of bounds for axis 0 with size %zd",
                         (long long)picks[k], pixels.shape[0]);
            goto done;
        }
    }
    int fits = pixels.ndim == 4 && pixels.itemsize == 1 && strcmp(pixels.format, "B") == 0 &&
               table.ndim == 2 && table.itemsize == 4 && strcmp(table.format, "f") == 0 &&
               table.shape[0] == pixels.shape[1] && table.shape[1] == 256 && out.ndim == 4 &&
               out.itemsize == 4 && strcmp(out.format, "f") == 0;
    fits = fits && out.shape[0] == count;
    for (int d = 1; fits && d < 4; d++) fits = out.shape[d] == pixels.shape[d];
    if (!fits) {
        PyErr_SetString(PyExc_ValueError,
                        "lookup expects uint8 pixels (N, C, H, W), a float32 table (C, 256) "
                        "and a float32 out of the pixels' shape (of len(rows) images)");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    const Py_ssize_t *shape = pixels.shape, *strides = pixels.strides;
    /* A plane whose rows follow one another is one run of H * W pixels. */
    int whole = strides[3] == 1 && strides[2] == shape[3];
    Py_ssize_t rows = whole ? 1 : shape[2], width = whole ? shape[2] * shape[3] : shape[3];
    float *to = out.buf;
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t n = picks ? (Py_ssize_t)picks[k] : k;
        if (n < 0) n += shape[0]; /* as NumPy reads a negative index */
        if (picks && whole && k + 2 < count) {
            /* Rows picked at random are cold: ask for the one after next while this one
             * is converted (its planes, a run of H * W bytes each). */
            Py_ssize_t ahead = (Py_ssize_t)picks[k + 2];
            if (ahead < 0) ahead += shape[0];
            for (Py_ssize_t c = 0; c < shape[1]; c++) {
                const char *plane = (const char *)pixels.buf + ahead * strides[0] + c * strides[1];
                for (Py_ssize_t at = 0; at < width; at += 64) __builtin_prefetch(plane + at);
            }
        }
        for (Py_ssize_t c = 0; c < shape[1]; c++) {
            const float *values = (const float *)table.buf + 256 * c;
            const char *plane = (const char *)pixels.buf + n * strides[0] + c * strides[1];
            for (Py_ssize_t y = 0; y < rows; y++) {
                const unsigned char *row = (const unsigned char *)(plane + y * strides[2]);
                if (strides[3] == 1) {
                    to = lookup_run(row, values, to, width);
                } else {
                    for (Py_ssize_t x = 0; x < width; x++) *to++ = values[row[x * strides[3]]];
                }
            }
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    if (picked.obj) PyBuffer_Release(&picked);
    PyBuffer_Release(&pixels);
    PyBuffer_Release(&table);
    PyBuffer_Release(&out);
    return result;
}

/* How far a crop's window may lie from the image (its arithmetic stays far from int64's
 * ends). */
#define CROP_REACH ((int64_t)1 << 40)

/* A 1-D C-contiguous buffer of `count` items of `itemsize` bytes. */
static int is_vector(const Py_buffer *b, Py_ssize_t count, Py_ssize_t itemsize) {
    return b->ndim == 1 && b->itemsize == itemsize && b->len == count * itemsize;
}

/* crop(pixels, rows, top, left, flips, fill, pad_top, pad_left, out[, table]): see
 * stack_crop.h. pixels: uint8 (N, C, H, W) of any strides; rows, top, left: int64 (count);
 * flips, fill: uint8 (count), (C); out: C-contiguous (count, C, height, width), uint8, or
 * float32 with a float32 table (C, 256). Each row is checked (and a negative one counted
 * from the end) as NumPy indexes. */
static PyObject *crop(PyObject *self, PyObject *args) {
    PyObject *objects[7], *table_obj = Py_None;
    Py_ssize_t pad_top, pad_left;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOnnO|O:crop", &objects[0], &objects[1], &objects[2],
                          &objects[3], &objects[4], &objects[5], &pad_top, &pad_left,
                          &objects[6], &table_obj))
        return NULL;
    Py_buffer b[8];
    int flags[8] = {PyBUF_STRIDES | PyBUF_FORMAT, PyBUF_C_CONTIGUOUS, PyBUF_C_CONTIGUOUS,
                    PyBUF_C_CONTIGUOUS, PyBUF_C_CONTIGUOUS, PyBUF_C_CONTIGUOUS,
                    PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE,
                    PyBUF_C_CONTIGUOUS | PyBUF_FORMAT};
    int got = 0;
    PyObject *result = NULL;
    int64_t *picks = NULL;
    for (; got < 8; got++) {
        PyObject *obj = got < 7 ? objects[got] : table_obj;
        if (obj == Py_None) break;
        if (PyObject_GetBuffer(obj, &b[got], flags[got]) < 0) goto done;
    }
    const Py_buffer *pixels = &b[0], *out = &b[6];
    const Py_buffer *table = got == 8 ? &b[7] : NULL;
    Py_ssize_t count = b[1].len / 8;
    int fits = got >= 7 && pixels->ndim == 4 && pixels->itemsize == 1 &&
               strcmp(pixels->format, "B") == 0 && is_vector(&b[1], count, 8) &&
               is_vector(&b[2], count, 8) && is_vector(&b[3], count, 8) &&
               is_vector(&b[4], count, 1) && is_vector(&b[5], pixels->shape[1], 1) &&
               out->ndim == 4 && out->shape[0] == count && out->shape[1] == pixels->shape[1] &&
               pad_top >= 0 && pad_top <= CROP_REACH && pad_left >= 0 && pad_left <= CROP_REACH;
    if (fits && table) {
        fits = table->ndim == 2 && table->itemsize == 4 && strcmp(table->format, "f") == 0 &&
               table->shape[0] == pixels->shape[1] && table->shape[1] == 256 &&
               out->itemsize == 4 && strcmp(out->format, "f") == 0;
    } else if (fits) {
        fits = out->itemsize == 1 && strcmp(out->format, "B") == 0;
    }
    if (!fits) {
        PyErr_SetString(PyExc_ValueError,
                        "crop expects uint8 pixels (N, C, H, W); int64 rows, top and left and "
                        "uint8 flips of one length; a uint8 fill per channel; paddings of 0 to "
                        "2**40; and a "
                        "C-contiguous out (len(rows), C, height, width) of uint8, or of "
                        "float32 with a float32 table (C, 256)");
        goto done;
    }
    picks = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(int64_t));
    if (!picks) {
        PyErr_NoMemory();
        goto done;
    }
    const int64_t *given = b[1].buf;
    for (Py_ssize_t k = 0; k < count; k++) {
        if (given[k] < -pixels->shape[0] || given[k] >= pixels->shape[0]) {
            PyErr_Format(PyExc_IndexError, "index %lld is out of bounds for axis 0 with size %zd",
                         (long long)given[k], pixels->shape[0]);
            goto done;
        }
        picks[k] = given[k] < 0 ? given[k] + pixels->shape[0] : given[k];
        const int64_t y = ((const int64_t *)b[2].buf)[k], x = ((const int64_t *)b[3].buf)[k];
        if (y < -CROP_REACH || y > CROP_REACH || x < -CROP_REACH || x > CROP_REACH) {
            PyErr_Format(PyExc_ValueError, "crop's window at (%lld, %lld) is beyond 2**40",
                         (long long)y, (long long)x);
            goto done;
        }
    }
    fl_crop_spec spec = {
        .pixels = pixels->buf,
        .strides = {pixels->strides[0], pixels->strides[1], pixels->strides[2],
                    pixels->strides[3]},
        .channels = pixels->shape[1],
        .height = pixels->shape[2],
        .width = pixels->shape[3],
        .out_height = out->shape[2],
        .out_width = out->shape[3],
        .pad_top = pad_top,
        .pad_left = pad_left,
        .fill = b[5].buf,
        .table = table ? table->buf : NULL,
    };
    Py_BEGIN_ALLOW_THREADS
    fl_crop_images(&spec, picks, b[2].buf, b[3].buf, b[4].buf, (size_t)count, out->buf);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(picks);
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    return result;
}

static PyMethodDef methods[] = {
    {"header", header, METH_VARARGS,
     "header(data) -> (width, height, components, supported, multi_scan)"},
    {"decode_into", (PyCFunction)(void (*)(void))decode_into, METH_VARARGS | METH_KEYWORDS,
     "decode_into(data, out, scale, x, y, filter, hflip, vflip, output, pillow_order[, mean, "
     "std, portable]): decode, "
     "resample, flip and convert one JPEG into out (3 planes, C-contiguous)."},
    {"decode_batch", (PyCFunction)(void (*)(void))decode_batch, METH_VARARGS | METH_KEYWORDS,
     "decode_batch(jobs, out, output, pillow_order[, mean, std, portable]) -> None or "
     "(position, error): each job (data, slot, scale, x, y, filter, hflip, vflip) decoded "
     "into its slot of out in one GIL-free pass, stopping at the first that fails."},
    {"lookup", lookup, METH_VARARGS,
     "lookup(pixels, table, out[, rows]): out = table[c][pixels] (or pixels[rows]) for uint8 "
     "pixels (N, C, H, W), a float32 table (C, 256) and a C-contiguous float32 out, "
     "without the GIL."},
    {"crop", crop, METH_VARARGS,
     "crop(pixels, rows, top, left, flips, fill, pad_top, pad_left, out[, table]): each "
     "image's window of the padded pixels, mirrored by its flips, as uint8 planes (or floats "
     "through table), without the GIL."},
    {"read_files", fl_read_files, METH_VARARGS,
     "read_files(paths, max_bytes) -> list of bytes or None: each file's contents, read "
     "without the GIL, for as many paths as fit in max_bytes (at least one); None where the "
     "caller must read the file itself."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_jpeg_kernel",
    "One native call per JPEG: region decode, Pillow's resampling, flips, conversion.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__jpeg_kernel(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    /* The global keeps its own reference; the module takes another (AddObjectRef steals
     * none), so a failure below drops each exactly once. */
    UnsupportedError = PyErr_NewException("flowloader.vision._jpeg_kernel.UnsupportedError",
                                          PyExc_ValueError, NULL);
    if (!UnsupportedError ||
        PyModule_AddObjectRef(m, "UnsupportedError", UnsupportedError) < 0 ||
        PyModule_AddStringConstant(m, "LIBRARY", fl_jpeg_version()) < 0 ||
        PyModule_AddObjectRef(m, "AVX2", fl_has_avx2() ? Py_True : Py_False) < 0) {
        Py_CLEAR(UnsupportedError);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
