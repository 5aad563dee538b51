// The passing case of a collective's check, in C: ``check(func, slow, spec, args, kwargs)``.
//
// Every collective the shim hooks goes through ``_check.checked``. In a model's step the same
// collectives run on the same buffers at every step, and the check in Python (a dozen reads of
// attributes and globals, a method call) costs there about ten times what it costs in a loop:
// between two collectives the model's own code has evicted it from the caches. Here a
// collective whose every tensor was found passing on its group before runs with no Python of
// the shim's: its depth is set (what it runs is not checked again) and ``func`` is called.
// Anything else goes to the check in Python, ``slow(args, kwargs)``, which tells this cache
// of each pass (``remember``). A failing collective is never cached: it reaches Python every
// time.
//
// A pass holds while what it was decided on holds: the record at the tensor's address (the
// same object, counting or not as it did: the allocation hook's block still has its serial
// number), and the rest of the binding table (``TABLE.version``: registered segments, a pool's
// groups, a record's groups changed in place). A pass keeps a few such bases: a block that a
// model's step hands out under several groups in turn has a record for each, brought back in
// turn by the allocation hook.
//
// Compiled into the allocation hook's extension (``allocator_hook.cpp`` adds these functions
// to its module); everything here runs with the GIL held.

#include <torch/csrc/autograd/python_variable.h>

#include <Python.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "class_attribute.h"
#include "thread_counts.h"

uint64_t block_serial_at(uint64_t addr);  // allocator_hook.cpp: the block's serial number, or 0

