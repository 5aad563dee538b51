// The runtime shim's allocation hook: the blocks the CUDA caching allocator hands out while a
// binding context is open on the calling thread, and whether each is still allocated.
//
// It replaces, where it builds, the function mode that sees every torch call made inside a
// binding context: an allocator trace tracker runs only when the allocator does, in C++.
// Built on first use by ``_allocator_hook.py`` (torch's extension builder), then loaded directly.
//
// The tracker runs inside the allocator with its lock held and without the GIL (torch releases
// it around its ops): it takes no lock but its own and calls no Python. Each block handed out
// while a context is open gets a serial number; the block's record in Python carries it, and
// counts only while the block at that address has the same number (``serial(addr)``), so a
// record whose block was freed is never mistaken for a later block at the same address.

#include <pybind11/pybind11.h>

#include <c10/cuda/CUDACachingAllocator.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace {

namespace alloc = c10::cuda::CUDACachingAllocator;
using alloc::TraceEntry;

struct Block {
  uint64_t addr;
  uint64_t size;
  uint64_t serial;
};

// Per thread: how many contexts are open, and the blocks allocated in them, not yet collected.
thread_local int open_contexts = 0;
thread_local std::vector<Block> opened;

// Per process (frees come from any thread): the blocks handed out in contexts and not freed,
// by address, with their serial numbers; and the freed ones, for ``close`` to return.
std::mutex mutex;
std::unordered_map<uint64_t, uint64_t> live;
std::vector<std::pair<uint64_t, uint64_t>> freed;
std::atomic<size_t> live_count{0};
std::atomic<bool> in_use{false};  // CUDA memory has been allocated in this process
uint64_t next_serial = 1;
bool attached = false;

void track(const TraceEntry& entry) {
  if (entry.action_ == TraceEntry::ALLOC) {
    if (!in_use.load(std::memory_order_relaxed)) in_use.store(true, std::memory_order_relaxed);
    if (!open_contexts) return;
    std::lock_guard<std::mutex> lock(mutex);
    uint64_t serial = next_serial++;
    live[entry.addr_] = serial;
    live_count.store(live.size(), std::memory_order_relaxed);
    opened.push_back({entry.addr_, entry.size_, serial});
  } else if (entry.action_ == TraceEntry::FREE_REQUESTED) {
    if (!live_count.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = live.find(entry.addr_);
    if (it == live.end()) return;
    freed.emplace_back(it->first, it->second);
    live.erase(it);
    live_count.store(live.size(), std::memory_order_relaxed);
  }
}

// Attach the tracker (once); ``memory_in_use``: CUDA memory is allocated already. The allocator
// must be initialized (CUDA is), or it attaches nowhere.
void attach(bool memory_in_use) {
  std::lock_guard<std::mutex> lock(mutex);
  if (memory_in_use) in_use.store(true, std::memory_order_relaxed);
  if (!attached) {
    alloc::attachAllocatorTraceTracker(&track);
    attached = true;
  }
}

// The per-context entry points take the raw C API, not pybind11: every binding context calls
// ``open`` and ``close``, and every collective on a hook's block calls ``serial``, so each call's
// cost is its own (pybind11 resolves overloads and converts arguments on every call).

// A context opens: the mark to give ``close``.
PyObject* open_context(PyObject*, PyObject*) {
  ++open_contexts;
  return PyLong_FromSize_t(opened.size());
}

PyObject* pairs(const std::vector<std::pair<uint64_t, uint64_t>>& items) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(items.size()));
  if (list == nullptr) return nullptr;
  for (size_t i = 0; i < items.size(); ++i) {
    PyObject* item = Py_BuildValue("(KK)", items[i].first, items[i].second);
    if (item == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), item);
  }
  return list;
}

PyObject* blocks(const std::vector<Block>& items) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(items.size()));
  if (list == nullptr) return nullptr;
  for (size_t i = 0; i < items.size(); ++i) {
    PyObject* item = Py_BuildValue("(KKK)", items[i].addr, items[i].size, items[i].serial);
    if (item == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), item);
  }
  return list;
}

// The context opened at ``mark`` closes. Returns ``(freed, blocks)``: the blocks freed since the
// last call, as (address, serial) pairs, to be forgotten first; then the blocks allocated since
// ``mark`` and still allocated, as (address, size, serial). None when both are empty.
PyObject* close_context(PyObject*, PyObject* arg) {
  size_t mark = PyLong_AsSize_t(arg);
  if (mark == static_cast<size_t>(-1) && PyErr_Occurred()) return nullptr;
  if (open_contexts > 0) --open_contexts;
  if (mark > opened.size()) mark = opened.size();
  std::vector<std::pair<uint64_t, uint64_t>> gone;
  std::vector<Block> kept;
  {
    std::lock_guard<std::mutex> lock(mutex);
    gone.swap(freed);
    for (size_t i = mark; i < opened.size(); ++i) {
      auto it = live.find(opened[i].addr);
      if (it != live.end() && it->second == opened[i].serial) kept.push_back(opened[i]);
    }
  }
  opened.resize(mark);
  if (gone.empty() && kept.empty()) Py_RETURN_NONE;
  PyObject* gone_list = pairs(gone);
  PyObject* kept_list = gone_list != nullptr ? blocks(kept) : nullptr;
  if (kept_list == nullptr) {
    Py_XDECREF(gone_list);
    return nullptr;
  }
  PyObject* result = PyTuple_Pack(2, gone_list, kept_list);
  Py_DECREF(gone_list);
  Py_DECREF(kept_list);
  return result;
}

// The serial number of the block allocated in a context at ``addr``, 0 when there is none.
PyObject* block_serial(PyObject*, PyObject* arg) {
  uint64_t addr = PyLong_AsUnsignedLongLong(arg);
  if (addr == static_cast<uint64_t>(-1) && PyErr_Occurred()) return nullptr;
  uint64_t serial = 0;
  if (live_count.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = live.find(addr);
    if (it != live.end()) serial = it->second;
  }
  return PyLong_FromUnsignedLongLong(serial);
}

// Whether the process has allocated CUDA memory (before ``attach``, as it said, or since).
bool cuda_in_use() { return in_use.load(std::memory_order_relaxed); }

PyMethodDef per_context[] = {
    {"open", open_context, METH_NOARGS, "A binding context opens on this thread: its mark."},
    {"close", close_context, METH_O, "The context opened at mark closes: (freed, blocks), or None."},
    {"serial", block_serial, METH_O, "The serial number of the context's block at an address, or 0."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "commgroup-lint's allocation hook: CUDA blocks allocated inside binding contexts";
  m.def("attach", &attach);
  m.def("in_use", &cuda_in_use);
  if (PyModule_AddFunctions(m.ptr(), per_context) < 0) throw pybind11::error_already_set();
}
