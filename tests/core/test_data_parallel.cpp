// Data-parallel training (train/data_parallel.hpp) with fake ranks: threads of this process, CPU
// replicas. The same DataParallelBackend drives the GPUs through NCCL (tests/kernels/test_multi_gpu.cpp);
// here its logic is checked where CI can run it: the shards cover the batch, the all-reduced
// gradient is the whole batch's, R ranks follow the one-device loss curve, one rank reproduces it bit
// for bit, a failing rank stops the step without hanging the others, processes that disagree stop,
// evaluation split over ranks gives the whole evaluation, and a run resumes on another rank count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "core/tiny_run.hpp"
#include "core/word_corpus.hpp"
#include "tttlab/data/synthetic.hpp"
#include "tttlab/train/data_parallel.hpp"
#include "tttlab/train/session.hpp"
#include "tttlab/train/trainer.hpp"
#include "tttlab/util/parallel.hpp"

namespace tttlab {
namespace fs = std::filesystem;
namespace {

constexpr std::uint64_t k_seed = 20261126;

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("tttlab_test_dp_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TrainConfig small_config(const fs::path& corpus, int batch = 6) {
  return testing::tiny_train_config(
      corpus, {.steps = 8, .batch = batch, .seq_len = 24, .seed = k_seed, .threads = 1, .eval_windows = 7},
      testing::kSmallModel);
}

// Fake ranks: `ranks` CPU replicas and a thread group, all in this process.
TrainBackendFactory fake_ranks(int ranks, DataParallelOptions o = {}) {
  return [ranks, o](const TrainBackendContext& ctx) -> std::unique_ptr<TrainBackend> {
    std::vector<std::unique_ptr<Replica>> replicas;
    for (int r = 0; r < ranks; ++r) replicas.push_back(make_cpu_replica(ctx));
    DataParallelOptions opt = o;
    opt.layout = DataParallelLayout{ranks, 0};
    return std::make_unique<DataParallelBackend>(std::move(replicas), make_thread_group(ranks, 20.0), opt, ctx);
  };
}

std::vector<float> host_params(const Model<float>& m) {
  std::vector<float> v;
  const_cast<Model<float>&>(m).for_each_param(
      [&](Eigen::Map<Mat<float>> p, const std::string&) { v.insert(v.end(), p.data(), p.data() + p.size()); });
  return v;
}

// A copy-task batch (tttlab/data/synthetic.hpp): only the answers count, so rows differ in their
// counted targets.
TokenBatch masked_batch(int T, int B, std::uint64_t index) {
  CopyConfig c;
  c.seq_len = T;
  c.max_len = std::max(1, std::min(64, T / 2));
  c.min_len = std::max(1, c.max_len / 2);
  return copy_batch(c, B, k_seed, index);
}

TEST(DataParallel, ShardsCoverTheBatchOnceInRankOrder) {
  for (int batch = 1; batch <= 13; ++batch)
    for (int ranks = 1; ranks <= batch; ++ranks) {
      int next = 0, lo = batch, hi = 0;
      for (int r = 0; r < ranks; ++r) {
        const ShardRange s = shard_range(batch, r, ranks);
        EXPECT_EQ(s.first, next) << batch << " " << ranks << " " << r;
        next += s.count;
        lo = std::min(lo, s.count);
        hi = std::max(hi, s.count);
      }
      EXPECT_EQ(next, batch);
      EXPECT_LE(hi - lo, 1);
      EXPECT_GE(lo, 1);
    }
  EXPECT_THROW(shard_range(3, 0, 4), std::invalid_argument);  // a rank with nothing to do
  EXPECT_THROW(shard_range(8, 4, 4), std::invalid_argument);
  EXPECT_THROW(shard_range(8, -1, 4), std::invalid_argument);
}

TEST(DataParallel, ShardOfCopiesTheRowsTheirMaskAndStarts) {
  const TokenBatch b = masked_batch(16, 5, 0);
  ASSERT_FALSE(b.mask.empty());
  const TokenBatch s = shard_of(b, ShardRange{2, 2});
  ASSERT_EQ(s.batch, 2);
  for (int r = 0; r < 2; ++r)
    for (int t = 0; t < 16; ++t) {
      EXPECT_EQ(s.input(r, t), b.input(2 + r, t));
      EXPECT_EQ(s.target(r, t), b.target(2 + r, t));
      EXPECT_EQ(s.counts(r, t), b.counts(2 + r, t));
    }
  EXPECT_EQ(s.starts.size(), 2u);
  EXPECT_THROW(shard_of(b, ShardRange{4, 2}), std::invalid_argument);
}

TEST(DataParallel, ThreadGroupSumsInRankOrderAndAbortReleasesWaiters) {
  auto comms = make_thread_group(3, 20.0);
  std::vector<std::vector<float>> buf(3);
  std::vector<std::array<double, 2>> host(3);
  run_parallel(3, [&](int r) {
    buf[r] = {float(r + 1), 0.5f * float(r), 1e8f};
    comms[r]->all_reduce_sum(buf[r].data(), buf[r].size());
    host[r] = {double(r), 1.0};
    comms[r]->all_reduce_sum_host(host[r]);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(buf[r], (std::vector<float>{6.f, 1.5f, 3e8f}));
    EXPECT_EQ(host[r][0], 3.0);
    EXPECT_EQ(host[r][1], 3.0);
  }
  // Rank 2 never arrives: its abort releases the two that wait, with an error.
  int released = 0;
  std::mutex m;
  run_parallel(3, [&](int r) {
    if (r == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      comms[2]->abort();
      return;
    }
    float x = 1;
    try {
      comms[r]->all_reduce_sum(&x, 1);
    } catch (const CommunicatorError& e) {
      std::lock_guard<std::mutex> lock(m);
      ++released;
      EXPECT_NE(std::string(e.what()).find("aborted"), std::string::npos) << e.what();
    }
  });
  EXPECT_EQ(released, 2);
  // A rank that waits past the timeout fails instead of hanging.
  auto slow = make_thread_group(2, 0.2);
  float x = 1;
  EXPECT_THROW(slow[0]->all_reduce_sum(&x, 1), CommunicatorError);
}

// The heart of it: every rank scales by the GLOBAL count of scored targets, so the sum of the shards'
// gradients is the whole batch's gradient, with uneven shards and masked targets alike.
TEST(DataParallel, AllReducedGradientIsTheWholeBatchGradient) {
  std::printf("seed %llu\n", static_cast<unsigned long long>(k_seed));
  const fs::path dir = temp_dir("grad");
  TrainConfig cfg = small_config(testing::write_word_corpus(dir, 3000), 5);
  Trainer owner(cfg, TextData::load(cfg));  // a model and an optimiser to copy
  AdamW<float> optim(AdamWConfig{}, WarmupCosineSchedule{0.0, 1e-3, 1, 10, 1e-5});
  const TrainBackendContext ctx{&cfg, &owner.model(), &optim, 1};
  // A copy-task batch: only the answers count, so the shards' counted targets differ.
  const TokenBatch batch = masked_batch(cfg.seq_len, 5, 3);
  const std::int64_t C = batch.counted_targets();
  ASSERT_LT(C, std::int64_t(5) * cfg.seq_len);
  auto whole = make_cpu_replica(ctx);
  const double loss = whole->forward_backward_shard(batch, C);
  const std::vector<float> expect(whole->gradient_buffer().begin(), whole->gradient_buffer().end());
  for (int R : {1, 2, 3, 5}) {
    auto comms = make_thread_group(R, 20.0);
    std::vector<std::unique_ptr<Replica>> reps;
    for (int r = 0; r < R; ++r) reps.push_back(make_cpu_replica(ctx));
    std::vector<double> losses(R);
    run_parallel(R, [&](int r) {
      losses[r] = reps[r]->forward_backward_shard(shard_of(batch, shard_range(5, r, R)), C);
      auto g = reps[r]->gradient_buffer();
      comms[r]->all_reduce_sum(g.data(), g.size());
    });
    double sum = 0;
    for (double l : losses) sum += l;
    EXPECT_NEAR(sum, loss, 1e-9 * loss) << R << " ranks";
    double max_err = 0, max_ref = 0;
    for (int r = 0; r < R; ++r) {
      const auto g = reps[r]->gradient_buffer();
      ASSERT_EQ(g.size(), expect.size());
      for (std::size_t k = 0; k < g.size(); ++k) {
        max_err = std::max(max_err, double(std::abs(g[k] - expect[k])));
        max_ref = std::max(max_ref, double(std::abs(expect[k])));
        if (r > 0) {
          ASSERT_EQ(g[k], reps[0]->gradient_buffer()[k]) << "ranks hold different sums";
        }
      }
    }
    // fp32 gradients summed in another order: rounding, relative to the largest entry.
    EXPECT_LT(max_err, 1e-5 * max_ref) << R << " ranks";
    if (R == 1) {
      EXPECT_EQ(max_err, 0.0);
    }
  }
  fs::remove_all(dir);
}

// Whole steps: R ranks follow the one-device curve; one rank reproduces it bit for bit; the
// replicas stay identical; evaluation split over the ranks equals the whole evaluation.
TEST(DataParallel, RanksFollowTheOneDeviceCurve) {
  std::printf("seed %llu\n", static_cast<unsigned long long>(k_seed));
  const fs::path dir = temp_dir("curve");
  const TrainConfig cfg = small_config(testing::write_word_corpus(dir, 3000));
  Trainer one(cfg, TextData::load(cfg));  // the CPU engine, one thread
  std::vector<double> ref, ref_norm;
  while (!one.finished()) {
    const StepReport r = one.step();
    ref.push_back(r.loss);
    ref_norm.push_back(r.grad_norm);
  }
  const EvalReport ref_eval = one.evaluate(cfg.eval_windows);
  const std::vector<float> ref_params = host_params(one.model());
  for (int R : {1, 2, 3}) {
    Trainer t(cfg, TextData::load(cfg), fake_ranks(R));
    for (std::size_t k = 0; k < ref.size(); ++k) {
      const StepReport r = t.step();
      if (R == 1) {
        EXPECT_EQ(r.loss, ref[k]) << "step " << k;
        EXPECT_EQ(r.grad_norm, ref_norm[k]) << "step " << k;
      } else {
        EXPECT_NEAR(r.loss, ref[k], 1e-5) << R << " ranks, step " << k;
        // AdamW barely sees a wrongly scaled gradient (it divides by its own scale); the norm does.
        EXPECT_NEAR(r.grad_norm, ref_norm[k], 1e-4 * ref_norm[k]) << R << " ranks, step " << k;
      }
      ASSERT_EQ(r.ranks.size(), std::size_t(R));
      long tokens = 0;
      for (const RankStepTiming& rt : r.ranks) tokens += rt.tokens;
      EXPECT_EQ(tokens, r.tokens);
    }
    const EvalReport e = t.evaluate(cfg.eval_windows);
    EXPECT_NEAR(e.loss, ref_eval.loss, 1e-4) << R;
    EXPECT_EQ(e.targets, ref_eval.targets);
    ASSERT_EQ(e.loss_by_position.size(), ref_eval.loss_by_position.size());
    t.sync_to_host();
    const std::vector<float> p = host_params(t.model());
    if (R == 1) {
      EXPECT_EQ(p, ref_params);
    }
  }
  fs::remove_all(dir);
}

TEST(DataParallel, ReplicasStayIdentical) {
  const fs::path dir = temp_dir("identical");
  const TrainConfig cfg = small_config(testing::write_word_corpus(dir, 3000));
  Trainer owner(cfg, TextData::load(cfg));
  AdamW<float> optim(AdamWConfig{}, WarmupCosineSchedule{0.0, 1e-2, 1, 10, 1e-5});
  const TrainBackendContext ctx{&cfg, &owner.model(), &optim, 1};
  DataParallelBackend dp = [&] {
    std::vector<std::unique_ptr<Replica>> reps;
    for (int r = 0; r < 3; ++r) reps.push_back(make_cpu_replica(ctx));
    DataParallelOptions o;
    o.layout = DataParallelLayout{3, 0};
    return DataParallelBackend(std::move(reps), make_thread_group(3, 20.0), o, ctx);
  }();
  const TextData data = TextData::load(cfg);  // the sampler keeps a view of it
  RandomWindowSampler sampler(data.train, cfg.batch_size, cfg.seq_len, k_seed);
  for (int k = 0; k < 4; ++k) EXPECT_TRUE(std::isfinite(dp.step(sampler.next()).loss_sum));
  std::vector<std::vector<float>> params;
  for (int r = 0; r < 3; ++r) {
    dp.replica(r).pull_to_host();
    params.push_back(host_params(owner.model()));
  }
  EXPECT_EQ(params[1], params[0]);
  EXPECT_EQ(params[2], params[0]);
  EXPECT_EQ(dp.step_count(), 4);
  fs::remove_all(dir);
}

TEST(DataParallel, FailingRankStopsTheStepWithoutHangingTheOthers) {
  const fs::path dir = temp_dir("fail");
  const TrainConfig cfg = small_config(testing::write_word_corpus(dir, 3000));
  DataParallelOptions o;
  apply_fault_injection(o, "1:2");  // rank 1 fails in the third step
  Trainer t(cfg, TextData::load(cfg), fake_ranks(3, o));
  t.step();
  t.step();
  try {
    t.step();
    FAIL() << "the injected failure did not stop the step";
  } catch (const RankFailure& e) {
    EXPECT_EQ(e.rank(), 1);
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 1 of 3"), std::string::npos) << m;
    EXPECT_NE(m.find("injected failure"), std::string::npos) << m;
    EXPECT_NE(m.find("after update 2"), std::string::npos) << m;
  }
  EXPECT_EQ(t.steps_done(), 2);  // nothing of the failed step was kept
  EXPECT_THROW(t.step(), std::runtime_error);  // the group stays stopped
  fs::remove_all(dir);
}

TEST(DataParallel, FaultInjectionSettingIsParsedStrictly) {
  DataParallelOptions o;
  apply_fault_injection(o, nullptr);
  apply_fault_injection(o, "");
  EXPECT_EQ(o.fail_rank, -1);
  apply_fault_injection(o, "3:17");
  EXPECT_EQ(o.fail_rank, 3);
  EXPECT_EQ(o.fail_at_step, 17);
  for (const char* bad : {"3", "3:", ":4", "a:1", "1:2x", "-1:2", "1:-2"})
    EXPECT_THROW(apply_fault_injection(o, bad), std::invalid_argument) << bad;
}

// Two "processes" (two backends of one rank each, one thread each, one thread group): with the
// same batches they train as one job; with different batches both stop before updating.
TEST(DataParallel, ProcessesThatDisagreeStopBeforeUpdating) {
  const fs::path dir = temp_dir("disagree");
  const TrainConfig cfg = small_config(testing::write_word_corpus(dir, 3000));
  const TextData data = TextData::load(cfg);
  for (const bool same : {true, false}) {
    auto comms = make_thread_group(2, 20.0);
    std::vector<std::unique_ptr<Trainer>> owners;
    std::vector<std::unique_ptr<AdamW<float>>> optims;
    std::vector<std::unique_ptr<DataParallelBackend>> procs;
    for (int p = 0; p < 2; ++p) {
      owners.push_back(std::make_unique<Trainer>(cfg, data));
      optims.push_back(std::make_unique<AdamW<float>>(AdamWConfig{}, WarmupCosineSchedule{0.0, 1e-2, 1, 10, 1e-5}));
      const TrainBackendContext ctx{&cfg, &owners[p]->model(), optims[p].get(), 1};
      std::vector<std::unique_ptr<Replica>> reps;
      reps.push_back(make_cpu_replica(ctx));
      std::vector<std::unique_ptr<Communicator>> mine;
      mine.push_back(std::move(comms[p]));
      DataParallelOptions o;
      o.layout = DataParallelLayout{2, p};
      procs.push_back(std::make_unique<DataParallelBackend>(std::move(reps), std::move(mine), o, ctx));
    }
    std::vector<double> loss(2, -1);
    std::vector<std::string> error(2);
    run_parallel(2, [&](int p) {
      RandomWindowSampler sampler(data.train, cfg.batch_size, cfg.seq_len, same ? k_seed : k_seed + p);
      try {
        loss[p] = procs[p]->step(sampler.next()).loss_sum;
      } catch (const std::exception& e) {
        error[p] = e.what();
      }
    });
    if (same) {
      EXPECT_EQ(loss[0], loss[1]);
      EXPECT_EQ(procs[0]->step_count(), 1);
    } else {
      for (int p = 0; p < 2; ++p) {
        EXPECT_NE(error[p].find("disagree"), std::string::npos) << error[p];
        EXPECT_EQ(procs[p]->step_count(), 0);
      }
    }
  }
  fs::remove_all(dir);
}

// A checkpoint does not record the rank count: a run saved on 2 ranks resumes on 3 (or 1) and
// continues the curve of an uninterrupted 2-rank run to rounding.
TEST(DataParallel, RunResumesOnAnotherNumberOfRanks) {
  const fs::path dir = temp_dir("resume");
  TrainConfig cfg = small_config(testing::write_word_corpus(dir, 3000));
  cfg.steps = 8;
  cfg.checkpoint_every = 4;
  cfg.eval_every = 0;
  std::vector<double> full;
  {
    auto s = TrainingSession::create(dir / "full", cfg, TextData::load(cfg), fake_ranks(2));
    SessionHooks h;
    h.on_step = [&](const StepReport& r, double, double) { full.push_back(r.loss); };
    s->run(h);
  }
  for (const int resume_ranks : {1, 3}) {
    const fs::path run = dir / ("part" + std::to_string(resume_ranks));
    {
      auto s = TrainingSession::create(run, cfg, TextData::load(cfg), fake_ranks(2));
      SessionHooks h;
      h.between_steps = [&] { return s->trainer().steps_done() >= 4 ? SessionControl::Stop : SessionControl::Continue; };
      EXPECT_EQ(s->run(h), TrainingSession::Outcome::Stopped);
    }
    auto s = TrainingSession::resume(run, fake_ranks(resume_ranks));
    EXPECT_EQ(s->trainer().steps_done(), 4);
    std::vector<double> rest;
    SessionHooks h;
    h.on_step = [&](const StepReport& r, double, double) { rest.push_back(r.loss); };
    s->run(h);
    ASSERT_EQ(rest.size(), 4u);
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(rest[k], full[4 + k], 1e-5) << resume_ranks << " ranks, step " << 5 + k;
  }
  fs::remove_all(dir);
}

// A follower process (SessionOptions::writes_files = false) writes nothing into the run directory.
TEST(DataParallel, FollowerSessionWritesNothing) {
  const fs::path dir = temp_dir("follower");
  TrainConfig cfg = small_config(testing::write_word_corpus(dir, 3000));
  cfg.steps = 3;
  cfg.checkpoint_every = 1;
  SessionOptions o;
  o.writes_files = false;
  auto s = TrainingSession::create(dir / "run", cfg, TextData::load(cfg), {}, o);
  EXPECT_EQ(s->run(), TrainingSession::Outcome::Finished);
  EXPECT_FALSE(fs::exists(dir / "run"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tttlab
