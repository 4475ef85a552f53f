// Exceptions thrown by kolo. Every error raised by a collective names the collective and its
// sequence number; errors caused by another process name that rank.
#pragma once
#include <stdexcept>
#include <string>

namespace kolo {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A bad argument, refused before any byte moved.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A bounded wait ran out of time. peer_rank() is the rank to blame, or -1: for a collective or
// point-to-point timeout, the rank at the end of the wait-for chain that the timed-out ranks
// settled through the group's store (the rank that did not report), else the rank waited for.
class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& what, int peer = -1) : Error(what), peer_(peer) {}
  int peer_rank() const { return peer_; }

 private:
  int peer_;
};

// A peer died, closed its connection, aborted, or sent something this rank did not expect.
// peer_rank() is the rank (in the group that raised it) that caused it, or -1 when unknown.
class PeerError : public Error {
 public:
  PeerError(const std::string& what, int peer) : Error(what), peer_(peer) {}
  int peer_rank() const { return peer_; }

 private:
  int peer_;
};

// Ranks called different collectives (or the same one with different arguments) at the same point.
class MismatchError : public PeerError {
 public:
  using PeerError::PeerError;
};

// This rank called ProcessGroup::shrink after the survivors had formed generation() without it
// (it answered after the deadline, e.g. it was stopped), or they named it excluded; or
// ProcessGroup::join found the group shut down (generation() its last) before it was admitted.
class ExcludedError : public Error {
 public:
  ExcludedError(const std::string& what, int generation) : Error(what), generation_(generation) {}
  int generation() const { return generation_; }

 private:
  int generation_;
};

}  // namespace kolo
