#include "daemon/snapshot/store.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "common/file_lock.h"
#include "common/durable_file.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/unique_fd.h"
#include "daemon/snapshot/create_internal.h"

namespace akad::snapshot {

namespace fs = std::filesystem;

nlohmann::json GcReport::toJson() const {
  return nlohmann::json{{"removed", removed}, {"bytes_freed", bytes_freed}, {"temp_files_removed", temp_files_removed}};
}

namespace {

bool validHash(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

Error badHash(const std::string& s) {
  return Error{"'" + s + "' is not a snapshot SHA-256 (64 lowercase hex digits)", 0};
}

// A temporary file in `dir` removed on destruction unless released.
class TempFile {
 public:
  Status create(const fs::path& dir, const std::string& suffix) {
    std::string tmpl = (dir / ("snap-XXXXXX" + suffix)).string();
    int fd = ::mkostemps(tmpl.data(), static_cast<int>(suffix.size()), O_CLOEXEC);
    if (fd < 0) return errnoError("cannot create a temporary file in " + dir.string());
    fd_.reset(fd);
    path_ = tmpl;
    return {};
  }
  ~TempFile() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  int fd() const { return fd_.get(); }
  const fs::path& path() const { return path_; }
  Status syncAndClose() {
    if (::fchmod(fd_.get(), 0644) != 0) return errnoError("cannot chmod " + path_.string());
    if (::fsync(fd_.get()) != 0) return errnoError("cannot fsync " + path_.string());
    if (::close(fd_.release()) != 0) return errnoError("cannot close " + path_.string());
    return {};
  }
  Status renameTo(const fs::path& final) {
    if (::rename(path_.c_str(), final.c_str()) != 0)
      return errnoError("cannot rename " + path_.string() + " to " + final.string());
    path_.clear();
    return {};
  }

 private:
  UniqueFd fd_;
  fs::path path_;
};

// Moves a written archive (synced, in tmp/) under its hash unless a sound copy is there, and
// writes the manifest beside it: archive first, so a crash leaves no manifest without its
// archive.
Status installArchive(const SnapshotStore& store, TempFile& tmp, const Manifest& m, const fs::path& corruptMarker) {
  const std::string& h = m.archive_sha256;
  const fs::path dir = store.archivePath(h).parent_path();
  if (::mkdir(dir.c_str(), 0755) == 0) {
    if (auto s = fsyncPath(dir.parent_path()); !s) return s;
  } else if (errno != EEXIST) {
    return errnoError("cannot create " + dir.string());
  }
  const bool haveArchive = ::access(store.archivePath(h).c_str(), F_OK) == 0 && !store.isCorrupt(h);
  if (!haveArchive)
    if (auto s = tmp.renameTo(store.archivePath(h)); !s) return s;
  if (!haveArchive || ::access(store.manifestPath(h).c_str(), F_OK) != 0) {
    TempFile manifestTmp;
    if (auto s = manifestTmp.create(store.root() / "tmp", ".json"); !s) return s;
    const std::string text = m.toJson().dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    if (auto s = writeAll(manifestTmp.fd(), text.data(), text.size(), manifestTmp.path()); !s) return s;
    if (auto s = manifestTmp.syncAndClose(); !s) return s;
    if (auto s = manifestTmp.renameTo(store.manifestPath(h)); !s) return s;
  }
  ::unlink(corruptMarker.c_str());
  return fsyncPath(dir);
}

}  // namespace

SnapshotStore::SnapshotStore(fs::path root) : root_(std::move(root)) {}

fs::path SnapshotStore::archivePath(const std::string& h) const { return root_ / "sha256" / h.substr(0, 2) / (h + ".tar.zst"); }
fs::path SnapshotStore::manifestPath(const std::string& h) const { return root_ / "sha256" / h.substr(0, 2) / (h + ".json"); }
fs::path SnapshotStore::corruptMarkerPath(const std::string& h) const { return root_ / "sha256" / h.substr(0, 2) / (h + ".corrupt"); }

Status SnapshotStore::ensureLayout() {
  std::error_code ec;
  for (const auto& d : {root_, root_ / "tmp", root_ / "sha256"}) {
    fs::create_directories(d, ec);
    if (ec) return Error{"cannot create snapshot store directory " + d.string() + ": " + ec.message(), 0};
  }
  return {};
}

Result<Manifest> SnapshotStore::add(const fs::path& workspace, const CreateOptions& options, const nlohmann::json& metadata) {
  if (auto s = ensureLayout(); !s) return s.error();
  FileLock lock;
  if (auto s = lock.acquire(root_ / ".lock", LOCK_SH); !s) return s.error();

  TempFile archiveTmp;
  if (auto s = archiveTmp.create(root_ / "tmp", ".tar.zst"); !s) return s.error();
  auto m = createArchiveToFd(workspace, archiveTmp.fd(), options, metadata);
  if (!m) return Error{"cannot snapshot " + workspace.string() + ": " + m.error().message, 0};
  if (auto s = archiveTmp.syncAndClose(); !s) return s.error();

  if (auto s = installArchive(*this, archiveTmp, *m, corruptMarkerPath(m->archive_sha256)); !s) return s.error();
  return m;
}

bool SnapshotStore::isCorrupt(const std::string& h) const {
  return validHash(h) && ::access(corruptMarkerPath(h).c_str(), F_OK) == 0;
}

Result<fs::path> SnapshotStore::openVerified(const std::string& h) {
  if (!validHash(h)) return badHash(h);
  if (isCorrupt(h)) return Error{"snapshot " + h + " is marked corrupt; nothing may be scored from it", 0};
  fs::path p = archivePath(h);
  auto actual = sha256File(p);
  if (!actual) return Error{"snapshot " + h + " cannot be read: " + actual.error().message, 0};
  if (*actual != h) {
    std::ofstream(corruptMarkerPath(h)) << "archive hashes to " << *actual << "\n";
    log::error("snapshot " + h + " is corrupt: its archive hashes to " + *actual);
    return Error{"snapshot " + h + " is corrupt: archive " + p.string() + " hashes to " + *actual +
                     "; it is now marked corrupt and nothing may be scored from it",
                 0};
  }
  return p;
}

Result<Manifest> SnapshotStore::manifest(const std::string& h) {
  if (!validHash(h)) return badHash(h);
  if (::access(archivePath(h).c_str(), F_OK) != 0) return Error{"no snapshot " + h + " in " + root_.string(), 0};
  return readManifest(manifestPath(h));
}

std::vector<Manifest> SnapshotStore::list() {
  std::vector<Manifest> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root_ / "sha256", ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".json") continue;
    std::string h = p.stem().string();
    if (!validHash(h) || ::access(archivePath(h).c_str(), F_OK) != 0) continue;
    auto m = readManifest(p);
    if (!m) {
      log::warn("snapshot store: skipping " + p.string() + ": " + m.error().message);
      continue;
    }
    out.push_back(std::move(*m));
  }
  std::sort(out.begin(), out.end(), [](const Manifest& a, const Manifest& b) { return a.archive_sha256 < b.archive_sha256; });
  return out;
}

