#pragma once
// Independent tasks 0..n-1 on up to `threads` threads (0: all cores), handed out in index
// order; after each task, `done(k, finished)` runs under a lock (progress lines). An
// exception is kept per task and the lowest-indexed one rethrown after every thread has
// joined; once a task has failed no further task is handed out (every lower-indexed one
// already was, so the error rethrown is the same for any thread count). An exception from
// `done` (a progress callable that raises, or an interrupt) stops the handing out too and is
// rethrown first; it never escapes a worker thread. Callers write each task's result to its
// own slot, so results do not depend on the thread count. Internal to the harness.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace foldcheck::detail {

// The threads a `threads` option means: itself, or every core for 0.
inline unsigned thread_count(unsigned threads) {
  return threads ? threads : std::max(1u, std::thread::hardware_concurrency());
}

template <class Task, class Done>
void run_tasks(std::size_t n, unsigned threads, Task task, Done done) {
  const unsigned nt = static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(thread_count(threads), n)));
  std::vector<std::exception_ptr> errors(n);
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  std::size_t finished = 0;
  std::exception_ptr done_error;
  auto worker = [&] {
    for (std::size_t k; (k = next++) < n;) {
      try {
        task(k);
      } catch (...) {
        errors[k] = std::current_exception();
        next = n;
      }
      const std::lock_guard<std::mutex> lock(mu);
      if (done_error) continue;
      try {
        done(k, ++finished);
      } catch (...) {
        done_error = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < nt; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  if (done_error) std::rethrow_exception(done_error);
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace foldcheck::detail
