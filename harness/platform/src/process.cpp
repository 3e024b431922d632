// Running an external command without leaving anything behind (foldcheck/platform/process.hpp).
#include "foldcheck/platform/process.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace foldcheck::command {

namespace {

using Clock = std::chrono::steady_clock;

// Written by the handlers only: the first terminating signal caught, and the self-pipes
// (g_wake: any caught signal, drained by run_command's wait; g_term: a terminating signal,
// read by the backstop's thread).
volatile sig_atomic_t g_signal = 0;
int g_wake[2] = {-1, -1};
int g_term[2] = {-1, -1};

// The directories to remove when foldcheck ends by a signal (SignalScope::remove_on_signal).
std::mutex g_dirs_mu;
std::vector<std::string> g_dirs;

// The terminating signals a SignalScope catches (SIGQUIT too: left to its default, it ended
// foldcheck at once, leaving the temporary directories and the adapter behind), and SIGCHLD.
constexpr int kSignals[kCaughtSignals] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD};
constexpr auto kGrace = std::chrono::milliseconds(1000);  // between SIGTERM and SIGKILL
// How long the main flow has, after a signal, to end foldcheck itself (end the command with
// its grace, remove its files) before the backstop does: more than kGrace and a reap.
constexpr auto kBackstop = std::chrono::milliseconds(2000);

extern "C" void on_signal(int s) {
  const int saved_errno = errno;
  if (s != SIGCHLD && g_signal == 0) g_signal = s;
  const char c = 0;
  if (g_wake[1] >= 0) [[maybe_unused]]
    const ssize_t n = write(g_wake[1], &c, 1);
  if (s != SIGCHLD && g_term[1] >= 0) [[maybe_unused]]
    const ssize_t n = write(g_term[1], &c, 1);
  errno = saved_errno;
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// An owned file descriptor.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// The text of /proc/PID/stat; "" when the process is gone. A process that exits between
// the directory scan and the read fails the read with ESRCH (or the open with ENOENT):
// that is an answer ("not there"), not an error. Plain read(2), never an iostream: the
// scan runs in destructors (Ender), where libstdc++'s ios_failure from a failed read
// ("basic_filebuf::underflow error reading the file: No such process") was uncaught and
// aborted foldcheck under load.
std::string proc_stat(long pid) {
  const std::string path = fmt::format("/proc/{}/stat", pid);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  char buf[512];
  ssize_t n = 0;
  while ((n = read(fd, buf, sizeof buf)) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      text.clear();
      break;
    }
    text.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  return text;
}

// Every process below foldcheck in the process tree (from /proc; zombies included), with
// whether it is foldcheck's own child. Empty where /proc is not mounted.
struct Descendant {
  pid_t pid;
  bool child;
};
std::vector<Descendant> descendants() {
  std::multimap<pid_t, pid_t> children;  // ppid -> pid
  if (DIR* d = opendir("/proc")) {
    while (const dirent* e = readdir(d)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      if (pid <= 0 || *end) continue;
      const std::string stat = proc_stat(pid);
      const std::size_t paren = stat.rfind(')');  // the command name may hold spaces and parentheses
      if (paren == std::string::npos) continue;
      char state = 0;
      long ppid = 0;
      if (std::sscanf(stat.c_str() + paren + 1, " %c %ld", &state, &ppid) == 2) children.emplace(static_cast<pid_t>(ppid), static_cast<pid_t>(pid));
    }
    closedir(d);
  }
  const pid_t self = getpid();
  std::vector<Descendant> r;
  std::vector<pid_t> todo{self};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    const auto [lo, hi] = children.equal_range(p);
    for (auto it = lo; it != hi; ++it) {
      r.push_back({it->second, p == self});
      todo.push_back(it->second);
    }
  }
  return r;
}

// Reaps foldcheck's children among `ds` (blocking: only after SIGKILL).
void reap(const std::vector<Descendant>& ds, bool block) {
  for (const Descendant& d : ds)
    if (d.child)
      while (waitpid(d.pid, nullptr, block ? 0 : WNOHANG) < 0 && errno == EINTR) {
      }
}

// Sends `sig` to the group `pgid` (while its leader is unreaped, so the id cannot have been
// reused) and to every descendant.
void signal_all(pid_t pgid, bool leader_unreaped, int sig, const std::vector<Descendant>& ds) {
  if (leader_unreaped) kill(-pgid, sig);
  for (const Descendant& d : ds) kill(d.pid, sig);
}

