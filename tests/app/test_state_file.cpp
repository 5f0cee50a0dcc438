// .tttlab state files (state_file.hpp), checked field reads (json_fields.hpp) and the head settings
// they carry (head_config.hpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/io/temp_dir.hpp"
#include "course/classroom.hpp"
#include "lab/engine/head_config.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/state/state_file.hpp"

namespace tttlab::lab {
namespace {

using namespace tttlab::course;  // the lessons and classroom mode, over the lab

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const StateError& e) {
    return e.what();
  }
  return "(no error)";
}

using tttlab::testing::TempDir;

TEST(StateFile, RejectsWhatIsNotAStateFileWithAClearMessage) {
  EXPECT_NE(error_of([] { parse_state("{\"panels\": {}", "x.tttlab"); }).find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_state("{\n \"a\": 1,\n}", "x.tttlab"); }).find("line 3"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_state("[1, 2]", "x.tttlab"); }).find("not a TTT Lab state file"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_state("{\"panels\": {}}", "x.tttlab"); }).find("\"format\""),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_state("{\"format\": \"tttlab-state\", \"version\": 99}", "x.tttlab");
            }).find("newer TTT Lab"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_state("{\"format\": \"tttlab-state\", \"panels\": 3}", "x.tttlab");
            }).find("panels: expected an object"),
            std::string::npos);
  EXPECT_EQ(error_of([] { parse_state("{\"format\": \"tttlab-state\"}", "x.tttlab"); }),
            "(no error)");
}

// A 200 KB file of nested arrays used to crash the app (the deep value overflowed the stack); it is
// now refused while parsing, and a state file at the cap's edge still reads.
TEST(StateFile, DeeplyNestedFilesAreRefusedNotACrash) {
  const std::string deep = "{\"format\": \"tttlab-state\", \"version\": " + std::string(100000, '[') +
                           std::string(100000, ']') + "}";
  EXPECT_NE(error_of([&] { parse_state(deep, "deep.tttlab"); }).find("deep.tttlab nests arrays and objects"),
            std::string::npos);
  const std::string nested_60 = "{\"format\": \"tttlab-state\", \"panels\": {\"x\": " +
                                std::string(60, '[') + std::string(60, ']') + "}}";
  EXPECT_EQ(error_of([&] { parse_state(nested_60, "ok.tttlab"); }), "(no error)");
}

TEST(StateFile, WriteThenReadGivesTheSameDocument) {
  TempDir dir;
  const fs::path p = dir.path() / "view.tttlab";
  nlohmann::json panels = {{"inner_stepper", {{"cursor", 12}, {"head", to_json(HeadConfig{})}}}};
  const auto doc = make_state("inner_stepper", panels);
  write_state_file(p, doc);
  EXPECT_EQ(read_state_file(p), doc);
  EXPECT_FALSE(fs::exists(p.string() + ".tmp"));
}

