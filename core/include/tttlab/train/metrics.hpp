// tttlab/train/metrics.hpp — a run's metrics.jsonl: its one schema, its writer and its reader.
//
// metrics.jsonl holds one JSON object per line, in the order things happened. Every record has an
// integer "step" (optimiser steps done when it was written); the other keys say its kind:
//
//   step   {"step":12,"loss":2.31,"lr":0.0029,"grad_norm":0.84,"skipped":false,"tokens_per_s":5120.5,
//           "elapsed_s":3.25}
//          loss: mean training loss of the batch (nats per byte); grad_norm: before clipping;
//          skipped: the gradient was not finite and the update was skipped; elapsed_s: wall time
//          since the session (or its resumption) started.
//   eval   {"step":50,"val_loss":2.10,"val_bpb":3.03,"val_targets":8192,"val_accuracy":0.41,
//           "val_loss_by_position":[...]}
//          val_loss in nats per byte (or per scored answer on the synthetic tasks), val_bpb = val_loss / ln 2,
//          val_accuracy: next-byte accuracy, the share of scored targets whose most likely byte is the
//          right one (null where a backend did not measure it). val_loss_by_position
//          ([T] mean loss at each position of the window) is written by the final evaluation only,
//          so that the file stays small for long sequences.
//   event  {"step":7,"event":"<kind>","message":"..."}   something worth recording that is neither;
//          kinds: "skipped_step" (a non-finite loss or gradient; the update was skipped), "rollback"
//          (a run of them: back to the last checkpoint with a lower learning rate), "diverged" (the
//          run stopped; session.hpp, DIVERGENCE). Readers skip kinds they do not know.
//
// Numbers that are not finite (a diverged loss) are written as null.
//
// Writing (MetricsLog): each record is one complete line given to the kernel with one write() on a
// descriptor opened with O_APPEND, so a reader (the app, `tail -f`) never sees half a line unless the
// machine dies mid-write; sync() makes the file durable (TrainingSession calls it before every
// checkpoint). Every failure throws FileError naming the file, e.g.
//   cannot append to 'runs/a/metrics.jsonl': No space left on device
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tttlab/io/json.hpp"
#include "tttlab/train/trainer.hpp"

namespace tttlab {

// The records, one function per kind (the schema above).
Json metrics_step_record(const StepReport& r, double tokens_per_s, double elapsed_s);
Json metrics_eval_record(const EvalReport& r, bool with_loss_by_position);
Json metrics_event_record(long step, std::string_view kind, std::string_view message);

// Appends records to a metrics.jsonl. Not copyable; one writer per file.
class MetricsLog {
 public:
  enum class Mode {
    Fresh,   // a new run: the file is created, or emptied when a run that never saved left one
    Append,  // continue an existing file (create it when absent)
  };
  MetricsLog(std::filesystem::path path, Mode mode);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void append(const Json& record);  // one line, one write(); FileError on failure
  void sync();                      // fsync; FileError on failure
  const std::filesystem::path& path() const { return m_path; }

 private:
  std::filesystem::path m_path;
  int m_fd = -1;
};

// Rewrites `path` ATOMICALLY (write_file_atomic) keeping only the complete records whose step is
// <= `step`: what a resumed run keeps of the curve before its checkpoint. Torn or unreadable lines
// (a crash mid-write) are dropped. Does nothing when the file does not exist. Returns the number
// of records kept.
long truncate_metrics(const std::filesystem::path& path, long step);

// The complete records of a metrics.jsonl (objects with an integer "step"), in file order, those
// with step <= `up_to_step` only when it is >= 0. Torn and unreadable lines are skipped. A missing
// file has no records.
std::vector<Json> read_metrics(const std::filesystem::path& path, long up_to_step = -1);

}  // namespace tttlab
