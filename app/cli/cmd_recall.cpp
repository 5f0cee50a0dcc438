// `tttlab recall`: the recall lab's table without the GUI (tttlab/analysis/recall.hpp, docs/MATH.md
// §9.4). For every member and number of pairs P: the fraction of the P pairs recalled after reading
// all of them, over `--sequences` episodes per seed, as the mean and sample standard deviation over
// the seeds, with the numbers the member holds after P pairs (weights, and weights plus buffers).
//
//   tttlab recall --width 32 --pairs 4,8,16,32,64,128 --sequences 16 --seeds 0,1,2 [--members ...]
//                 [--json]
//
// The table (CSV, or JSON with --json) goes to stdout, progress to stderr. Exit status 0 done, 2 bad
// usage (a one-line reason naming the accepted values).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/progress.hpp"
#include "tttlab/analysis/recall.hpp"

namespace tttlab::cli {
namespace {

struct RecallOptions {
  int width = 32;
  std::vector<int> pairs = {4, 8, 16, 32, 64, 128};
  int sequences = 16;
  std::vector<std::uint64_t> seeds;
  std::uint64_t seed = 0;
  std::vector<std::string> members;  // empty: every member
  bool json = false;
};

struct RecallRow {
  recall::Memory memory;
  std::vector<std::vector<double>> per_seed;  // [P][seed]
};

std::vector<recall::Memory> recall_members(const std::vector<std::string>& ids) {
  std::vector<recall::Memory> out;
  if (ids.empty()) {
    for (int m = 0; m < recall::kMemories; ++m) out.push_back(static_cast<recall::Memory>(m));
    return out;
  }
  for (const std::string& id : ids) {
    const auto m = recall::memory_from_id(id);
    if (!m)
      throw std::invalid_argument("--members: unknown member '" + id + "' (expected " +
                                  recall::memory_ids(",") + ")");
    for (const recall::Memory seen : out)
      if (seen == *m) throw std::invalid_argument("--members: '" + id + "' is named twice");
    out.push_back(*m);
  }
  return out;
}

void recall_validate(const RecallOptions& o) {
  using std::to_string;
  if (o.width < recall::kMinWidth || o.width > recall::kMaxWidth)
    throw std::invalid_argument("--width must be in [" + to_string(recall::kMinWidth) + ", " +
                                to_string(recall::kMaxWidth) + "], got " + to_string(o.width));
  if (o.pairs.empty()) throw std::invalid_argument("--pairs: give at least one number of pairs");
  for (std::size_t i = 0; i < o.pairs.size(); ++i) {
    if (o.pairs[i] < 1 || o.pairs[i] > recall::max_pairs())
      throw std::invalid_argument("--pairs: every number must be in [1, " +
                                  to_string(recall::max_pairs()) + "], got " +
                                  to_string(o.pairs[i]));
    if (i > 0 && o.pairs[i] <= o.pairs[i - 1])
      throw std::invalid_argument("--pairs: the numbers must increase");
  }
  if (o.sequences < 1 || o.sequences > 4096)
    throw std::invalid_argument("--sequences must be in [1, 4096], got " + to_string(o.sequences));
}

double recall_mean(const std::vector<double>& x) {
  double s = 0;
  for (const double v : x) s += v;
  return s / static_cast<double>(x.size());
}

// The sample standard deviation (n − 1); 0 for one seed.
double recall_sd(const std::vector<double>& x) {
  if (x.size() < 2) return 0.0;
  const double m = recall_mean(x);
  double s = 0;
  for (const double v : x) s += (v - m) * (v - m);
  return std::sqrt(s / static_cast<double>(x.size() - 1));
}

void run_recall(const RecallOptions& o) {
  recall_validate(o);
  const std::vector<recall::Memory> members = recall_members(o.members);
  const std::vector<std::uint64_t> seeds =
      o.seeds.empty() ? std::vector<std::uint64_t>{o.seed} : o.seeds;
  std::vector<RecallRow> rows;
  for (const recall::Memory m : members)
    rows.push_back({m, std::vector<std::vector<double>>(o.pairs.size())});
  ProgressLine progress("episodes");
  const std::int64_t total = static_cast<std::int64_t>(seeds.size() * o.pairs.size()) * o.sequences;
  std::int64_t done = 0;
  recall::MemoryParams p;
  p.width = o.width;
  for (const std::uint64_t seed : seeds) {
    const recall::Embedding emb(o.width, seed);
    p.seed = seed;
    for (std::size_t j = 0; j < o.pairs.size(); ++j) {
      std::vector<long> right(members.size(), 0);
      for (int s = 0; s < o.sequences; ++s) {
        const recall::Episode e =
            recall::make_episode(o.pairs[j], seed, static_cast<std::uint64_t>(s));
        for (std::size_t k = 0; k < members.size(); ++k)
          right[k] += recall::recall_correct(members[k], e, emb, p);
        progress.update(++done, total);
      }
      for (std::size_t k = 0; k < members.size(); ++k)
        rows[k].per_seed[j].push_back(static_cast<double>(right[k]) /
                                      (static_cast<double>(o.sequences) * o.pairs[j]));
    }
  }
  progress.finish();
  p.seed = 0;
  if (o.json) {
    nlohmann::json j;
    j["width"] = o.width;
    j["pairs"] = o.pairs;
    j["sequences"] = o.sequences;
    j["seeds"] = seeds;
    j["params"] = {{"eta_linear", p.eta_linear},     {"eta_mlp", recall::default_eta_mlp(o.width)},
                   {"softmax_beta", p.softmax_beta}, {"mamba_decay", p.mamba_decay},
                   {"delta_beta", p.delta_beta},     {"gated_decay", p.gated_decay},
                   {"momentum", p.momentum},         {"weight_decay", p.weight_decay},
                   {"titans_chunk", p.titans_chunk}, {"lact_chunk", p.lact_chunk}};
    j["members"] = nlohmann::json::array();
    for (const RecallRow& r : rows) {
      nlohmann::json m;
      m["id"] = recall::memory_id(r.memory);
      m["name"] = recall::memory_name(r.memory);
      for (std::size_t k = 0; k < o.pairs.size(); ++k) {
        m["accuracy_mean"].push_back(recall_mean(r.per_seed[k]));
        m["accuracy_sd"].push_back(recall_sd(r.per_seed[k]));
        m["accuracy_per_seed"].push_back(r.per_seed[k]);
        m["state_size"].push_back(recall::state_size(r.memory, p, o.pairs[k]));
        m["weight_size"].push_back(recall::weight_size(r.memory, o.width, o.pairs[k]));
      }
      j["members"].push_back(std::move(m));
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "member,width,pairs,seeds,sequences,accuracy_mean,accuracy_sd,state_size,weight_size\n");
    for (const RecallRow& r : rows)
      for (std::size_t k = 0; k < o.pairs.size(); ++k)
        std::printf("%s,%d,%d,%zu,%d,%.6f,%.6f,%ld,%ld\n", recall::memory_id(r.memory), o.width,
                    o.pairs[k], seeds.size(), o.sequences, recall_mean(r.per_seed[k]),
                    recall_sd(r.per_seed[k]), recall::state_size(r.memory, p, o.pairs[k]),
                    recall::weight_size(r.memory, o.width, o.pairs[k]));
  }
  std::fflush(stdout);
  set_exit_code(0);
}

}  // namespace

void register_recall(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "recall",
      "Associative recall of every fast-weight member at one width: accuracy against the number "
      "of pairs (docs/MATH.md §9.4)");
  auto o = std::make_shared<RecallOptions>();
  cmd->add_option("--width", o->width, "Width d of every memory")->capture_default_str();
  cmd->add_option("--pairs", o->pairs, "Numbers of pairs P, increasing, each in [1, 160]")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--sequences", o->sequences, "Episodes per P and seed")->capture_default_str();
  auto* seeds =
      cmd->add_option("--seeds", o->seeds,
                      "Seeds (episodes, embedding, MLP start), comma-separated: the table "
                      "gives the mean and sd over them")
          ->delimiter(',');
  cmd->add_option("--seed", o->seed, "One seed (instead of --seeds)")
      ->capture_default_str()
      ->excludes(seeds);
  cmd->add_option("--members", o->members,
                  "Members, comma-separated (default: all): " + recall::memory_ids(","))
      ->delimiter(',');
  cmd->add_flag("--json", o->json, "Print JSON instead of CSV");
  cmd->callback([o] {
    try {
      run_recall(*o);
    } catch (const std::invalid_argument& e) {
      std::fflush(stdout);
      std::fprintf(stderr, "tttlab recall: %s\n", e.what());
      set_exit_code(2);
    }
  });
}

}  // namespace tttlab::cli
