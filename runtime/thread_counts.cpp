// The shim's two per-thread counts, in C: checked collectives running on the thread
// (``_state.TLS.depth``) and contexts naming a group being entered (``_state.OPENING.depth``).
//
// Each is a ``threading.local`` attribute in Python, and the extension's fast paths read or
// write one at every collective and every context: a ``threading.local`` access finds the
// thread's dictionary and looks the name up in it, which in a model's step (cold caches) cost
// about as much as the rest of the fast path. ``ThreadCount(index)`` is a data descriptor over
// ``thread_counts[index]``, a C++ ``thread_local``: set on the Python class in place of its
// default, it makes ``TLS.depth`` read and write the C count, so the shim's Python and the
// extension share one count and the extension reads it with no Python at all.
//
// Compiled into the allocation hook's extension (``allocator_hook.cpp`` adds the type to its
// module); everything here runs with the GIL held.

#include <Python.h>

#include "thread_counts.h"

thread_local long thread_counts[kThreadCounts] = {};

namespace {

struct ThreadCountObject {
  PyObject_HEAD
  int index;
};

int& index_of(PyObject* self) { return reinterpret_cast<ThreadCountObject*>(self)->index; }

PyObject* count_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  int index;
  static const char* names[] = {"index", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i:ThreadCount", const_cast<char**>(names), &index)) {
    return nullptr;
  }
  if (index < 0 || index >= kThreadCounts) {
    PyErr_Format(PyExc_ValueError, "ThreadCount: index %d is not one of the %d counts", index, kThreadCounts);
    return nullptr;
  }
  PyObject* self = type->tp_alloc(type, 0);
  if (self != nullptr) index_of(self) = index;
  return self;
}

// ``owner.attr``: this thread's count (on the class too: it stands for the class's default).
PyObject* count_get(PyObject* self, PyObject*, PyObject*) { return PyLong_FromLong(thread_counts[index_of(self)]); }

// ``owner.attr = n``: never below 0. Counts moved to C while a thread was inside a counted call
// start at what that thread's Python count was (``_state.keep_counts_in``), and any other
// thread's call then ends on a count of 0, where it stays.
int count_set(PyObject* self, PyObject*, PyObject* value) {
  if (value == nullptr) {
    PyErr_SetString(PyExc_AttributeError, "a thread's count cannot be deleted");
    return -1;
  }
  long n = PyLong_AsLong(value);
  if (n == -1 && PyErr_Occurred()) return -1;
  thread_counts[index_of(self)] = n > 0 ? n : 0;
  return 0;
}

void count_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyType_Slot count_slots[] = {
    {Py_tp_doc, const_cast<char*>("ThreadCount(index): a data descriptor over one of this thread's counts in C.")},
    {Py_tp_new, reinterpret_cast<void*>(count_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(count_dealloc)},
    {Py_tp_descr_get, reinterpret_cast<void*>(count_get)},
    {Py_tp_descr_set, reinterpret_cast<void*>(count_set)},
    {0, nullptr}};

PyType_Spec count_spec = {"commgroup_lint_allocator_hook.ThreadCount", sizeof(ThreadCountObject), 0,
                          Py_TPFLAGS_DEFAULT, count_slots};

}  // namespace

int add_thread_counts(PyObject* module) {
  PyObject* type = PyType_FromSpec(&count_spec);
  if (type == nullptr) return -1;
  if (PyModule_AddObject(module, "ThreadCount", type) < 0) {
    Py_DECREF(type);
    return -1;
  }
  if (PyModule_AddIntConstant(module, "CHECKING", kChecking) < 0) return -1;
  return PyModule_AddIntConstant(module, "ENTERING", kEntering);
}
