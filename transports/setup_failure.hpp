// When one rank's transport setup fails, the others must not wait out the timeout for a
// connection that will never come, nor report a side effect (a segment already unlinked, a
// closed socket) as if it were the cause. The first rank to fail records its reason in the
// store; the others poll it while they wait and report it instead of their own symptom.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "transports/transport.hpp"

namespace kolo::transport {

// Records "rank R: what" as the group's setup failure unless one is recorded already (the first
// cause wins). Never throws: a lost store only means the peers find out by timing out.
void publish_setup_failure(const Bootstrap& b, const std::string& what);

// The recorded setup failure of another rank of this group, if any. Throws PeerError when the
// store itself is gone (the rank that hosted it died): setup cannot finish then.
std::optional<std::string> peer_setup_failure(const Bootstrap& b);

// For a rank waiting for its peers' connections: throws PeerError with the recorded reason if
// another rank gave up, or if the store is gone; `context` (say, the connections this rank
// refused meanwhile) is appended to the message.
void throw_if_peer_gave_up(const Bootstrap& b, const std::string& context);

// Called once by every rank whose setup failed, just before it throws: counts this rank as
// having given up and waits (at most `linger`) until every rank has. Whichever rank hosts the
// store (rank 0, usually) thereby keeps it up long enough for the others to read the reason
// instead of finding the store gone. Never throws.
void acknowledge_setup_failure(const Bootstrap& b, std::chrono::milliseconds linger);

}  // namespace kolo::transport
