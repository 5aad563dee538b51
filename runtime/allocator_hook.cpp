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
// block a new serial and reports the old one as freed, so its record is dropped; unless the
// old key was a kept one: then the block keeps it, with its serial and record (``TABLE.kept``),
// among its few earlier keys, and a hand-out under one of those later brings that record back
// (the engines' global DP buffer is one block handed out under each group's context in turn, at
// every step).

#include <pybind11/pybind11.h>

#include <c10/cuda/CUDACachingAllocator.h>

#include "thread_counts.h"

#include <array>
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

// The call stack from the ``with`` frame: code objects and lines. Lines, not instruction
// offsets: the site a record reports is a line, and CPython 3.11's specialized calls leave a
// frame's offset on the instruction before the call once they have warmed up.
struct Chain {
  int n = 0;
  uintptr_t code[kChain];
  int line[kChain];
};

// What a block's record was made from; ``chain.n == 0``: no record to keep.
struct Key {
  uintptr_t group = 0, pool = 0, registered = 0;
  Chain chain;
};

constexpr int kEarlier = 3;  // earlier keys a block keeps its records under

// A key a block was handed out under before, and the serial its record there has.
struct Earlier {
  Key key;  // chain.n == 0: none
  uint64_t serial = 0;
};

struct Entry {
  uint64_t serial;
  bool parked;  // freed: its record does not count until the block is handed out again
  Key key;
  Earlier earlier[kEarlier];  // the most recent first
};

bool same_fields(const Key& a, const Key& b) {
  return a.group == b.group && a.pool == b.pool && a.registered == b.registered;
}

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

// The (address, serial) of every record ``e`` has: its block's, and those of its earlier keys.
void report_records(uint64_t addr, const Entry& e, std::vector<std::pair<uint64_t, uint64_t>>& out) {
  out.emplace_back(addr, e.serial);
  for (const Earlier& k : e.earlier) {
    if (k.key.chain.n) out.emplace_back(addr, k.serial);
  }
}

