//===- TrainLog.h - training logs: TensorBoard, JSONL, progress ---------------------===//
//
// TensorBoardWriter  scalars in a TensorBoard event file, written without protobuf:
//                    events.out.tfevents.<10-digit unix time>.<host>.<pid>.<n>, a sequence
//                    of records  u64 length | u32 masked CRC-32C of the length | Event
//                    protobuf | u32 masked CRC-32C of the Event. The first Event holds
//                    wall_time and file_version "brain.Event:2"; each later one wall_time,
//                    step and summary { value { tag, simple_value } ... } or
//                    summary { value { tag, image { height, width, colorspace,
//                    encoded_image_string (PNG) } } }.
// JsonlLog           one JSON object per line (step, loss, lr, grad_norm, step_time,
//                    samples_per_s, data_wait and any extra fields), each line written with
//                    one write(2) call as soon as it is logged.
// Progress           on a terminal, a tqdm-like bar redrawn in place; otherwise (pipes, CI,
//                    SLURM) a plain line every `every` steps or `everySeconds`; then a
//                    summary line.
//
// I/O failures are medrun::Error naming the file.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_TRAINLOG_H
#define MEDRUN_TRAINLOG_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace medrun {

//===----------------------------------------------------------------------------------===//
// TensorBoard
//===----------------------------------------------------------------------------------===//

class TensorBoardWriter {
public:
  /// Creates `logdir` if needed and a new event file in it (never reusing a name), and
  /// writes the file_version record. Buffered records are written out when
  /// `flushSeconds` have passed since the last write, by flush() and by close().
  explicit TensorBoardWriter(const std::string &logdir, double flushSeconds = 10.0);
  /// Closes the file; errors at this point are lost (call close() to see them).
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter &) = delete;
  TensorBoardWriter &operator=(const TensorBoardWriter &) = delete;

  /// One Event at `step` holding one scalar per (tag, value); values are stored as float32
  /// (simple_value), as TensorBoard stores them.
  void addScalars(int64_t step, const std::vector<std::pair<std::string, double>> &values);
  void addScalar(const std::string &tag, double value, int64_t step) {
    addScalars(step, {{tag, value}});
  }
  /// One Event at `step` holding an image summary: `png` (the bytes of a PNG file) of
  /// width x height RGB pixels under `tag` (Summary.Value.image: height, width,
  /// colorspace 3, encoded_image_string), as TensorBoard's Images tab reads it.
  void addImage(int64_t step, const std::string &tag, const std::string &png, int width,
                int height);
  void flush();
  void close();
  const std::string &path() const { return path_; }

private:
  void writeRecord(const std::string &event);

  std::string path_;
  int fd_ = -1;
  std::string pending_;
  double flushSeconds_;
  double lastFlush_;
};

namespace detail {
/// The bytes of one TFRecord: framing and both masked CRCs around `data` (for tests).
std::string tfRecord(const std::string &data);
} // namespace detail

//===----------------------------------------------------------------------------------===//
// JSONL metrics
//===----------------------------------------------------------------------------------===//

/// One line of the metrics log. NaN/inf are written as null (JSON has no such numbers).
struct StepRecord {
  int64_t step = 0;
  double loss = 0, lr = 0, gradNorm = 0;
  double stepTime = 0;       ///< seconds of the step, data wait included
  double samplesPerSecond = 0;
  double dataWait = 0;       ///< seconds the step waited for its batch
  nlohmann::ordered_json extra = nlohmann::ordered_json::object(); ///< appended fields
};

class JsonlLog {
public:
  /// A new run (`resumeStep` empty) starts `path` afresh. A resumed run appends to it,
  /// after cutting what follows the checkpoint it resumes from: the first line whose
  /// (0-based) "step" is `*resumeStep` or more and everything after it, and a partial last
  /// line. `*resumeStep` is the checkpoint's step: the count of steps it completed, so the
  /// first step the resumed run logs.
  explicit JsonlLog(const std::string &path, std::optional<int64_t> resumeStep = std::nullopt);
  ~JsonlLog();
  JsonlLog(const JsonlLog &) = delete;
  JsonlLog &operator=(const JsonlLog &) = delete;

  /// Writes `record` (a JSON object) as one line.
  void write(const nlohmann::ordered_json &record);
  /// {"step", "loss", "lr", "grad_norm", "step_time", "samples_per_s", "data_wait", extra...}
  void write(const StepRecord &record);
  const std::string &path() const { return path_; }

private:
  std::string path_;
  int fd_ = -1;
};

//===----------------------------------------------------------------------------------===//
// Progress display
//===----------------------------------------------------------------------------------===//

class Progress {
public:
  enum class Mode { Auto, Bar, Lines }; ///< Auto: Bar if `out` is a terminal (TERM not dumb)

  struct Options {
    int64_t total = 0;   ///< steps of the run; 0 if unknown (no percentage, no ETA)
    int64_t initial = 0; ///< steps already done (resumed run)
    std::string desc = "train";
    Mode mode = Mode::Auto;
    int64_t every = 0;          ///< Lines: a line whenever the step crosses a multiple of this
    double everySeconds = 30.0; ///< Lines: ... or when this long since the last line
    double minRedrawSeconds = 0.1; ///< Bar: redraw at most this often (and on the last step)
    int width = 0;                 ///< Bar: line width; 0 = the terminal's, $COLUMNS or 80
    std::optional<bool> ascii;     ///< Bar: '#' instead of Unicode blocks; default: by locale
    std::function<double()> clock; ///< seconds; default: a monotonic clock
  };

  Progress(FILE *out, Options options);
  /// Ends a bar left unfinished with a newline.
  ~Progress();
  Progress(const Progress &) = delete;
  Progress &operator=(const Progress &) = delete;

  /// `step` steps are done; `postfix` is shown as "name=value" (4 significant digits).
  void update(int64_t step, const std::vector<std::pair<std::string, double>> &postfix = {});
  /// A line of text (a warning, an evaluation result) printed above the bar.
  void message(const std::string &text);
  /// Draws the final state and the summary line "<desc>: done N steps in T (R it/s), ...".
  /// Later calls do nothing.
  void finish(const std::vector<std::pair<std::string, double>> &postfix = {});

  bool isBar() const { return bar_; }

  /// "05:07", "1:02:03" (tqdm's format_interval).
  static std::string formatInterval(double seconds);

private:
  std::string statusText(bool forBar, int width) const;
  void draw();

  FILE *out_;
  Options o_;
  bool bar_;
  bool ascii_;
  double start_, now_, lastUpdateTime_, lastDrawTime_ = -1e300;
  int64_t n_, lastUpdateN_, lastPrintedN_ = -1;
  double rateEma_ = 0, rateWeight_ = 0; ///< moving average of steps/s and its total weight
  double rate_ = 0;                     ///< rateEma_ / rateWeight_ (0: not known yet)
  std::vector<std::pair<std::string, double>> postfix_;
  bool drawn_ = false, finished_ = false;
};

} // namespace medrun

#endif // MEDRUN_TRAINLOG_H
