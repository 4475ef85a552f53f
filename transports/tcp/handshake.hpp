// The first bytes on every TCP connection: who is calling, for which group, and the job secret.
#pragma once
#include <string>
#include <vector>

#include "transports/transport.hpp"

namespace kolo::tcp {

// Connecting side: announces itself to `peer`.
void send_hello(int fd, const transport::Bootstrap& b, int peer);
// Connecting side: reads the acceptor's verdict; throws a clear error when refused.
void expect_hello_reply(int fd, const transport::Bootstrap& b, int peer);
// Accepting side: reads and checks a hello, answers it. On success sets *peer and returns true;
// on refusal answers with the reason, sets *why and returns false. `want` marks the ranks that
// may still connect.
bool accept_hello(int fd, const transport::Bootstrap& b, const std::vector<bool>& want, int* peer, std::string* why);

uint64_t group_hash(const std::string& prefix);

}  // namespace kolo::tcp