void forget(std::unordered_map<uint64_t, Entry>::iterator it) {
  report_records(it->first, it->second, freed);
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

// What the context type needs of the shim's Python, given once by ``configure``.
struct Config {
  PyObject* modes = nullptr;        // _binding._MODES: the thread's ``mode`` and its ``frames``
  PyObject* thread_mode = nullptr;  // _binding._thread_mode(): the thread's mode, made if none
  PyObject* start = nullptr;        // _binding.start_binding, under an enclosing mode's frame
  PyObject* end = nullptr;          // _binding.end_binding, the same
  PyObject* binder = nullptr;       // _binding._bind_collected
  PyObject* nowhere = nullptr;      // _binding._NOWHERE, a frame's registered groups
  PyObject* module = nullptr;       // this module, the thread mode's ``native``
  PyObject* buffers = nullptr;      // _table.TABLE.buffers: address -> the record that counts there
  PyObject* kept = nullptr;         // _table.TABLE.kept: serial -> a record kept under an earlier key
} config;

PyObject* s_serial;


// A frame's line, by its code and instruction offset: finding it walks the code's line table
// from the start, at every context's exit in a model's step, through memory that the step has
// evicted. The cache holds the code objects it names, so that their addresses stay theirs.
struct CodeAt {
  uintptr_t code;
  int offset;
  bool operator==(const CodeAt& other) const { return code == other.code && offset == other.offset; }
};

struct CodeAtHash {
  size_t operator()(const CodeAt& c) const { return static_cast<size_t>(c.code * 0x9E3779B97F4A7C15ULL) ^ c.offset; }
};

constexpr size_t kMaxLines = 1 << 16;  // then the cache starts again
std::unordered_map<CodeAt, int, CodeAtHash> lines;

int line_of(PyFrameObject* f, PyCodeObject* code) {
#if PY_VERSION_HEX >= 0x030B0000
  int offset = PyFrame_GetLasti(f);
#else
  int offset = f->f_lasti;
#endif
  if (offset < 0) return PyFrame_GetLineNumber(f);
  CodeAt at{reinterpret_cast<uintptr_t>(code), offset};
  auto found = lines.find(at);
  if (found != lines.end()) return found->second;
  if (lines.size() >= kMaxLines) {  // released after the swap: a code's release may run Python
    std::unordered_map<CodeAt, int, CodeAtHash> dropped;
    dropped.swap(lines);
    for (auto& [held, line] : dropped) Py_DECREF(reinterpret_cast<PyObject*>(held.code));
  }
  int line = PyFrame_GetLineNumber(f);
  Py_INCREF(code);
  lines.emplace(at, line);
  return line;
}

// Up to ``depth`` frames of the stack from ``frame`` (a borrowed frame object).
Chain chain_from(PyObject* frame, int depth) {
  Chain chain;
  PyFrameObject* f = reinterpret_cast<PyFrameObject*>(frame);
  Py_XINCREF(f);
  while (f != nullptr && chain.n < depth) {
    PyCodeObject* code = PyFrame_GetCode(f);
    chain.code[chain.n] = reinterpret_cast<uintptr_t>(code);
    chain.line[chain.n] = line_of(f, code);
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
    if (kept.code[i] != now.code[i] || kept.line[i] != now.line[i]) return false;
  }
  return true;
}

// A Python list of one tuple per item, made by ``tuple_of(item)``; null (an error set) on failure.
template <typename Item, typename TupleOf>
PyObject* list_of(const std::vector<Item>& items, TupleOf tuple_of) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(items.size()));
  if (list == nullptr) return nullptr;
  for (size_t i = 0; i < items.size(); ++i) {
    PyObject* item = tuple_of(items[i]);
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

// A block handed out again under an earlier key: its record at ``addr`` goes from ``from``'s
// to ``to``'s.
struct Swap {
  uint64_t addr, from, to;
};

// The records of ``swaps`` brought back: ``TABLE.kept[to]`` counts at the address again, and the
// record there (``from``'s) is kept in its place. -1 with an error set on failure.
int bring_back(const std::vector<Swap>& swaps) {
  if (config.buffers == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "the allocation hook is not configured");
    return -1;
  }
  for (const Swap& s : swaps) {
    PyObject* addr = PyLong_FromUnsignedLongLong(s.addr);
    PyObject* from = PyLong_FromUnsignedLongLong(s.from);
    PyObject* to = PyLong_FromUnsignedLongLong(s.to);
    int failed = addr == nullptr || from == nullptr || to == nullptr;
    PyObject* back = failed ? nullptr : PyDict_GetItemWithError(config.kept, to);  // borrowed
    PyObject* here = failed ? nullptr : PyDict_GetItemWithError(config.buffers, addr);
    failed = failed || PyErr_Occurred();
    Py_XINCREF(back);
    Py_XINCREF(here);
    if (!failed && here != nullptr) {  // the record of ``from``, unless something dropped it
      PyObject* serial = PyObject_GetAttr(here, s_serial);
      unsigned long long value = serial != nullptr ? PyLong_AsUnsignedLongLong(serial) : 0;
      Py_XDECREF(serial);
      failed = PyErr_Occurred() != nullptr;
      if (!failed && value == s.from) failed = PyDict_SetItem(config.kept, from, here) < 0;
    }
    if (!failed && back != nullptr) {
      failed = PyDict_SetItem(config.buffers, addr, back) < 0 || PyDict_DelItem(config.kept, to) < 0;
    } else if (!failed && here != nullptr) {  // no record kept for ``to``: none counts here
      failed = PyDict_DelItem(config.buffers, addr) < 0;
    }
    Py_XDECREF(back);
    Py_XDECREF(here);
    Py_XDECREF(addr);
    Py_XDECREF(from);
    Py_XDECREF(to);
    if (failed) return -1;
  }
  return 0;
}

