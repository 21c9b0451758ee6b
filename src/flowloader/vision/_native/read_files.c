/* See read_files.h. Two GIL-free passes over a batch's files (open + fstat, then read), with
 * the GIL taken between them only to allocate each file's bytes object at its size: a thread
 * worker then gives up the GIL twice per batch for its files, instead of three times per
 * file (open, read, close), each a chance for another thread to hold it on return. */
#include "read_files.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    PyObject *path; /* the file system's bytes for the path; NULL: not a path we read */
    int fd;         /* open between the two passes; -1 otherwise */
    Py_ssize_t size;
    PyObject *data; /* a bytes object of `size`, filled by the second pass */
    int whole;      /* the read gave exactly `size` bytes, then the end of the file */
} file_read;

/* Reads `size` bytes into `buffer`; true when they were all there and nothing follows (a
 * file that changed size since fstat is left to the caller, who reads it again). */
static int read_whole(int fd, char *buffer, Py_ssize_t size) {
    Py_ssize_t done = 0;
    while (done < size) {
        ssize_t n = read(fd, buffer + done, (size_t)(size - done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return 0;
        done += n;
    }
    char probe;
    for (;;) {
        ssize_t n = read(fd, &probe, 1);
        if (n < 0 && errno == EINTR) continue;
        return n == 0;
    }
}

/* First pass, without the GIL: open each regular file and take its size, until the sizes
 * pass `max_bytes` (the first file read is always taken). Returns how many files it
 * covered; those that could not be opened, or are not regular files, stay at fd -1. */
static Py_ssize_t open_files(file_read *files, Py_ssize_t count, Py_ssize_t max_bytes) {
    Py_ssize_t total = 0, covered = 0;
    for (; covered < count; covered++) {
        file_read *f = &files[covered];
        if (!f->path) continue;
        /* O_NONBLOCK: a FIFO must not block the open; it is not a regular file anyway */
        int fd = open(PyBytes_AS_STRING(f->path), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) continue;
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 ||
            (unsigned long long)st.st_size > (unsigned long long)(PY_SSIZE_T_MAX / 2)) {
            close(fd);
            continue;
        }
        if (total > 0 && (Py_ssize_t)st.st_size > max_bytes - total) {
            close(fd);
            break;
        }
        f->fd = fd;
        f->size = (Py_ssize_t)st.st_size;
        total += f->size;
    }
    return covered;
}

static void release(file_read *files, Py_ssize_t count) {
    for (Py_ssize_t i = 0; i < count; i++) {
        if (files[i].fd >= 0) close(files[i].fd);
        Py_XDECREF(files[i].path);
        Py_XDECREF(files[i].data);
    }
    PyMem_Free(files);
}

PyObject *fl_read_files(PyObject *self, PyObject *args) {
    PyObject *paths;
    Py_ssize_t max_bytes;
    (void)self;
    if (!PyArg_ParseTuple(args, "On:read_files", &paths, &max_bytes)) return NULL;
    PyObject *seq = PySequence_Fast(paths, "read_files() takes a sequence of paths");
    if (!seq) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    file_read *files = PyMem_Calloc(count > 0 ? (size_t)count : 1, sizeof(file_read));
    if (!files) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        files[i].fd = -1;
        /* A path the file system cannot take (a NUL inside, not a str or bytes): None, so
         * that the caller's own open reports it as it always has. */
        if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(seq, i), &files[i].path)) {
            PyErr_Clear();
            files[i].path = NULL;
        }
    }
    Py_DECREF(seq);
    Py_ssize_t covered;
    Py_BEGIN_ALLOW_THREADS
    covered = open_files(files, count, max_bytes);
    Py_END_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < covered; i++) {
        if (files[i].fd < 0) continue;
        files[i].data = PyBytes_FromStringAndSize(NULL, files[i].size);
        if (!files[i].data) {
            release(files, count);
            return NULL;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < covered; i++) {
        file_read *f = &files[i];
        if (f->fd < 0) continue;
        /* the bytes objects are new and not yet shared: filling them needs no GIL */
        f->whole = read_whole(f->fd, PyBytes_AS_STRING(f->data), f->size);
        close(f->fd);
        f->fd = -1;
    }
    Py_END_ALLOW_THREADS
    PyObject *result = PyList_New(covered);
    if (!result) {
        release(files, count);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < covered; i++) {
        PyObject *item = files[i].whole ? files[i].data : Py_None;
        Py_INCREF(item);
        PyList_SET_ITEM(result, i, item);
    }
    release(files, count);
    return result;
}