namespace {

// A tensor known to pass on a group: its storage's start, its own data and the group.
struct Pass {
  uint64_t start;
  uint64_t data;
  uintptr_t group;
  bool operator==(const Pass& other) const {
    return start == other.start && data == other.data && group == other.group;
  }
};

struct PassHash {
  size_t operator()(const Pass& p) const {
    uint64_t h = p.start * 0x9E3779B97F4A7C15ULL ^ p.data * 0xC2B2AE3D27D4EB4FULL ^ p.group;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

// What a pass was decided on: the record at the storage's start (held; null: none), its block's
// serial number (0: a storage's record), and whether it counted (its block still had that number).
struct Basis {
  PyObject* record = nullptr;
  uint64_t serial = 0;
  bool counted = true;
};

// The bases a pass holds on (a block handed out under several groups in turn has one record
// for each, each brought back in turn: ``allocator_hook.cpp``), the most recent first.
constexpr int kBases = 4;
struct Bases {
  Basis basis[kBases];
  int n = 0;
  PyObject* start = nullptr;  // the storage's start as the table's key (held): not made at each check
};

constexpr size_t kMaxPasses = 1 << 16;  // then the cache starts again

// What the check reads of the shim's Python, given once by ``configure_checks``.
struct Sources {
  PyObject* active = nullptr;      // _state.Active: ``shim``, the installed shim or None
  PyObject* table = nullptr;       // _table.TABLE: ``version`` (changes beside the records themselves)
  PyObject* buffers = nullptr;     // _table.TABLE.buffers: storage start -> record
  PyObject* as_group = nullptr;    // _groups.as_process_group
  PyObject* group_type = nullptr;  // torch's ProcessGroup
  PyObject* compiler = nullptr;    // torch.compiler: ``_is_compiling_flag``
  PyObject* has_torch_function = nullptr;  // torch.overrides.has_torch_function
} sources;

PyObject *s_shim, *s_version, *s_flag, *s_serial, *s_buffers;
ClassAttribute active_shim;  // ``Active.shim``

// The passes found under one shim (held) at one version of the table, with their basis; the
// groups they name, held so that no other group is made at the same address while they live.
PyObject* cached_shim = nullptr;
long long cached_version = -1;
std::unordered_map<Pass, Bases, PassHash> passes;
std::vector<PyObject*> groups;

void forget_passes() {
  for (auto& [key, bases] : passes) {
    for (int i = 0; i < bases.n; ++i) Py_XDECREF(bases.basis[i].record);
    Py_XDECREF(bases.start);
  }
  passes.clear();
  for (PyObject* g : groups) Py_DECREF(g);
  groups.clear();
}

// The record bound at ``start`` now (borrowed; null: none, or an error set).
PyObject* record_at(uint64_t start) {
  PyObject* key = PyLong_FromUnsignedLongLong(start);
  if (key == nullptr) return nullptr;
  PyObject* record = PyDict_GetItemWithError(sources.buffers, key);
  Py_DECREF(key);
  return record;
}

// The key of an exact ``torch.Tensor`` with a storage; false for anything else.
bool key_of(PyObject* value, Pass& key) {
  if (Py_TYPE(value) != reinterpret_cast<PyTypeObject*>(THPVariableClass)) return false;
  try {
    const at::Tensor& t = THPVariable_Unpack(value);
    if (!t.has_storage()) return false;
    key.start = reinterpret_cast<uint64_t>(t.storage().data());
    key.data = key.start + static_cast<uint64_t>(t.storage_offset()) * t.itemsize();
  } catch (...) {
    return false;
  }
  return true;
}

// 1: ``value`` is no tensor, or a tensor known to pass on ``group`` as the table is now; 0: the
// check in Python; -1: an error.
int known(PyObject* value, uintptr_t group) {
  Pass key;
  if (key_of(value, key)) {
    key.group = group;
    auto found = passes.find(key);
    if (found == passes.end()) return 0;
    const Bases& bases = found->second;
    PyObject* record = PyDict_GetItemWithError(sources.buffers, bases.start);  // borrowed
    if (record == nullptr && PyErr_Occurred()) return -1;
    for (int i = 0; i < bases.n; ++i) {
      const Basis& basis = bases.basis[i];
      if (record == basis.record &&
          (!basis.serial || (block_serial_at(key.start) == basis.serial) == basis.counted)) {
        return 1;
      }
    }
    return 0;
  }
  if (PyList_Check(value) || PyTuple_Check(value)) return 0;  // their tensors: the full scan
  return THPVariable_Check(value) ? 0 : 1;                    // a tensor subclass
}

long long table_version() {
  PyObject* v = PyObject_GetAttr(sources.table, s_version);
  if (v == nullptr) return -1;
  long long version = PyLong_AsLongLong(v);
  Py_DECREF(v);
  return version;
}

// The group argument as ``_check.checked`` reads it: ``spec`` is (position, keyword, group_attr,
// traced). A new reference, or null with an error set.
PyObject* group_argument(PyObject* spec, PyObject* args, PyObject* kwargs) {
  PyObject* attr = PyTuple_GET_ITEM(spec, 2);
  Py_ssize_t nargs = PyTuple_GET_SIZE(args);
  if (attr != Py_None) {
    if (nargs == 0) Py_RETURN_NONE;
    PyObject* owner = PyTuple_GET_ITEM(args, 0);
    PyObject* held = PyObject_GetAttr(owner, attr);
    if (held == nullptr) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return nullptr;
      PyErr_Clear();
    } else {
      int truth = PyObject_IsTrue(held);
      if (truth != 0) {
        if (truth < 0) Py_CLEAR(held);
        return held;
      }
      Py_DECREF(held);
    }
    return Py_NewRef(owner);
  }
  if (kwargs != nullptr) {
    PyObject* found = PyDict_GetItemWithError(kwargs, PyTuple_GET_ITEM(spec, 1));
    if (found != nullptr) return Py_NewRef(found);
    if (PyErr_Occurred()) return nullptr;
  }
  PyObject* position = PyTuple_GET_ITEM(spec, 0);
  if (position != Py_None) {
    Py_ssize_t at = PyLong_AsSsize_t(position);
    if (at == -1 && PyErr_Occurred()) return nullptr;
    if (at < nargs) return Py_NewRef(PyTuple_GET_ITEM(args, at));
  }
  Py_RETURN_NONE;
}

// 1: every tensor among ``args`` and ``kwargs`` is known to pass on ``group`` as the table is now.
int all_known(PyObject* args, PyObject* kwargs, PyObject* group) {
  if (sources.as_group == nullptr || table_version() != cached_version) {
    return PyErr_Occurred() ? -1 : 0;
  }
  uintptr_t g = reinterpret_cast<uintptr_t>(group);
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
    int k = known(PyTuple_GET_ITEM(args, i), g);
    if (k <= 0) return k;
  }
  if (kwargs != nullptr) {
    Py_ssize_t pos = 0;
    PyObject *name, *value;
    while (PyDict_Next(kwargs, &pos, &name, &value)) {
      int k = known(value, g);
      if (k <= 0) return k;
    }
  }
  return 1;
}

// ``func(*args, **kwargs)`` counted as a checked collective running on the thread (``_state.TLS``).
PyObject* call_checked(PyObject* func, PyObject* args, PyObject* kwargs) {
  long& checking = thread_counts[kChecking];
  ++checking;
  PyObject* result = PyObject_Call(func, args, kwargs);
  if (checking > 0) --checking;  // never below 0, as the count's setter (``thread_counts.cpp``)
  return result;
}

// 1: the call is decided here (pass); 0: by the check in Python; -1: an error.
int passes_here(PyObject* shim, PyObject* spec, PyObject* args, PyObject* kwargs) {
  if (shim != cached_shim || passes.empty()) return 0;
  if (PyTuple_GET_ITEM(spec, 3) == Py_True) {  // traced: what the compiler traces is Python's call
    PyObject* flag = PyDict_GetItemWithError(PyModule_GetDict(sources.compiler), s_flag);  // borrowed
    if (flag == nullptr) {  // another torch: Python asks the compiler itself
      PyErr_Clear();
      return 0;
    }
    int compiling = PyObject_IsTrue(flag);
    if (compiling != 0) return compiling < 0 ? -1 : 0;
  }
  PyObject* group = group_argument(spec, args, kwargs);
  if (group == nullptr) return -1;
  if (reinterpret_cast<PyObject*>(Py_TYPE(group)) != sources.group_type) {
    Py_SETREF(group, PyObject_CallOneArg(sources.as_group, group));
    if (group == nullptr) return -1;
  }
  int known = all_known(args, kwargs, group);
  Py_DECREF(group);
  return known;
}

// ``slow(args, kwargs)``, the check in Python, which takes a dict of keyword arguments.
PyObject* call_slow(PyObject* slow, PyObject* args, PyObject* kwargs) {
  if (kwargs != Py_None) return PyObject_CallFunctionObjArgs(slow, args, kwargs, nullptr);
  PyObject* none = PyDict_New();
  if (none == nullptr) return nullptr;
  PyObject* result = PyObject_CallFunctionObjArgs(slow, args, none, nullptr);
  Py_DECREF(none);
  return result;
}

// 1: a collective called now is to be checked (a shim is installed, ``*shim`` when asked, and no
// checked collective runs on this thread); 0: not; -1: an error.
int to_check(PyObject** shim_out = nullptr) {
  if (sources.active == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "the collective check is not configured");
    return -1;
  }
  if (thread_counts[kChecking] != 0) return 0;
  PyObject* shim = active_shim.get();  // only its identity is read
  if (shim == nullptr) return -1;
  if (shim_out != nullptr) *shim_out = shim;
  return shim != Py_None;
}

