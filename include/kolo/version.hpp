#pragma once
namespace kolo {
constexpr int kVersionMajor = 0;
constexpr int kVersionMinor = 1;
constexpr int kProtocolVersion = 2;  // bumped whenever the wire format changes
const char* version_string();
}  // namespace kolo
