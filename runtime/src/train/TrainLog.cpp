//===- TrainLog.cpp - the JSONL metrics log ----------------------------------------===//
#include "medrun/Error.h"
#include "medrun/TrainLog.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include <fcntl.h>
#include <unistd.h>

namespace medrun {

using Json = nlohmann::ordered_json;

namespace {

Json number(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

/// Byte offset where a resumed log is cut: the start of the first line of 0-based step
/// `resumeStep` or later (a checkpoint of step N holds N completed steps, 0..N-1), or of a
/// partial last line; the file size if nothing is cut.
uint64_t resumeOffset(const std::string &path, int64_t resumeStep) {
  std::ifstream in(path, std::ios::binary);
  uint64_t offset = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) // no newline: a line cut short by a crash
      return offset;
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
        j["step"].get<int64_t>() >= resumeStep)
      return offset;
    offset += line.size() + 1;
  }
  return offset;
}

} // namespace

JsonlLog::JsonlLog(const std::string &path, std::optional<int64_t> resumeStep) : path_(path) {
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
  if (!resumeStep)
    flags |= O_TRUNC;
  fd_ = ::open(path.c_str(), flags, 0666);
  if (fd_ < 0)
    throw Error(str(path, ": cannot open the metrics log: ", std::strerror(errno)));
  if (resumeStep && ::ftruncate(fd_, static_cast<off_t>(resumeOffset(path, *resumeStep))) != 0) {
    int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw Error(str(path, ": cannot cut the metrics log at step ", *resumeStep, ": ",
                    std::strerror(err)));
  }
}

JsonlLog::~JsonlLog() {
  if (fd_ >= 0)
    ::close(fd_);
}

void JsonlLog::write(const Json &record) {
  if (!record.is_object())
    throw Error(str(path_, ": a metrics log line must be a JSON object, got ", record.dump()));
  std::string line = record.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  // One write(2) per line (O_APPEND): a line is never interleaved or held in a buffer.
  size_t done = 0;
  while (done < line.size()) {
    ssize_t put = ::write(fd_, line.data() + done, line.size() - done);
    if (put < 0) {
      if (errno == EINTR)
        continue;
      throw Error(str(path_, ": cannot write: ", std::strerror(errno)));
    }
    done += static_cast<size_t>(put);
  }
}

void JsonlLog::write(const StepRecord &r) {
  Json j = {{"step", r.step},
            {"loss", number(r.loss)},
            {"lr", number(r.lr)},
            {"grad_norm", number(r.gradNorm)},
            {"step_time", number(r.stepTime)},
            {"samples_per_s", number(r.samplesPerSecond)},
            {"data_wait", number(r.dataWait)}};
  if (!r.extra.is_null() && !r.extra.is_object())
    throw Error(str(path_, ": the extra fields of step ", r.step, " must be a JSON object"));
  for (const auto &[k, v] : r.extra.items()) {
    if (j.contains(k))
      throw Error(str(path_, ": extra field '", k, "' of step ", r.step,
                      " repeats a standard field"));
    j[k] = v.is_number_float() ? number(v.get<double>()) : v;
  }
  write(j);
}

} // namespace medrun
