#pragma once
// Internal to the reference: run f(t) on threads t = 0..nt-1 (t = 0 on the calling
// thread) and rethrow the first error after every thread has finished. Work is split by
// the callers so that each output is computed by one thread in a fixed way: results do
// not depend on nt.
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace foldcheck::ref::detail {

inline void parallel(unsigned nt, const std::function<void(unsigned)>& f) {
  std::vector<std::exception_ptr> errors(nt);
  auto guarded = [&](unsigned t) {
    try {
      f(t);
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < nt; ++t) threads.emplace_back(guarded, t);
  guarded(0);
  for (auto& th : threads) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// The thread count for `requested` (0: every core) and at most `items` work items (>= 1).
inline unsigned thread_count(unsigned requested, std::size_t items) {
  const unsigned hw = requested ? requested : std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(hw, items)));
}

}  // namespace foldcheck::ref::detail
