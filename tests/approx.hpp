// A relative Approx for the tests.
//
// doctest's Approx(x).epsilon(e) accepts a when |a - x| < e (scale + max(|a|, |x|)) with
// scale 1 by default: for quantities well below 1 (a collective's seconds, a fraction) e
// then acts as an absolute tolerance, and a check of a millisecond within "1%" passes
// whatever it computes. The tests' expectations are relative ("within 1% of the closed
// form"), so here the scale is negligible (1e-290 rather than 0, so that an expected 0
// still accepts an exact 0 under doctest's strict <) and e is a relative tolerance.
#pragma once

#include <doctest/doctest.h>

namespace ddlsim::test {

inline doctest::Approx Approx(double value) { return doctest::Approx(value).scale(1e-290); }

}  // namespace ddlsim::test
