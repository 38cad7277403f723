// One T per process, made on first use and never destroyed (users may still reach it during
// static destruction). A process forked from this one inherits the object's memory but none of
// the threads it may own, and perhaps a lock one of them held at the fork: the child makes a
// T of its own on its first use. The parent's copy stays reachable, never used again.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>

namespace conveyor {

template <class T>
class PerProcess {
public:
  // This process's T; `make()` returns a new T* the first time (and again after a fork).
  template <class Make>
  T& get(Make make) {
    const pid_t pid = getpid();
    Node* n = current_.load();
    while (n == nullptr || n->pid != pid) {
      auto* fresh = new Node{pid, make(), n};
      if (current_.compare_exchange_strong(n, fresh))
        return *fresh->value;
      delete fresh->value; // another thread of this process made one first: `n` is that one
      delete fresh;
    }
    return *n->value;
  }

private:
  struct Node {
    pid_t pid;
    T* value;
    Node* parent;
  };
  std::atomic<Node*> current_{nullptr};
};

} // namespace conveyor
