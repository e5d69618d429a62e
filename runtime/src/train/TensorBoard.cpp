//===- TensorBoard.cpp - TensorBoard event files without protobuf ------------------===//
//
// The few protobuf fields needed (tensorflow/core/util/event.proto, summary.proto):
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
//             Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; Image image = 4; }
//   Image   { int32 height = 1; int32 width = 2; int32 colorspace = 3;
//             bytes encoded_image_string = 4; }
// A field is a key varint (field number << 3 | wire type: 0 varint, 1 fixed64,
// 2 length-delimited, 5 fixed32) followed by its payload.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Checksum.h"
#include "medrun/Error.h"
#include "medrun/TrainLog.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <unistd.h>

namespace medrun {

namespace {

void putVarint(std::string &out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void putFixed(std::string &out, const void *p, size_t n) { // little-endian host
  out.append(static_cast<const char *>(p), n);
}

void putKey(std::string &out, int field, int wireType) { putVarint(out, field << 3 | wireType); }

void putBytes(std::string &out, int field, const std::string &bytes) {
  putKey(out, field, 2);
  putVarint(out, bytes.size());
  out += bytes;
}

std::string eventHeader(double wallTime) {
  std::string e;
  putKey(e, 1, 1);
  putFixed(e, &wallTime, 8);
  return e;
}

double wallClock() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double monotonic() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void writeAll(int fd, const std::string &data, const std::string &path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t put = ::write(fd, data.data() + done, data.size() - done);
    if (put < 0) {
      if (errno == EINTR)
        continue;
      throw Error(str(path, ": cannot write: ", std::strerror(errno)));
    }
    done += static_cast<size_t>(put);
  }
}

std::atomic<unsigned> fileCounter{0};

} // namespace

std::string detail::tfRecord(const std::string &data) {
  std::string r;
  uint64_t len = data.size();
  putFixed(r, &len, 8);
  uint32_t lenCrc = maskedCrc32c(crc32c(r.data(), 8));
  putFixed(r, &lenCrc, 4);
  r += data;
  uint32_t dataCrc = maskedCrc32c(crc32c(data.data(), data.size()));
  putFixed(r, &dataCrc, 4);
  return r;
}

TensorBoardWriter::TensorBoardWriter(const std::string &logdir, double flushSeconds)
    : flushSeconds_(flushSeconds), lastFlush_(monotonic()) {
  std::error_code ec;
  std::filesystem::create_directories(logdir, ec);
  if (ec)
    throw Error(str(logdir, ": cannot create the log directory: ", ec.message()));
  char host[256] = "localhost";
  if (::gethostname(host, sizeof host - 1) != 0)
    std::strcpy(host, "localhost");
  double now = wallClock();
  // Names are unique: the counter differs within a process, O_EXCL guards across.
  for (;;) {
    char name[400];
    std::snprintf(name, sizeof name, "events.out.tfevents.%010lld.%s.%d.%u",
                  static_cast<long long>(now), host, static_cast<int>(::getpid()),
                  fileCounter++);
    path_ = (std::filesystem::path(logdir) / name).string();
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0666);
    if (fd_ >= 0)
      break;
    if (errno != EEXIST && errno != EINTR)
      throw Error(str(path_, ": cannot create the event file: ", std::strerror(errno)));
  }
  std::string e = eventHeader(now);
  putBytes(e, 3, "brain.Event:2");
  writeRecord(e);
  flush(); // the file is recognisable at once
}

TensorBoardWriter::~TensorBoardWriter() {
  try {
    close();
  } catch (const Error &) {
  }
}

void TensorBoardWriter::addScalars(int64_t step,
                                   const std::vector<std::pair<std::string, double>> &values) {
  if (fd_ < 0)
    throw Error(str(path_, ": the event file is closed"));
  std::string summary;
  for (const auto &[tag, value] : values) {
    std::string v;
    putBytes(v, 1, tag);
    float f = static_cast<float>(value);
    putKey(v, 2, 5);
    putFixed(v, &f, 4);
    putBytes(summary, 1, v);
  }
  std::string e = eventHeader(wallClock());
  putKey(e, 2, 0);
  putVarint(e, static_cast<uint64_t>(step)); // int64: two's complement, 10 bytes if < 0
  putBytes(e, 5, summary);
  writeRecord(e);
  if (monotonic() - lastFlush_ >= flushSeconds_)
    flush();
}

void TensorBoardWriter::addImage(int64_t step, const std::string &tag, const std::string &png,
                                 int width, int height) {
  if (fd_ < 0)
    throw Error(str(path_, ": the event file is closed"));
  std::string image;
  putKey(image, 1, 0);
  putVarint(image, static_cast<uint64_t>(height));
  putKey(image, 2, 0);
  putVarint(image, static_cast<uint64_t>(width));
  putKey(image, 3, 0);
  putVarint(image, 3); // RGB
  putBytes(image, 4, png);
  std::string v;
  putBytes(v, 1, tag);
  putBytes(v, 4, image);
  std::string summary;
  putBytes(summary, 1, v);
  std::string e = eventHeader(wallClock());
  putKey(e, 2, 0);
  putVarint(e, static_cast<uint64_t>(step));
  putBytes(e, 5, summary);
  writeRecord(e);
  if (monotonic() - lastFlush_ >= flushSeconds_)
    flush();
}

void TensorBoardWriter::writeRecord(const std::string &event) {
  pending_ += detail::tfRecord(event);
}

void TensorBoardWriter::flush() {
  if (fd_ >= 0 && !pending_.empty()) {
    std::string data;
    data.swap(pending_);
    writeAll(fd_, data, path_);
  }
  lastFlush_ = monotonic();
}

void TensorBoardWriter::close() {
  if (fd_ < 0)
    return;
  std::string data;
  data.swap(pending_);
  int fd = fd_;
  fd_ = -1;
  try {
    writeAll(fd, data, path_);
  } catch (const Error &) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0)
    throw Error(str(path_, ": cannot close: ", std::strerror(errno)));
}

} // namespace medrun
