// A progress line for long commands (eval, states, ablate, bench). On a terminal it redraws one line
// in place, "[#####.......] 12/64 windows  0m07s left", at most ten times a second; when the stream is
// not a terminal (a log file, a pipe, CI) it prints a plain line at every tenth of the work, so logs
// stay short and readable. It writes to stderr, so that stdout keeps only the command's result (the
// JSON of --json stays parseable).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tttlab::cli {

// "1h02m", "3m07s", "12s"; "?" when unknown.
inline std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long t = std::lround(seconds);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

class ProgressLine {
 public:
  // `what` names the unit of work ("windows", "heads", "runs").
  explicit ProgressLine(std::string what, std::FILE* out = stderr)
      : m_what(std::move(what)), m_out(out), m_tty(isatty(fileno(out)) != 0), m_start(Clock::now()) {}
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine() { finish(); }

  bool on_terminal() const { return m_tty; }

  void update(std::int64_t done, std::int64_t total) {
    if (total <= 0) return;
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - m_start).count();
    if (m_tty) {
      // After finish() (a result line was printed) the bar is drawn again at once.
      if (m_drawn && done < total && now - m_last < std::chrono::milliseconds(100)) return;
    } else {
      const std::int64_t tenth = done * 10 / total;
      if (tenth == m_last_tenth && done < total) return;
      m_last_tenth = tenth;
    }
    m_last = now;
    const double left = done > 0 ? elapsed * double(total - done) / double(done) : NAN;
    constexpr int width = 24;
    const int filled = static_cast<int>(width * done / total);
    std::fprintf(m_out, "%s[%s%s] %lld/%lld %s  %s elapsed, %s left%s", m_tty ? "\r\33[2K" : "",
                 std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(width - filled), '.').c_str(), static_cast<long long>(done),
                 static_cast<long long>(total), m_what.c_str(), format_duration(elapsed).c_str(),
                 format_duration(left).c_str(), m_tty ? "" : "\n");
    std::fflush(m_out);
    m_drawn = true;
  }

  // Clears the line on a terminal (the result printed next starts on a clean line).
  void finish() {
    if (m_tty && m_drawn) std::fprintf(m_out, "\r\33[2K");
    std::fflush(m_out);
    m_drawn = false;
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::string m_what;
  std::FILE* m_out;
  bool m_tty;
  Clock::time_point m_start, m_last{};
  std::int64_t m_last_tenth = -1;
  bool m_drawn = false;
};

}  // namespace tttlab::cli
