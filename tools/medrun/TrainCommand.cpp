//===- TrainCommand.cpp - `medrun train RECIPE`: compile if needed, then train -------===//
//
// medc owns the recipe schema: `medc recipe` checks the recipe and the --set overrides and
// prints the effective recipe (JSON) with a hash of what it compiles to. The artifact is
// cached under that hash, so only a changed model, compile-time setting or compiler
// recompiles. Then the runtime's training loop runs (Train.h).
//
//===----------------------------------------------------------------------------------===//
#include "TrainCommand.h"

#include "medrun/Artifact.h"
#include "medrun/Cuda.h"
#include "medrun/Distributed.h"
#include "medrun/Error.h"
#include "medrun/RecipeCheck.h"
#include "medrun/Train.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

namespace medrun {
namespace {

namespace fs = std::filesystem;

std::atomic<int> stopRequests{0};
std::atomic<int> stopSignal{0};
// Where `medrun train` says what it does: stderr, nothing on the ranks of a data-parallel
// job other than rank 0 (their errors still reach stderr).
FILE *notes = stderr;
bool quietRank = false;

// First SIGINT/SIGTERM/SIGUSR1: finish the step, save, then exit 130 after SIGINT (the
// shell's status of an interrupted command) and 0 after SIGTERM or SIGUSR1 (a scheduler that
// preempts a job, or warns of its time limit as Slurm's --signal=USR1@300 does, and requeues
// it sees a clean end). Second: leave at once with 130.
void onSignal(int sig) {
  if (stopRequests.fetch_add(1) >= 1)
    _exit(130);
  stopSignal = sig;
  if (quietRank)
    return;
  const char msg[] = "\nmedrun: stopping after this step (checkpoint follows); "
                     "signal again to quit at once\n";
  ssize_t ignored = write(2, msg, sizeof msg - 1);
  (void)ignored;
}

std::string findMedc() {
  if (const char *e = std::getenv("MEDC"); e && *e)
    return e;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && fs::exists(self.parent_path() / "medc"))
    return (self.parent_path() / "medc").string();
  return "medc"; // from PATH
}

// Runs argv; returns its exit status. With `captured`, its standard output goes there.
int runProcess(const std::vector<std::string> &argv, std::string *captured) {
  int fds[2] = {-1, -1};
  if (captured && pipe(fds) != 0)
    throw Error("cannot create a pipe to run medc");
  pid_t pid = fork();
  if (pid < 0)
    throw Error("cannot start medc (fork failed)");
  if (pid == 0) {
    if (captured) {
      dup2(fds[1], 1);
      close(fds[0]);
      close(fds[1]);
    }
    std::vector<char *> args;
    for (const std::string &a : argv)
      args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "medrun: cannot run '%s' (set MEDC to the medc executable)\n", args[0]);
    _exit(127);
  }
  if (captured) {
    close(fds[1]);
    char buf[65536];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
      if (n > 0)
        captured->append(buf, static_cast<size_t>(n));
    close(fds[0]);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

fs::path cacheDir() {
  if (const char *e = std::getenv("MEDRUN_CACHE"); e && *e)
    return e;
  if (const char *e = std::getenv("XDG_CACHE_HOME"); e && *e)
    return fs::path(e) / "medrun";
  if (const char *e = std::getenv("HOME"); e && *e)
    return fs::path(e) / ".cache" / "medrun";
  return fs::temp_directory_path() / "medrun-cache";
}

// --set KEY=VALUE on an effective recipe (JSON): the key must exist; the value keeps its
// JSON type (a number, true/false, a list as a,b,c) or is a string.
void setKey(nlohmann::json &config, const std::string &spec) {
  size_t eq = spec.find('='), dot = spec.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq)
    throw Error(str("--set ", spec, ": expected section.key=value"));
  std::string section = spec.substr(0, dot), key = spec.substr(dot + 1, eq - dot - 1);
  std::string value = spec.substr(eq + 1);
  if (!config.contains(section) || !config[section].is_object() || !config[section].contains(key))
    throw Error(str("--set ", spec, ": the effective recipe has no key '", section, ".", key, "'"));
  std::string text = value.find(',') != std::string::npos && value.front() != '[' ? "[" + value + "]"
                                                                               : value;
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  config[section][key] = parsed.is_discarded() ? nlohmann::json(value) : parsed;
}

} // namespace

