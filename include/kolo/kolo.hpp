// The whole public API of kolo.
#pragma once
#include "kolo/buffer.hpp"
#include "kolo/ddp.hpp"
#include "kolo/error.hpp"
#include "kolo/options.hpp"
#include "kolo/process_group.hpp"
#include "kolo/sharded_ddp.hpp"
#include "kolo/store.hpp"
#include "kolo/types.hpp"
#include "kolo/version.hpp"
#include "kolo/work.hpp"
