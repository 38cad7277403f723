// A gate that test code holds threads at: callers of wait() block until open(); the test waits
// until n of them are inside. Waits are bounded, so a failing test still ends.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace conveyor::testing {

class Gate {
public:
  // Blocks until open() (at most `bound`).
  void wait(std::chrono::milliseconds bound = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    changed_.notify_all();
    changed_.wait_for(lock, bound, [this] { return open_; });
  }
  // Whether `n` callers entered wait() within `timeout`.
  bool wait_for_waiters(int n, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, timeout, [&] { return waiting_ >= n; });
  }
  int waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    changed_.notify_all();
  }
  // Opens the gate when it goes out of scope: declared after the queues or actors whose work
  // waits at the gate, it lets that work return before their destructors wait for it, also
  // when a failed REQUIRE unwinds the test.
  struct Opener {
    Gate& gate;
    ~Opener() { gate.open(); }
  };
  Opener opener() { return Opener{*this}; }

private:
  std::mutex mu_;
  std::condition_variable changed_;
  int waiting_ = 0;
  bool open_ = false;
};

} // namespace conveyor::testing
