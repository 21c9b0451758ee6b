/* flowloader._index_kernel: the keyed permutation (permute.c) and Philox blocks (philox.c)
 * for a batch, without the GIL. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "permute.h"
#include "philox.h"

static int check(Py_buffer *b, const char *name, Py_ssize_t count) {
    if (b->len != count * 8) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, not %zd (8 per element)", name,
                     b->len, count * 8);
        return 0;
    }
    return 1;
}

static PyObject *permute_into(PyObject *self, PyObject *args) {
    Py_buffer j, n, keys, out;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*w*:permute_into", &j, &n, &keys, &out)) return NULL;
    Py_ssize_t count = j.len / 8;
    PyObject *result = NULL;
    if (j.len % 8 == 0 && check(&n, "n", count) && check(&keys, "keys", count) &&
        check(&out, "out", count)) {
        Py_BEGIN_ALLOW_THREADS
        fl_permute((const int64_t *)j.buf, (const int64_t *)n.buf, (const uint64_t *)keys.buf,
                   (int64_t *)out.buf, (size_t)count);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    } else if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "j must hold 8 bytes per element");
    }
    PyBuffer_Release(&j);
    PyBuffer_Release(&n);
    PyBuffer_Release(&keys);
    PyBuffer_Release(&out);
    return result;
}

static PyObject *philox_into(PyObject *self, PyObject *args) {
    unsigned long long key0, counter;
    Py_buffer key1, out;
    (void)self;
    if (!PyArg_ParseTuple(args, "Ky*Kw*:philox_into", &key0, &key1, &counter, &out)) return NULL;
    Py_ssize_t count = key1.len / 8;
    PyObject *result = NULL;
    if (key1.len % 8 == 0 && out.len == 4 * key1.len) {
        Py_BEGIN_ALLOW_THREADS
        fl_philox_blocks((uint64_t)key0, (const uint64_t *)key1.buf, (uint64_t)counter,
                         (uint64_t *)out.buf, (size_t)count);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    } else {
        PyErr_Format(PyExc_ValueError,
                     "philox_into: key1 holds %zd bytes and out %zd: 8 per key and 32 per key",
                     key1.len, out.len);
    }
    PyBuffer_Release(&key1);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"permute_into", permute_into, METH_VARARGS,
     "permute_into(j, n, keys, out): out[k] = the keyed permutation of range(n[k]) at j[k] "
     "(int64, int64, uint64, int64 buffers of one length)."},
    {"philox_into", philox_into, METH_VARARGS,
     "philox_into(key0, key1, counter, out): out[k] = Philox4x64-10 of (counter, 0, 0, 0) "
     "under the key (key0, key1[k]) (uint64 buffers: key1 of N, out of 4 N)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_index_kernel",
                                    "The keyed permutation of flowloader.permutation and Philox blocks, native.",
                                    -1, methods};

PyMODINIT_FUNC PyInit__index_kernel(void) { return PyModule_Create(&module); }
