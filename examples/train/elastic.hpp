// kolo-train --elastic: losing a rank without losing the run. When a collective fails because a
// rank died, the survivors
//   1. shrink the world (ProcessGroup::shrink, whoever answers) and drop the reducer of the old one,
//   2. agree on the last step they all completed (the smallest of their newest ones),
//   3. restore that step's state: --zero 0 from memory (StepMemory below: every rank holds the
//      whole AdamW state, so any survivor's copy is the lost rank's too); --zero 1 from the newest
//      checkpoint this run wrote, or the run's start (a lost rank's AdamW shard exists nowhere else),
//   4. rebuild the reducer on the new group and carry on with the same global batch, split as
//      evenly as the new size allows (DistributedSampler's uneven shares; train_step.hpp weights
//      each rank's gradients by its share, so the update is the one the full group would make).
// The loss curve continues: the steps after the rollback are retrained and printed again.
#pragma once
#include <cstdint>
#include <deque>
#include <exception>
#include <string>
#include <utility>

#include "checkpoint.hpp"
#include "kolo/process_group.hpp"

namespace kolo::train {

// The whole state after each of the last two completed steps (parameters, AdamW's moments and
// step count, sampler position, generator, loss history: a checkpoint's content, in memory). Two,
// because the survivors may disagree by one step: a rank whose last collective of step s finished
// before the peer died has completed s while another has not; step s+1 cannot complete anywhere
// without every rank, so they never differ by more.
class StepMemory {
 public:
  void keep(TrainState state);
  // The state after `step`; throws kolo::Error if it is not among the two kept.
  TrainState take(uint64_t step) const;
  // The newest step kept; 0 before the first keep().
  uint64_t newest() const { return states_.empty() ? 0 : states_.back().step; }
  // The printed line of each of the last two steps (every rank formats it, rank 0 prints it).
  void keep_line(uint64_t step, std::string line);
  std::string line(uint64_t step) const;  // "" when not kept
  void clear() { states_.clear(); }

 private:
  std::deque<TrainState> states_;
  std::deque<std::pair<uint64_t, std::string>> lines_;
};

// --zero 1's rollback point: the newest checkpoint in `dir` that a run which started at
// first_step (> 0: resumed from that checkpoint) and checkpoints every ckpt_every steps wrote by
// current_step, and that is on disk; 0 for none (the run's start). Called after the shrink, so a
// live rank 0 has finished writing; one that died while writing left no file (save_checkpoint
// renames a complete one into place), and the one before is taken. Every survivor must see the
// same directory (one host, or a shared file system).
uint64_t newest_checkpoint_written(const std::string& dir, uint64_t first_step, uint64_t current_step, int ckpt_every);

// Whether `e`, thrown by a collective, is the kind a lost rank causes (a peer that vanished, a
// timeout, an abort) rather than a mistake that would recur on the survivors (a bad argument, a
// layout mismatch) or this rank's own exclusion from a shrink.
bool is_rank_loss(const std::exception& e);

// The rank `e` blames ("rank 2"), or "a rank" when it names none.
std::string blamed_rank(const std::exception& e);

// "6+5+5": how `global_batch` samples fall on `ranks` ranks (DistributedSampler's uneven shares).
std::string shares_text(size_t global_batch, int ranks);

// The samples per rank per micro-batch, for the summary: "4" when every rank's micro-batches hold
// the same number, else the range ("5-6": 16 over 3 ranks, accum 1), so that a run that shrank
// (or grew) reports the split it ended with, not the launch's --batch.
std::string local_batch_text(size_t global_batch, int ranks, int accum);

}  // namespace kolo::train
