#include "common/progress_page.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace athanor {
namespace {

int64_t NowUnixMs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);  // vDSO: no system call
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

constexpr auto kRelaxed = std::memory_order_relaxed;

int64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no system call
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace

const char* ProgressOpName(ProgressOp op) {
  switch (op) {
    case ProgressOp::kNone: return "";
    case ProgressOp::kAllReduce: return "all-reduce";
    case ProgressOp::kReduceScatter: return "reduce-scatter";
    case ProgressOp::kAllGather: return "all-gather";
    case ProgressOp::kBroadcast: return "broadcast";
    case ProgressOp::kBarrier: return "barrier";
    case ProgressOp::kCheckpointSave: return "checkpoint save";
  }
  return "";
}

absl::StatusOr<std::unique_ptr<ProgressWriter>> ProgressWriter::Open(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("progress file '", path, "' is not an absolute path"));
  }
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("open ", path, ": ", strerror(errno)));
  if (ftruncate(fd, sizeof(ProgressPageLayout)) != 0) {
    int e = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("ftruncate ", path, ": ", strerror(e)));
  }
  void* m = mmap(nullptr, sizeof(ProgressPageLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED) return absl::UnavailableError(absl::StrCat("mmap ", path, ": ", strerror(e)));
  auto* page = static_cast<ProgressPageLayout*>(m);  // zero-filled by ftruncate
  page->step.store(-1, kRelaxed);
  page->layout_version.store(1, kRelaxed);
  page->update_unix_ms.store(NowUnixMs(), kRelaxed);
  page->magic.store(kProgressMagic, std::memory_order_release);
  return std::unique_ptr<ProgressWriter>(new ProgressWriter(page));
}

absl::StatusOr<std::unique_ptr<ProgressWriter>> ProgressWriter::OpenIfNamed(
    const std::string& path) {
  if (path.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<ProgressWriter>> w = Open(path);
  if (w.ok() || w.status().code() == absl::StatusCode::kInvalidArgument) return w;
  ATHANOR_LOG(WARNING) << "no progress reports: " << w.status().message();
  return nullptr;
}

ProgressWriter::~ProgressWriter() { munmap(page_, sizeof(ProgressPageLayout)); }

void ProgressWriter::Begin() {
  while (busy_.test_and_set(std::memory_order_acquire)) {
  }
  page_->version.fetch_add(1, kRelaxed);  // odd
  std::atomic_thread_fence(std::memory_order_release);
}

void ProgressWriter::End() {
  page_->update_unix_ms.store(NowUnixMs(), kRelaxed);
  page_->version.fetch_add(1, std::memory_order_release);  // even
  busy_.clear(std::memory_order_release);
}

void ProgressWriter::StepDone(int64_t step, double compute_ms, double step_ms) {
  Begin();
  page_->step.store(step, kRelaxed);
  page_->step_compute_us.store(static_cast<int64_t>(compute_ms * 1000), kRelaxed);
  page_->step_us.store(static_cast<int64_t>(step_ms * 1000), kRelaxed);
  End();
}

uint64_t ProgressWriter::CollectiveIssued() {
  Begin();
  uint64_t seq = page_->collective_seq.load(kRelaxed) + 1;
  page_->collective_seq.store(seq, kRelaxed);
  End();
  return seq;
}

void ProgressWriter::WaitBegin(uint64_t seq, ProgressOp op) {
  wait_start_ns_.store(MonotonicNs(), kRelaxed);
  Begin();
  page_->waiting_seq.store(seq, kRelaxed);
  page_->op.store(static_cast<int32_t>(op), kRelaxed);
  End();
}

void ProgressWriter::WaitEnd() {
  wait_ns_.fetch_add(MonotonicNs() - wait_start_ns_.load(kRelaxed), kRelaxed);
  Begin();
  page_->waiting_seq.store(0, kRelaxed);
  page_->op.store(0, kRelaxed);
  End();
}

void ProgressWriter::BlockedBegin(ProgressOp op) {
  Begin();
  page_->op.store(static_cast<int32_t>(op), kRelaxed);
  End();
}

void ProgressWriter::BlockedEnd() {
  Begin();
  page_->op.store(0, kRelaxed);
  End();
}

absl::StatusOr<ProgressSnapshot> ReadProgressLayout(const ProgressPageLayout& page) {
  if (page.magic.load(std::memory_order_acquire) != kProgressMagic ||
      page.layout_version.load(kRelaxed) != 1) {
    return absl::DataLossError("not a progress page (bad magic or layout version)");
  }
  for (int attempt = 0; attempt < 64; ++attempt) {
    uint64_t v0 = page.version.load(std::memory_order_acquire);
    if (v0 & 1) continue;
    ProgressSnapshot s;
    s.step = page.step.load(kRelaxed);
    s.step_compute_ms = page.step_compute_us.load(kRelaxed) / 1000.0;
    s.step_ms = page.step_us.load(kRelaxed) / 1000.0;
    s.collective_seq = page.collective_seq.load(kRelaxed);
    s.waiting_seq = page.waiting_seq.load(kRelaxed);
    int32_t op = page.op.load(kRelaxed);
    s.update_unix_ms = page.update_unix_ms.load(kRelaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (page.version.load(kRelaxed) != v0) continue;
    s.waiting = s.waiting_seq != 0;
    s.op = (op >= 0 && op <= static_cast<int32_t>(ProgressOp::kLast)) ? static_cast<ProgressOp>(op)
                                                                          : ProgressOp::kNone;
    return s;
  }
  return absl::UnavailableError("progress page is being written (no consistent copy)");
}

absl::StatusOr<ProgressSnapshot> ReadProgressPage(const std::string& path) {
  // The page belongs to an untrusted rank: no mapping (a truncation would
  // fault the reader), no blocking open (a FIFO), no symbolic link.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no progress page yet"));
    return absl::UnavailableError(absl::StrCat("open ", path, ": ", strerror(errno)));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::DataLossError(absl::StrCat(path, ": not a progress page (not a regular file)"));
  }
  // Two copies that agree byte for byte, with an even version, were taken
  // while no write was under way.
  alignas(ProgressPageLayout) unsigned char a[sizeof(ProgressPageLayout)];
  alignas(ProgressPageLayout) unsigned char b[sizeof(ProgressPageLayout)];
  absl::Status last = absl::UnavailableError(
      absl::StrCat(path, ": progress page is being written (no consistent copy)"));
  for (int attempt = 0; attempt < 16; ++attempt) {
    ssize_t na = pread(fd, a, sizeof(a), 0);
    ssize_t nb = pread(fd, b, sizeof(b), 0);
    if (na != static_cast<ssize_t>(sizeof(a)) || nb != static_cast<ssize_t>(sizeof(b))) {
      last = absl::DataLossError(absl::StrCat(path, ": not a progress page (short read)"));
      break;
    }
    if (std::memcmp(a, b, sizeof(a)) != 0) continue;
    absl::StatusOr<ProgressSnapshot> s =
        ReadProgressLayout(*reinterpret_cast<const ProgressPageLayout*>(a));
    if (s.ok() || s.status().code() == absl::StatusCode::kDataLoss) {
      close(fd);
      return s;
    }
  }
  close(fd);
  return last;
}

}  // namespace athanor