// ``check(func, slow, spec, args, kwargs)``: the hooked collective's call (see the top).
PyObject* check(PyObject*, PyObject* const* a, Py_ssize_t n) {
  if (n != 5 || !PyTuple_Check(a[2]) || PyTuple_GET_SIZE(a[2]) != 4 || !PyTuple_Check(a[3]) ||
      (a[4] != Py_None && !PyDict_Check(a[4]))) {
    PyErr_SetString(PyExc_TypeError, "check(func, slow, spec: 4-tuple, args: tuple, kwargs: dict | None)");
    return nullptr;
  }
  PyObject *func = a[0], *slow = a[1], *spec = a[2], *args = a[3];
  PyObject* kwargs = a[4] == Py_None || PyDict_GET_SIZE(a[4]) == 0 ? nullptr : a[4];
  if (sources.active == nullptr) return call_slow(slow, args, a[4]);
  PyObject* shim = nullptr;
  int checking = to_check(&shim);
  if (checking < 0) return nullptr;
  if (!checking) return PyObject_Call(func, args, kwargs);  // no shim, or checked already
  int decided = passes_here(shim, spec, args, kwargs);
  if (decided < 0) return nullptr;
  if (decided) return call_checked(func, args, kwargs);
  return call_slow(slow, args, a[4]);
}

