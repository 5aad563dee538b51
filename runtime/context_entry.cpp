// A profile context's entry, in C: ``group_context(func, rest, spec, *args, **kwargs)`` and
// ``pool_context(func, rest, spec, *args, **kwargs)``.
//
// A profile context's wrapper (``_targets._context_function``) calls the engine's function, then
// decides what the manager it returned binds. In a model's step that decision in Python (the
// wrapper's tests, the compiler's flag, the group argument, the group behind a wrapper object)
// cost about ten times what it costs in a loop, as the collective checks did
// (``collective_check.cpp``): between two contexts the model's own code has evicted it from the
// caches. Here the usual cases are decided in C: a context that names one group returns the
// extension's manager over the engine's (``HookState.context``, ``Bound``), and a pool context
// made inside one returns the engine's manager as it is. Anything else is ``rest(cm, args,
// kwargs)``, the wrapper's Python after the call, which decides as it always did. The call's
// arguments come as vectorcall passes them, so that a wrapper made of a ``functools.partial``
// over an entry runs no Python at all (``_targets``): no tuple or dictionary is made for them
// unless ``rest`` is called.
//
// Compiled into the allocation hook's extension (``allocator_hook.cpp`` adds these functions
// to its module); everything here runs with the GIL held.

#include <Python.h>

#include <array>
#include <utility>

#include "class_attribute.h"
#include "thread_counts.h"

// allocator_hook.cpp: ``Bound(inner, group)`` made directly when ``type`` is ``Bound``, else ``type(inner, group)``
PyObject* make_manager(PyObject* type, PyObject* inner, PyObject* group);

namespace {

// What the entries read of the shim's Python, given once by ``configure_contexts``.
struct Sources {
  PyObject* active = nullptr;          // _state.Active: ``shim``
  PyObject* hook_state = nullptr;      // _allocator_hook.HookState: ``context``, the manager type
  PyObject* binds_body = nullptr;      // _targets._binds_body(type): the manager can bind its body
  PyObject* lists_segments = nullptr;  // _targets._lists_segments(type): a pool lists its segments
  PyObject* holder = nullptr;          // _groups._HOLDER: wrapper type -> attribute holding its group
  PyObject* labels = nullptr;          // _groups._LABELS: the groups seen through a wrapper
  PyObject* group_type = nullptr;      // torch's ProcessGroup
  PyObject* compiler = nullptr;        // torch.compiler: ``_is_compiling_flag``
} sources;

PyObject *s_shim, *s_context, *s_flag;
ClassAttribute active_shim, hooked_context;  // ``Active.shim``, ``HookState.context``

// ``call(arg)`` is true: 1, 0, or -1 with an error set.
int call_true(PyObject* call, PyObject* arg) {
  PyObject* result = PyObject_CallOneArg(call, arg);
  if (result == nullptr) return -1;
  int truth = PyObject_IsTrue(result);
  Py_DECREF(result);
  return truth;
}

// A question on types (``_targets._binds_body``, ``_lists_segments``) with its last type and answer
// kept: nearly every context of a program asks of one type, and the question's cache would make
// a key and look it up each time.
struct TypeMemo {
  PyObject* type = nullptr;
  int answer = 0;

  // ``question(type)``: 1, 0, or -1 with an error set.
  int ask(PyObject* question, PyObject* t) {
    if (t == type) return answer;
    int truth = call_true(question, t);
    if (truth >= 0) {
      Py_XSETREF(type, Py_NewRef(t));
      answer = truth;
    }
    return truth;
  }
};

TypeMemo binds_memo, lists_memo;

bool configured() {
  if (sources.active != nullptr) return true;
  PyErr_SetString(PyExc_RuntimeError, "the context entries are not configured");
  return false;
}

// A call's arguments as vectorcall passes them: ``n`` positional ones, then one for each name of
// ``names`` (a tuple, or null).
struct Arguments {
  PyObject* const* items;
  Py_ssize_t n;
  PyObject* names;