// Ends the command's process group and every descendant of foldcheck, and reaps them:
// SIGTERM, up to kGrace for them to exit, then SIGKILL until none is left (a process
// forking meanwhile is caught in a later round; orphans come back to the subreaper).
void end_everything(pid_t pgid, bool leader_unreaped) {
  std::vector<Descendant> ds = descendants();
  if (!leader_unreaped && ds.empty()) return;
  signal_all(pgid, leader_unreaped, SIGTERM, ds);
  const auto deadline = Clock::now() + kGrace;
  while (Clock::now() < deadline) {
    reap(ds, false);
    ds = descendants();
    if (ds.empty()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (int round = 0; round < 10000 && !ds.empty(); ++round) {
    signal_all(pgid, leader_unreaped && round == 0, SIGKILL, ds);
    reap(ds, true);
    ds = descendants();
  }
}

// The child's side of the fork: its own process group, dies with foldcheck (Linux), the
// signal mask and dispositions foldcheck had, stdin/stdout /dev/null, stderr the pipe.
// Only async-signal-safe calls.
[[noreturn]] void exec_child(const char* cmd, int err_w, pid_t parent, const sigset_t& mask) {
  setpgid(0, 0);
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
#endif
  for (const int s : kSignals) {
    struct sigaction cur{};
    sigaction(s, nullptr, &cur);
    if (cur.sa_handler != SIG_IGN) signal(s, SIG_DFL);
  }
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  const int null = open("/dev/null", O_RDWR);
  if (null >= 0) {
    dup2(null, 0);
    dup2(null, 1);
  }
  dup2(err_w, 2);
  execl("/bin/sh", "sh", "-c", cmd, static_cast<char*>(nullptr));
  _exit(127);
}

// Reads what the pipe holds now (at most 1 MiB, so a flooding writer cannot hold the loop)
// into `tail`; `open` becomes false at end of file.
void drain(int fd, TailBuffer& tail, bool& open) {
  char buf[65536];
  for (int i = 0; i < 16 && open; ++i) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) tail.append(buf, static_cast<std::size_t>(n));
    else if (n == 0) open = false;
    else if (errno != EINTR) return;  // EAGAIN: nothing more for now
  }
}

void drain_wake(int fd) {
  char buf[256];
  while (read(fd, buf, sizeof buf) > 0) {
  }
}

// Removes every registered directory (a few tries: the main flow may be removing one too,
// and remove_all stops at the first entry the other removed).
void remove_registered_dirs() {
  const std::lock_guard<std::mutex> lock(g_dirs_mu);
  for (const std::string& d : g_dirs)
    for (int i = 0; i < 5; ++i) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
      if (!std::filesystem::exists(d, ec)) break;
    }
}

// Waits up to `d` for a byte on fd; false when `stop` became true meanwhile.
bool wait_readable(int fd, std::chrono::milliseconds d, const std::atomic<bool>& stop) {
  pollfd p{fd, POLLIN, 0};
  poll(&p, 1, static_cast<int>(d.count()));
  char buf[64];
  while (read(fd, buf, sizeof buf) > 0) {}
  return !stop;
}

// The backstop's thread: after a terminating signal, the main flow has kBackstop to end
// foldcheck by it (it may be blocked in a system call the handler cannot interrupt, with
// SA_RESTART, or deep in a computation that checks for signals only between steps); then
// every descendant is killed, the registered directories are removed, and foldcheck ends
// by the signal from here.
void backstop(const std::atomic<bool>& stop) {
  while (g_signal == 0)
    if (!wait_readable(g_term[0], std::chrono::milliseconds(-1), stop)) return;
  const auto deadline = Clock::now() + kBackstop;
  for (auto now = Clock::now(); now < deadline; now = Clock::now())
    if (!wait_readable(g_term[0],
                       std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) +
                           std::chrono::milliseconds(1),
                       stop))
      return;
  for (const Descendant& d : descendants()) kill(d.pid, SIGKILL);
  SignalScope::die_of(g_signal);
}

}  // namespace

