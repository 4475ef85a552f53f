// Every collective's full correctness matrix (test_matrix.cpp: every algorithm, every size class,
// in and out of place, every element checked against the reference) over TCP with KOLO_TLS=1,
// at 2 and 3 ranks: eagerly (TLS handshakes while the group forms) and lazily (each TLS handshake
// inside the pair's first reads and writes, KOLO_CONNECT=lazy).
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "driver_support.hpp"
#include "matrix_cases.hpp"

namespace kolo::coltest {
namespace {

class TlsMatrix : public ::testing::TestWithParam<std::tuple<Coll, int, std::string>> {};

TEST_P(TlsMatrix, EveryOutputElementMatchesTheReference) {
  const auto [coll, world, connect] = GetParam();
  LaunchSpec spec = worker_launch("matrix", world, std::chrono::seconds(240));
  spec.args.push_back(coll_name(coll));
  spec.env["KOLO_TRANSPORT"] = "tcp";
  spec.env["KOLO_TLS"] = "1";
  spec.env["KOLO_SECRET"] = "tls-matrix-secret";
  spec.env["KOLO_CONNECT"] = connect;
  const WorldOutcome outcome = run_world(spec);
  EXPECT_TRUE(outcome.all_succeeded()) << outcome.describe();
  for (const RankOutcome& r : outcome.ranks) EXPECT_NE(r.out.find("OK rank"), std::string::npos) << r.describe();
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<Coll, int, std::string>>& info) {
  return std::string(coll_name(std::get<0>(info.param))) + "_world" + std::to_string(std::get<1>(info.param)) + "_" +
         std::get<2>(info.param);
}

INSTANTIATE_TEST_SUITE_P(AllCollectives, TlsMatrix,
                         ::testing::Combine(::testing::ValuesIn(all_colls()), ::testing::Values(2, 3),
                                            ::testing::Values(std::string("eager"), std::string("lazy"))),
                         case_name);

}  // namespace
}  // namespace kolo::coltest
