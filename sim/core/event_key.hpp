// The one encoding both event queues (event_queue.hpp, tournament_queue.hpp) order by.
//
// An event is one 128-bit integer: the bits of its time (a double >= 0, whose IEEE-754
// pattern read as an unsigned integer orders like the number) above (sequence << 24 |
// key). A single integer comparison, which GCC and Clang compile to cmp/sbb without a
// branch, then orders events by time and, at equal times, by the order they were
// scheduled (2^40 schedules before the sequence wraps); the key rides along.
#pragma once

#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "sim/core/units.hpp"

namespace ddlsim::event_key {

__extension__ using Key = unsigned __int128;

inline constexpr unsigned kKeyBits = 24;
inline constexpr std::uint32_t kKeyMask = (1u << kKeyBits) - 1;

/// Throws std::length_error if a queue named `queue` is asked for more keys than fit.
inline void check_keys(std::size_t keys, const char* queue) {
  if (keys > (std::size_t{1} << kKeyBits)) throw std::length_error(std::string(queue) + ": more than 2^24 keys");
}

inline Key make(Seconds t, std::uint64_t seq, std::uint32_t key) {
  return (Key{std::bit_cast<std::uint64_t>(t.value() + 0.0)} << 64) | ((seq << kKeyBits) | key);
}
inline std::uint32_t key_of(Key k) { return static_cast<std::uint32_t>(k) & kKeyMask; }
inline Seconds time_of(Key k) { return Seconds(std::bit_cast<double>(static_cast<std::uint64_t>(k >> 64))); }

}  // namespace ddlsim::event_key
