// A stand-in for torch's CUDA caching allocator header, for building the shim's extension on a
// machine without CUDA (``tests/runtime/native_build.py``): the trace tracker's types, and
// ``cgl_test_allocator_event`` to play the allocator's part from a test (through ctypes).
#pragma once

#include <cstddef>
#include <cstdint>

namespace c10::cuda::CUDACachingAllocator {

struct TraceEntry {
  enum Action { ALLOC, FREE_REQUESTED, FREE_COMPLETED };
  Action action_;
  uint64_t addr_;
  size_t size_;
};

using AllocatorTraceTracker = void (*)(const TraceEntry&);

inline AllocatorTraceTracker& attached_tracker() {
  static AllocatorTraceTracker tracker = nullptr;
  return tracker;
}

inline void attachAllocatorTraceTracker(AllocatorTraceTracker tracker) { attached_tracker() = tracker; }

}  // namespace c10::cuda::CUDACachingAllocator

// The allocator hands out (``alloc``) or frees a block, as the tracker would be told. Defined
// here, not inline: only the hook's source includes this header, and the test needs the symbol.
extern "C" __attribute__((visibility("default"), used)) void cgl_test_allocator_event(int alloc, uint64_t addr, uint64_t size) {
  namespace cca = c10::cuda::CUDACachingAllocator;
  cca::TraceEntry entry{alloc ? cca::TraceEntry::ALLOC : cca::TraceEntry::FREE_REQUESTED, addr,
                        static_cast<size_t>(size)};
  if (cca::attached_tracker() != nullptr) cca::attached_tracker()(entry);
}