std::string recipeCacheDir() { return cacheDir().string(); }

int prepareRecipe(const std::string &recipe, const std::vector<std::string> &overrides,
                  const std::string &artifactPath, PreparedRecipe &prepared, bool dataParallel) {
  if (!fs::exists(recipe))
    throw Error(str(recipe, ": no such recipe (see configs/ for examples)"));
  const bool effective = fs::path(recipe).extension() == ".json";
  if (effective && artifactPath.empty())
    throw Error(str(recipe, ": an effective recipe (JSON) trains a compiled artifact; give it "
                            "with --artifact X.medc, or train the YAML recipe"));
  const std::string medc = effective ? "" : findMedc();
  std::vector<std::string> recipeArgs = {recipe};
  for (const std::string &o : overrides) {
    recipeArgs.push_back("--set");
    recipeArgs.push_back(o);
  }

  // 1. The effective recipe: medc checks every key; or one medc printed before (a machine
  //    without the compiler trains a carried artifact).
  nlohmann::json config;
  std::vector<std::string> argv;
  if (effective) {
    config = readEffectiveRecipe(recipe);
    for (const std::string &o : overrides)
      setKey(config, o);
    checkEffectiveRecipe(config, recipe);
  } else {
    std::string text;
    argv = {medc, "recipe"};
    argv.insert(argv.end(), recipeArgs.begin(), recipeArgs.end());
    if (int rc = runProcess(argv, &text); rc != 0)
      return rc; // medc said why
    config = nlohmann::json::parse(text);
  }

  std::string device = config["train"]["device"];
  std::string why;
  const bool gpu = cudaAvailable(&why);
  bool cuda = device == "cuda" || (device == "auto" && gpu);
  if (device == "cuda" && !gpu)
    throw Error(str("--device cuda: no CUDA driver or GPU found; use --device cpu (", why, ")"));
  std::fprintf(notes, "device: %s%s\n", cuda ? "cuda" : "cpu",
               device == "auto" ? (cuda ? " (auto: a GPU is present)" : " (auto: no GPU found)") : "");

  // 2. The artifact, compiled once per compile hash and target.
  fs::path artifact = artifactPath;
  if (artifact.empty()) {
    fs::path cache = cacheDir();
    fs::create_directories(cache);
    artifact = cache / (config["compile_hash"].get<std::string>() + (cuda ? ".cuda" : "") +
                        (dataParallel ? ".dp" : "") + ".medc");
  }
  if (!artifactPath.empty()) {
    std::fprintf(notes, "using the compiled recipe %s\n", artifact.c_str());
  } else if (!fs::exists(artifact)) {
    fs::path tmp = artifact.string() + ".tmp." + std::to_string(getpid());
    std::fprintf(notes, "compiling %s -> %s\n", recipe.c_str(), artifact.c_str());
    auto start = std::chrono::steady_clock::now();
    argv = {medc, "compile", "--emit=artifact", "--recipe"};
    argv.insert(argv.end(), recipeArgs.begin(), recipeArgs.end());
    if (cuda)
      argv.insert(argv.end(), {"--target", "cuda"});
    if (dataParallel)
      argv.push_back("--data-parallel");
    argv.insert(argv.end(), {"-o", tmp.string()});
    if (int rc = runProcess(argv, nullptr); rc != 0) {
      fs::remove(tmp);
      return rc;
    }
    fs::rename(tmp, artifact);
    std::fprintf(notes, "compiled in %.1f s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  } else {
    std::fprintf(notes, "using the compiled recipe %s\n", artifact.c_str());
  }
  Artifact a = Artifact::load(artifact.string());
  // The artifact must be the recipe compiled: the same compile hash (what `medc recipe`
  // says the recipe compiles to). Name both sides when they differ.
  if (config.contains("compile_hash")) {
    auto option = [&](const char *key) {
      auto it = a.options.find(key);
      return it == a.options.end() ? std::string() : it->second;
    };
    const std::string want = config["compile_hash"].get<std::string>(), have = option("compile_hash");
    const std::string recipeName = config.value("recipe", recipe);
    if (have.empty())
      throw Error(str(artifact.string(), ": not compiled from a recipe (it was compiled from ",
                      a.source, " with no compile hash), but ", recipeName, " compiles to ",
                      want, "; compile the recipe with `medc compile --recipe ", recipeName,
                      " -o A.medc`"));
    if (have != want)
      throw Error(str(artifact.string(), ": compiled from a different recipe or compiler (",
                      option("recipe").empty() ? a.source : option("recipe"), ", compile hash ",
                      have, ") than ", recipeName, " (compile hash ", want,
                      "); recompile it with `medc compile --recipe ", recipeName, "`"));
  }
  prepared.config = std::move(config);
  prepared.artifact = std::move(a);
  prepared.cuda = cuda;
  return 0;
}

int trainCommand(const std::string &recipe, const std::vector<std::string> &overrides,
                 const std::optional<std::string> &resume, bool resumeOrStart, bool overwrite,
                 int progressMode, const std::string &artifactPath,
                 const std::string &initFrom, bool upkern, bool dataParallel) {
  // A rank of a data-parallel job: its GPU and the communicator first (the rendezvous
  // waits for every rank), so a rank that cannot join stops the job before any work.
  const DistEnv dist = distEnvFromEnvironment();
  std::unique_ptr<DataParallel> job;
  static std::unique_ptr<FILE, int (*)(FILE *)> devnull(nullptr, std::fclose);
  if (dist.rank > 0 && (devnull || (devnull.reset(std::fopen("/dev/null", "w")), devnull))) {
    notes = devnull.get();
    quietRank = true;
  }
  if (dist.worldSize > 1 || dataParallel) {
    std::fprintf(notes, "data parallel: %d rank%s; rank 0 (pid %d) writes the logs and checkpoints\n",
                 dist.worldSize, dist.worldSize == 1 ? "" : "s", static_cast<int>(getpid()));
    job = std::make_unique<DataParallel>(dist);
    setCudaDevice(job->device());
  }
  PreparedRecipe prepared;
  if (int rc = prepareRecipe(recipe, overrides, artifactPath, prepared, job != nullptr); rc != 0)
    return rc;
  const nlohmann::json &config = prepared.config;
  const Artifact &a = prepared.artifact;

  // 3. Train.
  TrainOptions options;
  std::string out = config["train"].value("out", "");
  options.out = out.empty() ? (fs::path("runs") / fs::path(recipe).stem()).string() : out;
  options.resume = resume;
  options.resumeOrStart = resumeOrStart;
  options.overwrite = overwrite;
  options.cuda = prepared.cuda;
  options.stop = &stopRequests;
  options.progressMode = progressMode;
  options.initFrom = initFrom;
  options.upkern = upkern;
  if (job) {
    options.reducer = job.get();
    options.rank = dist.rank;
  }
  struct sigaction sa = {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
  std::fprintf(notes, "training %s for %lld steps -> %s\n", recipe.c_str(),
               static_cast<long long>(config["train"]["steps"].get<int64_t>()),
               options.out.c_str());
  TrainSummary s = train(a, config, options);
  if (s.finished) {
    std::fprintf(notes, "the run is finished: its checkpoint is at step %lld and train.steps "
                        "is %lld; nothing to do (raise --steps to train on)\ncheckpoint: %s\n",
                 static_cast<long long>(s.lastStep),
                 static_cast<long long>(config["train"]["steps"].get<int64_t>()),
                 s.checkpoint.c_str());
    return 0;
  }
  std::fprintf(notes, "%s steps %lld..%lld: mean loss %.4g (first %lld steps) -> %.4g (last)%s%s\n",
               s.interrupted ? "interrupted after" : "trained", static_cast<long long>(s.firstStep),
               static_cast<long long>(s.lastStep), s.firstLoss,
               static_cast<long long>(config["logging"]["every"].get<int64_t>()), s.lastLoss,
               s.skipped ? str(", ", s.skipped, " steps skipped (non-finite loss)").c_str() : "",
               s.updateSkipped
                   ? str(", ", s.updateSkipped, " steps skipped (non-finite update)").c_str()
                   : "");
  std::fprintf(notes, "checkpoint: %s\n", s.checkpoint.c_str());
  return s.interrupted && stopSignal == SIGINT ? 130 : 0;
}

} // namespace medrun
