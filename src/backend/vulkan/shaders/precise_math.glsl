// f32 arithmetic rounded as the host rounds it, for shaders whose small errors the data
// magnifies. Vulkan rounds f32 add, sub and mul correctly, but not division, exp, sin or cos
// (lavapipe's exp is often a few ulps off), and fma() need not be fused (on lavapipe it is
// not). The error-free sums and products below (Knuth, Dekker) carry the rounding error as a
// second float; `precise` forbids the compiler to fuse or reorder them.

// a + b = s + e exactly.
void exact_sum(float a, float b, out float s, out float e) {
  precise float sum = a + b;
  precise float b_part = sum - a;
  precise float err = (a - (sum - b_part)) + (b - b_part);
  s = sum;
  e = err;
}

// a * b = p + e exactly (barring overflow): each factor splits into two 12-bit halves whose
// products f32 holds exactly.
void exact_product(float a, float b, out float p, out float e) {
  precise float prod = a * b;
  precise float a_big = 4097.0 * a;
  precise float a_hi = a_big - (a_big - a);
  precise float a_lo = a - a_hi;
  precise float b_big = 4097.0 * b;
  precise float b_hi = b_big - (b_big - b);
  precise float b_lo = b - b_hi;
  precise float err = ((a_hi * b_hi - prod) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo;
  p = prod;
  e = err;
}

// a / b rounded to nearest as IEEE division is (GLSL's may be 2.5 ulps off): one Newton
// step from the device's quotient, with its exact residual.
float divide_rounded(float a, float b) {
  const float q = a / b;
  float p, e;
  exact_product(q, b, p, e);
  precise float residual = (a - p) - e;
  precise float corrected = q + residual / b;
  return corrected;
}

// e^x within about 0.51 ulp (the correctly rounded value for all but ~1 in 500 arguments) for
// x in [-80, 88]: x = n ln2 + r with |r| <= ln2 / 2, and e^r = 1 + r + r^2/2! + ... + r^9/9!
// (the rest is below 1e-11), its first three terms summed without rounding.
float exp_rounded(float x) {
  const float LN2_HI = 0.693145751953125;     // 15 significant bits: n * LN2_HI is exact
  const float LN2_LO = 1.428606765330187e-6;  // ln 2 - LN2_HI
  const float n = round(x * 1.4426950408889634);
  precise float r_hi = x - n * LN2_HI;  // exact: x is close to n * LN2_HI
  float r, dr;
  exact_sum(r_hi, -n * LN2_LO, r, dr);
  float r2, r2_err;
  exact_product(r, r, r2, r2_err);
  // (r^3/3! + ... + r^9/9!) / r^3
  const float series =
      1.0 / 6 +
      r * (1.0 / 24 + r * (1.0 / 120 + r * (1.0 / 720 + r * (1.0 / 5040 + r * (1.0 / 40320 +
                                                                               r / 362880)))));
  // The terms too small to need exact sums: r^3 onwards, the rounding error of r^2, and
  // e^r (e^dr - 1) ~ dr (1 + r).
  precise float small_terms = r2 * r * series + 0.5 * r2_err + dr * (1.0 + r);
  float s1, s1_err, s2, s2_err;
  exact_sum(1.0, r, s1, s1_err);
  exact_sum(s1, 0.5 * r2, s2, s2_err);
  precise float e_r = s2 + ((s1_err + s2_err) + small_terms);
  return ldexp(e_r, int(n));  // exact scaling by 2^n
}

// x - 2 pi k for the k that puts it in [-pi, pi], exact to f32: a timestep makes hundreds of
// radians.
float reduce_angle(float x) {
  const float TWO_PI_HI = 6.2831854820251465;      // 2 pi rounded to f32
  const float TWO_PI_LO = -1.7484556000744883e-7;  // 2 pi - TWO_PI_HI
  const float k = round(x * 0.15915494309189535);
  float p, e;
  exact_product(k, TWO_PI_HI, p, e);
  precise float r = ((x - p) - e) - k * TWO_PI_LO;
  return r;
}

// sin and cos of an angle in [-pi, pi] from add and multiply alone (which Vulkan rounds
// correctly), within about an ulp: the builtins are only promised an absolute error of
// 2^-11 there (NVIDIA's differ from the host's by 3e-7). The angle is folded into
// [-pi/4, pi/4] by quarter turns (two-part pi/2, so the fold is exact to f32), then
// evaluated by the classic minimax polynomials of that interval.
float sin_poly(float r) {
  precise float r2 = r * r;
  precise float p = ((-1.9515295891e-4 * r2 + 8.3321608736e-3) * r2 - 1.6666654611e-1);
  precise float s = r + r * r2 * p;
  return s;
}
float cos_poly(float r) {
  precise float r2 = r * r;
  precise float p = ((2.443315711809948e-5 * r2 - 1.388731625493765e-3) * r2 +
                     4.166664568298827e-2);
  precise float c = 1.0 - 0.5 * r2 + r2 * r2 * p;
  return c;
}
// The angle in [-pi/4, pi/4] and the quarter turns taken off it (mod 4).
float fold_quarter(float x, out uint quadrant) {
  const float HALF_PI_HI = 1.5707963705062866;     // pi/2 rounded to f32
  const float HALF_PI_LO = -4.3711390001862426e-8; // pi/2 - HALF_PI_HI
  const float q = round(x * 0.6366197723675814);
  quadrant = uint(int(q) & 3);
  float p, e;
  exact_product(q, HALF_PI_HI, p, e);
  precise float r = ((x - p) - e) - q * HALF_PI_LO;
  return r;
}
float sin_precise(float x) {
  uint quadrant;
  const float r = fold_quarter(x, quadrant);
  if (quadrant == 0u) return sin_poly(r);
  if (quadrant == 1u) return cos_poly(r);
  if (quadrant == 2u) return -sin_poly(r);
  return -cos_poly(r);
}
float cos_precise(float x) {
  uint quadrant;
  const float r = fold_quarter(x, quadrant);
  if (quadrant == 0u) return cos_poly(r);
  if (quadrant == 1u) return -sin_poly(r);
  if (quadrant == 2u) return -cos_poly(r);
  return sin_poly(r);
}
