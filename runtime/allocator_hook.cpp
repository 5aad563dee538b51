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
// counts only while the block at that address is allocated with that number (``serial(addr)``),
// so a record whose block was freed is never mistaken for a later block at the same address.
//
// The steady state costs no Python: a model's step allocates the same blocks in the same
// contexts at every step. A freed block's entry is kept (parked, its record not counting), and
// when a context hands it out again under the same key as its record (the frame's group, pool
// and registered groups, and the call stack from the ``with`` up to the frame the record's site
// was found at), the record counts again, its serial unchanged. Any other hand-out gives the
// block a new serial and reports the old one as freed, so its record is dropped.

#include <pybind11/pybind11.h>

#include <c10/cuda/CUDACachingAllocator.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

namespace alloc = c10::cuda::CUDACachingAllocator;
using alloc::TraceEntry;

constexpr int kChain = 8;             // frames a key holds at most (a deeper site: no steady state)
constexpr size_t kMaxParked = 1 << 16;  // parked entries kept at most (then all are dropped)

// The call stack from the ``with`` frame: code objects and instruction offsets.
struct Chain {
  int n = 0;
  uintptr_t code[kChain];
  int lasti[kChain];
};

// What a block's record was made from; ``chain.n == 0``: no record to keep.
struct Key {
  uintptr_t group = 0, pool = 0, registered = 0;
  Chain chain;
};

struct Entry {
  uint64_t serial;
  bool parked;  // freed: its record does not count until the block is handed out again
  Key key;
};

struct Block {
  uint64_t addr;
  uint64_t size;
  uint64_t serial;
  bool again;  // a parked entry handed out again
};

// Per thread: how many contexts are open, and the blocks allocated in them, not yet collected.
thread_local int open_contexts = 0;
thread_local std::vector<Block> opened;

// Per process (frees come from any thread): the blocks handed out in contexts, by address,
// allocated or parked; and the (address, serial) of records no longer valid, to be dropped.
std::mutex mutex;
std::unordered_map<uint64_t, Entry> entries;
std::vector<std::pair<uint64_t, uint64_t>> freed;
size_t parked = 0;
std::atomic<size_t> entry_count{0};
std::atomic<bool> in_use{false};  // CUDA memory has been allocated in this process
uint64_t next_serial = 1;
bool attached = false;

void forget(std::unordered_map<uint64_t, Entry>::iterator it) {
  freed.emplace_back(it->first, it->second.serial);
  if (it->second.parked) --parked;
  entries.erase(it);
  entry_count.store(entries.size(), std::memory_order_relaxed);
}