SignalScope::SignalScope() {
  g_signal = 0;
  if (pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0 || pipe2(g_term, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error("cannot create a pipe for the signal handlers");
  for (int i = 0; i < kCaughtSignals; ++i) {
    sigaction(kSignals[i], nullptr, &saved_[i]);
    if (kSignals[i] != SIGCHLD && saved_[i].sa_handler == SIG_IGN) continue;  // ignored by whoever started us: stays so
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | (kSignals[i] == SIGCHLD ? SA_NOCLDSTOP : 0);
    sigaction(kSignals[i], &sa, nullptr);
    caught_[i] = true;
  }
#ifdef __linux__
  prctl(PR_GET_CHILD_SUBREAPER, &saved_subreaper_);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
  watcher_ = std::thread([this] { backstop(stop_); });
}

SignalScope::~SignalScope() {
  stop_ = true;
  const char c = 0;
  [[maybe_unused]] const ssize_t n = write(g_term[1], &c, 1);
  watcher_.join();
  // A signal caught after the main flow last looked (its last wait or step): acted on now,
  // never swallowed — the registered directories removed, foldcheck ended by it.
  if (const int s = g_signal) die_of(s);
  {
    const std::lock_guard<std::mutex> lock(g_dirs_mu);
    g_dirs.clear();
  }
#ifdef __linux__
  prctl(PR_SET_CHILD_SUBREAPER, saved_subreaper_);
#endif
  for (int i = 0; i < kCaughtSignals; ++i)
    if (caught_[i]) sigaction(kSignals[i], &saved_[i], nullptr);
  for (int* pipe : {g_wake, g_term})
    for (int i = 0; i < 2; ++i) {
      close(pipe[i]);
      pipe[i] = -1;
    }
}

void SignalScope::remove_on_signal(const std::string& dir) {
  const std::lock_guard<std::mutex> lock(g_dirs_mu);
  g_dirs.push_back(dir);
}

int SignalScope::pending() const { return g_signal; }

void SignalScope::throw_if_pending() const {
  if (const int s = g_signal) throw Interrupted{s};
}

int SignalScope::wake_fd() const { return g_wake[0]; }

void SignalScope::die_of(int signo) {
  remove_registered_dirs();
  signal(signo, SIG_DFL);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, signo);
  sigprocmask(SIG_UNBLOCK, &s, nullptr);
  if (signo == SIGQUIT) {  // its default also dumps core: after the cleanup, leave no core file behind
    rlimit none{0, 0};
    getrlimit(RLIMIT_CORE, &none);
    none.rlim_cur = 0;
    setrlimit(RLIMIT_CORE, &none);
  }
  raise(signo);
  _exit(128 + signo);  // not reached for a terminating signal
}

void TailBuffer::append(const char* p, std::size_t n) {
  total_ += n;
  if (n >= keep_) {
    buf_.assign(p + (n - keep_), keep_);
    return;
  }
  buf_.append(p, n);
  if (buf_.size() > 2 * keep_) buf_.erase(0, buf_.size() - keep_);
}

std::string TailBuffer::last(std::size_t max) const {
  std::size_t from = buf_.size() > max ? buf_.size() - max : 0;
  if (from > 0) {
    const std::size_t nl = buf_.find('\n', from);
    if (nl != std::string::npos && nl + 1 < buf_.size() && nl - from < max / 2) from = nl + 1;
    while (from < buf_.size() && (static_cast<unsigned char>(buf_[from]) & 0xC0) == 0x80) ++from;  // not inside a UTF-8 character
  }
  const std::uint64_t cut = total_ - (buf_.size() - from);
  return (cut ? fmt::format("… ({} bytes of stderr before this)\n", cut) : std::string()) + buf_.substr(from);
}

Outcome run_command(const std::string& cmd, double timeout_seconds, const SignalScope& signals) {
  signals.throw_if_pending();
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) throw std::runtime_error("bisect: cannot create a pipe");
  const pid_t parent = getpid();
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &old);  // no handler of ours runs in the child before exec
  const pid_t pid = fork();
  if (pid == 0) exec_child(cmd.c_str(), err_pipe[1], parent, old);
  sigprocmask(SIG_SETMASK, &old, nullptr);
  close(err_pipe[1]);
  Fd err(err_pipe[0]);
  if (pid < 0) throw std::runtime_error("bisect: fork failed");
  setpgid(pid, pid);  // also here: no race with the child's own call
  fcntl(err.fd, F_SETFL, fcntl(err.fd, F_GETFL) | O_NONBLOCK);
  // Whatever way this function is left, nothing of the command outlives it.
  struct Ender {
    pid_t pgid;
    bool leader_unreaped = true;
    ~Ender() { end_everything(pgid, leader_unreaped); }
  } ender{pid};
  const auto t0 = Clock::now();
  Outcome r;
  bool open = true;
  for (;;) {
    drain(err.fd, r.err, open);
    signals.throw_if_pending();
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      ender.leader_unreaped = false;
      drain(err.fd, r.err, open);  // what it wrote before exiting (background writers are ended next)
      r.seconds = since(t0);
      r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -2;
      r.signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
      return r;
    }
    r.seconds = since(t0);
    if (r.seconds >= timeout_seconds) {
      r.status = -1;
      return r;
    }
    const double wait_ms = std::min(100.0, (timeout_seconds - r.seconds) * 1000);
    pollfd fds[2] = {{signals.wake_fd(), POLLIN, 0}, {open ? err.fd : -1, POLLIN, 0}};
    poll(fds, 2, static_cast<int>(std::max(1.0, wait_ms)));
    drain_wake(signals.wake_fd());
  }
}

std::string shell_quote(const std::string& s) {
  std::string r = "'";
  for (const char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

std::string expand_placeholders(const std::string& tmpl, const std::vector<std::pair<std::string, std::string>>& values) {
  std::string r;
  for (std::size_t i = 0; i < tmpl.size();) {
    bool replaced = false;
    if (tmpl[i] == '{')
      for (const auto& [name, value] : values)
        if (tmpl.compare(i, name.size(), name) == 0) {
          r += shell_quote(value);
          i += name.size();
          replaced = true;
          break;
        }
    if (!replaced) r += tmpl[i++];
  }
  return r;
}

}  // namespace foldcheck::command