Result<GcReport> SnapshotStore::gc(const std::set<std::string>& referenced) {
  if (auto s = ensureLayout(); !s) return s.error();
  FileLock lock;
  if (auto s = lock.acquire(root_ / ".lock", LOCK_EX); !s) return s.error();
  GcReport report;
  std::error_code ec;
  // With the exclusive lock held no add() is running: every temporary file is a crash leftover.
  for (const auto& e : fs::directory_iterator(root_ / "tmp", ec)) {
    if (fs::remove(e.path(), ec)) ++report.temp_files_removed;
  }
  for (const auto& sub : fs::directory_iterator(root_ / "sha256", ec)) {
    if (!sub.is_directory()) continue;
    std::set<std::string> hashes;
    for (const auto& f : fs::directory_iterator(sub.path(), ec)) {
      std::string name = f.path().filename().string();
      std::string h = name.substr(0, name.find('.'));
      if (validHash(h)) hashes.insert(h);
    }
    bool removedAny = false;
    for (const auto& h : hashes) {
      if (referenced.count(h)) continue;
      uint64_t size = fs::file_size(archivePath(h), ec);
      if (!ec) report.bytes_freed += size;
      ec.clear();
      fs::remove(archivePath(h), ec);
      fs::remove(manifestPath(h), ec);
      fs::remove(corruptMarkerPath(h), ec);
      report.removed.push_back(h);
      removedAny = true;
    }
    if (removedAny) {
      if (auto s = fsyncPath(sub.path()); !s) return s.error();
      fs::remove(sub.path(), ec);  // only succeeds when empty
    }
  }
  return report;
}

