// The .akt reader must round-trip every dtype and reject malformed or hostile files with an
// error, never a crash or an allocation sized by the header's claims.
#include "akt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

namespace {

class AktTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("akt_test." + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void writeRaw(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  fs::path dir_;
};

template <class T> void putLe(std::string& s, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) s.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
}

// A header for one tensor named "x" with the given dtype code and dims, without data.
std::string header(uint8_t dtype, const std::vector<uint64_t>& dims, uint32_t count = 1) {
  std::string s = "AKT1";
  putLe<uint32_t>(s, count);
  putLe<uint16_t>(s, 1);
  s += "x";
  s.push_back(static_cast<char>(dtype));
  s.push_back(static_cast<char>(dims.size()));
  for (uint64_t d : dims) putLe<uint64_t>(s, d);
  return s;
}

TEST_F(AktTest, RoundTripsEveryDtype) {
  akt::TensorSet set;
  for (uint8_t code = 0; code <= 7; ++code) {
    std::string name = "t";
    name += std::to_string(code);
    akt::Tensor& t = set.add(akt::Tensor(name, static_cast<akt::DType>(code), {3, 2}));
    for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes.data()[i] = static_cast<unsigned char>(i * 7 + code);
  }
  set.add(akt::Tensor("scalar", akt::DType::F64, {}));
  set.at("scalar").data<double>()[0] = 2.5;
  set.add(akt::Tensor("empty", akt::DType::F32, {0, 5}));
  akt::writeAkt(path("a.akt"), set);

  akt::TensorSet back = akt::readAkt(path("a.akt"));
  ASSERT_EQ(back.size(), set.size());
  for (size_t i = 0; i < set.size(); ++i) {
    const akt::Tensor &a = set.tensors[i], &b = back.tensors[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.dtype, b.dtype);
    EXPECT_EQ(a.dims, b.dims);
    ASSERT_EQ(a.bytes.size(), b.bytes.size());
    EXPECT_EQ(0, std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size())) << a.name;
  }
  EXPECT_EQ(back.at("scalar").data<double>()[0], 2.5);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(back.tensors[0].bytes.data()) % 64, 0u);
}

TEST_F(AktTest, TypedAccessChecksElementSize) {
  akt::Tensor t("x", akt::DType::F64, {4});
  EXPECT_THROW(t.data<float>(), akt::Error);
  EXPECT_NO_THROW(t.data<double>());
}

TEST_F(AktTest, RejectsBadMagicTrailingBytesAndBadDtype) {
  writeRaw("magic.akt", "AKT2" + std::string(4, '\0'));
  EXPECT_THROW(akt::readAkt(path("magic.akt")), akt::Error);

  std::string ok = header(0, {1}) + std::string(4, '\0');
  writeRaw("trailing.akt", ok + "z");
  EXPECT_THROW(akt::readAkt(path("trailing.akt")), akt::Error);

  writeRaw("dtype.akt", header(9, {1}) + std::string(4, '\0'));
  EXPECT_THROW(akt::readAkt(path("dtype.akt")), akt::Error);

  writeRaw("rank.akt", header(0, std::vector<uint64_t>(17, 1)) + std::string(4, '\0'));
  EXPECT_THROW(akt::readAkt(path("rank.akt")), akt::Error);

  EXPECT_THROW(akt::readAkt(path("missing.akt")), akt::Error);
  EXPECT_THROW(akt::readAkt(dir_.string()), akt::Error);  // a directory
}

