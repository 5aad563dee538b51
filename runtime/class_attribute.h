// A class attribute the fast paths read at every event (``Active.shim``, ``HookState.context``),
// kept while the class is unchanged.
//
// CPython gives a class a new version tag (``tp_version_tag``) after it or one of its bases
// is changed (the change voids the old one); its own attribute cache relies on that. So the value
// read under a tag is still the class's while the tag stays. It is held all the same (a class's
// old value can be released before its tag is voided), and replaced at the first read after a
// change. Reading it costs two loads instead of two type lookups, which in a model's step (cold
// caches) cost more than their instructions say. Python 3.10 restarts its tags when
// ``sys._clear_type_cache()`` is called, so that a changed class can get its old tag back: there
// nothing is kept.
#pragma once

#include <Python.h>

struct ClassAttribute {
  PyObject* cls = nullptr;   // held by whoever configured it
  PyObject* name = nullptr;  // interned
  unsigned int tag = 0;      // 0: nothing kept
  PyObject* value = nullptr;  // held

  // A class's attribute from now on (nothing kept).
  void reset(PyObject* owner, PyObject* attribute) {
    cls = owner;
    name = attribute;
    tag = 0;
    Py_CLEAR(value);
  }

  // The attribute's value, borrowed (held here until the next read after a change); null with an
  // error set.
  PyObject* get() {
    PyTypeObject* type = reinterpret_cast<PyTypeObject*>(cls);
    if (tag != 0 && type->tp_version_tag == tag && valid(type)) return value;
    PyObject* found = PyObject_GetAttr(cls, name);
    if (found == nullptr) return nullptr;
    Py_XSETREF(value, found);
    tag = valid(type) ? type->tp_version_tag : 0;  // given by the lookup above, unless tags ran out
    return value;
  }

 private:
  // Whether the class's tag is one to keep a value under.
  static bool valid(PyTypeObject* type) {
#if PY_VERSION_HEX < 0x030B0000
    (void)type;
    return false;  // tags restart (see the top)
#elif PY_VERSION_HEX < 0x030C0000
    return PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG);  // a change clears this flag
#else
    (void)type;
    return true;  // a change sets the tag to 0
#endif
  }
};
