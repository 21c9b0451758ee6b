/* flowloader.vision._jpeg_kernel: the Python face of jpeg_kernel.c. The GIL is released for
 * the whole decode; the caller's bytes and output buffer are held for its duration. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "jpeg_kernel.h"

static PyObject *UnsupportedError;

static int parse_axis(PyObject *tuple, fl_axis *axis) {
    return PyArg_ParseTuple(tuple, "iddiiii;an axis is (in_size, in0, in1, out_size, out_start, "
                                   "out_count, origin)",
                            &axis->in_size, &axis->in0, &axis->in1, &axis->out_size,
                            &axis->out_start, &axis->out_count, &axis->origin);
}

static PyObject *raise_status(int status, const char *message) {
    switch (status) {
    case FL_UNSUPPORTED:
        PyErr_SetString(UnsupportedError, message);
        break;
    case FL_BAD_REQUEST:
        PyErr_SetString(PyExc_ValueError, message);
        break;
    case FL_NO_MEMORY:
        PyErr_SetString(PyExc_MemoryError, message);
        break;
    default:
        PyErr_Format(PyExc_OSError, "broken JPEG data: %s", message);
    }
    return NULL;
}

static PyObject *header(PyObject *self, PyObject *args) {
    Py_buffer data;
    fl_header h;
    char error[256] = "";
    (void)self;
    if (!PyArg_ParseTuple(args, "y*:header", &data)) return NULL;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = fl_read_header(data.buf, (size_t)data.len, &h, error, sizeof(error));
    Py_END_ALLOW_THREADS
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

static PyMethodDef methods[] = {
    {"header", header, METH_VARARGS,
     "header(data) -> (width, height, components, supported, multi_scan)"},
    {"decode_into", (PyCFunction)(void (*)(void))decode_into, METH_VARARGS | METH_KEYWORDS,
     "decode_into(data, out, scale, x, y, filter, hflip, vflip, output, pillow_order[, mean, "
     "std, portable]): decode, "
     "resample, flip and convert one JPEG into out (3 planes, C-contiguous)."},
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
