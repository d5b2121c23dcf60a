// The trust mapping of wrapped AKA tasks (daemon/aka/trust.h): the scorer's workspace is the
// pristine imported folder plus only what the agent may edit, so an agent's edit to AKA's
// evaluator files never reaches the scorer; for rocmbench files that hold kernel and tests
// together only the target kernel definitions are taken.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "daemon/aka/build_cache.h"
#include "daemon/aka/import.h"
#include "daemon/aka/trust.h"
#include "daemon/pipeline/files.h"
#include "tests/aka/aka_test_files.h"
#include "tests/daemon/harness.h"

namespace fs = std::filesystem;
using namespace akad;
using namespace akad::aka;

using namespace akad::akafixture;

namespace {

bool listed(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// Imports one fixture task and gives its pristine folder, its mapping and an agent's copy of it
// (with the files akad adds to every agent workspace).
struct Imported {
  test::TempDir tmp;
  fs::path pristine, agent;
  TrustMapping mapping;
  explicit Imported(const std::string& name) {
    ImportOptions o;
    o.checkout = kFixture;
    o.selectors = {name};
    o.stateDir = tmp / "state";
    auto r = importCheckout(o);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    if (!r) return;
    const ImportedTask& t = r->tasks.at(0);
    EXPECT_TRUE(t.imported) << t.name;
    pristine = importedTasksRoot(o.stateDir) / t.id / "workspace";
    auto spec = nlohmann::json::parse(readText(importedTasksRoot(o.stateDir) / t.id / "aka.json"));
    mapping.editable = spec["editable"].get<std::vector<std::string>>();
    mapping.splice_functions = spec["splice_functions"].get<std::vector<std::string>>();
    agent = tmp / "agent";
    EXPECT_TRUE(copyTree(pristine, agent).ok());
    writeText(agent / "PROMPT.md", "prompt\n");
    writeText(agent / "configs.json", "{}\n");
    writeText(agent / "harness/akacheck", "x\n");
  }
};

}  // namespace

TEST(AkaTrust, AnAgentEditToTheEvaluatorIsIgnoredAndListed) {
  Imported w("hip2hip/gpumode/ScaledRelu");
  // The agent improves its kernel, and also rewrites AKA's correctness check to always pass,
  // deletes the perf tool and adds a file.
  writeText(w.agent / "hip/hip_scaled_relu.hip", readText(w.agent / "hip/hip_scaled_relu.hip") + "// faster\n");
  writeText(w.agent / "eval_tools/correctness_check.py", "print('correctness: PASS')\n");
  fs::remove(w.agent / "eval_tools/cal_kernel_perf.py");
  writeText(w.agent / "notes.txt", "scratch\n");

  const fs::path dest = w.tmp / "score";
  auto ws = assembleWrappedWorkspace(w.mapping, w.pristine, w.agent, dest);
  ASSERT_TRUE(ws) << ws.error().message;
  EXPECT_EQ(ws->taken, std::vector<std::string>{"hip/hip_scaled_relu.hip"});
  EXPECT_EQ(readText(dest / "hip/hip_scaled_relu.hip"), readText(w.agent / "hip/hip_scaled_relu.hip"));
  EXPECT_EQ(readText(dest / "eval_tools/correctness_check.py"), readText(w.pristine / "eval_tools/correctness_check.py"));
  EXPECT_TRUE(fs::exists(dest / "eval_tools/cal_kernel_perf.py"));
  EXPECT_FALSE(fs::exists(dest / "notes.txt"));
  EXPECT_TRUE(listed(ws->ignored, "eval_tools/correctness_check.py (changed)"));
  EXPECT_TRUE(listed(ws->ignored, "eval_tools/cal_kernel_perf.py (deleted)"));
  EXPECT_TRUE(listed(ws->ignored, "notes.txt (added)"));
  EXPECT_EQ(ws->ignored.size(), 3u);  // PROMPT.md, configs.json and harness/ are akad's, not changes
}

TEST(AkaTrust, Torch2HipAgentMayNotEditThePyTorchReference) {
  Imported w("torch2hip/gpumode/AddBias");
  // A reference that computes what a broken kernel does would pass anything.
  writeText(w.agent / "pytorch_code_module/py_add_bias.py", "class Model: pass\n");
  writeText(w.agent / "hip/hip_add_bias.hip", readText(w.agent / "hip/hip_add_bias.hip") + "// tuned\n");
  const fs::path dest = w.tmp / "score";
  auto ws = assembleWrappedWorkspace(w.mapping, w.pristine, w.agent, dest);
  ASSERT_TRUE(ws) << ws.error().message;
  EXPECT_EQ(ws->taken, std::vector<std::string>{"hip/hip_add_bias.hip"});
  EXPECT_EQ(readText(dest / "pytorch_code_module/py_add_bias.py"), readText(w.pristine / "pytorch_code_module/py_add_bias.py"));
  EXPECT_TRUE(listed(ws->ignored, "pytorch_code_module/py_add_bias.py (changed)"));
}

TEST(AkaTrust, RocmbenchTakesOnlyTheTargetKernelFromTheTestFile) {
  Imported w("triton2triton/rocmbench/easy/test_vec_add");
  const std::string pristine = readText(w.pristine / "test_vec_add.py");
  // A faster kernel body, and a test weakened to assert nothing.
  std::string agent = replaced(pristine, "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n",
                               "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # tuned\n");
  agent = replaced(agent, "    torch.testing.assert_close(vec_add(x, y), x + y)\n", "    pass\n");
  writeText(w.agent / "test_vec_add.py", agent);
  const fs::path dest = w.tmp / "score";
  auto ws = assembleWrappedWorkspace(w.mapping, w.pristine, w.agent, dest);
  ASSERT_TRUE(ws) << ws.error().message;
  const std::string scored = readText(dest / "test_vec_add.py");
  EXPECT_NE(scored.find("# tuned"), std::string::npos);
  EXPECT_NE(scored.find("torch.testing.assert_close(vec_add(x, y), x + y)"), std::string::npos);
  EXPECT_EQ(ws->spliced, std::vector<std::string>{"test_vec_add.py: vec_add_kernel"});
  EXPECT_TRUE(listed(ws->ignored, "test_vec_add.py (changed outside target_kernel_functions)"));
  EXPECT_TRUE(ws->taken.empty());
}

TEST(AkaTrust, DefinitionSpansFollowDecoratorsDocstringsAndColumnZeroParens) {
  const std::string src = readText(kFixture / "tasks/triton2triton/rocmbench/easy/test_vec_add/test_vec_add.py");
  auto span = findTopLevelDef(src, "vec_add_kernel");
  ASSERT_TRUE(span) << span.error().message;
  ASSERT_TRUE(*span);
  const std::string def = src.substr((*span)->begin, (*span)->end - (*span)->begin);
  EXPECT_EQ(def.rfind("@triton.jit\ndef vec_add_kernel(", 0), 0u) << def;
  EXPECT_NE(def.find("tl.store(out_ptr + offs"), std::string::npos);
  EXPECT_EQ(def.find("####"), std::string::npos);  // the separator comment after it is not part of it
  // "def not_a_definition" sits at column 0 inside the docstring: not a definition.
  auto inDoc = findTopLevelDef(src, "not_a_definition");
  ASSERT_TRUE(inDoc);
  EXPECT_FALSE(*inDoc);
  auto test = findTopLevelDef(src, "test_vec_add");
  ASSERT_TRUE(test && *test);
  EXPECT_EQ(src.substr((*test)->begin, 24), "@pytest.mark.parametrize");

  auto twice = findTopLevelDef("def f():\n    pass\n\ndef f():\n    return 1\n", "f");
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message.find("defined 2 times"), std::string::npos);
  auto nested = findTopLevelDef("class A:\n    def f(self):\n        pass\n", "f");
  ASSERT_TRUE(nested);
  EXPECT_FALSE(*nested);
  auto continued = findTopLevelDef("x = 1 + \\\ndef_f = 2\ndef f(a,\n):\n    s = '''\ndef g():\n'''\n    return a\ny = 3\n", "f");
  ASSERT_TRUE(continued && *continued);
  EXPECT_EQ(std::string("x = 1 + \\\ndef_f = 2\ndef f(a,\n):\n    s = '''\ndef g():\n'''\n    return a\ny = 3\n")
                .substr((*continued)->begin, (*continued)->end - (*continued)->begin),
            "def f(a,\n):\n    s = '''\ndef g():\n'''\n    return a\n");
}