  // Whether ``name`` (a str) was passed by name, or at ``at``: a borrowed reference to it, null
  // when it was not (an error set when one occurred).
  PyObject* get(PyObject* name, PyObject* at) const {
    Py_ssize_t count = names != nullptr ? PyTuple_GET_SIZE(names) : 0;
    for (Py_ssize_t k = 0; k < count; ++k) {  // names are interned: the same object, usually
      if (PyTuple_GET_ITEM(names, k) == name) return items[n + k];
    }
    for (Py_ssize_t k = 0; k < count; ++k) {
      int same = PyUnicode_Compare(PyTuple_GET_ITEM(names, k), name);
      if (same == -1 && PyErr_Occurred()) return nullptr;
      if (same == 0) return items[n + k];
    }
    Py_ssize_t i = PyLong_AsSsize_t(at);
    if (i == -1 && PyErr_Occurred()) return nullptr;
    return i >= 0 && i < n ? items[i] : nullptr;
  }

  // ``(args, kwargs)`` for Python: a tuple and a dict (new references); false with an error set.
  bool as_python(PyObject** args, PyObject** kwargs) const {
    *args = PyTuple_New(n);
    *kwargs = PyDict_New();
    if (*args == nullptr || *kwargs == nullptr) {
      Py_CLEAR(*args);
      Py_CLEAR(*kwargs);
      return false;
    }
    for (Py_ssize_t i = 0; i < n; ++i) PyTuple_SET_ITEM(*args, i, Py_NewRef(items[i]));
    Py_ssize_t count = names != nullptr ? PyTuple_GET_SIZE(names) : 0;
    for (Py_ssize_t k = 0; k < count; ++k) {
      if (PyDict_SetItem(*kwargs, PyTuple_GET_ITEM(names, k), items[n + k]) < 0) {
        Py_CLEAR(*args);
        Py_CLEAR(*kwargs);
        return false;
      }
    }
    return true;
  }
};

// The compiler's flag, read from its module's dictionary (a module attribute's lookup asks the
// module's type first).
int compiling() {
  PyObject* flag = PyDict_GetItemWithError(PyModule_GetDict(sources.compiler), s_flag);  // borrowed
  if (flag == nullptr) {  // another torch: the wrapper's Python asks the compiler itself
    PyErr_Clear();
    return 1;
  }
  return PyObject_IsTrue(flag);
}

// The ProcessGroup ``group`` names when a ProcessGroup or a wrapper of a type seen before (as
// ``_groups.as_process_group`` answers first); a new reference, or null (no error) otherwise.
PyObject* known_group(PyObject* group) {
  if (reinterpret_cast<PyObject*>(Py_TYPE(group)) == sources.group_type) return Py_NewRef(group);
  PyObject* attr = PyDict_GetItemWithError(sources.holder, reinterpret_cast<PyObject*>(Py_TYPE(group)));
  if (attr == nullptr) return nullptr;
  Py_INCREF(attr);  // the attribute's lookup may run Python, which may change the table
  PyObject* pg = PyObject_GetAttr(group, attr);
  Py_DECREF(attr);
  if (pg == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  if (reinterpret_cast<PyObject*>(Py_TYPE(pg)) == sources.group_type) {
    int labelled = PyDict_Contains(sources.labels, pg);
    if (labelled == 1) return pg;
    if (labelled < 0) PyErr_Clear();
  }
  Py_DECREF(pg);
  return nullptr;
}

int bind_with(PyObject* manager_type, PyObject* cm, PyObject* spec, const Arguments& args,
              PyObject** out);

// ``cm`` bound to one group when the context's arguments are its usual ones; 0 when ``rest``
// decides, -1 on an error; ``*out`` the result when 1.
int bind_group(PyObject* cm, PyObject* spec, const Arguments& args, PyObject** out) {
  // spec: (off_name, off_at, name, at, simple): ``simple``, no ``enabled`` and no default group
  if (PyTuple_GET_ITEM(spec, 4) != Py_True) return 0;
  PyObject* manager_type = Py_XNewRef(hooked_context.get());  // held: what follows may run Python
  if (manager_type == nullptr) return -1;
  int decided = manager_type == Py_None ? 0 : bind_with(manager_type, cm, spec, args, out);
  Py_DECREF(manager_type);
  return decided;
}

// :func:`bind_group` once the manager's type (``HookState.context``) is known.
int bind_with(PyObject* manager_type, PyObject* cm, PyObject* spec, const Arguments& args,
              PyObject** out) {
  int binds = binds_memo.ask(sources.binds_body, reinterpret_cast<PyObject*>(Py_TYPE(cm)));
  if (binds < 0) return -1;
  if (binds == 0) {
    *out = Py_NewRef(cm);
    return 1;
  }
  int compiled = compiling();
  if (compiled != 0) return compiled < 0 ? -1 : 0;
  PyObject* off_name = PyTuple_GET_ITEM(spec, 0);
  if (off_name != Py_None) {
    PyObject* off = args.get(off_name, PyTuple_GET_ITEM(spec, 1));
    if (off == nullptr && PyErr_Occurred()) return -1;
    int truth = off != nullptr ? PyObject_IsTrue(off) : 0;
    if (truth < 0) return -1;
    if (truth > 0) {
      *out = Py_NewRef(cm);
      return 1;
    }
  }
  PyObject* group = args.get(PyTuple_GET_ITEM(spec, 2), PyTuple_GET_ITEM(spec, 3));
  if (group == nullptr) return PyErr_Occurred() ? -1 : 0;  // left out: the default group, in Python
  PyObject* pg = known_group(group);
  if (pg == nullptr) return PyErr_Occurred() ? -1 : 0;
  *out = make_manager(manager_type, cm, pg);
  Py_DECREF(pg);
  return *out == nullptr ? -1 : 1;
}

// A pool context's manager returned as it is: made while a context naming a group is made or
// entered, over a pool that lists its segments (``_targets._pool_context_function``'s first
// case). 1 when so, 0 when ``rest`` decides, -1 on an error.
int inside_group_context(PyObject* spec, const Arguments& args) {
  PyObject* pool = args.get(PyTuple_GET_ITEM(spec, 0), PyTuple_GET_ITEM(spec, 1));
  if (pool == nullptr) return PyErr_Occurred() ? -1 : 0;
  if (thread_counts[kEntering] <= 0) return 0;  // ``_state.OPENING.depth``
  return lists_memo.ask(sources.lists_segments, reinterpret_cast<PyObject*>(Py_TYPE(pool)));
}

using Decide = int (*)(PyObject* cm, PyObject* spec, const Arguments& args, PyObject** out);

// The shared part of both entries, called as ``entry(func, rest, spec, *args, **kwargs)``: call
// ``func``; with no shim, its manager; else ``decide``, and ``rest(cm, args, kwargs)`` when it
// does not.
PyObject* enter(PyObject* const* a, size_t nargsf, PyObject* names, Decide decide, const char* usage) {
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  if (n < 3 || !PyTuple_Check(a[2])) {
    PyErr_SetString(PyExc_TypeError, usage);
    return nullptr;
  }
  if (!configured()) return nullptr;
  PyObject *func = a[0], *rest = a[1], *spec = a[2];
  Arguments args{a + 3, n - 3, names != nullptr && PyTuple_GET_SIZE(names) ? names : nullptr};
  PyObject* cm = PyObject_Vectorcall(func, args.items, args.n, args.names);
  if (cm == nullptr) return nullptr;
  PyObject* shim = active_shim.get();  // only its identity is read
  if (shim == nullptr) {
    Py_DECREF(cm);
    return nullptr;
  }
  if (shim == Py_None) return cm;
  PyObject* out = nullptr;
  int decided = decide(cm, spec, args, &out);
  if (decided != 0) {
    Py_DECREF(cm);
    return decided < 0 ? nullptr : out;
  }
  PyObject *positional, *named, *result = nullptr;
  if (args.as_python(&positional, &named)) {
    result = PyObject_CallFunctionObjArgs(rest, cm, positional, named, nullptr);
    Py_DECREF(positional);
    Py_DECREF(named);
  }
  Py_DECREF(cm);
  return result;
}

PyObject* group_context(PyObject*, PyObject* const* a, size_t nargsf, PyObject* names) {
  return enter(a, nargsf, names, bind_group, "group_context(func, rest, spec: 5-tuple, *args, **kwargs)");
}

int pool_decide(PyObject* cm, PyObject* spec, const Arguments& args, PyObject** out) {
  if (PyTuple_GET_SIZE(spec) != 2) {
    PyErr_SetString(PyExc_TypeError, "a pool context's spec is (name, index)");
    return -1;
  }
  int inside = inside_group_context(spec, args);
  if (inside == 1) *out = Py_NewRef(cm);
  return inside;
}

PyObject* pool_context(PyObject*, PyObject* const* a, size_t nargsf, PyObject* names) {
  return enter(a, nargsf, names, pool_decide, "pool_context(func, rest, spec: 2-tuple, *args, **kwargs)");
}

// ``configure_contexts(active, hook_state, binds_body, lists_segments, holder, labels, group_type,
// compiler)``.
PyObject* configure_contexts(PyObject*, PyObject* args) {
  Sources next;
  if (!PyArg_UnpackTuple(args, "configure_contexts", 8, 8, &next.active, &next.hook_state, &next.binds_body,
                         &next.lists_segments, &next.holder, &next.labels, &next.group_type, &next.compiler)) {
    return nullptr;
  }
  if (!PyType_Check(next.active) || !PyType_Check(next.hook_state) || !PyDict_Check(next.holder) ||
      !PyDict_Check(next.labels) || !PyModule_Check(next.compiler)) {
    PyErr_SetString(PyExc_TypeError,
                    "configure_contexts: active and hook_state are classes, holder and labels dicts, compiler a module");
    return nullptr;
  }
  auto all = [](const Sources& s) -> std::array<PyObject*, 8> {
    return {s.active, s.hook_state, s.binds_body, s.lists_segments, s.holder, s.labels, s.group_type, s.compiler};
  };
  for (PyObject* o : all(next)) Py_INCREF(o);
  std::swap(sources, next);
  active_shim.reset(sources.active, s_shim);
  hooked_context.reset(sources.hook_state, s_context);
  Py_CLEAR(binds_memo.type);  // other questions: nothing asked yet
  Py_CLEAR(lists_memo.type);
  for (PyObject* o : all(next)) Py_XDECREF(o);
  Py_RETURN_NONE;
}

PyMethodDef functions[] = {
    {"group_context", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(group_context)),
     METH_FASTCALL | METH_KEYWORDS,
     "group_context(func, rest, spec, *args, **kwargs): a profile context's call, bound in C when usual."},
    {"pool_context", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(pool_context)),
     METH_FASTCALL | METH_KEYWORDS,
     "pool_context(func, rest, spec, *args, **kwargs): a pool context's call, returned as it is when inside."},
    {"configure_contexts", configure_contexts, METH_VARARGS,
     "configure_contexts(active, hook_state, binds_body, lists_segments, holder, labels, group_type, compiler): "
     "what the entries read."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

// Adds the functions above to the extension's module; -1 with an error set on failure.
int add_context_entry(PyObject* module) {
  for (auto [name, slot] : {std::pair{"shim", &s_shim}, {"context", &s_context},
                            {"_is_compiling_flag", &s_flag}}) {
    *slot = PyUnicode_InternFromString(name);
    if (*slot == nullptr) return -1;
  }
  return PyModule_AddFunctions(module, functions);
}