// The frame ``frames[index]`` (a tuple ``(group, pool, registered, mark)``) closes and is
// removed from ``frames``. The blocks allocated since its mark and still allocated are
// collected: one handed out again under its record's key counts again as it was; the others
// are new to Python. When records were dropped or blocks are new, ``binder(freed, blocks,
// frames[:index + 1], with_frame)`` binds them (``freed``: (address, serial) of records to drop;
// ``blocks``: (address, size, serial)) and returns how many frames from ``with_frame`` (the
// frame of the context's ``with``) its site search walked (0: keep no key).
PyObject* close_frame(PyObject* frames, Py_ssize_t index, PyObject* binder, PyObject* with_frame) {
  PyObject* frame = PyList_GET_ITEM(frames, index);
  if (!PyTuple_Check(frame) || PyTuple_GET_SIZE(frame) != 4) {
    PyErr_SetString(PyExc_TypeError, "a binding frame is (group, pool, registered, mark)");
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
  bool keyed = index == 0 && PyTuple_GET_ITEM(frame, 1) == Py_None && PyFrame_Check(with_frame);

  if (open_contexts > 0) --open_contexts;
  if (mark > opened.size()) mark = opened.size();
  // The stack is walked (outside the lock: making frame objects may free memory) only as deep
  // as the keys of the blocks handed out again that could match need.
  int needed = 0;
  if (keyed) {
    std::lock_guard<std::mutex> lock(mutex);
    for (size_t i = mark; i < opened.size(); ++i) {
      if (!opened[i].again) continue;
      auto it = entries.find(opened[i].addr);
      if (it == entries.end()) continue;
      const Entry& e = it->second;
      if (same_fields(e.key, key) && e.key.chain.n > needed) needed = e.key.chain.n;
      for (const Earlier& k : e.earlier) {
        if (same_fields(k.key, key) && k.key.chain.n > needed) needed = k.key.chain.n;
      }
    }
  }
  Chain now;
  if (needed > 0) now = chain_from(with_frame, needed);

  std::vector<std::pair<uint64_t, uint64_t>> gone;
  std::vector<Block> kept;
  std::vector<Swap> swaps;
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
        auto matches = [&](const Key& k) { return k.chain.n && same_fields(k, key) && same_stack(k.chain, now); };
        if (keyed && matches(e.key)) continue;  // its record counts again
        int earlier = -1;
        for (int k = 0; keyed && k < kEarlier && earlier < 0; ++k) {
          if (matches(e.earlier[k].key)) earlier = k;
        }
        if (earlier >= 0) {  // a key it had before: that record counts again, this one is kept
          Earlier& back = e.earlier[earlier];
          swaps.push_back({b.addr, e.serial, back.serial});
          std::swap(e.key, back.key);
          std::swap(e.serial, back.serial);
          continue;
        }
        if (e.key.chain.n) {  // its record is kept under its key; the oldest one kept goes
          Earlier& last = e.earlier[kEarlier - 1];
          if (last.key.chain.n) gone.emplace_back(b.addr, last.serial);
          for (int k = kEarlier - 1; k > 0; --k) e.earlier[k] = e.earlier[k - 1];
          e.earlier[0] = {e.key, e.serial};
        } else {
          gone.emplace_back(b.addr, e.serial);
        }
        e.serial = next_serial++;
      }
      e.key.chain.n = 0;
      kept.push_back({b.addr, b.size, e.serial, false});
    }
    if (parked > kMaxParked) {  // blocks freed and never handed out again: drop their records
      for (auto it = entries.begin(); it != entries.end();) {
        if (it->second.parked) {
          report_records(it->first, it->second, gone);
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
  if (!swaps.empty() && bring_back(swaps) < 0) return nullptr;

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

  PyObject* gone_list = list_of(gone, [](const auto& g) { return Py_BuildValue("(KK)", g.first, g.second); });
  PyObject* kept_list = gone_list == nullptr ? nullptr : list_of(kept, [](const Block& b) {
    return Py_BuildValue("(KKK)", b.addr, b.size, b.serial);
  });
  PyObject* depth = nullptr;
  if (kept_list != nullptr) {
    PyObject* call[] = {gone_list, kept_list, bound, with_frame};
    depth = PyObject_Vectorcall(binder, call, 4, nullptr);
  }
  Py_XDECREF(gone_list);
  Py_XDECREF(kept_list);
  Py_DECREF(bound);
  if (depth == nullptr) return nullptr;
  long walked = PyLong_Check(depth) ? PyLong_AsLong(depth) : 0;
  Py_DECREF(depth);
  if (walked == -1 && PyErr_Occurred()) return nullptr;
  if (keyed && walked > 0 && walked <= kChain && !kept.empty()) {
    key.chain = chain_from(with_frame, static_cast<int>(walked));
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

// ``exit_frame(frames, index, binder, with_frame)``: :func:`close_frame`, for the frames the
// shim's Python opens (``_binding.end_binding``).
PyObject* exit_frame(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || !PyList_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "exit_frame(frames: list, index: int, binder, with_frame)");
    return nullptr;
  }
  Py_ssize_t index = PyLong_AsSsize_t(args[1]);
  if (index == -1 && PyErr_Occurred()) return nullptr;
  if (index < 0 || index >= PyList_GET_SIZE(args[0])) {
    PyErr_SetString(PyExc_IndexError, "exit_frame: no such frame");
    return nullptr;
  }
  return close_frame(args[0], index, args[2], args[3]);
}

PyObject *s_mode, *s_frames, *s_native, *s_enter, *s_exit;

// The thread's binding mode (``_binding._thread_mode()``) and its frames, for the thread state
// that asked last: ``_MODES`` is a ``threading.local``, which a context's entry would otherwise
// read at every step. Keyed by the thread state's id, which CPython never gives another thread
// state (its address may be reused); one entry, so that no mode outlives its thread for long.
struct ThreadMode {
  uint64_t thread = 0;
  PyObject* mode = nullptr;
  PyObject* frames = nullptr;
} last_mode;

// ``last_mode`` becomes ``next``; the references it held are released after (that may run Python).
void keep_thread_mode(ThreadMode next) {
  std::swap(last_mode, next);
  Py_XDECREF(next.mode);
  Py_XDECREF(next.frames);
}

// ``configure(modes, thread_mode, start, end, binder, nowhere, table)``.
PyObject* configure(PyObject* module, PyObject* args) {
  Config next;
  PyObject* table;
  if (!PyArg_UnpackTuple(args, "configure", 7, 7, &next.modes, &next.thread_mode, &next.start, &next.end,
                         &next.binder, &next.nowhere, &table)) {
    return nullptr;
  }
  next.module = module;
  next.buffers = PyObject_GetAttrString(table, "buffers");
  next.kept = next.buffers == nullptr ? nullptr : PyObject_GetAttrString(table, "kept");
  if (next.kept == nullptr || !PyDict_Check(next.buffers) || !PyDict_Check(next.kept)) {
    Py_XDECREF(next.buffers);
    Py_XDECREF(next.kept);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "configure: the table's buffers and kept are dicts");
    return nullptr;
  }
  auto all = [](const Config& c) -> std::array<PyObject*, 7> {
    return {c.modes, c.thread_mode, c.start, c.end, c.binder, c.nowhere, c.module};
  };
  for (PyObject* o : all(next)) Py_INCREF(o);  // buffers and kept: held already
  std::swap(config, next);
  keep_thread_mode({});  // the modes of the Python now configured are found anew
  for (PyObject* o : all(next)) Py_XDECREF(o);
  Py_XDECREF(next.buffers);
  Py_XDECREF(next.kept);
  Py_RETURN_NONE;
}

// ``Bound(inner, group)``: the context manager a profile context returns while the hook binds,
// ``_targets._BoundContext`` in C (its frame's opening and closing too), so that a context in a
// model's step runs no Python of the shim's beyond the profile context's wrapper.
struct BoundObject {
  PyObject_HEAD
  PyObject* inner;   // the context manager the profile context returned
  PyObject* group;   // a ProcessGroup
  PyObject* frame;   // while entered
  PyObject* frames;  // the list the frame is in; null when it was begun by ``config.start``
};

// The calling thread's mode and frames (borrowed, held by ``last_mode``); -1 with an error set.
int thread_mode(PyObject** mode, PyObject** frames) {
  uint64_t thread = PyThreadState_GetID(PyThreadState_Get());
  if (thread != last_mode.thread || last_mode.mode == nullptr) {
    PyObject* found = PyObject_GetAttr(config.modes, s_mode);
    if (found == Py_None) Py_SETREF(found, PyObject_CallNoArgs(config.thread_mode));
    if (found == nullptr) return -1;
    PyObject* list = PyObject_GetAttr(found, s_frames);
    if (list == nullptr || !PyList_Check(list)) {
      Py_DECREF(found);
      Py_XDECREF(list);
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "a thread's binding frames are a list");
      return -1;
    }
    keep_thread_mode({thread, found, list});
  }
  *mode = last_mode.mode;
  *frames = last_mode.frames;
  return 0;
}

