// StdMutex: std::mutex that clang's -Wthread-safety can reason about.
//
// Hot paths that take a lock per call (the UCX backend's progress) use
// std::mutex rather than absl::Mutex, whose Debian build records a lock-order
// graph on every contended Lock. std::mutex carries no capability annotation
// in libstdc++, so ABSL_GUARDED_BY on it is refused by clang; this wrapper
// adds the annotations and nothing else. Thread-safe, like std::mutex.
#pragma once

#include <mutex>

#include "absl/base/thread_annotations.h"

namespace athanor {

class ABSL_LOCKABLE StdMutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // For code the analysis cannot follow (a callback that its caller runs
  // with the lock held): states the fact, checks nothing at run time.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  std::mutex mu_;
};

// Holds a StdMutex for its scope.
class ABSL_SCOPED_LOCKABLE StdMutexLock {
 public:
  explicit StdMutexLock(StdMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~StdMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  StdMutexLock(const StdMutexLock&) = delete;
  StdMutexLock& operator=(const StdMutexLock&) = delete;

 private:
  StdMutex* const mu_;
};

}  // namespace athanor
