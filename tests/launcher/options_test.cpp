// kolorun's option parsing, checked in-process.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kolo/error.hpp"
#include "kolorun/options.hpp"

namespace kolo::launcher {
namespace {

LaunchOptions parse(std::vector<std::string> args) { return parse_launch_options(args); }

TEST(KolorunOptions, ShortAndLongFormsAndProgramArguments) {
  LaunchOptions o = parse({"-n", "4", "-t", "--timeout=2.5", "--master-addr", "10.0.0.7",
                           "--master-port=29500", "-x", "A=1", "-xB=x=y", "prog", "-n", "9", "--tag-output"});
  EXPECT_EQ(o.nproc, 4);
  EXPECT_TRUE(o.tag_output);
  ASSERT_TRUE(o.timeout_seconds.has_value());
  EXPECT_DOUBLE_EQ(*o.timeout_seconds, 2.5);
  EXPECT_EQ(o.master_addr, "10.0.0.7");
  EXPECT_EQ(o.master_port, 29500);
  ASSERT_EQ(o.extra_env.size(), 2u);
  EXPECT_EQ(o.extra_env[0], (std::pair<std::string, std::string>{"A", "1"}));
  EXPECT_EQ(o.extra_env[1], (std::pair<std::string, std::string>{"B", "x=y"}));
  // Everything from the program on belongs to the program, even kolorun-looking options.
  EXPECT_EQ(o.program, (std::vector<std::string>{"prog", "-n", "9", "--tag-output"}));
}

TEST(KolorunOptions, AttachedShortValueAndLongNproc) {
  EXPECT_EQ(parse({"-n3", "p"}).nproc, 3);
  EXPECT_EQ(parse({"--nproc", "8", "p"}).nproc, 8);
  EXPECT_EQ(parse({"--nproc=1", "p"}).nproc, 1);
  LaunchOptions defaults = parse({"-n", "2", "p"});
  EXPECT_FALSE(defaults.tag_output);
  EXPECT_FALSE(defaults.timeout_seconds.has_value());
  EXPECT_FALSE(defaults.master_port.has_value());
  EXPECT_EQ(defaults.master_addr, "127.0.0.1");
}

TEST(KolorunOptions, MpirunAndTorchrunSpellingsOfTheRankCount) {
  EXPECT_EQ(parse({"-np", "4", "p"}).nproc, 4);
  EXPECT_EQ(parse({"--nproc_per_node", "2", "p"}).nproc, 2);
  EXPECT_EQ(parse({"--nproc-per-node=3", "p"}).nproc, 3);
  EXPECT_EQ(parse({"--nproc_per_node=5", "p"}).program, std::vector<std::string>{"p"});
  EXPECT_THROW(parse({"-np"}), InvalidArgument) << "a value is needed";
  EXPECT_THROW(parse({"-np", "0", "p"}), InvalidArgument);
}

TEST(KolorunOptions, DoubleDashEndsOptions) {
  LaunchOptions o = parse({"-n", "2", "--", "-weird-program", "--help"});
  EXPECT_EQ(o.program, (std::vector<std::string>{"-weird-program", "--help"}));
  EXPECT_FALSE(o.show_help);
}

TEST(KolorunOptions, HelpAndVersionNeedNothingElse) {
  EXPECT_TRUE(parse({"--help"}).show_help);
  EXPECT_TRUE(parse({"-h"}).show_help);
  EXPECT_TRUE(parse({"--version"}).show_version);
  EXPECT_NE(usage_text().find("--tag-output"), std::string::npos);
}

TEST(KolorunOptions, XWithoutValueCopiesKolorunsOwnValue) {
  ::setenv("KOLORUN_OPTIONS_TEST_VAR", "from-parent", 1);
  LaunchOptions o = parse({"-n", "1", "-x", "KOLORUN_OPTIONS_TEST_VAR", "p"});
  ::unsetenv("KOLORUN_OPTIONS_TEST_VAR");
  ASSERT_EQ(o.extra_env.size(), 1u);
  EXPECT_EQ(o.extra_env[0].second, "from-parent");
  EXPECT_THROW(parse({"-n", "1", "-x", "KOLORUN_OPTIONS_TEST_UNSET_VAR", "p"}), InvalidArgument);
}

TEST(KolorunOptions, ReplaceCountsReplacementsAndNeedsElastic) {
  EXPECT_EQ(parse({"-n", "4", "--elastic", "--replace", "2", "p"}).replace, 2);
  EXPECT_EQ(parse({"-n", "4", "--elastic", "p"}).replace, 0);
  // Across hosts only with a store kolorun serves (--store-addr): rank 0's would die with it.
  const LaunchOptions o = parse({"--elastic", "--hosts", "a:2", "--store-addr", "10.0.0.1", "--replace", "1", "p"});
  EXPECT_EQ(o.replace, 1);
  EXPECT_EQ(o.store_addr, "10.0.0.1");
  EXPECT_EQ(parse({"-n", "2", "p"}).store_addr, "");
}

TEST(KolorunOptions, RejectsBadInput) {
  const std::vector<std::vector<std::string>> bad = {
      {"prog"},                                   // no -n
      {"-n", "2"},                                // no program
      {"-n"},                                     // -n without value
      {"-n", "0", "p"},                           // too few
      {"-n", "1025", "p"},                        // too many
      {"-n", "2x", "p"},                          // not a number
      {"-n", "2", "--timeout", "0", "p"},         // timeout must be positive
      {"-n", "2", "--timeout", "-1", "p"},
      {"-n", "2", "--timeout", "soon", "p"},
      {"-n", "2", "--master-port", "0", "p"},
      {"-n", "2", "--master-port", "65536", "p"},
      {"-n", "2", "--master-addr=", "p"},
      {"-n", "2", "-x", "=1", "p"},               // no variable name
      {"-n", "2", "-x", "1A=1", "p"},
      {"-n", "2", "-x", "RANK=3", "p"},           // kolorun's own variables are not overridable
      {"-n", "2", "-x", "MASTER_PORT=1", "p"},
      {"-n", "2", "--frobnicate", "p"},           // unknown option
      {"-n", "2", "--tag-output=yes", "p"},       // flag with a value
      {"-n", "2", "--replace", "1", "p"},         // --replace without --elastic
      {"-n", "2", "--elastic", "--replace", "x", "p"},
      {"--elastic", "--hosts", "a:2", "--replace", "1", "p"},  // the store would be rank 0's
      {"-n", "2", "-x", "KOLO_JOIN=1", "p"},      // kolorun sets it for replacements only
      {"-n", "2", "--store-addr", "", "p"},       // an address or nothing
  };
  for (const auto& args : bad) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_THROW(parse(args), InvalidArgument) << joined;
  }
}

// CLI11 parses kolorun as a prefix command: the first argument that is not an option is the
// program, and everything from it on is the program's, however much it looks like kolorun's.
TEST(KolorunOptions, EverythingFromTheProgramOnIsTheProgramsOwn) {
  LaunchOptions o = parse({"-n", "2", "prog", "--nproc", "5", "-np", "3", "-x", "A=1", "-t", "--", "--help", "-h", "-V"});
  EXPECT_EQ(o.nproc, 2);
  EXPECT_FALSE(o.tag_output);
  EXPECT_FALSE(o.show_help);
  EXPECT_FALSE(o.show_version);
  EXPECT_TRUE(o.extra_env.empty());
  EXPECT_EQ(o.program, (std::vector<std::string>{"prog", "--nproc", "5", "-np", "3", "-x", "A=1", "-t", "--", "--help",
                                                 "-h", "-V"}));
  // The program's own "--": only the first one, before the program, is kolorun's.
  EXPECT_EQ(parse({"-n", "1", "--", "prog", "--", "x"}).program, (std::vector<std::string>{"prog", "--", "x"}));
  // -x takes one value: what follows it is the program again.
  LaunchOptions x = parse({"-n", "1", "-x", "A=1", "prog", "arg"});
  EXPECT_EQ(x.program, (std::vector<std::string>{"prog", "arg"}));
  ASSERT_EQ(x.extra_env.size(), 1u);
  // mpirun's -np is rewritten before the program only; a program's "-np" stays as it is.
  LaunchOptions np = parse({"-np", "2", "mpiprog", "-np", "4"});
  EXPECT_EQ(np.nproc, 2);
  EXPECT_EQ(np.program, (std::vector<std::string>{"mpiprog", "-np", "4"}));
  // A value that looks like an option is still the value.
  EXPECT_EQ(parse({"-n", "1", "--master-addr", "-np", "p"}).master_addr, "-np");
  EXPECT_EQ(parse({"-n", "1", "--launch-agent", "-np", "p"}).program, std::vector<std::string>{"p"});
}

TEST(KolorunOptions, ClusteredShortFlagsRepeatsAndEmptyValues) {
  LaunchOptions o = parse({"-tn", "3", "p"});
  EXPECT_TRUE(o.tag_output);
  EXPECT_EQ(o.nproc, 3);
  LaunchOptions x = parse({"-tx", "A=1", "-n2", "p"});
  EXPECT_TRUE(x.tag_output);
  ASSERT_EQ(x.extra_env.size(), 1u);
  EXPECT_EQ(x.extra_env[0].first, "A");
  EXPECT_EQ(parse({"-n", "2", "-n", "3", "p"}).nproc, 3) << "the last one counts, as before";
  EXPECT_EQ(parse({"--hosts", "a:2", "-n", "2", "p"}).nproc, 2);
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"--nproc=", "4", "p"},          // an empty attached value is not the next argument
           {"-n", "2", "--timeout=", "5", "p"},
           {"-n", "2", "-5", "p"},           // not an option of kolorun's, not a program either
           {"-n", "2", "-tq", "p"},          // -q is unknown
           {"-n", "2", "--help=yes", "p"},   // flags take no value
           {"-n", "2", "-x"},                // -x needs one
       }) {
    std::string joined;
    for (const auto& a : bad) joined += a + " ";
    EXPECT_THROW(parse(bad), InvalidArgument) << joined;
  }
}