TEST(AkaTrust, ACandidateThatDropsTheKernelKeepsThePristineOne) {
  const std::string pristine = "import x\n\n@jit\ndef k(a):\n    return a\n\n\ndef test():\n    assert k(1) == 1\n";
  const std::string candidate = "import x\n\ndef test():\n    assert True\n";
  auto r = spliceFunctions(pristine, candidate, {"k"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->text, pristine);
  EXPECT_EQ(r->kept, std::vector<std::string>{"k"});
  EXPECT_TRUE(r->outsideChanged);
  auto same = spliceFunctions(pristine, pristine, {"k"});
  ASSERT_TRUE(same);
  EXPECT_FALSE(same->outsideChanged);
  EXPECT_EQ(same->text, pristine);
}

// The trusted baseline's built extensions reach the candidate's cache folder
// (seedBuiltExtensions, docs/aka.md "Build cache"): only the modules, only where it has none of
// that key, as the candidate's own files.
namespace {

const std::string kKeyA(64, 'a'), kKeyB(64, 'b'), kKeyC(64, 'c');

struct SeedFolders {
  test::TempDir tmp;
  fs::path trusted = tmp / "aka-jit-baseline", cand = tmp / "jit-candidate";
  fs::path built(const fs::path& jit) const { return jit / "torch_extensions" / "akad-built"; }
  SeedFolders() {
    writeText(built(trusted) / kKeyA / "GELU.so", "module A");
    writeText(built(trusted) / kKeyB / "GELU_ref.so", "module B, the baseline's");
    writeText(built(trusted) / kKeyC / "notes.txt", "no module here");
    writeText(built(trusted) / "not-a-key" / "x.so", "not an entry");
    writeText(trusted / "triton" / "held-out-kernel.json", "may name held-out shapes");
    writeText(trusted / "torch_extensions" / "GELU" / "build.ninja", "a build folder, not a kept module");
    fs::create_directories(cand / "home");
  }
};

}  // namespace

TEST(AkaBuildSeed, TheCandidateGetsOnlyTheModulesItLacksAsItsOwnFiles) {
  if (geteuid() != 0) GTEST_SKIP() << "gives the copies to another uid: needs root";
  SeedFolders f;
  writeText(f.built(f.cand) / kKeyB / "GELU_ref.so", "the candidate's own build");
  auto n = seedBuiltExtensions(f.trusted, f.cand, 4242, 4343);
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 1);
  const fs::path a = f.built(f.cand) / kKeyA / "GELU.so";
  EXPECT_EQ(readText(a), "module A");
  struct stat st {};
  ASSERT_EQ(::stat(a.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4242u);
  EXPECT_EQ(st.st_gid, 4343u);
  ASSERT_EQ(::stat(a.parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4242u);
  // What it had stays its own; an entry without a module and a name that is no key are not copied.
  EXPECT_EQ(readText(f.built(f.cand) / kKeyB / "GELU_ref.so"), "the candidate's own build");
  EXPECT_FALSE(fs::exists(f.built(f.cand) / kKeyC));
  EXPECT_FALSE(fs::exists(f.built(f.cand) / "not-a-key"));
  // Nothing else of the trusted folder.
  EXPECT_FALSE(fs::exists(f.cand / "triton"));
  EXPECT_FALSE(fs::exists(f.cand / "torch_extensions" / "GELU"));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(f.built(f.cand))) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{kKeyA, kKeyB})) << "no temporary folder is left";
  // A second seeding finds nothing more to copy.
  auto again = seedBuiltExtensions(f.trusted, f.cand, 4242, 4343);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, 0);
}

