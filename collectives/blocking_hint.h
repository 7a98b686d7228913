// Internal to collectives/: lets a backend know that the Async call it is
// serving was made by one of Communicator's blocking wrappers (AllReduce,
// Barrier, ...), whose thread will Wait on the returned Work at once. The ucx
// backend then leaves its progress thread asleep and lets the caller progress
// inline, which saves a wake-up per small synchronous call.
// Thread-local; not part of the public API.
#pragma once

namespace athanor {
namespace collectives_internal {

// True while the calling thread is inside a blocking wrapper.
bool InBlockingCall();

class BlockingCallScope {
 public:
  BlockingCallScope();
  ~BlockingCallScope();
  BlockingCallScope(const BlockingCallScope&) = delete;
  BlockingCallScope& operator=(const BlockingCallScope&) = delete;

 private:
  bool saved_;
};

}  // namespace collectives_internal
}  // namespace athanor
