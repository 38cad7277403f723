// How many elements a deterministic read's job puts in a split (`deterministic=True`,
// docs/SEMANTICS.md "Reproducible order"). The consumer holds about a window of splits ahead of
// the one its order waits for, so a split's bytes times the window should stay near the hold's
// byte budget: small elements get larger splits (less per-split work: hand-outs, finish reports,
// task lists), large ones smaller splits (so several workers stay busy under the budget).
#pragma once

#include <cstdint>
#include <optional>

#include "conveyor/element.hpp"

namespace conveyor {

// A deterministic job's splits without a known element size: at most this many elements.
inline constexpr int64_t kDeterministicDefaultSplit = 1024;
// ...and with one: at most this many (a split lost with its worker is read again from its start).
inline constexpr int64_t kDeterministicLargestSplit = 8192;

// The bytes of tensor data every element of `spec` has, when the spec says: fixed-size dtypes
// (not string) and fully known shapes; nullopt otherwise (an unknown spec included).
std::optional<int64_t> static_element_bytes(const ElementSpec& spec);

// The most elements a deterministic job's split may have: hold_bytes / (window x element_bytes)
// within [1, kDeterministicLargestSplit] when the element size is known, else
// kDeterministicDefaultSplit. window >= 1, hold_bytes >= 1.
int64_t deterministic_split_cap(std::optional<int64_t> element_bytes, int64_t window,
                                int64_t hold_bytes);

} // namespace conveyor
