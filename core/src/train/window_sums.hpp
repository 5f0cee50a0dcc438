// core/src/train/window_sums.hpp — the sums of an evaluation over windows on the CPU (the CPU
// backend's and the Trainer's synthetic tasks'), one slot per worker thread.
//
// Each thread adds only to its own slot and report() adds the slots in thread order, so the result is
// the same for a given thread count however the threads were scheduled.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "tttlab/nn/cross_entropy.hpp"
#include "tttlab/tensor.hpp"
#include "tttlab/train/backend.hpp"

namespace tttlab {

class WindowSums {
 public:
  WindowSums(int threads, int seq_len)
      : m_seq_len(seq_len),
        m_loss(threads, 0.0),
        m_count(threads, 0),
        m_correct(threads, 0),
        m_by_pos(threads, std::vector<double>(seq_len, 0.0)) {}

  // One window scored by `thread`: its statistics and its per-position losses ([seq_len]).
  void add(int thread, const CrossEntropyStats& st, const Vec<float>& pos) {
    m_loss[thread] += st.loss_sum;
    m_count[thread] += st.counted;
    m_correct[thread] += st.correct;
    for (int t = 0; t < m_seq_len; ++t) m_by_pos[thread][t] += pos(t);
  }

  // Loss, bits per byte and accuracy over every scored target; loss by position as the mean over the
  // `windows` windows.
  EvalReport report(std::int64_t windows) const {
    EvalReport r;
    double total = 0;
    long right = 0;
    for (std::size_t i = 0; i < m_loss.size(); ++i) {
      total += m_loss[i];
      r.targets += m_count[i];
      right += m_correct[i];
    }
    r.loss = total / double(r.targets);
    r.bpb = r.loss / std::log(2.0);
    r.accuracy = r.targets ? double(right) / double(r.targets) : 0.0;
    r.accuracy_measured = true;
    r.loss_by_position.assign(m_seq_len, 0.0);
    for (const auto& by_pos : m_by_pos)
      for (int t = 0; t < m_seq_len; ++t) r.loss_by_position[t] += by_pos[t] / double(windows);
    return r;
  }

 private:
  int m_seq_len;
  std::vector<double> m_loss;
  std::vector<long> m_count, m_correct;
  std::vector<std::vector<double>> m_by_pos;
};

}  // namespace tttlab
