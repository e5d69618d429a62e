//===- DistEnv.cpp - a rank's place in the job from its launcher's environment -------===//
#include "medrun/Distributed.h"

#include "medrun/Error.h"

#include <cctype>
#include <cstdlib>
#include <optional>

namespace medrun {
namespace {

struct Reader {
  const EnvLookup &lookup;

  std::optional<std::string> get(const char *name) const {
    const char *v = lookup(name);
    if (!v || !*v)
      return std::nullopt;
    return std::string(v);
  }

  /// An integer variable in [least, most]; nullopt when unset.
  std::optional<long> integer(const char *name, long least, long most = 1L << 30) const {
    auto v = get(name);
    if (!v)
      return std::nullopt;
    char *end = nullptr;
    long n = std::strtol(v->c_str(), &end, 10);
    if (*end || !std::isdigit(static_cast<unsigned char>((*v)[0])) || n < least || n > most)
      throw Error(str(name, "='", *v, "' is not an integer in [", least, ", ", most, "]"));
    return n;
  }

  long required(const char *name, const char *launcher, const char *whatSets, long least) const {
    auto v = integer(name, least);
    if (!v)
      throw Error(str(name, " is not set, but ", whatSets, " is (", launcher,
                      " sets both; set it for each process)"));
    return *v;
  }
};

/// Checks rank < world and local rank < local world, naming the variables.
void checkRanks(const DistEnv &e, const char *rank, const char *world, const char *local,
                const char *localWorld) {
  if (e.rank >= e.worldSize)
    throw Error(str(rank, "=", e.rank, " is not below ", world, "=", e.worldSize,
                    " (ranks count from 0)"));
  if (e.localWorldSize && e.localRank >= e.localWorldSize)
    throw Error(str(local, "=", e.localRank, " is not below ", localWorld, "=", e.localWorldSize));
  if (e.localWorldSize > e.worldSize)
    throw Error(str(localWorld, "=", e.localWorldSize, " exceeds ", world, "=", e.worldSize));
  if (e.localRank > e.rank)
    throw Error(str(local, "=", e.localRank, " exceeds ", rank, "=", e.rank,
                    " (ranks of earlier hosts come first)"));
}

/// "4(x2),3" -> 4: Slurm's tasks per node, the first node's count.
int firstTaskCount(const std::string &v) {
  int n = 0;
  for (char c : v) {
    if (!std::isdigit(static_cast<unsigned char>(c)))
      break;
    n = n * 10 + (c - '0');
  }
  return n;
}

} // namespace

std::string DistEnv::describe() const {
  return str("rank ", rank, " of ", worldSize, " (local rank ", localRank, ", ", launcher, ")");
}

std::string firstSlurmHost(const std::string &nodelist) {
  auto bad = [&](const char *why) {
    return Error(str("SLURM_NODELIST='", nodelist, "' is not a Slurm host list (", why, ")"));
  };
  // The first top-level item ends at a comma outside brackets; within it each bracket
  // group "[a-b,c]" contributes its first number, leading zeros kept ("01").
  std::string host;
  size_t i = 0;
  while (i < nodelist.size() && nodelist[i] != ',') {
    char c = nodelist[i];
    if (c == ']')
      throw bad("']' without '['");
    if (c != '[') {
      host += c;
      ++i;
      continue;
    }
    size_t close = nodelist.find(']', i);
    if (close == std::string::npos)
      throw bad("'[' without ']'");
    std::string first;
    for (size_t j = i + 1; j < close && std::isdigit(static_cast<unsigned char>(nodelist[j])); ++j)
      first += nodelist[j];
    if (first.empty())
      throw bad("a bracket without a number");
    host += first;
    i = close + 1;
  }
  if (host.empty())
    throw bad("no host");
  return host;
}

DistEnv distEnvFromEnvironment(const EnvLookup &lookup) {
  Reader r{lookup};
  DistEnv e;
  std::optional<long> basePort; // MASTER_PORT or the launcher's convention
  if (r.get("RANK") || r.get("WORLD_SIZE")) {
    e.launcher = "torchrun";
    e.worldSize = r.required("WORLD_SIZE", "torchrun", "RANK", 1);
    e.rank = r.required("RANK", "torchrun", "WORLD_SIZE", 0);
    e.localRank = r.required("LOCAL_RANK", "torchrun", "RANK", 0);
    e.localWorldSize = r.integer("LOCAL_WORLD_SIZE", 1).value_or(0);
    checkRanks(e, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
    e.nonce = r.get("TORCHELASTIC_RUN_ID").value_or("");
  } else if (r.get("OMPI_COMM_WORLD_RANK") || r.get("OMPI_COMM_WORLD_SIZE")) {
    e.launcher = "mpirun";
    e.worldSize = r.required("OMPI_COMM_WORLD_SIZE", "mpirun", "OMPI_COMM_WORLD_RANK", 1);
    e.rank = r.required("OMPI_COMM_WORLD_RANK", "mpirun", "OMPI_COMM_WORLD_SIZE", 0);
    e.localRank = r.required("OMPI_COMM_WORLD_LOCAL_RANK", "mpirun", "OMPI_COMM_WORLD_RANK", 0);
    e.localWorldSize = r.integer("OMPI_COMM_WORLD_LOCAL_SIZE", 1).value_or(0);
    checkRanks(e, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
               "OMPI_COMM_WORLD_LOCAL_SIZE");
    e.nonce = r.get("PMIX_NAMESPACE").value_or(r.get("OMPI_MCA_ess_base_jobid").value_or(""));
  } else if (r.get("SLURM_PROCID") || r.get("SLURM_NTASKS")) {
    e.launcher = "slurm";
    e.worldSize = r.required("SLURM_NTASKS", "srun", "SLURM_PROCID", 1);
    e.rank = r.required("SLURM_PROCID", "srun", "SLURM_NTASKS", 0);
    e.localRank = r.required("SLURM_LOCALID", "srun", "SLURM_PROCID", 0);
    e.localWorldSize = firstTaskCount(r.get("SLURM_NTASKS_PER_NODE").value_or(""));
    if (e.localWorldSize && e.localRank >= e.localWorldSize)
      e.localWorldSize = 0; // the first node's count; this node may run more
    checkRanks(e, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE");
    auto job = r.get("SLURM_JOB_ID");
    if (job) {
      e.nonce = *job + "." + r.get("SLURM_STEP_ID").value_or("");
      if (!r.get("MASTER_PORT")) {
        std::string digits = job->size() > 4 ? job->substr(job->size() - 4) : *job;
        basePort = 15000 + std::strtol(digits.c_str(), nullptr, 10);
      }
    }
    if (!r.get("MASTER_ADDR")) {
      auto nodes = r.get("SLURM_STEP_NODELIST") ? r.get("SLURM_STEP_NODELIST") : r.get("SLURM_NODELIST");
      if (!nodes && e.worldSize > 1)
        throw Error("SLURM_NODELIST is not set (it names rank 0's host); set MASTER_ADDR instead");
      if (nodes)
        e.masterAddr = firstSlurmHost(*nodes);
    }
  }
  if (auto job = r.get("MEDRUN_JOB_ID"))
    e.nonce = *job;

  if (auto addr = r.get("MASTER_ADDR"))
    e.masterAddr = *addr;
  if (e.masterAddr.empty()) {
    if (e.worldSize > 1 && e.localWorldSize != e.worldSize)
      throw Error(str("MASTER_ADDR is not set and the job's ", e.worldSize, " ranks are not all on "
                      "this host (", e.launcher == "mpirun" ? "mpirun -x MASTER_ADDR=HOST" : "set it",
                      " to rank 0's host)"));
    e.masterAddr = "127.0.0.1";
  }
  if (auto port = r.integer("MASTER_PORT", 1, 65534))
    basePort = *port;
  if (auto port = r.integer("MEDRUN_DIST_PORT", 1, 65535))
    e.port = static_cast<int>(*port);
  else
    e.port = static_cast<int>(basePort.value_or(29500) + 1);
  if (auto t = r.get("MEDRUN_DIST_TIMEOUT")) {
    char *end = nullptr;
    e.timeout = std::strtod(t->c_str(), &end);
    if (*end || !(e.timeout > 0))
      throw Error(str("MEDRUN_DIST_TIMEOUT='", *t, "' is not a positive number of seconds"));
  }
  return e;
}

int rankDevice(const DistEnv &env, int visible, const char *cudaVisibleDevices) {
  std::string list = cudaVisibleDevices ? cudaVisibleDevices : "";
  if (visible == 1 && !list.empty() && list.find(',') == std::string::npos)
    return 0;
  if (env.localRank < visible)
    return env.localRank;
  throw Error(str(env.describe(), " uses GPU ", env.localRank, " (its local rank), but the driver "
                  "reports ", visible, " GPU", visible == 1 ? "" : "s", " on this host",
                  list.empty() ? "" : str(" (CUDA_VISIBLE_DEVICES=", list, ")"), ": start at most ",
                  visible, " rank", visible == 1 ? "" : "s", " per host"));
}

DistEnv distEnvFromEnvironment() {
  return distEnvFromEnvironment([](const char *name) { return std::getenv(name); });
}

} // namespace medrun
