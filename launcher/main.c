/* gpurun: placeholder wrapper that execs the program (placement comes with the launcher issue). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int first = 1;
  if (first < argc && strcmp(argv[first], "--") == 0) first++;
  if (first >= argc) {
    fprintf(stderr, "usage: gpurun [--] PROGRAM [ARGS...]\n");
    return 2;
  }
  execvp(argv[first], &argv[first]);
  int err = errno;
  fprintf(stderr, "gpurun: cannot execute %s: %s\n", argv[first], strerror(err));
  return err == ENOENT ? 127 : 126;
}
