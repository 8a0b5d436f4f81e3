/* Which MPI library a program uses (launcher/elf_needed.c), read from ELF files:
 *   direct      libgpurun links its MPI library itself: found, needed by libgpurun, the
 *               build's family;
 *   through     a program that links only a library that links MPI (launcher_elf_prog links
 *               libgpurun, which links MPI): found, needed by that library, not by the program;
 *   none        /bin/sh and a text file: nothing; a missing file: nothing;
 *   hostile     every truncation of launcher_elf_prog's file (every 64th length up to 64 KiB, and the
 *               first 512 lengths), and copies with a corrupt header, program table or dynamic
 *               section: nothing found or the right answer, never a crash (run under ASan too). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "gr_test_tmpdir.h"

#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gr_launcher.h"

static char dir[256];

static int setup(void **state) {
  (void)state;
  return gr_test_tmpdir_make(dir, sizeof dir, "gr_test_elf");
}

static int teardown(void **state) {
  (void)state;
  return gr_test_tmpdir_remove(dir);
}

static void test_direct(void **state) {
  (void)state;
  char so[256], via[256];
  assert_int_equal(gr__elf_mpi_lib(GR_LIB_FILE, so, sizeof so, via, sizeof via), 1);
  assert_true(gr__elf_mpi_family(so) != NULL);
  assert_string_equal(via, strrchr(GR_LIB_FILE, '/') + 1);
  assert_string_equal(gr__elf_mpi_family(so), GR_FAMILY);
}

static void test_through(void **state) {
  (void)state;
  char so[256], via[256], layer_so[256], layer_via[256];
  assert_int_equal(gr__elf_mpi_lib(GR_PROG_FILE, so, sizeof so, via, sizeof via), 1);
  assert_int_equal(
      gr__elf_mpi_lib(GR_LIB_FILE, layer_so, sizeof layer_so, layer_via, sizeof layer_via), 1);
  assert_string_equal(so, layer_so); /* one build, one MPI */
  assert_string_not_equal(via, strrchr(GR_PROG_FILE, '/') + 1);
  assert_non_null(strstr(via, "libgpurun"));
}

static void test_none(void **state) {
  (void)state;
  char so[256] = "", via[256] = "", path[512];
  assert_int_equal(gr__elf_mpi_lib("/bin/sh", so, sizeof so, via, sizeof via), 0);
  assert_int_equal(gr__elf_mpi_lib("/nonexistent/prog", so, sizeof so, via, sizeof via), 0);
  snprintf(path, sizeof path, "%s/text", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("#!/bin/sh\nexec mpirun\n", f);
  fclose(f);
  assert_int_equal(gr__elf_mpi_lib(path, so, sizeof so, via, sizeof via), 0);
  assert_null(gr__elf_mpi_family("libmpifort.so.12"));
  assert_string_equal(gr__elf_mpi_family("libmpich.so.12"), "mpich");
  assert_string_equal(gr__elf_mpi_family("libmpi.so.40"), "openmpi");
}

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  assert_true(n > 0);
  rewind(f);
  unsigned char *b = malloc((size_t)n);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return b;
}

/* Writes len bytes of b as dir/name and asks; returns what gr__elf_mpi_lib said. */
static int ask(const unsigned char *b, size_t len, char *so, size_t cap) {
  char path[512], via[256];
  snprintf(path, sizeof path, "%s/copy", dir);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, len, f), len);
  fclose(f);
  return gr__elf_mpi_lib(path, so, cap, via, sizeof via);
}

static void test_hostile(void **state) {
  (void)state;
  size_t len;
  unsigned char *b = slurp(GR_PROG_FILE, &len);
  char want[256], so[256], via[256];
  assert_int_equal(gr__elf_mpi_lib(GR_PROG_FILE, want, sizeof want, via, sizeof via), 1);
  for (size_t n = 0; n < len && n < 65536; n += n < 512 ? 1 : 64) {
    int r = ask(b, n, so, sizeof so);
    if (r) assert_string_equal(so, want);
  }
  Elf64_Ehdr *eh = (Elf64_Ehdr *)b;
  unsigned char *c = malloc(len);
  assert_non_null(c);
  /* the program table's place and count, the class, the entry size: each corrupt alone */
  const struct {
    size_t off, size;
    unsigned long long v;
  } bad[] = {
      {offsetof(Elf64_Ehdr, e_phoff), 8, ~0ull},
      {offsetof(Elf64_Ehdr, e_phoff), 8, (unsigned long long)len - 8},
      {offsetof(Elf64_Ehdr, e_phnum), 2, 0xffff},
      {offsetof(Elf64_Ehdr, e_phentsize), 2, 1},
      {EI_CLASS, 1, ELFCLASS32},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memcpy(c, b, len);
    memcpy(c + bad[i].off, &bad[i].v, bad[i].size);
    assert_int_equal(ask(c, len, so, sizeof so), 0);
  }
  /* every program header's and dynamic entry's fields set to extremes, one byte pattern each */
  for (int ph = 0; ph < eh->e_phnum; ph++)
    for (int pat = 0; pat < 3; pat++) {
      memcpy(c, b, len);
      Elf64_Phdr *p = (Elf64_Phdr *)(c + eh->e_phoff + (size_t)ph * sizeof *p);
      unsigned long long v = pat == 0 ? ~0ull : pat == 1 ? 0 : (unsigned long long)len;
      p->p_offset = p->p_filesz = p->p_vaddr = v;
      int r = ask(c, len, so, sizeof so);
      if (r) assert_string_equal(so, want);
    }
  for (int ph = 0; ph < eh->e_phnum; ph++) {
    Elf64_Phdr *p = (Elf64_Phdr *)(b + eh->e_phoff + (size_t)ph * sizeof *p);
    if (p->p_type != PT_DYNAMIC || p->p_offset + p->p_filesz > len) continue;
    for (size_t e = 0; e < p->p_filesz / sizeof(Elf64_Dyn); e++)
      for (int pat = 0; pat < 2; pat++) {
        memcpy(c, b, len);
        Elf64_Dyn *d = (Elf64_Dyn *)(c + p->p_offset) + e;
        d->d_un.d_val = pat ? ~0ull : len;
        int r = ask(c, len, so, sizeof so);
        if (r) assert_true(gr__elf_mpi_family(so) != NULL);
      }
  }
  free(c);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_direct),
      cmocka_unit_test(test_through),
      cmocka_unit_test(test_none),
      cmocka_unit_test(test_hostile),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
