// Kept for code that includes this path: BackingStore now lives in
// <blkcrypt/backing_store.hpp>, shared by dm-crypt and the verity engines,
// with dm:: spellings of its names.
#pragma once

#include <blkcrypt/backing_store.hpp>