// ``has_torch_function(relevant_args)``: torch's, for ``distributed_c10d``, except that a
// collective not checked yet is handed to the shim (``_collectives`` says why).
PyObject* has_torch_function(PyObject*, PyObject* relevant) {
  int checking = to_check();
  if (checking < 0) return nullptr;
  if (checking) Py_RETURN_TRUE;
  return PyObject_CallOneArg(sources.has_torch_function, relevant);
}

// What ``handle_torch_function`` hands collectives to, given by ``set_handle``: public function
// -> (func, slow, spec) of its check, and the shim's handle_torch_function in Python.
PyObject* handled = nullptr;
PyObject* python_handle = nullptr;

// ``handle_torch_function(public, relevant_args, *args, **kwargs)``: for ``distributed_c10d``, a
// collective not checked yet goes to its check (``check``) with no Python of the shim's in
// between; any other call to the shim's handle_torch_function in Python.
PyObject* handle_torch_function(PyObject*, PyObject* args, PyObject* kwargs) {
  if (python_handle == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "handle_torch_function is not configured");
    return nullptr;
  }
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  PyObject* entry = n >= 2 ? PyDict_GetItemWithError(handled, PyTuple_GET_ITEM(args, 0)) : nullptr;
  if (entry == nullptr && PyErr_Occurred()) return nullptr;
  int checking = entry != nullptr && PyTuple_Check(entry) && PyTuple_GET_SIZE(entry) == 3 ? to_check() : 0;
  if (checking < 0) return nullptr;
  if (!checking) return PyObject_Call(python_handle, args, kwargs);
  Py_INCREF(entry);  // held while the collective runs: the table may change meanwhile
  PyObject* rest = PyTuple_GetSlice(args, 2, n);
  PyObject* result = nullptr;
  if (rest != nullptr) {
    PyObject* call[] = {PyTuple_GET_ITEM(entry, 0), PyTuple_GET_ITEM(entry, 1), PyTuple_GET_ITEM(entry, 2), rest,
                        kwargs != nullptr ? kwargs : Py_None};
    result = check(nullptr, call, 5);
    Py_DECREF(rest);
  }
  Py_DECREF(entry);
  return result;
}

// ``set_handle(handled, python_handle)``.
PyObject* set_handle(PyObject*, PyObject* args) {
  PyObject *table, *fallback;
  if (!PyArg_UnpackTuple(args, "set_handle", 2, 2, &table, &fallback)) return nullptr;
  if (!PyDict_Check(table)) {
    PyErr_SetString(PyExc_TypeError, "set_handle(handled: dict, python_handle)");
    return nullptr;
  }
  Py_XSETREF(handled, Py_NewRef(table));
  Py_XSETREF(python_handle, Py_NewRef(fallback));
  Py_RETURN_NONE;
}

// ``remember(shim, args, kwargs, group)``: the check in Python found this call passing.
PyObject* remember(PyObject*, PyObject* const* a, Py_ssize_t n) {
  if (n != 4 || !PyTuple_Check(a[1]) || (a[2] != Py_None && !PyDict_Check(a[2]))) {
    PyErr_SetString(PyExc_TypeError, "remember(shim, args: tuple, kwargs: dict | None, group)");
    return nullptr;
  }
  long long version = table_version();
  if (version == -1 && PyErr_Occurred()) return nullptr;
  if (a[0] != cached_shim || version != cached_version || passes.size() >= kMaxPasses) {
    forget_passes();
    Py_XSETREF(cached_shim, Py_NewRef(a[0]));
    cached_version = version;
  }
  PyObject* group = a[3];
  uintptr_t g = reinterpret_cast<uintptr_t>(group);
  // Held before any pass names it (an error below may leave some): no other group is made at
  // its address while they live.
  if (std::find(groups.begin(), groups.end(), group) == groups.end()) groups.push_back(Py_NewRef(group));
  auto add = [&](PyObject* value) -> int {
    Pass key;
    if (!key_of(value, key)) return 0;
    key.group = g;
    PyObject* record = record_at(key.start);
    if (record == nullptr && PyErr_Occurred()) return -1;
    Basis basis{Py_XNewRef(record), 0, true};
    if (record != nullptr) {
      PyObject* serial = PyObject_GetAttr(record, s_serial);
      basis.serial = serial != nullptr ? PyLong_AsUnsignedLongLong(serial) : 0;
      Py_XDECREF(serial);
      if (PyErr_Occurred()) {
        Py_DECREF(record);
        return -1;
      }
      basis.counted = !basis.serial || block_serial_at(key.start) == basis.serial;
    }
    Bases& bases = passes[key];
    if (bases.start == nullptr) bases.start = PyLong_FromUnsignedLongLong(key.start);
    if (bases.start == nullptr) {  // a new entry, left empty
      Py_XDECREF(basis.record);
      passes.erase(key);
      return -1;
    }
    int slot = 0;  // the same record's basis, replaced; else the oldest goes
    while (slot < bases.n && bases.basis[slot].record != record) ++slot;
    if (slot == bases.n) slot = bases.n < kBases ? bases.n++ : kBases - 1;
    Py_XDECREF(bases.basis[slot].record);
    for (int i = slot; i > 0; --i) bases.basis[i] = bases.basis[i - 1];
    bases.basis[0] = basis;
    return 0;
  };
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(a[1]); ++i) {
    if (add(PyTuple_GET_ITEM(a[1], i)) < 0) return nullptr;
  }
  if (a[2] != Py_None) {
    Py_ssize_t pos = 0;
    PyObject *name, *value;
    while (PyDict_Next(a[2], &pos, &name, &value)) {
      if (add(value) < 0) return nullptr;
    }
  }
  Py_RETURN_NONE;
}

