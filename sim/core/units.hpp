// Strong physical units used throughout ddlsim.
//
// Every quantity is a double in SI base units (seconds, bytes, FLOP) wrapped in a
// distinct type, so that a byte count cannot be passed where a duration is expected.
// Only dimensionally meaningful operators exist: Bytes / BytesPerSecond -> Seconds,
// Flops / FlopsPerSecond -> Seconds, and scaling by a plain number.
#pragma once

#include <limits>

namespace ddlsim {

template <class Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(double v) : v_(v) {}
  [[nodiscard]] constexpr double value() const { return v_; }

  constexpr Quantity& operator+=(Quantity o) { v_ += o.v_; return *this; }
  constexpr Quantity& operator-=(Quantity o) { v_ -= o.v_; return *this; }
  friend constexpr Quantity operator+(Quantity a, Quantity b) { return Quantity(a.v_ + b.v_); }
  friend constexpr Quantity operator-(Quantity a, Quantity b) { return Quantity(a.v_ - b.v_); }
  friend constexpr Quantity operator*(Quantity a, double k) { return Quantity(a.v_ * k); }
  friend constexpr Quantity operator*(double k, Quantity a) { return Quantity(a.v_ * k); }
  friend constexpr Quantity operator/(Quantity a, double k) { return Quantity(a.v_ / k); }
  friend constexpr double operator/(Quantity a, Quantity b) { return a.v_ / b.v_; }
  // Plain comparisons rather than a defaulted <=>: they compile to one instruction on
  // doubles, and the replay loop compares times constantly.
  friend constexpr bool operator==(Quantity a, Quantity b) { return a.v_ == b.v_; }
  friend constexpr bool operator!=(Quantity a, Quantity b) { return a.v_ != b.v_; }
  friend constexpr bool operator<(Quantity a, Quantity b) { return a.v_ < b.v_; }
  friend constexpr bool operator<=(Quantity a, Quantity b) { return a.v_ <= b.v_; }
  friend constexpr bool operator>(Quantity a, Quantity b) { return a.v_ > b.v_; }
  friend constexpr bool operator>=(Quantity a, Quantity b) { return a.v_ >= b.v_; }

 private:
  double v_ = 0.0;
};

struct SecondsTag {};
struct BytesTag {};
struct FlopsTag {};
struct BytesPerSecondTag {};
struct FlopsPerSecondTag {};

using Seconds = Quantity<SecondsTag>;               // s
using Bytes = Quantity<BytesTag>;                   // B
using Flops = Quantity<FlopsTag>;                   // floating-point operations
using BytesPerSecond = Quantity<BytesPerSecondTag>; // B/s
using FlopsPerSecond = Quantity<FlopsPerSecondTag>; // FLOP/s

constexpr Seconds operator/(Bytes b, BytesPerSecond r) { return Seconds(b.value() / r.value()); }
constexpr Seconds operator/(Flops f, FlopsPerSecond r) { return Seconds(f.value() / r.value()); }
constexpr Bytes operator*(BytesPerSecond r, Seconds t) { return Bytes(r.value() * t.value()); }
constexpr Bytes operator*(Seconds t, BytesPerSecond r) { return r * t; }

/// Binary byte multiples (what MiB and GiB figures in inputs and reports mean).
inline constexpr double kKiB = 1024.0;
inline constexpr double kMiB = 1024.0 * kKiB;
inline constexpr double kGiB = 1024.0 * kMiB;

/// A time that never comes: what an idle resource reports as its next event.
inline constexpr Seconds kNever{std::numeric_limits<double>::infinity()};

}  // namespace ddlsim
