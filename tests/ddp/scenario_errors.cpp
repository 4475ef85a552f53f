// Scenarios "mismatch" (3 ranks: rank 1 sizes a parameter differently, rank 2 names one
// differently, so every rank must throw the same MismatchError naming the first difference and
// both ranks; then an extra parameter, a different compression, different bucket sizes) and "peer-dies" (2 ranks: rank 1 exits mid-step, rank 0's finish() must throw a
// PeerError naming rank 1 instead of hanging).
#include <cstdlib>
#include <string>
#include <thread>

#include "test_model.hpp"
#include "worker.hpp"

namespace kolo::ddptest {
namespace {

std::vector<DdpParam> contiguous(const std::vector<std::pair<std::string, size_t>>& shapes) {
  std::vector<DdpParam> layout;
  size_t offset = 0;
  for (const auto& [name, count] : shapes) {
    layout.push_back(DdpParam{name, offset, count});
    offset += count;
  }
  return layout;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Builds a DDP over `layout` and returns the MismatchError's text (empty if none was thrown).
std::string mismatch_text(Worker& w, const std::vector<DdpParam>& layout, int* peer,
                          const DdpOptions& options = model_options()) {
  size_t total = layout.back().offset + layout.back().count;
  std::vector<float> params(total, 1.0f), grads(total, 0.0f);
  try {
    DistributedDataParallel ddp(w.group, params.data(), grads.data(), total, layout, options);
  } catch (const MismatchError& e) {
    *peer = e.peer_rank();
    return e.what();
  }
  return "";
}

}  // namespace

void scenario_mismatch(Worker& w) {
  const int rank = w.group->rank();
  w.begin("a parameter sized differently on rank 1, named differently on rank 2");
  std::vector<DdpParam> layout = contiguous({{"embed.w", 64},
                                             {"h.0.attn.w", rank == 1 ? size_t{4096} : size_t{2048}},
                                             {rank == 2 ? "lm_head.w" : "head.w", 32}});
  int peer = -2;
  std::string text = mismatch_text(w, layout, &peer);
  w.say("MISMATCH " + text);
  w.expect(!text.empty(), "no MismatchError");
  for (const char* part : {"'h.0.attn.w'", "rank 1 has", "4096", "where rank 0 has", "2048", "ranks 1, 2"})
    w.expect(contains(text, part), std::string("the message lacks \"") + part + "\": " + text);
  w.expect(peer == (rank == 1 ? 0 : 1), "peer_rank() = " + std::to_string(peer));

  w.begin("rank 2 has an extra parameter");
  std::vector<std::pair<std::string, size_t>> shapes = {{"embed.w", 64}, {"head.w", 32}};
  if (rank == 2) shapes.push_back({"extra.b", 5});
  text = mismatch_text(w, contiguous(shapes), &peer);
  w.expect(contains(text, "rank 2 has 3 parameters where rank 0 has 2") && contains(text, "'extra.b'"),
           "unexpected message: " + text);

  w.begin("options that change the collectives must agree too");
  const std::vector<DdpParam> agreed = contiguous({{"embed.w", 64}, {"head.w", 32}});
  DdpOptions compressed = model_options();
  if (rank == 1) compressed.compression = GradCompression::bfloat16;
  text = mismatch_text(w, agreed, &peer, compressed);
  w.expect(contains(text, "rank 1 uses compression bfloat16 where rank 0 uses none"), "unexpected message: " + text);
  DdpOptions sized = model_options();
  if (rank == 2) sized.bucket_bytes *= 2;
  text = mismatch_text(w, agreed, &peer, sized);
  w.expect(contains(text, "rank 2 uses bucket sizes 2048/12288 bytes where rank 0 uses 2048/6144"),
           "unexpected message: " + text);

  w.begin("the group still works after a refused layout");
  const std::vector<DdpParam> same = contiguous({{"a", 10}, {"b", 3}});
  std::vector<float> params(13, 0.0f), grads(13, static_cast<float>(rank));
  DistributedDataParallel ddp(w.group, params.data(), grads.data(), 13, same, model_options());
  ddp.finish();
  const float mean = static_cast<float>(w.group->size() - 1) / 2.0f;
  for (float g : grads) w.expect(g == mean, "grad " + std::to_string(g) + ", expected " + std::to_string(mean));
}

void scenario_peer_dies(Worker& w) {
  w.begin("rank 1 exits before its step");
  const std::vector<DdpParam> layout = model_layout();
  const size_t total = model_total(layout);
  std::vector<float> params(total, 0.0f), grads(total, 1.0f);
  DdpOptions o = model_options();
  o.timeout = std::chrono::milliseconds(20000);
  {
    DistributedDataParallel ddp(w.group, params.data(), grads.data(), total, layout, o);
    if (w.group->rank() == 1) {
      // Rank 1 received the whole broadcast, so rank 0's part of it is done; the pause lets
      // rank 0 return from the constructor and wait in finish() before the death.
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      std::_Exit(0);  // dies without a goodbye
    }
    bool peer_error = false;
    try {
      ddp.finish();
    } catch (const PeerError& e) {
      peer_error = e.peer_rank() == 1 && contains(e.what(), "rank 1") && contains(e.what(), "allreduce");
      w.say(std::string("FINISH THREW ") + e.what());
    } catch (const TimeoutError& e) {
      w.say(std::string("FINISH TIMED OUT ") + e.what());
    }
    w.expect(peer_error, "finish() did not throw a PeerError naming rank 1 and the allreduce");
  }
  w.group->abort("peer-dies scenario done");
  w.group.reset();
}

}  // namespace kolo::ddptest
