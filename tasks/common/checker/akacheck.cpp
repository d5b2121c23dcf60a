// akacheck - the trusted, generic output checker.
//
//   akacheck --plan P --data D --out O --tolerances T [--perf]
//
// Compares O/<case>.out.akt (written by candidate code: hostile) with D/<case>.ref.akt (trusted)
// for every case of the plan (with --perf: only the cases named by the plan's perf groups) and
// prints one JSON document:
//   {"ok": bool, "cases": [{"name", "ok", "reason", "max_abs_err", "max_rel_err", "mismatches",
//                           "elements"}]}
// T is {"f32": {"atol": a, "rtol": r}, ...}, or any object holding that under "tolerances"
// (so a workspace's configs.json works as is).
// A one-line summary per failed case goes to stderr for humans.
// Exit status: 0 every case ok, 1 some case failed, 2 usage error or unreadable trusted input.
#include "akt.h"
#include "akaplan.h"
#include <sys/stat.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>

namespace {

struct Tolerance {
  double atol = 0, rtol = 0;
};

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Verdict {
  std::string name;
  bool ok = true;
  std::string reason;
  double maxAbs = 0, maxRel = 0;
  uint64_t mismatches = 0, elements = 0;

  nlohmann::json json() const {
    return {{"name", name}, {"ok", ok}, {"reason", reason}, {"max_abs_err", maxAbs}, {"max_rel_err", maxRel},
            {"mismatches", mismatches}, {"elements", elements}};
  }
  void fail(const std::string& why) {
    if (ok) reason = why;
    ok = false;
  }
};

std::map<std::string, Tolerance> readTolerances(const std::string& path) {
  nlohmann::json j = akaplan::readJsonFile(path);
  if (j.is_object() && j.contains("tolerances")) j = j["tolerances"];
  if (!j.is_object()) throw UsageError(path + ": tolerances must be an object keyed by dtype");
  std::map<std::string, Tolerance> tol;
  for (auto& [key, v] : j.items()) {
    akt::parseDType(key);
    if (!v.is_object() || !v.contains("atol") || !v.contains("rtol") || !v["atol"].is_number() ||
        !v["rtol"].is_number() || v["atol"].get<double>() < 0 || v["rtol"].get<double>() < 0)
      throw UsageError(path + ": tolerance '" + key + "' needs non-negative numbers atol and rtol");
    tol[key] = {v["atol"].get<double>(), v["rtol"].get<double>()};
  }
  return tol;
}

// Reads element i as double; integers up to 2^53 convert exactly, larger i64 are compared raw.
double valueAt(const akt::Tensor& t, uint64_t i) {
  const unsigned char* p = t.bytes.data() + i * akt::dtypeSize(t.dtype);
  switch (t.dtype) {
    case akt::DType::F32: { float v; std::memcpy(&v, p, 4); return v; }
    case akt::DType::F64: { double v; std::memcpy(&v, p, 8); return v; }
    case akt::DType::F16: { uint16_t v; std::memcpy(&v, p, 2); return akt::halfToFloat(v); }
    case akt::DType::BF16: { uint16_t v; std::memcpy(&v, p, 2); return akt::bf16ToFloat(v); }
    case akt::DType::I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case akt::DType::I64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case akt::DType::U8: return p[0];
    case akt::DType::I8: return static_cast<int8_t>(p[0]);
  }
  return 0;
}

bool sameBytes(const akt::Tensor& t, uint64_t i, uint64_t j) {
  size_t s = akt::dtypeSize(t.dtype);
  return std::memcmp(t.bytes.data() + i * s, t.bytes.data() + j * s, s) == 0;
}

bool allEqual(const akt::Tensor& t) {
  for (uint64_t i = 1; i < t.elements(); ++i)
    if (!sameBytes(t, 0, i) && valueAt(t, 0) != valueAt(t, i)) return false;  // +0 == -0
  return true;
}

bool allZero(const akt::Tensor& t) {
  for (uint64_t i = 0; i < t.elements(); ++i)
    if (valueAt(t, i) != 0) return false;
  return true;
}

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

void compareTensor(const akt::Tensor& out, const akt::Tensor& ref, const Tolerance& tol, Verdict& v) {
  const uint64_t n = ref.elements();
  v.elements += n;
  const bool isFloat = akt::isFloat(ref.dtype);
  std::string first;
  for (uint64_t i = 0; i < n; ++i) {
    bool bad;
    if (!isFloat) {
      const size_t size = akt::dtypeSize(ref.dtype);
      bad = std::memcmp(out.bytes.data() + i * size, ref.bytes.data() + i * size, size) != 0;
      if (bad) {
        double d = std::fabs(valueAt(out, i) - valueAt(ref, i));
        v.maxAbs = std::max(v.maxAbs, d);
      }
    } else {
      double o = valueAt(out, i), r = valueAt(ref, i);
      if (std::isnan(r) || std::isnan(o)) {
        bad = std::isnan(r) != std::isnan(o);
      } else if (std::isinf(r) || std::isinf(o)) {
        bad = o != r;
      } else {
        double d = std::fabs(o - r);
        bad = !(d <= tol.atol + tol.rtol * std::fabs(r));
        v.maxAbs = std::max(v.maxAbs, d);
        if (r != 0) v.maxRel = std::max(v.maxRel, d / std::fabs(r));
      }
    }
    if (bad) {
      if (v.mismatches++ == 0)
        first = "tensor '" + ref.name + "' element " + std::to_string(i) + ": out=" + fmt(valueAt(out, i)) +
                " ref=" + fmt(valueAt(ref, i));
    }
  }
  if (v.mismatches)
    v.fail(std::to_string(v.mismatches) + " of " + std::to_string(v.elements) + " elements out of tolerance (atol " +
           fmt(tol.atol) + ", rtol " + fmt(tol.rtol) + "); first: " + first);
}

Verdict checkCase(const std::string& name, const std::string& data, const std::string& outDir,
                  const std::map<std::string, Tolerance>& tolerances) {
  Verdict v;
  v.name = name;
  akt::TensorSet ref;
  try {
    ref = akt::readAkt(data + "/" + name + ".ref.akt");
  } catch (const akt::Error& e) {
    throw UsageError(std::string("reference: ") + e.what());
  }
  akt::TensorSet out;
  // The candidate wrote outDir: a link there to the reference would have the reference checked
  // against itself. Its processes have ended, so what lstat sees is what is read.
  const std::string outPath = outDir + "/" + name + ".out.akt";
  struct stat lst {};
  if (::lstat(outPath.c_str(), &lst) == 0 && !S_ISREG(lst.st_mode)) {
    v.fail("the output is not a regular file (a link or another kind of file)");
    return v;
  }
  try {
    out = akt::readAkt(outPath);
  } catch (const akt::Error& e) {
    v.fail(std::string("unreadable output: ") + e.what());
    return v;
  }
  if (out.size() != ref.size()) {
    v.fail("output has " + std::to_string(out.size()) + " tensors, expected " + std::to_string(ref.size()));
    return v;
  }
  for (size_t i = 0; i < ref.size(); ++i) {
    const akt::Tensor &r = ref.tensors[i], &o = out.tensors[i];
    if (o.name != r.name) { v.fail("output tensor " + std::to_string(i) + " is named '" + o.name + "', expected '" + r.name + "'"); continue; }
    if (o.dtype != r.dtype) { v.fail("tensor '" + r.name + "' has dtype " + akt::dtypeName(o.dtype) + ", expected " + akt::dtypeName(r.dtype)); continue; }
    if (o.dims != r.dims) { v.fail("tensor '" + r.name + "' has shape " + o.shapeString() + ", expected " + r.shapeString()); continue; }
    Tolerance tol;
    if (akt::isFloat(r.dtype)) {
      auto it = tolerances.find(akt::dtypeName(r.dtype));
      if (it == tolerances.end()) throw UsageError(std::string("no tolerance for dtype ") + akt::dtypeName(r.dtype));
      tol = it->second;
    }
    // These two reject outputs that loose tolerances could otherwise let through.
    if (r.elements() > 1 && allZero(o) && !allZero(r)) v.fail("tensor '" + r.name + "' is all zeros, the reference is not");
    else if (r.elements() > 1 && allEqual(o) && !allEqual(r)) v.fail("tensor '" + r.name + "' is constant output, the reference is not");
    Verdict part;
    compareTensor(o, r, tol, part);
    v.elements += part.elements;
    v.mismatches += part.mismatches;
    v.maxAbs = std::max(v.maxAbs, part.maxAbs);
    v.maxRel = std::max(v.maxRel, part.maxRel);
    if (!part.ok) v.fail(part.reason);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> opts;
  bool perfOnly = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--perf") perfOnly = true;
    else if (a.rfind("--", 0) == 0 && i + 1 < argc) opts[a.substr(2)] = argv[++i];
    else opts["?"] = a;
  }
  if (opts.count("?") || !opts.count("plan") || !opts.count("data") || !opts.count("out") || !opts.count("tolerances")) {
    std::cerr << "usage: akacheck --plan P --data D --out O --tolerances T [--perf]\n";
    return 2;
  }
  try {
    akaplan::Plan plan = akaplan::readPlan(opts["plan"]);
    auto tolerances = readTolerances(opts["tolerances"]);
    std::vector<std::string> names;
    if (perfOnly) {
      if (!plan.hasPerf) throw UsageError("--perf given but the plan has no 'perf' section");
      for (const auto& g : plan.perf.groups) names.insert(names.end(), g.cases.begin(), g.cases.end());
    } else {
      for (const auto& c : plan.cases) names.push_back(c.name);
    }
    nlohmann::json cases = nlohmann::json::array();
    bool ok = true;
    size_t failed = 0;
    for (const std::string& name : names) {
      Verdict v = checkCase(name, opts["data"], opts["out"], tolerances);
      ok = ok && v.ok;
      if (!v.ok) {
        ++failed;
        std::cerr << "akacheck: FAIL " << name << ": " << v.reason << "\n";
      }
      cases.push_back(v.json());
    }
    std::cerr << "akacheck: " << names.size() - failed << " of " << names.size() << " cases ok\n";
    std::cout << nlohmann::json{{"ok", ok}, {"cases", cases}}.dump() << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "akacheck: " << e.what() << "\n";
    return 2;
  }
}
