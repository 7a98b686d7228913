// libroot_marker.so: loaded through a job's LD_PRELOAD by
// agent_findings_test. Its constructor runs in every dynamically linked
// program that loads it; when that program runs as root (uid or euid 0) it
// leaves a marker file in $ROOT_MARKER_DIR (a folder only root may write):
// "root-<pid>" holding "uid euid exe". As any other uid it does nothing, so a
// rank may load it as the tenant.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

__attribute__((constructor)) static void MarkRoot() {
  if (getuid() != 0 && geteuid() != 0) return;
  const char* dir = getenv("ROOT_MARKER_DIR");
  if (dir == nullptr || dir[0] != '/') return;
  char path[4096];
  snprintf(path, sizeof(path), "%s/root-%d", dir, static_cast<int>(getpid()));
  char exe[1024] = {0};
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n < 0) n = 0;
  exe[n] = '\0';
  char text[1200];
  int len = snprintf(text, sizeof(text), "%d %d %s\n", static_cast<int>(getuid()), static_cast<int>(geteuid()), exe);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ssize_t unused = write(fd, text, static_cast<size_t>(len));
  (void)unused;
  close(fd);
}
