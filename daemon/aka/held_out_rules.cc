#include "daemon/aka/held_out_rules.h"

#include <algorithm>
#include <cctype>
#include <regex>

namespace akad::aka {
namespace {

bool isPrime(std::int64_t n) {
  if (n < 2) return false;
  for (std::int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

std::int64_t nextPrimeAbove(std::int64_t n) {
  std::int64_t p = n + 1;
  while (!isPrime(p)) ++p;
  return p;
}

std::int64_t elements(const Shape& s) {
  std::int64_t e = 1;
  for (std::int64_t d : s) e *= std::max<std::int64_t>(d, 1);
  return e;
}

// A tiny reader for the list literal: [ (1, 2), (3, 4), ] or [1, 2, 3].
class Reader {
 public:
  explicit Reader(const std::string& s, std::size_t at) : s_(s), i_(at) {}
  void skip() {
    for (;;) {
      while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
      if (i_ < s_.size() && s_[i_] == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
        continue;
      }
      return;
    }
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool integer(std::int64_t& out) {
    skip();
    std::size_t j = i_;
    while (j < s_.size() && std::isdigit(static_cast<unsigned char>(s_[j]))) ++j;
    if (j == i_ || j - i_ > 15) return false;
    // An integer literal only: "1 << 20" or "2 * 64" is code, and the rules do not guess at it.
    std::size_t k = j;
    while (k < s_.size() && (s_[k] == ' ' || s_[k] == '\t')) ++k;
    if (k < s_.size() && s_[k] != ',' && s_[k] != ')' && s_[k] != ']' && s_[k] != '\n' && s_[k] != '#') return false;
    out = std::stoll(s_.substr(i_, j - i_));
    i_ = j;
    return true;
  }
  std::size_t at() const { return i_; }
  char peek() {
    skip();
    return i_ < s_.size() ? s_[i_] : '\0';
  }

 private:
  const std::string& s_;
  std::size_t i_;
};

}  // namespace

namespace {

// A list literal read from just after its `[` (the reader is left after its `]`).
Result<ShapeList> readShapeList(Reader& r) {
  ShapeList list;
  bool first = true;
  while (!r.eat(']')) {
    if (!first && !r.eat(',')) return Error{"TEST_SHAPES is not a plain list of integer tuples"};
    if (r.eat(']')) break;  // a trailing comma
    first = false;
    Shape shape;
    if (r.eat('(')) {
      if (list.scalars && !list.shapes.empty()) return Error{"TEST_SHAPES mixes integers and tuples"};
      bool firstDim = true;
      while (!r.eat(')')) {
        if (!firstDim && !r.eat(',')) return Error{"TEST_SHAPES holds a tuple of something else than integers"};
        if (r.eat(')')) break;
        firstDim = false;
        std::int64_t d;
        if (!r.integer(d)) return Error{"TEST_SHAPES holds a tuple of something else than integers"};
        shape.push_back(d);
      }
      if (shape.empty()) return Error{"TEST_SHAPES holds an empty tuple"};
    } else {
      std::int64_t d;
      if (!r.integer(d)) return Error{"TEST_SHAPES is not a plain list of integer tuples"};
      if (!list.shapes.empty() && !list.scalars) return Error{"TEST_SHAPES mixes integers and tuples"};
      list.scalars = true;
      shape.push_back(d);
    }
    if (!list.shapes.empty() && list.shapes.front().size() != shape.size())
      return Error{"TEST_SHAPES holds tuples of different lengths"};
    list.shapes.push_back(shape);
  }
  if (list.shapes.empty()) return Error{"TEST_SHAPES is empty"};
  return list;
}

bool namesLaunchParameter(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* word : {"block", "warp", "stage", "tile", "split", "group", "stride", "seed"})
    if (name.find(word) != std::string::npos) return true;
  return false;
}

}  // namespace

Result<ShapeList> parseTestShapes(const std::string& text) {
  static const std::regex assign(R"((^|\n)[ \t]*TEST_SHAPES[ \t]*=[ \t]*\[)");
  std::smatch m;
  if (!std::regex_search(text, m, assign)) return Error{"no TEST_SHAPES list"};
  Reader r(text, static_cast<std::size_t>(m.position(0) + m.length(0)));
  return readShapeList(r);
}

Result<ParametrizedSizes> parseParametrizedSizes(const std::string& text) {
  static const std::regex deco(R"(@pytest\.mark\.parametrize\(\s*(["'])([A-Za-z_][A-Za-z_0-9]*)\1\s*,\s*\[)");
  static const std::regex def(R"(\n[ \t]*(async[ \t]+)?def[ \t]+([A-Za-z_][A-Za-z_0-9]*))");
  for (std::sregex_iterator it(text.begin(), text.end(), deco), end; it != end; ++it) {
    const auto& m = *it;
    if (namesLaunchParameter(m.str(2))) continue;
    const std::size_t start = static_cast<std::size_t>(m.position(0)), open = start + m.length(0);
    Reader r(text, open);
    auto list = readShapeList(r);
    if (!list || !list->scalars) continue;
    if (std::any_of(list->shapes.begin(), list->shapes.end(), [](const Shape& v) { return v[0] < 64; })) continue;
    const std::size_t close = r.at() - 1;  // the reader stopped just after the list's `]`
    std::smatch f;
    const std::string rest = text.substr(close);
    if (!std::regex_search(rest, f, def)) continue;
    std::string fn = f.str(2);
    std::transform(fn.begin(), fn.end(), fn.begin(), [](unsigned char c) { return std::tolower(c); });
    if (fn.find("perf") != std::string::npos || fn.find("bench") != std::string::npos) continue;
    ParametrizedSizes p{*list, text.substr(start, close + 1 - start), text.substr(start, open - start)};
    if (text.find(p.decorator, start + 1) != std::string::npos || text.find(p.decorator) != start) continue;
    return p;
  }
  return Error{"no pytest parametrize list of sizes"};
}

std::string parametrizeCode(const std::string& prefix, const std::vector<Shape>& sizes) {
  std::string code = prefix;
  for (std::size_t i = 0; i < sizes.size(); ++i) code += (i ? ", " : "") + std::to_string(sizes[i].at(0));
  return code + "]";
}

std::vector<GeneratedShape> generateShapes(const ShapeList& visible, std::size_t max, std::int64_t growth) {
  std::vector<GeneratedShape> out;
  const auto& v = visible.shapes;
  if (v.empty()) return out;
  std::int64_t largest = 0;
  std::size_t big = 0, small = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (elements(v[i]) > elements(v[big])) big = i;
    if (elements(v[i]) < elements(v[small])) small = i;
    largest = std::max(largest, elements(v[i]));
  }
  auto add = [&](Shape s, const char* rule) {
    if (out.size() >= max || elements(s) > growth * largest) return;
    for (std::int64_t d : s)
      if (d < 1) return;
    if (std::find(v.begin(), v.end(), s) != v.end()) return;
    for (const auto& g : out)
      if (g.shape == s) return;
    out.push_back({std::move(s), rule});
  };
  // Odd and prime: each size of at least 4 becomes the next prime above it (sizes below 4 are
  // counts such as a batch of 1 or a top-k of 2, kept as they are).
  auto prime = [](Shape s) {
    for (auto& d : s)
      if (d >= 4) d = nextPrimeAbove(d);
    return s;
  };
  add(prime(v[small]), "prime");
  add(prime(v[big]), "prime");
  add(prime(v[v.size() / 2]), "prime");
  // The largest shape scaled up: its biggest size doubled.
  Shape up = v[big];
  *std::max_element(up.begin(), up.end()) *= 2;
  add(up, "scaled-up");
  // The smallest scaled down: every size of at least 2 halved, and made odd.
  Shape down = v[small];
  for (auto& d : down)
    if (d >= 2) d = (d / 2) | 1;
  add(down, "scaled-down");
  // Another aspect ratio: the two largest sizes of the largest shape trade places.
  if (v[big].size() >= 2) {
    Shape aspect = v[big];
    std::vector<std::size_t> idx(aspect.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return aspect[a] > aspect[b]; });
    if (aspect[idx[0]] != aspect[idx[1]]) {
      std::swap(aspect[idx[0]], aspect[idx[1]]);
      add(aspect, "aspect");
    }
  }
  return out;
}

std::string testShapesCode(const std::vector<Shape>& shapes, bool scalars) {
  std::string code = "TEST_SHAPES = [\n";
  for (const auto& s : shapes) {
    code += "    ";
    if (scalars) {
      code += std::to_string(s.at(0));
    } else {
      code += "(";
      for (std::size_t i = 0; i < s.size(); ++i) code += (i ? ", " : "") + std::to_string(s[i]);
      code += s.size() == 1 ? ",)" : ")";
    }
    code += ",\n";
  }
  return code + "]\n";
}

}  // namespace akad::aka
