// Hostile-tester findings for the app and the course: a model whose forward overflows is named with
// core's one message wherever it is used (library, stepper, evaluation, generation, lesson checks);
// state files report unknown keys; what is printed from a file is escaped.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/io/temp_dir.hpp"
#include "course/experiments.hpp"
#include "course/lesson.hpp"
#include "lab/engine/engine.hpp"
#include "lab/evaluation/evaluation_module.hpp"
#include "lab/generation/generation_module.hpp"
#include "lab/models/library_module.hpp"
#include "lab/models/model_library.hpp"
#include "lab/engine/resources.hpp"
#include "lab/engine/snapshot.hpp"
#include "lab/inner_stepper/stepper_module.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/state/state_file.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/model/checkpoint.hpp"

namespace tttlab::lab {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kNonFinite = "gives non-finite outputs (NaN or infinity)";

// tiny-brown with block 0's query/key projection scaled by 1e30: every weight is finite, but the
// inner loss (½‖kW − v‖² with k ~ 1e29) overflows float in the forward.
std::shared_ptr<Model<float>> overflowing_model() {
  const auto dir = find_resource(kShippedModelPath);
  EXPECT_TRUE(dir.has_value());
  std::shared_ptr<Model<float>> m = load_model(*dir);
  bool scaled = false;
  m->for_each_param([&](Eigen::Map<Mat<float>> p, const std::string& name) {
    if (!scaled && name.find("layers.0.") != std::string::npos && name.find("q_proj.weight") != std::string::npos) {
      p *= 1e30f;
      scaled = true;
    }
  });
  EXPECT_TRUE(scaled);
  return m;
}

// A library holding the overflowing model under `id`, put() the way a training run's checkpoint arrives.
std::shared_ptr<ModelLibrary> library_with_overflow(const std::string& id) {
  auto lib = std::make_shared<ModelLibrary>();
  lib->put(id, "diverged run", "runs/diverged/step-40", overflowing_model(), true, 40);
  return lib;
}

template <class M>
std::unique_ptr<Engine> engine_of(std::shared_ptr<ModelLibrary> lib) {
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<M>(std::move(lib)));
  auto e = std::make_unique<Engine>(std::move(mods));
  e->start();
  return e;
}

TEST(LosesNothing, F11_LibraryMarksAPutModelWhoseForwardIsNotFinite) {
  const auto lib = library_with_overflow("run:diverged");
  const ModelInfo* info = lib->view()->find("run:diverged");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->warning, non_finite_model_message("runs/diverged/step-40"));
  // The shipped model, put the same way, carries no warning.
  lib->put("run:fine", "fine run", "runs/fine", lib->get(kShippedModelId), true, 1);
  EXPECT_TRUE(lib->view()->find("run:fine")->warning.empty());
}

TEST(LosesNothing, F11_OpeningAnOverflowingCheckpointShowsTheLoadMessage) {
  testing::TempDir dir;
  const auto src = find_resource(kShippedModelPath);
  ASSERT_TRUE(src);
  fs::copy_file(*src / "config.json", dir / "config.json");
  auto m = overflowing_model();
  save_model_safetensors(*m, dir / "model.safetensors");
  auto lib = std::make_shared<ModelLibrary>();
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<LibraryModule>(lib));
  Engine e(std::move(mods));
  e.start();
  e.post(LibraryOpen{dir.path().string()});
  ASSERT_TRUE(e.wait_quiescent(60s));
  const auto s = e.snapshot()->library;
  ASSERT_TRUE(s);
  EXPECT_NE(s->error.find(kNonFinite), std::string::npos) << s->error;
  EXPECT_NE(s->error.find(dir.path().string()), std::string::npos) << s->error;
}

TEST(LosesNothing, F11_StepperWarnsOnNonFiniteModel) {
  auto e = engine_of<StepperModule>(library_with_overflow("run:diverged"));
  HeadConfig c;
  c.source = HeadSource::Model;
  c.model_id = "run:diverged";
  c.block = 0;
  c.head = 0;
  c.text = "The old man said that the sea was calm.";
  e->post(StepperConfigure{c, c.tokens() - 1});
  ASSERT_TRUE(e->wait_quiescent(60s));
  const auto v = e->snapshot()->stepper;
  ASSERT_TRUE(v->error.empty()) << v->error;
  ASSERT_EQ(v->computed(), c.tokens());
  EXPECT_EQ(v->warning, non_finite_model_message("runs/diverged/step-40"));

  // The same head of the shipped model: no warning.
  c.model_id = kShippedModelId;
  e->post(StepperConfigure{c, c.tokens() - 1});
  ASSERT_TRUE(e->wait_quiescent(60s));
  EXPECT_TRUE(e->snapshot()->stepper->warning.empty()) << e->snapshot()->stepper->warning;
}