TEST_F(AktTest, HostileSizeClaimsFailWithoutAllocating) {
  // 2^61 f32 elements: the byte count overflows 64 bits if computed naively.
  writeRaw("huge.akt", header(0, {1ull << 31, 1ull << 30}) + std::string(16, '\0'));
  try {
    akt::readAkt(path("huge.akt"));
    FAIL() << "huge tensor accepted";
  } catch (const akt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  writeRaw("count.akt", header(0, {1}, 0xffffffffu));
  EXPECT_THROW(akt::readAkt(path("count.akt")), akt::Error);

  std::string truncated = header(0, {1000}) + std::string(100, '\0');
  writeRaw("truncated.akt", truncated);
  EXPECT_THROW(akt::readAkt(path("truncated.akt")), akt::Error);
  writeRaw("cut-header.akt", truncated.substr(0, 10));
  EXPECT_THROW(akt::readAkt(path("cut-header.akt")), akt::Error);
}

// The driver generates each call's inputs into the previous call's memory (BufferPool): a tensor
// made there must read as zeros, as new memory does, whatever the block held, since a generator
// may leave bytes unwritten and the reference regenerates the inputs into new memory.
TEST(AktBufferPool, ARecycledBlockIsReusedAndZeroedLikeNewMemory) {
  akt::BufferPool pool;
  akt::Tensor old("x", akt::DType::F32, {1000});
  std::memset(old.bytes.data(), 0xab, old.bytes.size());
  const unsigned char* block = old.bytes.data();
  pool.recycle(std::move(old.bytes));
  EXPECT_EQ(old.bytes.data(), nullptr);

  const akt::BufferPool::Use use(pool);
  akt::Tensor next("y", akt::DType::I32, {1000});
  EXPECT_EQ(next.bytes.data(), block) << "the block of the same size is taken";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(next.bytes.data()) % 64, 0u);
  for (size_t i = 0; i < next.bytes.size(); ++i) ASSERT_EQ(next.bytes.data()[i], 0) << "byte " << i;
  akt::Tensor another("z", akt::DType::F32, {1000});
  EXPECT_NE(another.bytes.data(), block) << "a block is taken once";
}

TEST(AktBufferPool, OnlyBlocksOfTheSameSizeAndOnlyWhileInUse) {
  akt::BufferPool pool;
  akt::TensorSet set;
  set.add(akt::Tensor("a", akt::DType::F32, {256}));
  set.add(akt::Tensor("b", akt::DType::F64, {256}));
  const unsigned char* a = set.at("a").bytes.data();
  const unsigned char* b = set.at("b").bytes.data();
  unsigned char outside[64];
  akt::Buffer view = akt::Buffer::view(outside, sizeof outside);
  pool.recycle(std::move(view));  // not the pool's to keep: a view owns nothing
  pool.recycle(std::move(set));
  EXPECT_EQ(set.size(), 0u);

  akt::Buffer before(1024);  // no pool in use yet
  EXPECT_NE(before.data(), a);
  {
    const akt::BufferPool::Use use(pool);
    akt::Buffer small(64), odd(1000);
    EXPECT_NE(small.data(), outside);
    EXPECT_NE(odd.data(), a);
    EXPECT_NE(odd.data(), b);
    akt::Buffer large(2048), first(1024);
    EXPECT_EQ(large.data(), b);
    EXPECT_EQ(first.data(), a);
  }
  akt::Buffer kept(1024);
  const unsigned char* k = kept.data();
  pool.recycle(std::move(kept));
  akt::Buffer after(1024);  // the Use has ended
  EXPECT_NE(after.data(), k);
}

TEST(AktHalf, ConvertsExactlyRepresentableValuesBothWays) {
  for (float v : {0.0f, 1.0f, -2.0f, 0.5f, 65504.0f, 6.103515625e-05f, 5.9604644775390625e-08f, 1000.5f}) {
    EXPECT_EQ(akt::halfToFloat(akt::floatToHalf(v)), v) << v;
    EXPECT_EQ(akt::bf16ToFloat(akt::floatToBf16(v)), akt::bf16ToFloat(akt::floatToBf16(v)));
  }
  EXPECT_EQ(akt::floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(akt::floatToHalf(-2.0f), 0xc000);
  EXPECT_TRUE(std::isinf(akt::halfToFloat(akt::floatToHalf(1e6f))));
  EXPECT_TRUE(std::isnan(akt::halfToFloat(akt::floatToHalf(NAN))));
  EXPECT_EQ(akt::bf16ToFloat(akt::floatToBf16(1.0f)), 1.0f);
  EXPECT_EQ(akt::bf16ToFloat(0x4049), 3.140625f);
}

}  // namespace
