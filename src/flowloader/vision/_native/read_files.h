/* read_files(paths, max_bytes) -> list of bytes or None: the whole contents of each file,
 * read with the GIL released, for as many of the paths as fit in max_bytes (at least one).
 * None where the file could not be read here (missing, not a regular file, not readable, a
 * size that changed while it was read): the caller reads that one itself, and its own open
 * raises the error Python users know. An image dataset reads a batch's files with it. */
#ifndef FL_READ_FILES_H
#define FL_READ_FILES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *fl_read_files(PyObject *self, PyObject *args);

#endif