TEST(KolorunOptions, HelpListsEveryOption) {
  const std::string help = usage_text();
  EXPECT_EQ(help.rfind("Usage: kolorun", 0), 0u) << help;
  for (const char* flag : {"-n,", "--nproc", "-np", "--nproc-per-node", "--nproc_per_node", "-t,", "--tag-output",
                           "--timeout", "--master-addr", "--master-port", "-H,", "--hosts", "--host ", "--launch-agent",
                           "-x ", "--bind-to", "-h,", "--help", "-V,", "--version", "  --  ", "KOLO_LAUNCH_GRACE"})
    EXPECT_NE(help.find(flag), std::string::npos) << flag << " is missing from --help:\n" << help;
}

TEST(KolorunOptions, GraceSeconds) {
  EXPECT_DOUBLE_EQ(parse_grace_seconds(nullptr), kDefaultGraceSeconds);
  EXPECT_DOUBLE_EQ(parse_grace_seconds(""), kDefaultGraceSeconds);
  EXPECT_DOUBLE_EQ(parse_grace_seconds("0"), 0.0);
  EXPECT_DOUBLE_EQ(parse_grace_seconds("1.5"), 1.5);
  EXPECT_THROW(parse_grace_seconds("-1"), InvalidArgument);
  EXPECT_THROW(parse_grace_seconds("fast"), InvalidArgument);
  EXPECT_THROW(parse_grace_seconds("nan"), InvalidArgument);
}