// The frame of this context on the thread's frames: through the hook (the thread's outermost
// frame, or one inside frames bound through it), else begun by ``config.start``.
int open_bound_frame(BoundObject* self) {
  PyObject *mode, *frames;
  if (thread_mode(&mode, &frames) < 0) return -1;
  Py_INCREF(mode);  // held here: the calls below may run Python
  Py_INCREF(frames);
  bool hooked = true;
  if (PyList_GET_SIZE(frames) == 0) {
    hooked = PyObject_SetAttr(mode, s_native, config.module) == 0;
  } else {
    PyObject* native = PyObject_GetAttr(mode, s_native);
    if (native == nullptr) hooked = false;
    else if (native != config.module) hooked = false;
    Py_XDECREF(native);
  }
  Py_DECREF(mode);
  if (PyErr_Occurred()) {
    Py_DECREF(frames);
    return -1;
  }
  if (!hooked) {  // inside frames bound through the function mode: so is this one
    Py_DECREF(frames);
    self->frame = PyObject_CallOneArg(config.start, self->group);
    return self->frame == nullptr ? -1 : 0;
  }
  PyObject* mark = PyLong_FromSize_t(opened.size());
  if (mark == nullptr) {
    Py_DECREF(frames);
    return -1;
  }
  PyObject* frame = PyTuple_Pack(4, self->group, Py_None, config.nowhere, mark);
  Py_DECREF(mark);
  if (frame == nullptr || PyList_Append(frames, frame) < 0) {
    Py_XDECREF(frame);
    Py_DECREF(frames);
    return -1;
  }
  ++open_contexts;
  self->frame = frame;
  self->frames = frames;
  return 0;
}

