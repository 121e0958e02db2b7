// OpTable: the native operations a parked task waits on. Each has a cancel function so that
// killing a task (or ending the run) releases its timer, transfer or process group.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>

namespace kagent {

class OpTable {
 public:
  using Cancel = std::function<void()>;

  uint64_t begin(Cancel cancel = {}) {
    const uint64_t id = next_id_++;
    ops_.emplace(id, std::move(cancel));
    return id;
  }
  void set_cancel(uint64_t id, Cancel cancel) {
    auto it = ops_.find(id);
    if (it != ops_.end()) it->second = std::move(cancel);
  }
  bool pending(uint64_t id) const { return ops_.count(id) != 0; }
  // Forgets the op; true when it was pending (so exactly one completion is delivered).
  bool finish(uint64_t id) { return ops_.erase(id) != 0; }
  // Runs the op's cancel function (once) and forgets it.
  bool cancel(uint64_t id) {
    auto it = ops_.find(id);
    if (it == ops_.end()) return false;
    Cancel c = std::move(it->second);
    ops_.erase(it);
    if (c) c();
    return true;
  }
  void cancel_all() {
    while (!ops_.empty()) cancel(ops_.begin()->first);
  }
  size_t size() const { return ops_.size(); }

 private:
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Cancel> ops_;
};

}  // namespace kagent