// ``configure_checks(active, table, as_process_group, group_type, compiler, has_torch_function)``.
PyObject* configure_checks(PyObject*, PyObject* args) {
  Sources next;
  if (!PyArg_UnpackTuple(args, "configure_checks", 6, 6, &next.active, &next.table, &next.as_group, &next.group_type,
                         &next.compiler, &next.has_torch_function)) {
    return nullptr;
  }
  if (!PyType_Check(next.active) || !PyModule_Check(next.compiler)) {
    PyErr_SetString(PyExc_TypeError, "configure_checks: active is a class, compiler a module");
    return nullptr;
  }
  auto all = [](const Sources& s) -> std::array<PyObject*, 7> {
    return {s.active, s.table, s.buffers, s.as_group, s.group_type, s.compiler, s.has_torch_function};
  };
  next.buffers = PyObject_GetAttr(next.table, s_buffers);
  if (next.buffers == nullptr) return nullptr;
  if (!PyDict_Check(next.buffers)) {
    Py_DECREF(next.buffers);
    PyErr_SetString(PyExc_TypeError, "the binding table's buffers are a dict");
    return nullptr;
  }
  for (PyObject* o : all(next)) Py_INCREF(o);
  Py_DECREF(next.buffers);  // held once, as the others
  forget_passes();
  std::swap(sources, next);
  active_shim.reset(sources.active, s_shim);
  for (PyObject* o : all(next)) Py_XDECREF(o);
  Py_CLEAR(cached_shim);
  Py_RETURN_NONE;
}

PyMethodDef functions[] = {
    {"check", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(check)), METH_FASTCALL,
     "check(func, slow, spec, args, kwargs): a hooked collective's call, decided here when known to pass."},
    {"remember", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(remember)), METH_FASTCALL,
     "remember(shim, args, kwargs, group): the check in Python found this call passing."},
    {"has_torch_function", has_torch_function, METH_O,
     "has_torch_function(relevant_args): torch's, but true for a collective not checked yet."},
    {"handle_torch_function", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(handle_torch_function)),
     METH_VARARGS | METH_KEYWORDS,
     "handle_torch_function(public, relevant_args, *args, **kwargs): a collective not checked yet, to its check."},
    {"set_handle", set_handle, METH_VARARGS,
     "set_handle(handled, python_handle): the checks handle_torch_function hands collectives to."},
    {"configure_checks", configure_checks, METH_VARARGS,
     "configure_checks(active, table, as_process_group, group_type, compiler, has_torch_function)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

// Adds the functions above to the extension's module; -1 with an error set on failure.
int add_collective_check(PyObject* module) {
  for (auto [name, slot] : {std::pair{"shim", &s_shim}, {"version", &s_version},
                            {"_is_compiling_flag", &s_flag}, {"serial", &s_serial},
                            {"buffers", &s_buffers}}) {
    *slot = PyUnicode_InternFromString(name);
    if (*slot == nullptr) return -1;
  }
  return PyModule_AddFunctions(module, functions);
}