Result<Manifest> SnapshotStore::importVerified(const fs::path& archive, const std::string& h) {
  if (!validHash(h)) return badHash(h);
  auto m = readManifest(manifestPathFor(archive));
  if (!m) return Error{"the snapshot's manifest beside " + archive.string() + ": " + m.error().message, 0};
  if (m->archive_sha256 != h)
    return Error{"the manifest beside " + archive.string() + " names " + m->archive_sha256 + ", not " + h, 0};
  if (auto s = ensureLayout(); !s) return s.error();
  FileLock lock;
  if (auto s = lock.acquire(root_ / ".lock", LOCK_SH); !s) return s.error();
  TempFile tmp;
  if (auto s = tmp.create(root_ / "tmp", ".tar.zst"); !s) return s.error();
  {
    UniqueFd in(::open(archive.c_str(), O_RDONLY | O_CLOEXEC));
    if (!in.valid()) return errnoError("cannot open " + archive.string());
    char buf[1 << 16];
    for (;;) {
      const ssize_t n = ::read(in.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errnoError("cannot read " + archive.string());
      if (n == 0) break;
      if (auto s = writeAll(tmp.fd(), buf, static_cast<size_t>(n), tmp.path()); !s) return s.error();
    }
  }
  if (auto s = tmp.syncAndClose(); !s) return s.error();
  // The copy is what is hashed: bytes that changed on the way in are refused, not stored.
  auto actual = sha256File(tmp.path());
  if (!actual) return actual.error();
  if (*actual != h) return Error{"snapshot archive " + archive.string() + " hashes to " + *actual + ", not " + h, 0};
  if (auto s = installArchive(*this, tmp, *m, corruptMarkerPath(h)); !s) return s.error();
  return m;
}

Status SnapshotStore::exportTo(const std::string& h, const fs::path& archive) {
  auto src = openVerified(h);
  if (!src) return src.error();
  std::error_code ec;
  fs::copy_file(*src, archive, fs::copy_options::overwrite_existing, ec);
  if (ec) return Error{"cannot copy snapshot " + h + " to " + archive.string() + ": " + ec.message(), 0};
  fs::copy_file(manifestPath(h), manifestPathFor(archive), fs::copy_options::overwrite_existing, ec);
  if (ec) return Error{"cannot copy the manifest of " + h + " to " + manifestPathFor(archive).string() + ": " + ec.message(), 0};
  // The copy is re-hashed: what the user gets is what was verified.
  auto copied = sha256File(archive);
  if (!copied || *copied != h) return Error{"exported copy " + archive.string() + " does not hash to " + h, 0};
  return {};
}

nlohmann::json SnapshotStore::listJson() {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& m : list()) {
    auto j = describe(m);
    j["corrupt"] = isCorrupt(m.archive_sha256);
    arr.push_back(std::move(j));
  }
  return nlohmann::json{{"snapshots", std::move(arr)}};
}

Result<nlohmann::json> SnapshotStore::showJson(const std::string& h) {
  auto m = manifest(h);
  if (!m) return m.error();
  auto j = describe(*m, /*withEntries=*/true);
  j["corrupt"] = isCorrupt(h);
  j["path"] = archivePath(h).string();
  return j;
}

}  // namespace akad::snapshot
