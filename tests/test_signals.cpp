// SIGINT, SIGTERM and SIGQUIT end foldcheck promptly in every wait (foldcheck/platform/process.hpp):
// also where no wait of foldcheck looks for them — a system call the handler cannot
// interrupt (handlers are installed with SA_RESTART: an open() of a FIFO with no writer is
// restarted for ever) or a long step that checks only between steps. The backstop of the
// SignalScope then ends the process by the signal within about 2 s, its registered
// temporary directories removed. (Before it, the FIFO case stayed blocked for minutes after
// SIGTERM, and only SIGKILL ended it, leaving /tmp/foldcheck-engines-* behind. SIGQUIT was not
// caught at all: it ended foldcheck at once, with a core dump, leaving the temporary
// directories and the adapter behind.)
#include <catch2/catch.hpp>

#include <csignal>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "cli_run.hpp"
#include "foldcheck/platform/process.hpp"

using namespace foldcheck_cli_test;

namespace {

using Clock = std::chrono::steady_clock;

// The child: a SignalScope with `work` registered, then blocked in open() of `fifo`.
[[noreturn]] void blocked_child(const fs::path& work, const fs::path& fifo, const fs::path& ready) {
  rlimit core{};  // core dumps allowed as far as the hard limit lets (SIGQUIT's default dumps one)
  getrlimit(RLIMIT_CORE, &core);
  core.rlim_cur = core.rlim_max;
  setrlimit(RLIMIT_CORE, &core);
  if (chdir(work.parent_path().c_str()) != 0) _exit(5);  // a core file would be left here
  const foldcheck::command::SignalScope scope;
  foldcheck::command::SignalScope::remove_on_signal(work.string());
  std::ofstream(ready) << "ready";
  const int fd = open(fifo.c_str(), O_RDONLY);  // no writer ever comes
  _exit(fd >= 0 ? 3 : 4);
}

// The child's status once it ended, or -1 when it still runs after `limit` (then killed).
int wait_for(pid_t pid, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  int st = 0;
  while (Clock::now() < end) {
    if (waitpid(pid, &st, WNOHANG) == pid) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return -1;
}

}  // namespace

TEST_CASE(
    "signals: a process blocked in open() of a FIFO ends by SIGINT, SIGTERM or SIGQUIT within seconds, its temporaries "
    "removed",
    "[cli][signals]") {
  for (const int sig : {SIGINT, SIGTERM, SIGQUIT}) {
    INFO("signal " << sig);
    const fs::path dir = tmp("signal_blocked_" + std::to_string(sig));
    fs::remove_all(dir);
    fs::create_directories(dir / "work");
    std::ofstream(dir / "work" / "file") << "temporary";
    REQUIRE(mkfifo((dir / "fifo").c_str(), 0600) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) blocked_child(dir / "work", dir / "fifo", dir / "ready");
    for (int i = 0; i < 500 && !fs::exists(dir / "ready"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // into the open()
    const auto t0 = Clock::now();
    kill(pid, sig);
    const int st = wait_for(pid, std::chrono::milliseconds(8000));
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    INFO("ended after " << seconds << " s");
    REQUIRE(st != -1);  // it ended (it stayed blocked for ever before the backstop)
    CHECK(WIFSIGNALED(st));
    CHECK(WTERMSIG(st) == sig);  // 128 + sig in a shell: 130, 143, 131
    CHECK_FALSE(WCOREDUMP(st));  // SIGQUIT's default: the cleanup done, no core file is left
    CHECK(seconds < 5);
    CHECK_FALSE(fs::exists(dir / "work"));
    for (const auto& e : fs::directory_iterator(dir)) CHECK(e.path().filename().string().rfind("core", 0) != 0);
    fs::remove_all(dir);
  }
}
