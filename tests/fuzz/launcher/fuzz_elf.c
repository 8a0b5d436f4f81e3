/* libFuzzer target for the ELF dependency reader (launcher/elf_needed.c): each input is written
 * to one scratch file and read as a program; whatever it holds, the answer is "none" or an MPI
 * library's soname and the name of what needs it, both NUL-terminated within their buffers. */
#include "gr_launcher.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[64];

static void remove_scratch(void) { unlink(path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!path[0]) {
    snprintf(path, sizeof path, "/tmp/gr_fuzz_elf.XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) abort();
    close(fd);
    atexit(remove_scratch);
  }
  int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) abort();
  if (size && write(fd, data, size) != (ssize_t)size) abort();
  close(fd);
  char so[64], via[64];
  if (gr__elf_mpi_lib(path, so, sizeof so, via, sizeof via)) {
    if (!memchr(so, '\0', sizeof so) || !memchr(via, '\0', sizeof via) || !gr__elf_mpi_family(so))
      abort();
  }
  return 0;
}
