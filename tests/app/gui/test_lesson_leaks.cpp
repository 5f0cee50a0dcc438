// The prediction gate, on every lesson of the course: before a prediction is locked in, nothing the
// lesson pane or the veil draws gives its answer away.
//
// For each lesson in lessons/, every experiment the lesson reads is "measured" first, with synthetic,
// distinctive values (7.3141 + k for the k-th measure, so each can be searched for as the app writes
// it), as if the student had pressed "Check it now" everywhere before predicting, and every question's
// hint and answer is opened. Then the predictions
// are walked in order. Before each is locked in, the pane is drawn (several frames) and everything it
// draws is read back through ImGui's log; it must contain none of: this or any later prediction's
// reveal text, a question's answer, a gated check's result or expected range, the lesson's "The
// reveal" section, or the measured value of a prediction not locked in or of a gated check. The view
// must be veiled whenever it shows the experiment of a prediction not locked in. Then the prediction
// is locked in and measured, and its own value and reveal must now be drawn (so the reading works).
#include <gtest/gtest.h>
#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "app/gui/headless_imgui.hpp"
#include "course/lesson.hpp"
#include "course/lesson_session.hpp"
#include "course/markdown.hpp"
#include "gui/lab.hpp"
#include "gui/lessons/lesson_pane.hpp"
#include "gui/lessons/lesson_widgets.hpp"
#include "lab/engine/snapshot.hpp"

namespace tttlab::gui {
namespace {

namespace fs = std::filesystem;

using testing::NullSink;

// Text compared without any whitespace: the log separates words, runs and lines with spaces and
// newlines that the source text does not have in the same places.
std::string squeeze(const std::string& s) {
  std::string out;
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c))) out += c;
  return out;
}

// What a student reads of a Markdown text (inline markup removed), squeezed.
std::string plain(const std::string& markdown) {
  std::string out;
  try {
    for (const auto& b : course::parse_markdown(markdown).blocks)
      for (const auto& r : b.runs) out += r.text;
  } catch (const std::exception&) {
    out = markdown;
  }
  return squeeze(out);
}

// The blocks of each "## The reveal" section, with the part it is in.
std::vector<std::pair<std::size_t, std::string>> reveal_sections(const course::Lesson& L) {
  std::vector<std::pair<std::size_t, std::string>> out;
  for (std::size_t k = 0; k < L.parts.size(); ++k) {
    if (L.parts[k].kind != course::LessonPart::Kind::Markdown) continue;
    const std::string& md = L.parts[k].markdown;
    std::size_t at = md.find("## The reveal");
    while (at != std::string::npos) {
      const std::size_t body = md.find('\n', at);
      if (body == std::string::npos) break;
      std::size_t end = md.find("\n## ", body);
      if (end == std::string::npos) end = md.size();
      try {  // block by block (a paragraph, a list item): each must be absent on its own
        for (const auto& b : course::parse_markdown(md.substr(body + 1, end - body - 1)).blocks) {
          std::string text;
          for (const auto& r : b.runs) text += r.text;
          if (squeeze(text).size() >= 24) out.emplace_back(k, squeeze(text));
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << L.name << ": its reveal section does not parse: " << e.what();
      }
      at = md.find("## The reveal", end);
    }
  }
  return out;
}

class LessonLeaks : public ::testing::Test {
 protected:
  void SetUp() override {
    // A pane tall enough that nothing in it is clipped: everything drawn is also logged.
    testing::start_headless_imgui(ImVec2(1280, 40000));
  }
  void TearDown() override { ImGui::DestroyContext(); }

  // One frame of the pane (460 px wide, as docked at 1280 × 720) and, when the app would draw it, the
  // veil; returns every text drawn.
  std::string frame(LessonSession& s, const LessonPaneHost& host) {
    ImGuiContext& g = *GImGui;
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImVec2(460, 40000));
    ImGui::Begin("##pane", nullptr, ImGuiWindowFlags_NoDecoration);
    g.LogBuffer.clear();
    ImGui::LogToBuffer();
    draw_lesson_pane(s, m_snap, m_sink, host);
    std::string text = g.LogBuffer.c_str();  // before LogFinish, which empties it
    ImGui::LogFinish();
    ImGui::End();
    if (s.veiled()) {
      ImGui::SetNextWindowPos(ImVec2(460, 0));
      ImGui::SetNextWindowSize(ImVec2(820, 720));
      ImGui::Begin("##view", nullptr, ImGuiWindowFlags_NoDecoration);
      g.LogBuffer.clear();
      ImGui::LogToBuffer();
      draw_lesson_veil(s);
      text += "\n";
      text += g.LogBuffer.c_str();
      ImGui::LogFinish();
      ImGui::End();
    }
    ImGui::Render();
    return text;
  }

  Snapshot m_snap;
  NullSink m_sink;
};