void track(const TraceEntry& entry) {
  if (entry.action_ == TraceEntry::ALLOC) {
    if (!in_use.load(std::memory_order_relaxed)) in_use.store(true, std::memory_order_relaxed);
    if (!open_contexts && !entry_count.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = entries.find(entry.addr_);
    if (!open_contexts) {  // a parked block handed out outside any context: its record goes
      if (it != entries.end()) forget(it);
      return;
    }
    if (it != entries.end()) {  // parked (an allocated block is not handed out twice)
      if (it->second.parked) --parked;
      it->second.parked = false;
      opened.push_back({entry.addr_, entry.size_, it->second.serial, true});
      return;
    }
    uint64_t serial = next_serial++;
    entries.emplace(entry.addr_, Entry{serial, false, Key{}});
    entry_count.store(entries.size(), std::memory_order_relaxed);
    opened.push_back({entry.addr_, entry.size_, serial, false});
  } else if (entry.action_ == TraceEntry::FREE_REQUESTED) {
    if (!entry_count.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = entries.find(entry.addr_);
    if (it == entries.end() || it->second.parked) return;
    it->second.parked = true;
    ++parked;
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

// Whether the process has allocated CUDA memory (before ``attach``, as it said, or since).
bool cuda_in_use() { return in_use.load(std::memory_order_relaxed); }

// The entry points below take the raw C API, not pybind11: every binding context calls ``open``
// and ``exit_frame``, and every collective on a hook's block calls ``serial``.

// Up to ``depth`` frames of the stack from ``frame`` (a borrowed frame object).
Chain chain_from(PyObject* frame, int depth) {
  Chain chain;
  PyFrameObject* f = reinterpret_cast<PyFrameObject*>(frame);
  Py_XINCREF(f);
  while (f != nullptr && chain.n < depth) {
    PyCodeObject* code = PyFrame_GetCode(f);
    chain.code[chain.n] = reinterpret_cast<uintptr_t>(code);
#if PY_VERSION_HEX >= 0x030B0000
    chain.lasti[chain.n] = PyFrame_GetLasti(f);
#else
    chain.lasti[chain.n] = f->f_lasti;
#endif
    Py_DECREF(code);  // the finder holds every code object it has walked: the address stays its own
    ++chain.n;
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  Py_XDECREF(f);
  return chain;
}

bool same_stack(const Chain& kept, const Chain& now) {
  if (now.n < kept.n) return false;
  for (int i = 0; i < kept.n; ++i) {
    if (kept.code[i] != now.code[i] || kept.lasti[i] != now.lasti[i]) return false;
  }
  return true;
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

// A context opens: the mark its frame keeps.
PyObject* open_context(PyObject*, PyObject*) {
  ++open_contexts;
  return PyLong_FromSize_t(opened.size());
}

// ``exit_frame(frames, index, binder, with_frame)``: the frame ``frames[index]`` (a tuple
// ``(group, pool, registered, mark)``) closes and is removed from ``frames``. The blocks
// allocated since its mark and still allocated are collected: one handed out again under its
// record's key counts again as it was; the others are new to Python. When records were
// dropped or blocks are new, ``binder(freed, blocks, frames[:index + 1], with_frame)`` binds
// them (``freed``: (address, serial) of records to drop; ``blocks``: (address, size, serial))
// and returns how many frames from ``with_frame`` its site search walked (0: keep no key).
PyObject* exit_frame(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || !PyList_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "exit_frame(frames: list, index: int, binder, with_frame)");
    return nullptr;
  }
  PyObject* frames = args[0];
  Py_ssize_t index = PyLong_AsSsize_t(args[1]);
  if (index == -1 && PyErr_Occurred()) return nullptr;
  if (index < 0 || index >= PyList_GET_SIZE(frames)) {
    PyErr_SetString(PyExc_IndexError, "exit_frame: no such frame");
    return nullptr;
  }
  PyObject* frame = PyList_GET_ITEM(frames, index);
  if (!PyTuple_Check(frame) || PyTuple_GET_SIZE(frame) != 4) {
    PyErr_SetString(PyExc_TypeError, "exit_frame: a frame is (group, pool, registered, mark)");
    return nullptr;
  }
  Key key;
  key.group = reinterpret_cast<uintptr_t>(PyTuple_GET_ITEM(frame, 0));
  key.pool = reinterpret_cast<uintptr_t>(PyTuple_GET_ITEM(frame, 1));
  key.registered = reinterpret_cast<uintptr_t>(PyTuple_GET_ITEM(frame, 2));
  size_t mark = PyLong_AsSize_t(PyTuple_GET_ITEM(frame, 3));
  if (mark == static_cast<size_t>(-1) && PyErr_Occurred()) return nullptr;
  // Records are kept for the outermost frame over no modelled pool: an inner one takes groups
  // from around it, and a modelled pool acquires a block at each binding.
  bool keyed = index == 0 && PyTuple_GET_ITEM(frame, 1) == Py_None && PyFrame_Check(args[3]);

  if (open_contexts > 0) --open_contexts;
  if (mark > opened.size()) mark = opened.size();
  bool again = false;
  for (size_t i = mark; i < opened.size(); ++i) again = again || opened[i].again;
  Chain now;
  if (keyed && again) now = chain_from(args[3], kChain);

  std::vector<std::pair<uint64_t, uint64_t>> gone;
  std::vector<Block> kept;
  {
    std::lock_guard<std::mutex> lock(mutex);
    gone.swap(freed);
    for (size_t i = mark; i < opened.size(); ++i) {
      const Block& b = opened[i];
      auto it = entries.find(b.addr);
      // freed inside the context (parked), or freed and handed out again since: not this block
      if (it == entries.end() || it->second.parked || it->second.serial != b.serial) continue;
      Entry& e = it->second;
      if (b.again) {
        if (keyed && e.key.chain.n && e.key.group == key.group && e.key.pool == key.pool &&
            e.key.registered == key.registered && same_stack(e.key.chain, now)) {
          continue;  // its record counts again
        }
        gone.emplace_back(b.addr, e.serial);
        e.serial = next_serial++;
      }
      e.key.chain.n = 0;
      kept.push_back({b.addr, b.size, e.serial, false});
    }
    if (parked > kMaxParked) {  // blocks freed and never handed out again: drop their records
      for (auto it = entries.begin(); it != entries.end();) {
        if (it->second.parked) {
          gone.emplace_back(it->first, it->second.serial);
          it = entries.erase(it);
        } else {
          ++it;
        }
      }
      parked = 0;
      entry_count.store(entries.size(), std::memory_order_relaxed);
    }
  }
  opened.resize(mark);

  PyObject* bound = nullptr;  // the frames open while the blocks were allocated
  if (!gone.empty() || !kept.empty()) {
    bound = PyList_GetSlice(frames, 0, index + 1);
    if (bound == nullptr) return nullptr;
  }
  if (PySequence_DelItem(frames, index) < 0) {
    Py_XDECREF(bound);
    return nullptr;
  }
  if (bound == nullptr) Py_RETURN_NONE;

  PyObject* gone_list = pairs(gone);
  PyObject* kept_list = gone_list != nullptr ? blocks(kept) : nullptr;
  PyObject* depth = nullptr;
  if (kept_list != nullptr) {
    PyObject* call[] = {gone_list, kept_list, bound, args[3]};
    depth = PyObject_Vectorcall(args[2], call, 4, nullptr);
  }
  Py_XDECREF(gone_list);
  Py_XDECREF(kept_list);
  Py_DECREF(bound);
  if (depth == nullptr) return nullptr;
  long walked = PyLong_Check(depth) ? PyLong_AsLong(depth) : 0;
  Py_DECREF(depth);
  if (walked == -1 && PyErr_Occurred()) return nullptr;
  if (keyed && walked > 0 && walked <= kChain && !kept.empty()) {
    key.chain = chain_from(args[3], static_cast<int>(walked));
    if (key.chain.n == walked) {
      std::lock_guard<std::mutex> lock(mutex);
      for (const Block& b : kept) {
        auto it = entries.find(b.addr);
        if (it != entries.end() && it->second.serial == b.serial) it->second.key = key;
      }
    }
  }
  Py_RETURN_NONE;
}

// The serial number of the block allocated in a context at ``addr``, 0 when there is none.
PyObject* block_serial(PyObject*, PyObject* arg) {
  uint64_t addr = PyLong_AsUnsignedLongLong(arg);
  if (addr == static_cast<uint64_t>(-1) && PyErr_Occurred()) return nullptr;
  uint64_t serial = 0;
  if (entry_count.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = entries.find(addr);
    if (it != entries.end() && !it->second.parked) serial = it->second.serial;
  }
  return PyLong_FromUnsignedLongLong(serial);
}

PyMethodDef per_context[] = {
    {"open", open_context, METH_NOARGS, "A binding context opens on this thread: its mark."},
    {"exit_frame", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(exit_frame)), METH_FASTCALL,
     "exit_frame(frames, index, binder, with_frame): the frame closes; new blocks go to binder."},
    {"serial", block_serial, METH_O, "The serial number of the context's block at an address, or 0."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "commgroup-lint's allocation hook: CUDA blocks allocated inside binding contexts";
  m.def("attach", &attach);
  m.def("in_use", &cuda_in_use);
  if (PyModule_AddFunctions(m.ptr(), per_context) < 0) throw pybind11::error_already_set();
}
