#include "engine/shrink.hpp"

#include <algorithm>
#include <thread>

#include "common/log.hpp"
#include "kolo/error.hpp"

namespace kolo::engine {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string encode_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

std::optional<std::vector<int>> decode_ranks(const std::string& text) {
  std::vector<int> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    if (item.empty() || item.size() > 9 || item.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    out.push_back(std::stoi(item));
    at = end + 1;
  }
  return out;
}

namespace {

std::string text_of(const Bytes& b) { return std::string(b.begin(), b.end()); }

std::string label(const ShrinkRequest& req) {
  return "shrink of group " + req.group + " to generation " + std::to_string(req.generation) + " (rank " +
         std::to_string(req.rank) + " of " + std::to_string(req.size) + ")";
}

}  // namespace

std::vector<int> agree_survivors(Store& store, const ShrinkRequest& req, const std::function<void()>& on_present) {
  const size_t n = static_cast<size_t>(req.size);
  const std::string members_key = req.ns + "/members";
  auto present_key = [&](int r) { return req.ns + "/present/" + std::to_string(r); };
  store.set(present_key(req.rank), "lost " + encode_ranks(req.lost));
  // A TCPStore's SET has no reply: read it back, so that it is in before the abort goes out.
  if (!store.check({present_key(req.rank)}))
    throw Error("kolo: " + label(req) + ": the store lost this rank's presence key " + present_key(req.rank));
  on_present();

  std::vector<bool> present(n, false), lost(n, false), named(n, !req.exclude.has_value());
  present[static_cast<size_t>(req.rank)] = true;
  for (int r : req.lost)
    if (r >= 0 && static_cast<size_t>(r) < n) lost[static_cast<size_t>(r)] = true;
  if (req.exclude) {
    named.assign(n, true);
    for (int r : *req.exclude) named[static_cast<size_t>(r)] = false;
  }
  std::vector<int> named_list;
  for (size_t r = 0; r < n; ++r)
    if (named[r]) named_list.push_back(static_cast<int>(r));

  // Presence and decisions arrive within milliseconds when the survivors saw the failure
  // together: poll fast at first, then every 20 ms, never past the deadlines below.
  milliseconds pause(1);
  std::vector<int> decided;
  for (;;) {
    if (store.check({members_key})) {
      const std::string text = store.get_string(members_key);
      auto d = decode_ranks(text);
      if (!d) throw Error("kolo: " + label(req) + ": the store holds a malformed member list '" + text + "' at " + members_key);
      decided = std::move(*d);
      break;
    }
    for (size_t r = 0; r < n; ++r) {
      if (present[r] || !store.check({present_key(static_cast<int>(r))})) continue;
      present[r] = true;
      const std::string v = store.get_string(present_key(static_cast<int>(r)));
      if (v.rfind("lost ", 0) == 0)
        if (auto l = decode_ranks(v.substr(5)))
          for (int x : *l)
            if (x >= 0 && static_cast<size_t>(x) < n) lost[static_cast<size_t>(x)] = true;
    }
    std::vector<int> here;
    for (size_t r = 0; r < n; ++r)
      if (present[r]) here.push_back(static_cast<int>(r));
    const auto now = Clock::now();
    std::optional<std::vector<int>> proposal;
    if (req.exclude) {
      std::vector<int> missing;
      for (int r : named_list)
        if (!present[static_cast<size_t>(r)]) missing.push_back(r);
      if (missing.empty()) {
        proposal = named_list;
      } else if (now >= req.deadline) {
        throw TimeoutError("kolo: " + label(req) + " timed out: rank(s) " + encode_ranks(missing) +
                               ", named as survivors, did not call shrink in time (present: " + encode_ranks(here) + ")",
                           missing.front());
      }
    } else {
      bool complete = true;
      for (size_t r = 0; r < n; ++r) complete = complete && (present[r] || lost[r]);
      const auto me = std::find(here.begin(), here.end(), req.rank);
      const auto pos = static_cast<size_t>(me - here.begin());
      if (pos == 0 && (complete || now >= req.deadline)) {
        proposal = here;
      } else if (now >= req.deadline + req.takeover * static_cast<int64_t>(pos)) {
        // Every present rank below this one had its turn and published nothing: presumed gone.
        proposal = std::vector<int>(me, here.end());
        KOLO_LOG(warn, label(req) << ": rank(s) " << encode_ranks(std::vector<int>(here.begin(), me))
                                  << " answered but did not publish the members; proposing without them");
      }
    }
    if (proposal) {
      const std::string want = encode_ranks(*proposal);
      const Bytes got = store.compare_set(members_key, Bytes(), Bytes(want.begin(), want.end()));
      auto d = decode_ranks(text_of(got));
      if (!d) throw Error("kolo: " + label(req) + ": the store holds a malformed member list '" + text_of(got) + "'");
      decided = std::move(*d);
      break;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, milliseconds(20));
  }

  if (std::find(decided.begin(), decided.end(), req.rank) == decided.end())
    throw ExcludedError("kolo: rank " + std::to_string(req.rank) + " of group " + req.group + " was excluded from generation " +
                            std::to_string(req.generation) + ": the survivors formed it from ranks " + encode_ranks(decided) +
                            (req.exclude ? std::string(" as named") : std::string(" before this rank answered (was it stopped?)")),
                        req.generation);
  if (req.exclude && decided != named_list)
    throw InvalidArgument("kolo: " + label(req) + " refused: ranks disagree on the survivors: this rank named " +
                          encode_ranks(named_list) + ", another named " + encode_ranks(decided));
  KOLO_LOG(info, label(req) << ": members " << encode_ranks(decided));
  return decided;
}

}  // namespace kolo::engine
