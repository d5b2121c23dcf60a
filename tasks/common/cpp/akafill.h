// akafill.h - counter-based uniform fills: element i of a fill is a pure function of (seed,
// stream, i), computed the same way, bit for bit, by the host (akt::fillUniform in akaconfig.h,
// which tasks call from akaGenerate) and by a GPU kernel (the hip driver's, driver_main.hip).
// That lets the hip driver make every timed call's fresh inputs on the device in microseconds,
// where generating them on the host took seconds per call for large tensors, while the reference
// still regenerates any kept call's inputs on the host from its seed.
//
// Bit-exactness rests on three choices: the random bits come from integer arithmetic only
// (splitmix64's finaliser over a counter); the value in [lo, hi) is lo + (hi - lo) * u with u
// a multiple of 2^-24, whose product with a float is exact in double, so a fused multiply-add
// and a separate multiply and add round alike; and the narrowing to f16 or bf16 is integer
// code, not a library or hardware conversion.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define AKAFILL_HD __host__ __device__
#else
#define AKAFILL_HD
#endif

namespace akafill {

// What a fill writes: f32 values, or f16 or bf16 values rounded to nearest even.
enum class Kind : uint8_t { F32 = 0, F16 = 1, BF16 = 2 };

AKAFILL_HD inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The key of one fill: distinct streams of one seed (one per tensor) are independent.
AKAFILL_HD inline uint64_t keyOf(uint64_t seed, uint32_t stream) {
  return mix(seed ^ mix(0x6a09e667f3bcc909ull + stream));
}

AKAFILL_HD inline float uniformAt(uint64_t key, uint64_t i, float lo, float hi) {
  const uint64_t bits = mix(key + (i + 1) * 0x9e3779b97f4a7c15ull);
  const float u = static_cast<float>(bits >> 40) * 0x1.0p-24f;  // [0, 1), exact
  return static_cast<float>(static_cast<double>(lo) + static_cast<double>(hi - lo) * static_cast<double>(u));
}

AKAFILL_HD inline uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __float_as_uint(f);
#else
  uint32_t x;
  memcpy(&x, &f, 4);
  return x;
#endif
}

// IEEE half, round to nearest even, from the bits alone (NaN becomes a quiet NaN).
AKAFILL_HD inline uint16_t toHalf(float f) {
  const uint32_t x = floatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u;
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds to 65536 or more: infinity
  const int32_t exp = static_cast<int32_t>(ax >> 23) - 127;
  if (exp < -14) {  // subnormal half (or zero): units of 2^-24
    if (exp < -25) return sign;  // below half of the smallest subnormal
    const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    const int shift = -exp - 1;  // value in units of 2^-24 = mant >> (shift)
    const uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    return sign | static_cast<uint16_t>(q + (rem > half || (rem == half && (q & 1u))));
  }
  const uint32_t mant = ax & 0x7fffffu, q = mant >> 13, rem = mant & 0x1fffu;
  uint32_t h = (static_cast<uint32_t>(exp + 15) << 10) | q;
  h += (rem > 0x1000u || (rem == 0x1000u && (q & 1u)));  // a carry into the exponent is right
  return sign | static_cast<uint16_t>(h);
}

// bfloat16, round to nearest even (NaN stays a NaN).
AKAFILL_HD inline uint16_t toBf16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

// Writes element i of a fill into `out` (an array of `kind`).
AKAFILL_HD inline void store(void* out, Kind kind, uint64_t i, float v) {
  switch (kind) {
    case Kind::F32: static_cast<float*>(out)[i] = v; break;
    case Kind::F16: static_cast<uint16_t*>(out)[i] = toHalf(v); break;
    case Kind::BF16: static_cast<uint16_t*>(out)[i] = toBf16(v); break;
  }
}

}  // namespace akafill
