// kolo-train's command line and the text it prints per step and at the end.
#include <gtest/gtest.h>

#include <string>

#include "kolo/error.hpp"
#include "step_report.hpp"
#include "train_options.hpp"

namespace kolo::train {
namespace {

TEST(TrainOptions, DefaultsDescribeASmallRun) {
  TrainOptions o = parse_train_options({});
  EXPECT_EQ(o.batch, 16);
  EXPECT_EQ(o.layers, 2);
  EXPECT_EQ(o.device, "cpu");
  EXPECT_EQ(o.data, "kjv");
  EXPECT_FALSE(o.resume);
  EXPECT_FALSE(o.help);
}

TEST(TrainOptions, ParsesTheDocumentedFlagsInBothForms) {
  TrainOptions o = parse_train_options({"--batch", "3", "--seq=32", "--layers", "4", "--heads", "2", "--dim", "16",
                                        "--steps", "9", "--lr", "3e-4", "--seed", "12345678901", "--accum", "2",
                                        "--data", "/tmp/x.txt", "--ckpt", "/tmp/ck", "--resume", "--device", "cuda"});
  EXPECT_EQ(o.batch, 3);
  EXPECT_EQ(o.seq, 32);
  EXPECT_EQ(o.layers, 4);
  EXPECT_EQ(o.heads, 2);
  EXPECT_EQ(o.dim, 16);
  EXPECT_EQ(o.steps, 9);
  EXPECT_DOUBLE_EQ(o.lr, 3e-4);
  EXPECT_EQ(o.seed, 12345678901ull);
  EXPECT_EQ(o.accum, 2);
  EXPECT_EQ(o.data, "/tmp/x.txt");
  EXPECT_EQ(o.ckpt, "/tmp/ck");
  EXPECT_TRUE(o.resume);
  EXPECT_EQ(o.device, "cuda");
  EXPECT_TRUE(parse_train_options({"--help"}).help);
}

TEST(TrainOptions, RefusesMalformedValuesNamingTheFlag) {
  auto message = [](std::vector<std::string> args) {
    try {
      parse_train_options(args);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message({"--batch", "0"}).find("--batch"), std::string::npos);
  EXPECT_NE(message({"--batch", "4x"}).find("--batch"), std::string::npos);
  EXPECT_NE(message({"--lr"}).find("--lr needs a value"), std::string::npos);
  EXPECT_NE(message({"--device", "tpu"}).find("cpu|cuda"), std::string::npos);
  EXPECT_NE(message({"--frobnicate"}).find("unknown option"), std::string::npos);
  EXPECT_NE(message({"--dim", "10", "--heads", "4"}).find("multiple of --heads"), std::string::npos);
  EXPECT_NE(train_usage().find("--resume"), std::string::npos);
}

TEST(TrainOptions, ElasticIsAFlagForTheHostOnly) {
  EXPECT_FALSE(parse_train_options({}).elastic);
  const TrainOptions o = parse_train_options({"--elastic", "--die-at-step", "5", "--die-rank", "2", "--die-after-us", "700"});
  EXPECT_TRUE(o.elastic);
  EXPECT_EQ(o.die_at_step, 5);
  EXPECT_EQ(o.die_rank, 2);
  EXPECT_EQ(o.die_after_us, 700);
  EXPECT_NE(train_usage().find("--elastic"), std::string::npos);
  try {
    parse_train_options({"--elastic", "--device", "cuda"});
    ADD_FAILURE() << "--elastic --device cuda accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--device cpu"), std::string::npos) << e.what();
  }
}

TEST(StepReport, LineStartsWithStepAndExactLoss) {
  StepRecord r;
  r.step = 12;
  r.loss = 5.123456789f;
  r.lr = 1e-3;
  r.seconds = 0.5;
  r.tokens = 1024;
  r.comm_seconds = 0.004;
  r.exposed_seconds = 0.001;
  const std::string line = format_step_line(r, 65);
  EXPECT_EQ(line.rfind("step 12 loss ", 0), 0u) << line;
  const float printed = std::stof(line.substr(13));
  EXPECT_EQ(printed, static_cast<float>(r.loss));  // 9 digits survive the float round trip
  EXPECT_NE(line.find("tok/s 2048"), std::string::npos) << line;
  EXPECT_NE(line.find("eta 1:05"), std::string::npos) << line;
  EXPECT_NE(line.find("comm 4.00ms exposed 1.00ms hidden 75%"), std::string::npos) << line;
}

TEST(StepReport, StatsLeaveOutTheFirstStep) {
  RunStats stats;
  for (int i = 0; i < 4; ++i) {
    StepRecord r;
    r.seconds = i == 0 ? 10.0 : 1.0;
    r.tokens = 100;
    r.comm_seconds = 0.4;
    r.exposed_seconds = 0.1;
    stats.add(r);
  }
  EXPECT_EQ(stats.measured_steps(), 3u);
  EXPECT_DOUBLE_EQ(stats.mean_step_seconds(), 1.0);
  EXPECT_DOUBLE_EQ(stats.tokens_per_second(), 100.0);
  EXPECT_DOUBLE_EQ(stats.eta_seconds(4, 10), 6.0);
  EXPECT_NEAR(hidden_fraction(stats.mean_comm_seconds(), stats.mean_exposed_seconds()), 0.75, 1e-12);
  const std::string summary = format_summary(stats, 2, "8", 1, 32, 1000);
  EXPECT_EQ(summary.rfind("summary ranks 2 local_batch 8", 0), 0u) << summary;
  EXPECT_NE(summary.find("tokens_per_s_per_rank 50"), std::string::npos) << summary;
  EXPECT_NE(summary.find("allreduce_hidden 0.750"), std::string::npos) << summary;
  EXPECT_EQ(format_duration(3725), "1:02:05");
}

}  // namespace
}  // namespace kolo::train