PyObject* bound_enter(PyObject* op, PyObject*) {
  BoundObject* self = reinterpret_cast<BoundObject*>(op);
  if (config.module == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "the allocation hook is not configured");
    return nullptr;
  }
  if (self->frame != nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "this binding context is entered already");
    return nullptr;
  }
  long& entering = thread_counts[kEntering];  // ``_state.OPENING.depth``: a pool context inside asks
  ++entering;
  PyObject* entered = PyObject_CallMethodNoArgs(self->inner, s_enter);
  if (entering > 0) --entering;  // never below 0, as the count's setter (``thread_counts.cpp``)
  if (entered == nullptr) return nullptr;
  if (open_bound_frame(self) < 0) {
    Py_DECREF(entered);
    return nullptr;
  }
  return entered;
}

PyObject* bound_exit(PyObject* op, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "__exit__(type, value, traceback)");
    return nullptr;
  }
  BoundObject* self = reinterpret_cast<BoundObject*>(op);
  PyObject* frame = self->frame;
  if (frame != nullptr) {
    PyObject* frames = self->frames;
    self->frame = self->frames = nullptr;
    PyObject* done;
    if (frames == nullptr) {
      done = PyObject_CallOneArg(config.end, frame);
    } else {
      Py_ssize_t i = PyList_GET_SIZE(frames) - 1;  // frames are told apart by identity
      while (i >= 0 && PyList_GET_ITEM(frames, i) != frame) --i;
      PyObject* with_frame = reinterpret_cast<PyObject*>(PyEval_GetFrame());  // the ``with``'s
      if (i >= 0) {
        done = close_frame(frames, i, config.binder, with_frame != nullptr ? with_frame : Py_None);
      } else {
        done = Py_NewRef(Py_None);  // ended already (``end_binding``)
      }
      Py_DECREF(frames);
    }
    Py_DECREF(frame);
    if (done == nullptr) return nullptr;
    Py_DECREF(done);
  }
  PyObject* inner = Py_NewRef(self->inner);  // the call below may drop the last other reference
  PyObject* call[] = {inner, args[0], args[1], args[2]};  // the method called with no bound method made
  PyObject* result = PyObject_VectorcallMethod(s_exit, call, 4, nullptr);
  Py_DECREF(inner);
  return result;
}

PyObject* new_bound(PyTypeObject* type, PyObject* inner, PyObject* group) {
  BoundObject* self = reinterpret_cast<BoundObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->inner = Py_NewRef(inner);
  self->group = Py_NewRef(group);
  return reinterpret_cast<PyObject*>(self);
}

PyObject* bound_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *inner, *group;
  if ((kwargs != nullptr && PyDict_GET_SIZE(kwargs)) || !PyArg_UnpackTuple(args, "Bound", 2, 2, &inner, &group)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "Bound(inner, group) takes no keyword arguments");
    return nullptr;
  }
  return new_bound(type, inner, group);
}

int bound_traverse(PyObject* op, visitproc visit, void* arg) {
  BoundObject* self = reinterpret_cast<BoundObject*>(op);
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(self->inner);
  Py_VISIT(self->group);
  Py_VISIT(self->frame);
  Py_VISIT(self->frames);
  return 0;
}

int bound_clear(PyObject* op) {
  BoundObject* self = reinterpret_cast<BoundObject*>(op);
  Py_CLEAR(self->inner);
  Py_CLEAR(self->group);
  Py_CLEAR(self->frame);
  Py_CLEAR(self->frames);
  return 0;
}

void bound_dealloc(PyObject* op) {
  PyTypeObject* type = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  bound_clear(op);
  type->tp_free(op);
  Py_DECREF(type);
}

