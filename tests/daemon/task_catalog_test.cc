// Task selector resolution over a real directory tree (daemon/task_catalog.h).
#include <gtest/gtest.h>

#include <fstream>

#include "common/protocol.h"
#include "daemon/pipeline/task_scan.h"
#include "daemon/task_catalog.h"
#include "tests/daemon/harness.h"

namespace akad {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<std::string>;

TEST(TaskCatalog, ListsEveryFolderWithATaskYaml) {
  test::TempDir dir;
  TaskCatalog catalog(test::writeFakeTasks(dir.path()));
  auto all = catalog.list();
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(*all, (Ids{"cpu/softmax", "cpu/vecadd", "hip2hip/gemm"}));
}

TEST(TaskCatalog, ResolvesSuitesTasksAndGlobsWithoutDuplicates) {
  test::TempDir dir;
  TaskCatalog catalog(test::writeFakeTasks(dir.path()));
  EXPECT_EQ(*catalog.resolve({"cpu"}), (Ids{"cpu/softmax", "cpu/vecadd"}));
  EXPECT_EQ(*catalog.resolve({"cpu/softmax"}), (Ids{"cpu/softmax"}));
  EXPECT_EQ(*catalog.resolve({"cpu/*"}), (Ids{"cpu/softmax", "cpu/vecadd"}));
  EXPECT_EQ(*catalog.resolve({"*/gemm", "cpu/soft*", "cpu"}), (Ids{"cpu/softmax", "cpu/vecadd", "hip2hip/gemm"}));
  // "*" with FNM_PATHNAME stays within one path component: suites only, which are not tasks.
  EXPECT_FALSE(catalog.resolve({"*"}));
  EXPECT_EQ(catalog.resolve({"*/*"})->size(), 3u);
}

TEST(TaskCatalog, AnUnmatchedSelectorIsNamedInTheError) {
  test::TempDir dir;
  TaskCatalog catalog(test::writeFakeTasks(dir.path()));
  for (const char* sel : {"gpu", "cpu/nosuch", "triton*/*", "cpu/soft", "common"}) {
    auto r = catalog.resolve({"cpu", sel});
    ASSERT_FALSE(r) << sel;
    EXPECT_EQ(r.error().code, protocol::kNoTasksMatch) << sel;
    EXPECT_NE(r.error().message.find(sel), std::string::npos) << r.error().message;
  }
  EXPECT_EQ(catalog.resolve({}).error().code, protocol::kInvalidParams);
  EXPECT_EQ(catalog.resolve({""}).error().code, protocol::kInvalidParams);
}

TEST(TaskCatalog, AMissingRootIsAClearError) {
  TaskCatalog catalog("/nonexistent/akad/tasks");
  auto r = catalog.resolve({"cpu"});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("/nonexistent/akad/tasks"), std::string::npos);
}

// The catalog (run.submit's selectors) and tasks.list (scanTasks) once scanned with rules of
// their own: the list took shared harness code with a task.yaml for a suite and any task.yaml
// that merely existed (a directory too), the catalog neither; an unreadable root threw in one
// and was an error in the other. Now both go through task_scan.h.
TEST(TaskCatalog, TheCatalogAndTheTaskListSeeTheSameTasks) {
  test::TempDir dir;
  const fs::path tasks = test::writeFakeTasks(dir.path());
  fs::create_directories(tasks / "common" / "shared");
  std::ofstream(tasks / "common" / "shared" / "task.yaml") << "id: shared\n";  // harness code, not a task
  fs::create_directories(tasks / "cpu" / "half-made" / "task.yaml");            // a folder, not a file
  std::ofstream(tasks / "cpu" / "notes.txt") << "not a task\n";
  std::ofstream(tasks / "README") << "not a suite\n";

  auto catalog = TaskCatalog(tasks).list();
  ASSERT_TRUE(catalog) << catalog.error().message;
  EXPECT_EQ(*catalog, (Ids{"cpu/softmax", "cpu/vecadd", "hip2hip/gemm"}));
  auto folders = findTaskFolders(tasks);
  ASSERT_TRUE(folders) << folders.error().message;
  Ids folderIds;
  for (const auto& f : *folders) folderIds.push_back(f.id);
  EXPECT_EQ(folderIds, *catalog);
  const TaskCatalogScan scan = scanTasks(tasks);
  EXPECT_TRUE(scan.errors.empty()) << scan.errors.front();
  Ids listed;
  for (const auto& t : scan.tasks) listed.push_back(t.id);
  EXPECT_EQ(listed, *catalog);
  EXPECT_FALSE(isTaskFolder(tasks / "common" / "shared"));
  EXPECT_FALSE(isTaskFolder(tasks / "cpu" / "half-made"));
  EXPECT_TRUE(isTaskFolder(tasks / "cpu" / "softmax"));
}

TEST(TaskCatalog, AMissingRootHoldsNoTasksAndAnUnreadableOneIsReported) {
  test::TempDir dir;
  auto none = findTaskFolders(dir / "absent");
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_TRUE(none->empty());
  EXPECT_TRUE(scanTasks(dir / "absent").errors.empty());
  std::ofstream(dir / "plain-file") << "x\n";  // a root that cannot be listed (ENOTDIR), even by root
  auto bad = findTaskFolders(dir / "plain-file");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("plain-file"), std::string::npos) << bad.error().message;
  const TaskCatalogScan scan = scanTasks(dir / "plain-file");
  ASSERT_EQ(scan.errors.size(), 1u);
  EXPECT_TRUE(scan.tasks.empty());
}

}  // namespace
}  // namespace akad
