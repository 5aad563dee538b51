// The shim's per-thread counts in C (``thread_counts.cpp``), read and written by the fast paths.
#pragma once

enum ThreadCountIndex {
  kChecking = 0,  // checked collectives running on this thread (``_state.TLS.depth``)
  kEntering = 1,  // contexts naming a group being entered on this thread (``_state.OPENING.depth``)
  kThreadCounts = 2,
};

extern thread_local long thread_counts[kThreadCounts];
