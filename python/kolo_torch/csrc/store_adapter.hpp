// kolo::Store over any c10d::Store (File, TCP, Hash, Prefix): torch hands the backend creator a
// c10d store (already prefixed with the group's name) and kolo's group setup talks through it.
#pragma once
#include <memory>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "kolo/store.hpp"

namespace kolo_torch {

std::shared_ptr<kolo::Store> adapt_store(c10::intrusive_ptr<c10d::Store> store);

}  // namespace kolo_torch
