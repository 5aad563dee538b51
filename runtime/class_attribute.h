// A class attribute the fast paths read at every event (``Active.shim``, ``HookState.context``),
// kept while the class is unchanged.
//
// CPython gives a class a new version tag (``tp_version_tag``) after it or one of its bases
// is changed (the change voids the old one); its own attribute cache relies on that. So the value
// read under a tag is still the class's while the tag stays, and the class's dictionary holds
// it: it is kept borrowed. Reading it costs two loads instead of two type lookups, which in a
// model's step (cold caches) cost more than their instructions say.
#pragma once

#include <Python.h>

struct ClassAttribute {
  PyObject* cls = nullptr;   // held by whoever configured it
  PyObject* name = nullptr;  // interned
  unsigned int tag = 0;      // 0: nothing kept
  PyObject* value = nullptr;

  // A class's attribute from now on (nothing kept).
  void reset(PyObject* owner, PyObject* attribute) {
    cls = owner;
    name = attribute;
    tag = 0;
    value = nullptr;
  }

  // The attribute's value, borrowed; null with an error set.
  PyObject* get() {
    PyTypeObject* type = reinterpret_cast<PyTypeObject*>(cls);
    if (tag != 0 && type->tp_version_tag == tag && valid(type)) return value;
    PyObject* found = PyObject_GetAttr(cls, name);
    if (found == nullptr) return nullptr;
    Py_DECREF(found);  // the class holds it
    value = found;
    tag = valid(type) ? type->tp_version_tag : 0;  // given by the lookup above, unless tags ran out
    return value;
  }

 private:
  // Before 3.12, a change voids the tag by clearing this flag (since, by setting the tag to 0).
  static bool valid(PyTypeObject* type) {
#if PY_VERSION_HEX < 0x030C0000
    return PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG);
#else
    (void)type;
    return true;
#endif
  }
};
