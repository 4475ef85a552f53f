// read_launch_env(): torchrun, Open MPI, Slurm and the default, with their precedence, the Slurm
// node-list forms, the derived port, and refusals of bad values naming the variable.
#include <gtest/gtest.h>

#include "kolo/error.hpp"
#include "kolo/process_group.hpp"
#include "store_test_util.hpp"

namespace kolo {
namespace {

using namespace store_test;

const char* const kLauncherVariables[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_orte_ess_jobid", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
    "SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_ID", "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_RESTART_COUNT",
};

// Each test starts from an environment with no launcher variables (the CI may run under Slurm).
class LaunchEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kLauncherVariables) env_.unset(name);
  }
  ScopedEnv env_;
};

// Expects InvalidArgument whose message names `variable`.
void expect_refused_naming(const std::string& variable) {
  try {
    read_launch_env();
    ADD_FAILURE() << "accepted a bad " << variable;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(variable), std::string::npos) << e.what();
  }
}

TEST_F(LaunchEnvTest, NothingSetMeansOneProcessOnLocalhost) {
  LaunchEnv e = read_launch_env();
  EXPECT_EQ(e.source, "default");
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.local_world_size, 1);
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
}

TEST_F(LaunchEnvTest, TorchrunVariables) {
  env_.set("RANK", "5").set("WORLD_SIZE", "8").set("LOCAL_RANK", "1").set("LOCAL_WORLD_SIZE", "4");
  env_.set("MASTER_ADDR", "node17").set("MASTER_PORT", "12345");
  LaunchEnv e = read_launch_env();
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.master_addr, "node17");
  EXPECT_EQ(e.master_port, 12345);
}

TEST_F(LaunchEnvTest, TorchrunDefaultsForOptionalVariables) {
  env_.set("RANK", "0").set("WORLD_SIZE", "2");
  LaunchEnv e = read_launch_env();
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.local_world_size, 1);
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
}

TEST_F(LaunchEnvTest, TorchrunAgentStoreMakesEveryRankAClientUnderAnAttemptPrefix) {
  env_.set("RANK", "0").set("WORLD_SIZE", "2");
  EXPECT_FALSE(read_launch_env().agent_store) << "no TORCHELASTIC_USE_AGENT_STORE: rank 0 hosts";
  EXPECT_EQ(read_launch_env().store_prefix, "");
  env_.set("TORCHELASTIC_USE_AGENT_STORE", "False");
  EXPECT_FALSE(read_launch_env().agent_store);
  env_.set("TORCHELASTIC_USE_AGENT_STORE", "True");
  LaunchEnv e = read_launch_env();
  EXPECT_TRUE(e.agent_store);
  EXPECT_EQ(e.store_prefix, "kolo/attempt_0");
  env_.set("TORCHELASTIC_RESTART_COUNT", "3");
  EXPECT_EQ(read_launch_env().store_prefix, "kolo/attempt_3") << "a restarted job must not see stale keys";
  env_.set("TORCHELASTIC_RESTART_COUNT", "x");
  expect_refused_naming("TORCHELASTIC_RESTART_COUNT");
}

TEST_F(LaunchEnvTest, TorchrunTakesPrecedenceOverMpiAndSlurm) {
  env_.set("RANK", "1").set("WORLD_SIZE", "2");
  env_.set("OMPI_COMM_WORLD_RANK", "3").set("OMPI_COMM_WORLD_SIZE", "4");
  env_.set("SLURM_PROCID", "6").set("SLURM_NTASKS", "7");
  LaunchEnv e = read_launch_env();
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 2);
}

TEST_F(LaunchEnvTest, TorchrunBadValuesAreRefusedNamingTheVariable) {
  env_.set("RANK", "abc").set("WORLD_SIZE", "2");
  expect_refused_naming("RANK");
  env_.set("RANK", "2");  // == WORLD_SIZE
  expect_refused_naming("RANK");
  env_.set("RANK", "-1");
  expect_refused_naming("RANK");
  env_.set("RANK", "0").set("WORLD_SIZE", "0");
  expect_refused_naming("WORLD_SIZE");
  env_.set("WORLD_SIZE", "2x");
  expect_refused_naming("WORLD_SIZE");
  env_.set("WORLD_SIZE", "2").set("LOCAL_RANK", "3").set("LOCAL_WORLD_SIZE", "2");
  expect_refused_naming("LOCAL_RANK");
  env_.set("LOCAL_RANK", "0").set("MASTER_PORT", "70000");
  expect_refused_naming("MASTER_PORT");
  env_.set("MASTER_PORT", "0");
  expect_refused_naming("MASTER_PORT");
  env_.unset("MASTER_PORT").unset("WORLD_SIZE");
  expect_refused_naming("WORLD_SIZE");  // RANK alone: torchrun, but incomplete
}