// Candidate code left links in its cache folder for akad (root) to write through: into the
// trusted folder, or anywhere else. None is followed.
TEST(AkaBuildSeed, LinksTheCandidatePlantedInItsCacheFolderAreNotWrittenThrough) {
  for (const std::string& planted :
       std::vector<std::string>{"torch_extensions", "torch_extensions/akad-built", "torch_extensions/akad-built/" + kKeyA}) {
    SCOPED_TRACE(planted);
    SeedFolders f;
    const fs::path elsewhere = f.tmp / "elsewhere";
    fs::create_directories(elsewhere);
    fs::create_directories((f.cand / planted).parent_path());
    fs::create_directory_symlink(elsewhere, f.cand / planted);
    auto n = seedBuiltExtensions(f.trusted, f.cand, 4242, 4343);
    if (planted.ends_with(kKeyA)) {
      // The entry's name is taken (by the link): that one is left alone, the other copied.
      ASSERT_TRUE(n) << n.error().message;
      EXPECT_EQ(*n, 1);
      EXPECT_TRUE(fs::exists(f.built(f.cand) / kKeyB / "GELU_ref.so"));
    } else {
      EXPECT_FALSE(n) << "seeded through a link";
    }
    EXPECT_TRUE(fs::is_empty(elsewhere)) << "written through the candidate's link";
    EXPECT_TRUE(fs::is_symlink(f.cand / planted));
  }
}

// --- the candidate's build cache (build_cache.h): its folder is written by candidate code ------

