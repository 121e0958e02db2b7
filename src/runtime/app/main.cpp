// kagent-rt: runs a Lua agent script on the runtime (event loop, tasks, native primitives).
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "lua/runtime.hpp"
#include "util/dotenv.hpp"
#include "util/entry_points.hpp"
#include "util/inherited_fds.hpp"
#include "util/logging.hpp"
#include "util/root_dir.hpp"
#include "util/version.hpp"

namespace {

const char* kDescription =
    "kagent-rt: an embedded LuaJIT runtime for GPU-kernel optimization agents.\n"
    "Runs SCRIPT as the main task; arguments after SCRIPT reach it as kagent.args. A relative\n"
    "SCRIPT that is not a file here is looked up in the user folder, then the installed files.\n"
    "Main job: kagent-rt agents/beam.lua --problem PROBLEM.py [--kernel KERNEL.py] (see its --help).\n"
    "Environment: KAGENT_LOG_LEVEL, KAGENT_ROOT, KAGENT_HOME, NO_COLOR, KAGENT_DB, KAGENT_PYTHON, KAGENT_MODEL,\n"
    "KAGENT_LLM_URL, ANTHROPIC_API_KEY, OPENAI_API_KEY, OPENAI_BASE_URL (also read from .env).";

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a descriptor or starts a thread: what we inherited (fd 7 on a .env,
  // fd 8 on a file in the home folder) stays ours and never reaches a worker or its candidates.
  kagent::mark_inherited_fds_cloexec();
  CLI::App app{kDescription, "kagent-rt"};
  std::string script;
  std::vector<std::string> script_args;
  std::string log_level;
  std::string log_file;
  std::string env_file = ".env";
  std::string color = "auto";
  bool show_version = false;
  app.add_flag("--version", show_version, "Print the version and exit");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off (default info or KAGENT_LOG_LEVEL)");
  app.add_option("--log-file", log_file, "Also write the log to this file");
  app.add_option("--env-file", env_file, "Load variables from this file if it exists (default ./.env)");
  app.add_option("--color", color, "Log colours: auto (on a terminal, unless NO_COLOR is set), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  app.add_option("script", script, "Lua script to run (a path, or e.g. agents/beam.lua from the search path)");
  // the entry points, each with its own first line's summary (one source: the files themselves);
  // read only when the help is shown
  app.footer([] { return kagent::entry_points_help(kagent::find_root()); });
  // Everything after the script belongs to the script (its own --help included), so split
  // argv at the first word that is neither an option nor an option's value.
  int split = 1;
  while (split < argc) {
    std::string a = argv[split];
    if (a.rfind("-", 0) != 0) break;
    const bool takes_value = (a == "--log-level" || a == "--log-file" || a == "--env-file" || a == "--color");
    split += takes_value ? 2 : 1;
  }
  if (split < argc) ++split;  // the script itself
  if (split > argc) split = argc;
  for (int i = split; i < argc; ++i) script_args.emplace_back(argv[i]);
  try {
    app.parse(split, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // usage errors exit 2, like most command-line tools
  }
  if (show_version) {
    std::printf("kagent-rt %s\n", kagent::kVersion);
    return 0;
  }
  if (script.empty()) {
    std::fprintf(stderr, "kagent-rt: no script given\n%s", app.help().c_str());
    return 2;
  }

  // Not dumpable: our /proc files (environ, memory) belong to root, so a candidate kernel running
  // as the same user cannot read the API keys we hold; no core dump can hold them either.
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  kagent::load_dotenv(env_file);
  if (log_level.empty()) {
    const char* env = std::getenv("KAGENT_LOG_LEVEL");
    log_level = env != nullptr && *env != '\0' ? env : "info";
  }
  if (std::string err = kagent::setup_logging(log_level, log_file, color); !err.empty()) {
    std::fprintf(stderr, "kagent-rt: %s\n", err.c_str());
    return 2;
  }

  // SIGPIPE would kill us when a child closes its stdin; INT/TERM stop the run cleanly
  // (children killed, databases closed) through a signalfd on the loop, where WINCH (the
  // terminal resized) wakes the tasks in fs.wait_resize, so a status line is redrawn at once.
  signal(SIGPIPE, SIG_IGN);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGHUP);
  sigaddset(&mask, SIGWINCH);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  int sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);

  int code = 1;
  try {
    kagent::RuntimeOptions opts;
    opts.script = script;
    opts.args = script_args;
    opts.root = kagent::find_root();
    kagent::Runtime rt(opts);
    if (sigfd >= 0) {
      rt.loop().watch_fd(sigfd, EPOLLIN, [&rt, sigfd](uint32_t) {
        signalfd_siginfo info{};
        while (read(sigfd, &info, sizeof info) == sizeof info) {
          if (info.ssi_signo == SIGWINCH) {
            rt.notify_resize();
          } else {
            rt.request_stop(static_cast<int>(info.ssi_signo));
          }
        }
      });
    }
    code = rt.run_main();
    if (sigfd >= 0) rt.loop().unwatch_fd(sigfd);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kagent-rt: fatal: %s\n", e.what());
    code = 1;
  }
  if (sigfd >= 0) close(sigfd);
  return code;
}