TEST_F(LaunchEnvTest, OpenMpiVariables) {
  env_.set("OMPI_COMM_WORLD_RANK", "3").set("OMPI_COMM_WORLD_SIZE", "6");
  env_.set("OMPI_COMM_WORLD_LOCAL_RANK", "0").set("OMPI_COMM_WORLD_LOCAL_SIZE", "3");
  env_.set("MASTER_ADDR", "head").set("MASTER_PORT", "4000");
  env_.set("SLURM_PROCID", "1").set("SLURM_NTASKS", "2");  // Open MPI inside Slurm: MPI wins
  LaunchEnv e = read_launch_env();
  EXPECT_EQ(e.source, "openmpi");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 6);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.local_world_size, 3);
  EXPECT_EQ(e.master_addr, "head");
  EXPECT_EQ(e.master_port, 4000);
}

TEST_F(LaunchEnvTest, OpenMpiPortIsDerivedFromTheJobId) {
  env_.set("OMPI_COMM_WORLD_RANK", "0").set("OMPI_COMM_WORLD_SIZE", "2");
  EXPECT_EQ(read_launch_env().master_port, 29500) << "no job id: the default port";
  env_.set("OMPI_MCA_orte_ess_jobid", "3735552001");
  EXPECT_EQ(read_launch_env().master_port, 20000 + 3735552001ull % 20000);
  env_.set("OMPI_MCA_orte_ess_jobid", "prterun-host-12345@1");
  const uint16_t hashed = read_launch_env().master_port;
  EXPECT_GE(hashed, 20000);
  EXPECT_LT(hashed, 40000);
  EXPECT_EQ(read_launch_env().master_port, hashed) << "every rank must derive the same port";
  env_.set("OMPI_MCA_orte_ess_jobid", "prterun-host-12346@1");
  EXPECT_NE(read_launch_env().master_port, hashed) << "neighbouring jobs should not collide";
}

TEST_F(LaunchEnvTest, OpenMpiBadValuesAreRefused) {
  env_.set("OMPI_COMM_WORLD_RANK", "4").set("OMPI_COMM_WORLD_SIZE", "4");
  expect_refused_naming("OMPI_COMM_WORLD_RANK");
  env_.set("OMPI_COMM_WORLD_RANK", "1").set("OMPI_COMM_WORLD_LOCAL_SIZE", "many");
  expect_refused_naming("OMPI_COMM_WORLD_LOCAL_SIZE");
}

TEST_F(LaunchEnvTest, SlurmVariablesAndNodeListForms) {
  env_.set("SLURM_PROCID", "7").set("SLURM_NTASKS", "8").set("SLURM_LOCALID", "3");
  env_.set("SLURM_TASKS_PER_NODE", "4(x2)").set("SLURM_JOB_ID", "123456");
  env_.set("SLURM_NODELIST", "gpu[07-09,12]");
  LaunchEnv e = read_launch_env();
  EXPECT_EQ(e.source, "slurm");
  EXPECT_EQ(e.rank, 7);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 3);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.master_addr, "gpu07");
  EXPECT_EQ(e.master_port, 20000 + 123456 % 20000);

  env_.set("SLURM_STEP_NODELIST", "node[1-3,5]");  // the step's nodes win over the job's
  EXPECT_EQ(read_launch_env().master_addr, "node1");
  env_.set("SLURM_STEP_NODELIST", "alpha,beta");
  EXPECT_EQ(read_launch_env().master_addr, "alpha");
  env_.set("SLURM_STEP_NODELIST", "rack[2-3]-n[10-11],x");
  EXPECT_EQ(read_launch_env().master_addr, "rack2-n10");
  env_.set("SLURM_STEP_NODELIST", "solo");
  EXPECT_EQ(read_launch_env().master_addr, "solo");
  env_.set("MASTER_ADDR", "explicit").set("MASTER_PORT", "31000");
  e = read_launch_env();
  EXPECT_EQ(e.master_addr, "explicit");
  EXPECT_EQ(e.master_port, 31000);
  env_.set("SLURM_NTASKS_PER_NODE", "6");  // wins over SLURM_TASKS_PER_NODE
  EXPECT_EQ(read_launch_env().local_world_size, 6);
}

TEST_F(LaunchEnvTest, SlurmBadValuesAreRefused) {
  env_.set("SLURM_PROCID", "x1").set("SLURM_NTASKS", "2");
  expect_refused_naming("SLURM_PROCID");
  env_.set("SLURM_PROCID", "1").unset("SLURM_NTASKS");
  expect_refused_naming("SLURM_NTASKS");
  env_.set("SLURM_NTASKS", "2").set("SLURM_LOCALID", "2").set("SLURM_TASKS_PER_NODE", "2(x1)");
  expect_refused_naming("SLURM_LOCALID");
  env_.set("SLURM_LOCALID", "0").set("SLURM_NODELIST", "node[1-3");
  expect_refused_naming("node[1-3");
}

}  // namespace
}  // namespace kolo