// Anything else is the inner context manager's (as ``_BoundContext.__getattr__``).
PyObject* bound_getattro(PyObject* op, PyObject* name) {
  PyObject* found = PyObject_GenericGetAttr(op, name);
  if (found != nullptr || !PyErr_ExceptionMatches(PyExc_AttributeError)) return found;
  PyErr_Clear();
  return PyObject_GetAttr(reinterpret_cast<BoundObject*>(op)->inner, name);
}

PyMethodDef bound_methods[] = {
    {"__enter__", bound_enter, METH_NOARGS, "Enter the inner context, then open the binding frame."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(bound_exit)), METH_FASTCALL,
     "Close the binding frame (binding what is new), then exit the inner context."},
    {nullptr, nullptr, 0, nullptr}};

PyType_Slot bound_slots[] = {
    {Py_tp_doc, const_cast<char*>("A profile context's manager, binding its body through the allocation hook.")},
    {Py_tp_new, reinterpret_cast<void*>(bound_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(bound_dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(bound_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(bound_clear)},
    {Py_tp_getattro, reinterpret_cast<void*>(bound_getattro)},
    {Py_tp_methods, bound_methods},
    {0, nullptr}};

PyType_Spec bound_spec = {"commgroup_lint_allocator_hook.Bound", sizeof(BoundObject), 0,
                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, bound_slots};
PyObject* bound_type = nullptr;  // the type made from it (held)

uint64_t serial_at(uint64_t addr) {
  if (!entry_count.load(std::memory_order_relaxed)) return 0;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = entries.find(addr);
  return it != entries.end() && !it->second.parked ? it->second.serial : 0;
}

// The serial number of the block allocated in a context at ``addr``, 0 when there is none.
PyObject* block_serial(PyObject*, PyObject* arg) {
  uint64_t addr = PyLong_AsUnsignedLongLong(arg);
  if (addr == static_cast<uint64_t>(-1) && PyErr_Occurred()) return nullptr;
  return PyLong_FromUnsignedLongLong(serial_at(addr));
}

PyMethodDef per_context[] = {
    {"open", open_context, METH_NOARGS, "A binding context opens on this thread: its mark."},
    {"exit_frame", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(exit_frame)), METH_FASTCALL,
     "exit_frame(frames, index, binder, with_frame): the frame closes; new blocks go to binder."},
    {"serial", block_serial, METH_O, "The serial number of the context's block at an address, or 0."},
    {"configure", configure, METH_VARARGS,
     "configure(modes, thread_mode, start, end, binder, nowhere, table): what Bound needs of the shim."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

uint64_t block_serial_at(uint64_t addr) { return serial_at(addr); }  // for collective_check.cpp

// For context_entry.cpp: ``Bound(inner, group)`` made directly when ``type`` is ``Bound`` (no
// arguments to pack and parse), else ``type(inner, group)``.
PyObject* make_manager(PyObject* type, PyObject* inner, PyObject* group) {
  if (type == bound_type) return new_bound(reinterpret_cast<PyTypeObject*>(type), inner, group);
  return PyObject_CallFunctionObjArgs(type, inner, group, nullptr);
}

int add_collective_check(PyObject* module);  // collective_check.cpp
int add_context_entry(PyObject* module);     // context_entry.cpp
int add_thread_counts(PyObject* module);     // thread_counts.cpp

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "commgroup-lint's allocation hook: CUDA blocks allocated inside binding contexts";
  m.def("attach", &attach);
  m.def("in_use", &cuda_in_use);
  if (PyModule_AddFunctions(m.ptr(), per_context) < 0 || add_collective_check(m.ptr()) < 0 ||
      add_context_entry(m.ptr()) < 0 || add_thread_counts(m.ptr()) < 0) {
    throw pybind11::error_already_set();
  }
  for (auto [name, slot] : {std::pair{"mode", &s_mode}, {"frames", &s_frames},
                            {"native", &s_native}, {"__enter__", &s_enter}, {"__exit__", &s_exit},
                            {"serial", &s_serial}}) {
    *slot = PyUnicode_InternFromString(name);
    if (*slot == nullptr) throw pybind11::error_already_set();
  }
  PyObject* bound = PyType_FromSpec(&bound_spec);
  if (bound == nullptr || PyModule_AddObject(m.ptr(), "Bound", Py_NewRef(bound)) < 0) {
    throw pybind11::error_already_set();
  }
  bound_type = bound;
}