TEST(LosesNothing, F11_EvaluationRefusesANonFiniteCurve) {
  auto e = engine_of<EvaluationModule>(library_with_overflow("run:diverged"));
  EvalSettings s;
  s.models = {"run:diverged", kShippedModelId};
  s.data = "sample";
  s.seq_len = 64;
  s.windows = 2;
  e->post(EvaluationRun{s});
  ASSERT_TRUE(e->wait_quiescent(120s));
  const auto v = e->snapshot()->evaluation;
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  EXPECT_EQ(v->curves[0].error, non_finite_model_message("runs/diverged/step-40"));
  EXPECT_TRUE(v->curves[0].loss_by_position.empty()) << "nothing is plotted for it";
  EXPECT_TRUE(v->curves[1].error.empty()) << v->curves[1].error;
  EXPECT_TRUE(std::isfinite(v->curves[1].bpb));
}

TEST(LosesNothing, F11_GenerationStopsOnNonFiniteLogits) {
  auto e = engine_of<GenerationModule>(library_with_overflow("run:diverged"));
  GenSettings s;
  s.model_id = "run:diverged";
  s.prompt = "The man";
  s.max_tokens = 8;
  s.tokens_per_second = 1e6;
  s.seed = 5;
  e->post(GenerateStart{s});
  ASSERT_TRUE(e->wait_quiescent(60s));
  const auto v = e->snapshot()->generation;
  EXPECT_FALSE(v->running);
  EXPECT_EQ(v->error, non_finite_model_message("runs/diverged/step-40"));
}

// ---- the lesson checker ----------------------------------------------------------------------------

TEST(LosesNothing, F11_LessonCheckFailsANonFiniteMeasure) {
  // An evaluation whose curve has a NaN loss (and no error): bpb_0 would be NaN.
  Snapshot s;
  auto ev = std::make_shared<EvaluationView>();
  ev->generation = 1;
  ev->outcome = JobOutcome::Done;
  EvalCurve c;
  c.model_id = "run:diverged";
  c.label = "diverged run";
  c.loss_by_position.assign(64, std::nan(""));
  c.loss = c.bpb = std::nan("");
  c.windows_done = 2;
  ev->curves.push_back(c);
  s.evaluation = ev;
  try {
    course::read_measures("evaluation", s);
    ADD_FAILURE() << "a NaN measure was accepted";
  } catch (const course::LessonError& e) {
    EXPECT_NE(std::string(e.what()).find(kNonFinite), std::string::npos) << e.what();
  }

  // The stepper on a model that overflows: its fraction of loss drops is a finite 0 (NaN < NaN is
  // false), so the view's warning fails the experiment.
  auto e = engine_of<StepperModule>(library_with_overflow("run:diverged"));
  HeadConfig h;
  h.model_id = "run:diverged";
  h.text = "abcdefghijklmnopqrstuvwxyz";
  e->post(StepperConfigure{h, h.tokens() - 1});
  ASSERT_TRUE(e->wait_quiescent(60s));
  Snapshot st;
  st.stepper = e->snapshot()->stepper;
  try {
    course::read_measures("inner_stepper", st);
    ADD_FAILURE() << "the stepper's measures on an overflowing model were accepted";
  } catch (const course::LessonError& ex) {
    EXPECT_NE(std::string(ex.what()).find(kNonFinite), std::string::npos) << ex.what();
  }
}

}  // namespace
}  // namespace tttlab::lab

