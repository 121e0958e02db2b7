// Descriptors kagent-rt inherits from whatever started it (a shell's `exec 7<.env`, an IDE, a
// CI runner) must never reach the processes it starts: an evaluator worker runs untrusted
// candidate kernels, which could read or write through them (issue #53).
#pragma once

namespace kagent {

// Marks every descriptor above stderr close-on-exec: close_range(3, ~0U, CLOSE_RANGE_CLOEXEC)
// (Linux 5.11), else each entry of /proc/self/fd. Call first thing in main, while the process
// has one thread. Returns how many descriptors it could not mark (0 normally).
int mark_inherited_fds_cloexec();

}  // namespace kagent