namespace {

const std::string kCacheKey(64, 'c');

// A candidate's build folder and a cache root as deep as it below one temporary folder, so
// that a relative path taken through a link climbs from the cache entry to exactly where it
// climbs from the build folder: onto the victim's file, outside both.
struct CacheFolders {
  test::TempDir tmp;
  fs::path jit = tmp / "s1/s2/s3/aka-ext";
  fs::path root = tmp / "r1/r2/r3";
  fs::path victim = tmp / "victim";
  CacheFolders() {
    fs::create_directories(jit);
    writeText(jit / "module.so", "the candidate's build");
    fs::create_directories(victim);
    writeText(victim / "precious.db", "another tenant's data");
  }
  void expectVictimUntouched() const {
    EXPECT_FALSE(fs::is_symlink(victim / "precious.db"));
    ASSERT_TRUE(fs::is_regular_file(fs::symlink_status(victim / "precious.db")));
    EXPECT_EQ(readText(victim / "precious.db"), "another tenant's data");
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(victim)) names.push_back(e.path().filename().string());
    EXPECT_EQ(names, std::vector<std::string>{"precious.db"});
  }
};

}  // namespace

// Candidate code left links in its build folder to a file of another's, by absolute and by
// relative path, and to a folder: root keeps them as links, as they were, and neither deletes,
// replaces nor writes into what they point to, on keeping or on handing them back.
TEST(AkaBuildCache, LinksTheCandidateLeftInItsBuildFolderAreKeptAsLinksAndNothingOutsideIsTouched) {
  CacheFolders f;
  fs::create_symlink(f.victim / "precious.db", f.jit / "absolute");
  fs::create_symlink(fs::path("../../../../victim/precious.db"), f.jit / "relative");
  fs::create_directory_symlink(f.victim, f.jit / "folder");
  auto kept = publishCandidateBuild(f.root, kCacheKey, f.jit);
  f.expectVictimUntouched();
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_TRUE(kept->starts_with("kept (")) << *kept;
  const fs::path entry = f.root / kCacheKey;
  EXPECT_EQ(readText(entry / "module.so"), "the candidate's build");
  EXPECT_EQ(fs::read_symlink(entry / "absolute"), f.victim / "precious.db");
  EXPECT_EQ(fs::read_symlink(entry / "relative"), fs::path("../../../../victim/precious.db"));
  EXPECT_TRUE(fs::is_symlink(entry / "folder"));

  const fs::path again = f.tmp / "ws2/build/aka-ext";
  fs::create_directories(again.parent_path());
  auto hit = restoreCandidateBuild(f.root, kCacheKey, again);
  ASSERT_TRUE(hit) << hit.error().message;
  EXPECT_TRUE(*hit);
  EXPECT_EQ(readText(again / "module.so"), "the candidate's build");
  EXPECT_TRUE(fs::is_symlink(again / "absolute"));
  f.expectVictimUntouched();
}

// Candidate code swapped its build folder for a link to a folder it may not read (held-out
// configurations, another tenant's snapshots): root keeps nothing, so a later scoring of the
// same bytes gets nothing of that folder back.
TEST(AkaBuildCache, ABuildFolderSwappedForALinkIsNotKept) {
  CacheFolders f;
  const fs::path secret = f.tmp / "secret";
  fs::create_directories(secret);
  writeText(secret / "held_out.yaml", "configs: [the unseen ones]\n");
  fs::remove_all(f.jit);
  fs::create_directory_symlink(secret, f.jit);
  auto kept = publishCandidateBuild(f.root, kCacheKey, f.jit);
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_TRUE(kept->starts_with("not kept")) << *kept;
  EXPECT_FALSE(fs::exists(fs::symlink_status(f.root / kCacheKey)));
  if (fs::exists(f.root))
    for (const auto& e : fs::directory_iterator(f.root)) ADD_FAILURE() << "left in the cache: " << e.path();
  const fs::path again = f.tmp / "ws2/build/aka-ext";
  fs::create_directories(again.parent_path());
  auto hit = restoreCandidateBuild(f.root, kCacheKey, again);
  ASSERT_TRUE(hit) << hit.error().message;
  EXPECT_FALSE(*hit);
  EXPECT_FALSE(fs::exists(again / "held_out.yaml"));
  // copyTree itself refuses a link as the folder to copy.
  EXPECT_FALSE(copyTree(f.jit, f.tmp / "copy").ok());
  EXPECT_FALSE(fs::exists(f.tmp / "copy" / "held_out.yaml"));
}