namespace tttlab::lab {
namespace {

namespace fs = std::filesystem;

// ---- state files: unknown keys are named -------------------------------------------------------------

TEST(LosesNothing, F17_UnknownKeysInStateFilesAreNamed) {
  const std::string text = R"({"format": "tttlab-state", "version": 1, "app": "tttlab 0.1.0", "colour": "red",
      "panels": {"p": {"d": 8, "sped": 3, "head": {"seed": 4, "sede": 5}}, "x": {"free": 1}}})";
  KeyLog keys;
  mark_envelope_keys(keys);
  const nlohmann::json doc = parse_state(text, "view.tttlab");
  const FieldReader panels = FieldReader(doc, "").object("panels");
  const FieldReader p = panels.object("p");
  p.integer("d", 1, 64, 16);
  p.object("head").uint64("seed", 7);
  panels.has("p");
  EXPECT_EQ(keys.unknown(doc),
            (std::vector<std::string>{"colour", "panels.p.head.sede", "panels.p.sped", "panels.x"}));
  // An object read some other way (no FieldReader on it) is not judged: marked, nothing in it is reported.
  keys.mark("panels.x");
  EXPECT_EQ(keys.unknown(doc), (std::vector<std::string>{"colour", "panels.p.head.sede", "panels.p.sped"}));
  const auto notes = keys.notes(doc, "dir/view\x1b[2J.tttlab");
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_EQ(notes[2], "dir/view\\x1b[2J.tttlab: unknown key \"panels.p.sped\" (ignored)");
  // A hostile key is escaped in the note.
  KeyLog other;
  const nlohmann::json bad = nlohmann::json::parse(R"({"a\u001b": 1})");
  (void)FieldReader(bad, "");
  const auto n = other.notes(bad, "f.tttlab");
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].find('\x1b'), std::string::npos) << n[0];
}

TEST(LosesNothing, F17_OutOfRangeSeedsAreRefusedNamingTheField) {
  for (const char* seed : {"-1", "18446744073709551616", "1.5", "\"7\""}) {
    const nlohmann::json doc = nlohmann::json::parse(std::string(R"({"head": {"seed": )") + seed + "}}");
    try {
      const std::uint64_t got = FieldReader(doc, "panels.inner_stepper").object("head").uint64("seed", 7);
      ADD_FAILURE() << "seed " << seed << " was read as " << got;
    } catch (const StateError& e) {
      EXPECT_NE(std::string(e.what()).find("panels.inner_stepper.head.seed"), std::string::npos) << e.what();
    }
  }
}

// ---- lessons: a malformed lesson is named; control bytes never reach a terminal ----------------------

const char* kLessonBody = R"(
goal: See it.
duration: 5
scene: x.tttlab
---
# A lesson

```predict
ask: Which?
measure: tokens
choice: Many | > 1
choice: Few | <= 1
```
```check
claim: There are tokens.
measure: tokens
expect: > 0
```
)";

void write_text(const fs::path& p, const std::string& text) { write_file_atomic(p, std::string_view(text)); }

TEST(LosesNothing, F17_AMalformedLessonIsNamedWhenAskedFor) {
  testing::TempDir dir;
  write_text(dir / "05-broken.md", "---\ntitle: Broken\n");
  const course::Course c = course::load_course(dir.path());
  EXPECT_EQ(c.find("05"), nullptr);
  const std::string* e = c.find_error("05");
  ASSERT_NE(e, nullptr) << "the malformed lesson is not found by its number";
  EXPECT_NE(e->find((dir / "05-broken.md").generic_string()), std::string::npos) << *e;
  EXPECT_NE(c.find_error("05-broken"), nullptr);
  EXPECT_EQ(c.find_error("06"), nullptr);
}

TEST(LosesNothing, F12_ControlBytesInLessonFilesAreEscaped) {
  testing::TempDir dir;
  write_text(dir / "x.tttlab", R"({"format": "tttlab-state", "version": 1, "active_panel": "inner_stepper"})");
  write_text(dir / "01-esc\x1b]0;owned\x07.md", std::string("---\ntitle: Ti\x1b[2Jtle\x1b]0;pwned\x07") + kLessonBody);
  write_text(dir / "02-bad\x1b[31m.md", "---\ntitle: \x1b[31mred\n");
  const course::Course c = course::load_course(dir.path());
  ASSERT_EQ(c.lessons.size(), 1u);
  const course::Lesson& l = c.lessons[0];
  for (const std::string& s : {l.name, l.title, l.goal, l.checks[0].claim})
    EXPECT_EQ(s.find('\x1b'), std::string::npos) << s;
  EXPECT_NE(l.title.find("\\x1b[2J"), std::string::npos) << l.title;
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_EQ(c.errors[0].second.find('\x1b'), std::string::npos) << c.errors[0].second;
  EXPECT_NE(c.errors[0].second.find("02-bad\\x1b[31m.md"), std::string::npos) << c.errors[0].second;
}

}  // namespace
}  // namespace tttlab::lab