TEST_F(LessonLeaks, NoLessonShowsAnAnswerBeforeItsPredictionIsLockedIn) {
  const course::Course course = course::load_course(fs::path(TTTLAB_SOURCE_DIR) / "lessons");
  ASSERT_TRUE(course.errors.empty()) << course.errors.front().second;
  ASSERT_GE(course.lessons.size(), 15u);
  LessonPaneHost host;
  host.open_scene = [](const fs::path&) { return true; };
  host.engine_quiet = [] { return true; };

  int lessons_walked = 0;
  for (const course::Lesson& L : course.lessons) {
    SCOPED_TRACE(L.name);
    LessonSession s(L, nullptr);

    // Synthetic measures: one distinctive value per (experiment, measure) the lesson reads.
    using Key = std::pair<std::string, std::string>;
    std::map<Key, double> value;
    std::map<std::string, course::Measures> measures;
    std::set<std::string> experiments{""};
    const auto add = [&](const std::string& e, const std::string& m) {
      experiments.insert(e);
      if (value.count({e, m})) return;
      const double v = 7.3141 + static_cast<double>(value.size());
      measures[e][m] = course::Measurement{v, std::nullopt, std::nullopt, false};
      value[{e, m}] = v;
    };
    for (const auto& p : L.predictions) add(p.experiment, p.measure);
    for (const auto& c : L.checks) add(c.experiment, c.measure);
    // Each value as the pane writes it, with the pane's own formatting: a prediction's reveal and a
    // check's result line may write the same measure differently (a percentage, a plain number).
    const auto shown_p = [&](const course::Prediction& p) {
      return squeeze(lesson_ui::measured_text(p, value.at({p.experiment, p.measure})));
    };
    const auto shown_c = [&](const course::Check& c) {
      return squeeze(lesson_ui::measured_text(c, value.at({c.experiment, c.measure})));
    };
    for (const auto& x : L.experiments) experiments.insert(x.id);
    // "Check it now" on every experiment, and every hint and answer opened, before any prediction.
    for (const auto& [e, m] : measures) s.apply_measures(e, m);
    for (std::size_t q = 0; q < L.questions.size(); ++q) {
      s.show_hint(static_cast<int>(q), true);
      s.show_answer(static_cast<int>(q), true);
    }

    const auto reveals = reveal_sections(L);
    std::vector<std::size_t> part_of_prediction(L.predictions.size());
    for (std::size_t k = 0; k < L.parts.size(); ++k)
      if (L.parts[k].kind == course::LessonPart::Kind::Prediction)
        part_of_prediction[static_cast<std::size_t>(L.parts[k].index)] = k;

    for (std::size_t i = 0; i < L.predictions.size(); ++i) {
      const course::Prediction& p = L.predictions[i];
      SCOPED_TRACE("before locking in prediction " + std::to_string(i + 1) + " (" + p.id + ")");

      // The veil, for each view the lesson can show.
      for (const std::string& e : experiments) {
        s.view_opened(e);
        bool asks = false;
        for (std::size_t j = i; j < L.predictions.size(); ++j) asks = asks || L.predictions[j].experiment == e;
        EXPECT_EQ(s.veiled(), asks) << "the view showing experiment \"" << e << "\"";
      }
      s.view_opened(p.experiment);
      ASSERT_TRUE(s.veiled()) << "the view shows what this prediction asks about";

      // What must not be drawn yet.
      std::vector<std::pair<std::string, std::string>> secrets;  // what, text
      for (std::size_t j = i; j < L.predictions.size(); ++j) {
        const course::Prediction& q = L.predictions[j];
        if (!q.reveal.empty())
          secrets.emplace_back("the reveal of prediction " + std::to_string(j + 1), plain(q.reveal));
        secrets.emplace_back("the measured value of prediction " + std::to_string(j + 1), shown_p(q));
        for (const auto& ck : L.checks)  // the same value as a check on it would write it
          if (ck.experiment == q.experiment && ck.measure == q.measure)
            secrets.emplace_back("the measured value of prediction " + std::to_string(j + 1) + ", as a check writes it",
                                 shown_c(ck));
      }
      for (std::size_t q = 0; q < L.questions.size(); ++q)
        if (!L.questions[q].answer.empty())
          secrets.emplace_back("the answer to question " + std::to_string(q + 1), plain(L.questions[q].answer));
      // A gated check may read a value already shown: by an open check, or by a prediction revealed above.
      std::set<Key> open_values;
      std::set<std::string> open_expects;
      for (std::size_t j = 0; j < i; ++j) open_values.insert({L.predictions[j].experiment, L.predictions[j].measure});
      for (std::size_t c = 0; c < L.checks.size(); ++c)
        if (s.check_open(static_cast<int>(c))) {
          open_values.insert({L.checks[c].experiment, L.checks[c].measure});
          open_expects.insert(squeeze(L.checks[c].expect.text));
        }
      for (std::size_t c = 0; c < L.checks.size(); ++c) {
        const course::Check& ck = L.checks[c];
        if (s.check_open(static_cast<int>(c))) continue;
        if (!open_values.count({ck.experiment, ck.measure}))
          secrets.emplace_back("the result of gated check " + std::to_string(c + 1), shown_c(ck));
        if (!open_expects.count(squeeze(ck.expect.text)))
          secrets.emplace_back("the expected range of gated check " + std::to_string(c + 1),
                               squeeze("(the lesson expects " + ck.expect.text + ")"));
      }
      for (const auto& [part, para] : reveals)
        if (part > part_of_prediction[i]) secrets.emplace_back("\"The reveal\" section", para);

      for (int f = 0; f < 3; ++f) {
        const std::string drawn = squeeze(frame(s, host));
        ASSERT_NE(drawn.find(plain(p.ask)), std::string::npos) << "the prediction itself is drawn (else the log reads nothing): " << plain(p.ask);
        for (const auto& [what, text] : secrets)
          EXPECT_EQ(drawn.find(text), std::string::npos) << what << " is drawn: \"" << text << "\"";
      }
      if (HasFailure()) return;  // one lesson's leak at a time

      // Lock it in and measure it (the student's "Run the experiment"): its value and reveal appear.
      if (!p.is_slider()) s.choose(static_cast<int>(i), 0);
      ASSERT_TRUE(s.lock(static_cast<int>(i)));
      s.apply_measures(p.experiment, measures.at(p.experiment));
      ASSERT_TRUE(s.prediction(static_cast<int>(i)).revealed);
      const std::string drawn = squeeze(frame(s, host));
      EXPECT_NE(drawn.find(shown_p(p)), std::string::npos)
          << "the measured value is drawn once the prediction is locked in and measured";
      if (!p.reveal.empty()) {
        EXPECT_NE(drawn.find(plain(p.reveal)), std::string::npos) << "its reveal is drawn";
      }
    }

    // Everything locked in: no veil, the whole lesson drawn, every check's value shown.
    for (const std::string& e : experiments) {
      s.view_opened(e);
      EXPECT_FALSE(s.veiled()) << e;
    }
    const std::string drawn = squeeze(frame(s, host));
    for (const auto& [part, para] : reveals) EXPECT_NE(drawn.find(para), std::string::npos) << para;
    for (const auto& q : L.questions) {
      if (!q.answer.empty()) {
        EXPECT_NE(drawn.find(plain(q.answer)), std::string::npos) << "an opened answer is drawn";
      }
    }
    for (std::size_t c = 0; c < L.checks.size(); ++c) {
      EXPECT_TRUE(s.check_open(static_cast<int>(c))) << "check " << c + 1;
      EXPECT_NE(drawn.find(shown_c(L.checks[c])), std::string::npos)
          << "the value of check " << c + 1;
    }
    ++lessons_walked;
  }
  EXPECT_EQ(lessons_walked, static_cast<int>(course.lessons.size()));
}

// The reveal writes a fraction as a percentage when the choices speak in percent, and a check's result
// as its expected range is written; the leak test above searches for exactly these strings.
TEST(LessonValues, ChoicesInPercentShowThePercentage) {
  course::Prediction p;
  p.choices = {{"More than 40 %.", course::Expectation::parse("> 0.4")},
               {"Less.", course::Expectation::parse("<= 0.4")}};
  EXPECT_EQ(lesson_ui::measured_text(p, 0.4893), "48.93 %");
  EXPECT_EQ(lesson_ui::measured_text(p, 0.5, 0.47, 0.52), "50 %  (47 \xE2\x80\x93 52)");
  p.choices[0].text = "More than 0.4.";
  EXPECT_EQ(lesson_ui::measured_text(p, 0.4893), "0.4893");
  course::Check c;
  EXPECT_EQ(lesson_ui::measured_text(c, 0.4893), "0.4893");
}

}  // namespace
}  // namespace tttlab::gui
