// The programs' command lines (kolorun, kolo-store, kolo-train, the micro-benchmarks) are
// CLI11's (Debian's libcli11-dev, header-only): this is what they share. Never included by the
// library itself. kolo-perf and its peers keep getopt_long, as nccl-tests do (bench/common).
//
// Conventions: every program adds -h/--help as an ordinary flag (its parser reports it; the
// program prints help() and exits 0), options given twice keep the last value (as getopt's
// loops did), and a flag given a value (--resume=yes) is an error.
#pragma once
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace kolo::cli {

// Help text: the usage lines, the description, the positional arguments, every option by
// group, the footer.
class UsageFirstFormatter : public CLI::Formatter {
 public:
  explicit UsageFirstFormatter(std::string usage) : usage_(std::move(usage)) { column_width(28); }
  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode mode) const override {
    std::string out = usage_;
    if (!app->get_description().empty()) out += app->get_description() + "\n";
    out += make_positionals(app);
    out += make_groups(app, mode);
    if (!app->get_footer().empty()) out += "\n" + app->get_footer() + "\n";
    // One blank line between groups (CLI11 leaves two).
    for (size_t at; (at = out.find("\n\n\n")) != std::string::npos;) out.erase(at, 1);
    return out;
  }

 private:
  std::string usage_;
};

// An App set up the shared way; `usage`: the usage lines, each ending in '\n'.
inline void configure(CLI::App& app, const std::string& usage) {
  app.set_help_flag();  // each program's own -h/--help flag (above)
  app.formatter(std::make_shared<UsageFirstFormatter>(usage));
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->disable_flag_override();
}

// -h/--help as an ordinary flag.
inline CLI::Option* add_help(CLI::App& app, bool& help, const std::string& what = "show this help") {
  return app.add_flag("-h,--help", help, what);
}

// Parses `args` (argv[1..], in order). Throws CLI::ParseError (unknown option, missing value,
// ...): its what() says which.
inline void parse(CLI::App& app, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  app.parse(args);
}

// The help text of `app` (what -h prints).
inline std::string help(const CLI::App& app) { return app.help(); }

}  // namespace kolo::cli
