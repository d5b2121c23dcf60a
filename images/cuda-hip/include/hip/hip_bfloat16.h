#pragma once
// HIP's older bfloat16 class (hip_bfloat16): 16 bits of storage in `data`, converted to and
// from float with round-to-nearest-even, arithmetic done in float. Usable on host and device.
// New code should prefer __hip_bfloat16 from hip/hip_bf16.h.

#include "hip/hip_common.h"

#include <cstdint>
#include <cstring>

struct hip_bfloat16 {
  uint16_t data;

  enum truncate_t { truncate };

  AKAD_HIP_HOST_DEVICE hip_bfloat16() : data(0) {}
  AKAD_HIP_HOST_DEVICE hip_bfloat16(float f) : data(roundToBfloat16(f)) {}
  // Drops the low 16 bits instead of rounding, as HIP's truncating constructor does.
  AKAD_HIP_HOST_DEVICE hip_bfloat16(float f, truncate_t) : data(static_cast<uint16_t>(bitsOf(f) >> 16)) {}

  AKAD_HIP_HOST_DEVICE operator float() const {
    uint32_t bits = static_cast<uint32_t>(data) << 16;
    return floatOf(bits);
  }

  AKAD_HIP_HOST_DEVICE static hip_bfloat16 round_to_bfloat16(float f) {
    hip_bfloat16 r;
    r.data = roundToBfloat16(f);
    return r;
  }

  AKAD_HIP_HOST_DEVICE hip_bfloat16& operator+=(hip_bfloat16 o) { return *this = hip_bfloat16(float(*this) + float(o)); }
  AKAD_HIP_HOST_DEVICE hip_bfloat16& operator-=(hip_bfloat16 o) { return *this = hip_bfloat16(float(*this) - float(o)); }
  AKAD_HIP_HOST_DEVICE hip_bfloat16& operator*=(hip_bfloat16 o) { return *this = hip_bfloat16(float(*this) * float(o)); }
  AKAD_HIP_HOST_DEVICE hip_bfloat16& operator/=(hip_bfloat16 o) { return *this = hip_bfloat16(float(*this) / float(o)); }

 private:
  AKAD_HIP_HOST_DEVICE static uint32_t bitsOf(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    return u;
  }
  AKAD_HIP_HOST_DEVICE static float floatOf(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof(f));
    return f;
  }
  AKAD_HIP_HOST_DEVICE static uint16_t roundToBfloat16(float f) {
    uint32_t u = bitsOf(f);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
      // NaN: keep it a NaN even if the payload lives only in the low bits.
      return static_cast<uint16_t>((u >> 16) | 0x0040u);
    }
    // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit, then truncate.
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
};

AKAD_HIP_HOST_DEVICE inline hip_bfloat16 operator+(hip_bfloat16 a, hip_bfloat16 b) { return hip_bfloat16(float(a) + float(b)); }
AKAD_HIP_HOST_DEVICE inline hip_bfloat16 operator-(hip_bfloat16 a, hip_bfloat16 b) { return hip_bfloat16(float(a) - float(b)); }
AKAD_HIP_HOST_DEVICE inline hip_bfloat16 operator*(hip_bfloat16 a, hip_bfloat16 b) { return hip_bfloat16(float(a) * float(b)); }
AKAD_HIP_HOST_DEVICE inline hip_bfloat16 operator/(hip_bfloat16 a, hip_bfloat16 b) { return hip_bfloat16(float(a) / float(b)); }
AKAD_HIP_HOST_DEVICE inline hip_bfloat16 operator-(hip_bfloat16 a) {
  a.data ^= 0x8000u;
  return a;
}
AKAD_HIP_HOST_DEVICE inline bool operator==(hip_bfloat16 a, hip_bfloat16 b) { return float(a) == float(b); }
AKAD_HIP_HOST_DEVICE inline bool operator!=(hip_bfloat16 a, hip_bfloat16 b) { return float(a) != float(b); }
AKAD_HIP_HOST_DEVICE inline bool operator<(hip_bfloat16 a, hip_bfloat16 b) { return float(a) < float(b); }
AKAD_HIP_HOST_DEVICE inline bool operator>(hip_bfloat16 a, hip_bfloat16 b) { return float(a) > float(b); }
AKAD_HIP_HOST_DEVICE inline bool operator<=(hip_bfloat16 a, hip_bfloat16 b) { return float(a) <= float(b); }
AKAD_HIP_HOST_DEVICE inline bool operator>=(hip_bfloat16 a, hip_bfloat16 b) { return float(a) >= float(b); }