TEST(StateFile, FileProblemsAreStateErrors) {
  TempDir dir;
  EXPECT_NE(error_of([&] { read_state_file(dir.path() / "missing.tttlab"); }).find("no such file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_state_file(dir.path()); }).find("is a directory"), std::string::npos);
  EXPECT_NE(error_of([&] {
              write_state_file(dir.path() / "no_such_dir" / "x.tttlab", make_state("a", {}));
            }).find("no_such_dir' does not exist"),
            std::string::npos);
  const fs::path binary = dir.path() / "binary.tttlab";
  std::ofstream(binary, std::ios::binary) << std::string("\x89PNG\r\n\x1a\n\0\0", 10);
  EXPECT_NE(error_of([&] { read_state_file(binary); }).find("not valid JSON"), std::string::npos);
}

TEST(FieldReader, NamesTheFieldAndTheExpectation) {
  const auto j = nlohmann::json::parse(R"({"d": 100, "b": "x", "gate": "sigmoid", "flag": 1,
                                            "eta": -1.0, "sub": {"seed": -3}})");
  FieldReader r(j, "panels.p");
  EXPECT_EQ(error_of([&] { r.integer("d", 2, 64, 16); }),
            "panels.p.d: expected an integer in [2, 64], got 100");
  EXPECT_EQ(error_of([&] { r.integer("b", 1, 9, 1); }),
            "panels.p.b: expected an integer in [1, 9], got \"x\"");
  EXPECT_EQ(error_of([&] { r.choice("gate", {"learned", "fixed"}, 0); }),
            "panels.p.gate: expected one of \"learned\", \"fixed\", got \"sigmoid\"");
  EXPECT_EQ(error_of([&] { r.boolean("flag", false); }),
            "panels.p.flag: expected true or false, got number");
  EXPECT_NE(error_of([&] { r.number("eta", 0.0, 10.0, 1.0); }).find("panels.p.eta"),
            std::string::npos);
  EXPECT_NE(error_of([&] { r.object("sub").uint64("seed", 1); }).find("panels.p.sub.seed"),
            std::string::npos);
  EXPECT_EQ(r.integer("absent", 0, 5, 4), 4);
  EXPECT_EQ(error_of([&] { FieldReader bad(nlohmann::json(3), "x"); }),
            "x: expected an object, got number");
}

TEST(HeadConfigJson, RoundTripsEveryField) {
  HeadConfig c;
  c.source = HeadSource::Toy;
  c.model_id = "file:/some/run";
  c.block = 3;
  c.head = 2;
  c.override_model = true;
  c.text = "abc, \"quoted\"\nnew line";
  c.seed = 0xFFFFFFFFFFFFFFFFull;
  c.repeat = 3;
  c.model = InnerModel::MLP;
  c.d = 8;
  c.mini_batch = 5;
  c.eta_base = 0.125;
  c.gate = EtaGate::Fixed;
  c.token_index = false;
  c.layer_norm = false;
  c.residual = false;
  c.bias = false;
  c.w0 = W0Init::Random;
  const nlohmann::json j = nlohmann::json::parse(to_json(c).dump());
  EXPECT_EQ(head_config_from(FieldReader(j, "head")), c);
  // Missing fields keep the defaults.
  EXPECT_EQ(head_config_from(FieldReader(nlohmann::json::object(), "head")), HeadConfig{});
}

TEST(HeadConfigValidate, RejectsUnusableSettingsWithActionableText) {
  const HeadLimits lim;
  HeadConfig c;
  EXPECT_NO_THROW(validate(c, lim));
  c.text.clear();
  EXPECT_THROW(validate(c, lim), std::invalid_argument);
  c = HeadConfig{};
  c.text = std::string(600, 'a');
  try {
    validate(c, lim);
    ADD_FAILURE() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("600 tokens"), std::string::npos);
  }
  c = HeadConfig{};
  c.source = HeadSource::Toy;
  c.model = InnerModel::MLP;
  c.d = 64;  // allowed for Linear, too large for MLP
  EXPECT_THROW(validate(c, lim), std::invalid_argument);
  c.model = InnerModel::Linear;
  EXPECT_NO_THROW(validate(c, lim));
  c.mini_batch = 0;
  EXPECT_THROW(validate(c, lim), std::invalid_argument);
}

// The classroom keys of a state file: the hint and answer switches round-trip, default to allowed
// in files written before they existed, and only bite while classroom mode is on.
TEST(ClassroomJson, HintAndAnswerSwitchesRoundTripWithOldFilesAllowingBoth) {
  ClassroomState s;
  s.enabled = true;
  s.allow_hints = false;
  s.allow_answers = true;
  const nlohmann::json j = nlohmann::json::parse(classroom::to_json(s).dump());
  EXPECT_EQ(j.at("allow_hints"), false);
  EXPECT_EQ(j.at("allow_answers"), true);
  EXPECT_EQ(classroom::from_json(FieldReader(j, "classroom")), s);

  const auto old = nlohmann::json::parse(R"({"enabled": true, "hidden": [], "hide_panel_list": false})");
  const ClassroomState o = classroom::from_json(FieldReader(old, "classroom"));
  EXPECT_TRUE(o.allow_hints);
  EXPECT_TRUE(o.allow_answers);

  EXPECT_EQ(error_of([] {
              classroom::from_json(FieldReader(nlohmann::json::parse(R"({"allow_answers": "no"})"), "classroom"));
            }),
            "classroom.allow_answers: expected true or false, got string");

  classroom::set(s);
  EXPECT_FALSE(classroom::hints_allowed());
  EXPECT_TRUE(classroom::answers_allowed());
  s.enabled = false;
  classroom::set(s);
  EXPECT_TRUE(classroom::hints_allowed()) << "outside classroom mode nothing is hidden";
  classroom::set(ClassroomState{});
}

}  // namespace
}  // namespace tttlab::lab