TEST(KolorunBinding, ParsesTheModeAndPlansOneRankPerCpu) {
  EXPECT_EQ(parse_launch_options({"--bind-to", "core", "-n", "2", "p"}).bind, BindMode::core);
  EXPECT_EQ(parse_launch_options({"--bind-to=none", "-n", "2", "p"}).bind, BindMode::none);
  EXPECT_EQ(parse_launch_options({"-n", "2", "p"}).bind, BindMode::automatic);
  EXPECT_THROW(parse_launch_options({"--bind-to", "socket", "-n", "2", "p"}), InvalidArgument);
  EXPECT_THROW(parse_launch_options({"--bind-to", "-n", "2", "p"}), InvalidArgument);

  const std::vector<int> cpus = {2, 5, 7};  // a machine where kolorun may use these three
  EXPECT_EQ(plan_binding(BindMode::automatic, 2, true, cpus), (std::vector<int>{2, 5}));
  EXPECT_EQ(plan_binding(BindMode::automatic, 3, true, cpus), (std::vector<int>{2, 5, 7}));
  EXPECT_TRUE(plan_binding(BindMode::automatic, 4, true, cpus).empty()) << "more ranks than CPUs: unbound";
  EXPECT_TRUE(plan_binding(BindMode::automatic, 2, false, cpus).empty()) << "--hosts: ranks run elsewhere";
  EXPECT_TRUE(plan_binding(BindMode::none, 2, true, cpus).empty());
  EXPECT_EQ(plan_binding(BindMode::core, 3, true, cpus), (std::vector<int>{2, 5, 7}));
  EXPECT_THROW(plan_binding(BindMode::core, 4, true, cpus), InvalidArgument);
  EXPECT_THROW(plan_binding(BindMode::core, 2, false, cpus), InvalidArgument);
}

}  // namespace
}  // namespace kolo::launcher
