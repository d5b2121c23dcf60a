// Generates the benchmark workspace: about 200 MiB in 5 000 files, deterministic for a seed.
//   4 000 source-like text files (2-30 KiB, C/CUDA-looking lines)        ~ 64 MiB
//     800 object-like files (~100 KiB: code-ish bytes, zero runs, tables) ~ 80 MiB
//     200 incompressible blobs (~280 KiB: weights, already-compressed)     ~ 56 MiB
// Usage: snapshot_gen_workspace DIR [SEED]

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kWords = {
    "int", "float", "const", "return", "for", "if", "else", "threadIdx.x", "blockIdx.x", "blockDim.x",
    "__global__", "__shared__", "__syncthreads();", "void", "auto", "tile", "acc", "sum", "idx", "stride",
    "static_cast<float>", "std::vector<float>", "kernel", "launch", "+=", "=", "*", "+", "<", "{", "}", "(", ")",
    "half2", "mma_sync", "load_matrix_sync", "warp", "lane", "offset", "n", "m", "k", "ptr", "out", "in"};

void writeFile(const fs::path& p, const std::string& data, bool exec) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << data;
  if (exec) fs::permissions(p, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec, fs::perm_options::add);
}

std::string sourceText(std::mt19937_64& rng, size_t size) {
  std::string s;
  s.reserve(size + 128);
  std::uniform_int_distribution<size_t> word(0, kWords.size() - 1), lineLen(3, 14), indent(0, 3), num(0, 9999);
  while (s.size() < size) {
    s.append(2 * indent(rng), ' ');
    size_t n = lineLen(rng);
    for (size_t i = 0; i < n; ++i) {
      s += kWords[word(rng)];
      if (rng() % 5 == 0) s += std::string("_") + std::to_string(num(rng));
      s += ' ';
    }
    s += ";\n";
  }
  s.resize(size);
  return s;
}

std::string objectBytes(std::mt19937_64& rng, size_t size) {
  std::string s;
  s.reserve(size + 4096);
  std::string table(256, '\0');
  for (auto& c : table) c = static_cast<char>(rng());
  while (s.size() < size) {
    switch (rng() % 4) {
      case 0:  // zero padding / bss
        s.append(64 + rng() % 2048, '\0');
        break;
      case 1:  // repeated table (relocations, symbol strings)
        s.append(table, 0, 16 + rng() % 240);
        break;
      case 2:  // instruction-like: few distinct opcodes
        for (int i = 0; i < 512; ++i) s.push_back(static_cast<char>("\x48\x89\x8b\xe8\xc3\x0f\x1f\x44"[rng() % 8] ^ (rng() % 4)));
        break;
      default:  // random immediates and addresses
        for (int i = 0; i < 128; ++i) s.push_back(static_cast<char>(rng()));
    }
  }
  s.resize(size);
  return s;
}

std::string randomBytes(std::mt19937_64& rng, size_t size) {
  std::string s(size, '\0');
  for (size_t i = 0; i + 8 <= size; i += 8) {
    uint64_t v = rng();
    std::memcpy(&s[i], &v, 8);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [SEED]\n", argv[0]);
    return 2;
  }
  fs::path root = argv[1];
  std::mt19937_64 rng(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 42);
  uint64_t total = 0;
  for (int i = 0; i < 4000; ++i) {
    size_t size = 2048 + rng() % (28 * 1024);
    fs::path p = root / "src" / (std::string("mod") + std::to_string(i % 50)) / (std::string("sub") + std::to_string(i % 7)) /
                 (std::string("file") + std::to_string(i) + (i % 3 ? ".cu" : ".h"));
    writeFile(p, sourceText(rng, size), false);
    total += size;
  }
  for (int i = 0; i < 800; ++i) {
    size_t size = 50 * 1024 + rng() % (100 * 1024);
    fs::path p = root / "build" / (std::string("obj") + std::to_string(i % 20)) / (std::string("unit") + std::to_string(i) + (i % 10 ? ".o" : ".so"));
    writeFile(p, objectBytes(rng, size), i % 10 == 0);
    total += size;
  }
  for (int i = 0; i < 200; ++i) {
    size_t size = 160 * 1024 + rng() % (240 * 1024);
    writeFile(root / "data" / (std::string("blob") + std::to_string(i) + ".bin"), randomBytes(rng, size), false);
    total += size;
  }
  std::printf("%llu\n", static_cast<unsigned long long>(total));
  return 0;
}
