#pragma once
// Running an external command without leaving anything behind: the floor of the harness
// that talks to the operating system (POSIX processes and signals, Linux's /proc and child
// subreaper). Its users: `bisect --cmd` (commands/src/external_bisect.cpp) and `engines`
// (commands/src/engines.cpp runs the adapters; engine_catalog.cpp quotes their words).
//
// Contract of the seams:
//   SignalScope      while alive: SIGINT, SIGTERM, SIGHUP and SIGQUIT are caught (unless
//                    they were ignored on entry) and only recorded; SIGCHLD wakes the wait; the process
//                    is a child subreaper (Linux), so descendants of a command that leave its
//                    process group (setsid, double fork) are reparented to foldcheck and can
//                    be found and ended. The destructor restores all of it; a signal caught
//                    after the main flow last looked is acted on there (die_of), never
//                    swallowed. A backstop: when foldcheck is still alive 2 s after a
//                    SIGINT/SIGTERM/SIGHUP/SIGQUIT (the main flow blocked in a system call or
//                    inside a long step that checks only between steps), a thread of the scope kills
//                    every descendant, removes the directories registered with
//                    remove_on_signal and ends foldcheck by the signal. So a signal ends
//                    foldcheck within about 2 s in every wait, its temporaries removed.
//   run_command      /bin/sh -c CMD in its own process group, stdin and stdout /dev/null, stderr
//                    through a pipe of which only the last kStderrKept bytes are kept. On
//                    every way out — exit, timeout, a caught signal, an exception — the group
//                    and every remaining descendant are ended (SIGTERM, then SIGKILL after a
//                    grace period) and reaped before it returns or throws. A caught signal
//                    throws Interrupted, after that cleanup.
//   Interrupted      not a std::exception (no generic handler may swallow it): the caller
//                    removes its temporaries while unwinding, then calls
//                    SignalScope::die_of(signo), which removes the registered directories
//                    and ends foldcheck by that signal (exit status 128 + signo in a shell:
//                    130 for SIGINT, 143 for SIGTERM, 131 for SIGQUIT, without a core dump:
//                    the cleanup done, a core file would be left behind).
#include <signal.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace foldcheck::command {

// SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCHLD (process.cpp's kSignals).
inline constexpr int kCaughtSignals = 5;

struct Interrupted {
  int signo;
};

class SignalScope {
 public:
  SignalScope();
  ~SignalScope();
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;
  // The first caught signal (0: none).
  int pending() const;
  // Throws Interrupted when a signal was caught.
  void throw_if_pending() const;
  // The read end of the self-pipe a caught signal (or SIGCHLD) writes to; drained by wait().
  int wake_fd() const;
  // `dir` (a temporary directory of the command) is removed when foldcheck ends by a signal
  // while this scope is alive, whichever way (die_of, the backstop).
  static void remove_on_signal(const std::string& dir);
  // Default disposition, unblocked, raised: foldcheck ends by that signal (its exit status
  // is the signal's). Never returns.
  [[noreturn]] static void die_of(int signo);

 private:
  struct sigaction saved_[kCaughtSignals] {};
  bool caught_[kCaughtSignals]{};
  int saved_subreaper_ = 0;
  std::atomic<bool> stop_{false};
  std::thread watcher_;  // the backstop
};

// The end of a stream kept in a bounded buffer: at most 2 x `keep` bytes in memory, the last
// `keep` (at least) available.
class TailBuffer {
 public:
  explicit TailBuffer(std::size_t keep) : keep_(keep) {}
  void append(const char* p, std::size_t n);
  // The last at most `max` bytes, started after a newline when one is in reach; with a note
  // of how much came before when anything was cut.
  std::string last(std::size_t max) const;
  std::uint64_t total() const { return total_; }

 private:
  std::size_t keep_;
  std::string buf_;
  std::uint64_t total_ = 0;
};

constexpr std::size_t kStderrKept = 64 * 1024;

struct Outcome {
  int status = 0;  // exit status, or -1 timed out, -2 killed by a signal (then `signal`)
  int signal = 0;
  double seconds = 0;
  TailBuffer err{kStderrKept};
};

Outcome run_command(const std::string& cmd, double timeout_seconds, const SignalScope& signals);

// `s` as one shell word in single quotes (a single quote inside escaped), also when empty.
std::string shell_quote(const std::string& s);
// `tmpl` with each placeholder ("{out}") replaced by its value as one quoted shell word, in
// one left-to-right pass (a value is never scanned again); any other {...} is left as it is.
std::string expand_placeholders(const std::string& tmpl, const std::vector<std::pair<std::string, std::string>>& values);

}  // namespace foldcheck::command
