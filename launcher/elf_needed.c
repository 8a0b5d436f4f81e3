/* Which MPI library a program uses (gr_launcher.h, gr__elf_mpi_lib): its dynamic dependencies read
 * from the ELF files themselves, breadth first, without running the program or its loader (ldd
 * does). A library is found as the loader would for the usual cases: the needing object's
 * DT_RUNPATH (or DT_RPATH), LD_LIBRARY_PATH, then the system's directories; entries with '$'
 * ($ORIGIN, $LIB) and libraries it cannot find are passed over, so the answer is "not found" rather
 * than a guess. Every field read from a file is bounded: the files may be anyone's. */
#include "gr_launcher.h"

#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_OBJECTS 128 /* libraries looked at, at most */
#define MAX_NEEDED 128  /* DT_NEEDED entries read per object */
#define NAME_LEN 256

static const char *const system_dirs[] = {
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/usr/local/lib",
};

typedef struct {
  char needed[MAX_NEEDED][NAME_LEN];
  int nneeded;
  char runpath[PATH_MAX];
} dyn_info;

/* The file offset of virtual address va (a PT_LOAD segment's), or -1. */
static off_t va_to_off(int fd, const Elf64_Ehdr *eh, Elf64_Addr va) {
  for (int i = 0; i < eh->e_phnum; i++) {
    Elf64_Phdr ph;
    if (pread(fd, &ph, sizeof ph, (off_t)(eh->e_phoff + (Elf64_Off)i * sizeof ph)) != sizeof ph)
      return -1;
    if (ph.p_type == PT_LOAD && va >= ph.p_vaddr && va - ph.p_vaddr < ph.p_filesz)
      return (off_t)(ph.p_offset + (va - ph.p_vaddr));
  }
  return -1;
}

/* A NUL-terminated string of at most cap - 1 bytes at strtab + off (strsz bytes long). */
static int read_str(int fd, off_t strtab, Elf64_Xword strsz, Elf64_Xword off, char *out,
                    size_t cap) {
  if (off >= strsz) return -1;
  size_t want = cap - 1;
  if (strsz - off < want) want = (size_t)(strsz - off);
  ssize_t n = pread(fd, out, want, strtab + (off_t)off);
  if (n <= 0) return -1;
  out[n] = '\0';
  return (size_t)strnlen(out, (size_t)n) < (size_t)n ? 0 : -1; /* the NUL must be within */
}

/* The dynamic section of a 64-bit ELF file: its DT_NEEDED names and its run path. 0, or -1 (not an
 * ELF file of this machine's kind, no dynamic section, or something out of bounds). */
static int read_dynamic(const char *file, dyn_info *d) {
  memset(d, 0, sizeof *d);
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = -1;
  Elf64_Ehdr eh;
  if (pread(fd, &eh, sizeof eh, 0) != sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
      eh.e_phnum == 0 || eh.e_phnum >= 4096)
    goto out;
  Elf64_Phdr dyn = {0};
  for (int i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (Elf64_Off)i * sizeof ph)) != sizeof ph)
      goto out;
    if (ph.p_type == PT_DYNAMIC) dyn = ph;
  }
  if (dyn.p_type != PT_DYNAMIC || dyn.p_filesz > (1u << 20)) goto out;
  size_t n = (size_t)(dyn.p_filesz / sizeof(Elf64_Dyn));
  Elf64_Dyn *e = malloc(n ? n * sizeof *e : 1);
  if (!e) goto out;
  if (pread(fd, e, n * sizeof *e, (off_t)dyn.p_offset) != (ssize_t)(n * sizeof *e)) {
    free(e);
    goto out;
  }
  Elf64_Addr strtab_va = 0;
  Elf64_Xword strsz = 0, runpath = (Elf64_Xword)-1, rpath = (Elf64_Xword)-1;
  for (size_t i = 0; i < n && e[i].d_tag != DT_NULL; i++) {
    if (e[i].d_tag == DT_STRTAB) strtab_va = e[i].d_un.d_ptr;
    if (e[i].d_tag == DT_STRSZ) strsz = e[i].d_un.d_val;
    if (e[i].d_tag == DT_RUNPATH) runpath = e[i].d_un.d_val;
    if (e[i].d_tag == DT_RPATH) rpath = e[i].d_un.d_val;
  }
  off_t strtab = strtab_va ? va_to_off(fd, &eh, strtab_va) : -1;
  if (strtab >= 0 && strsz > 0) {
    Elf64_Xword rp = runpath != (Elf64_Xword)-1 ? runpath : rpath;
    if (rp != (Elf64_Xword)-1 && read_str(fd, strtab, strsz, rp, d->runpath, sizeof d->runpath))
      d->runpath[0] = '\0';
    for (size_t i = 0; i < n && e[i].d_tag != DT_NULL && d->nneeded < MAX_NEEDED; i++)
      if (e[i].d_tag == DT_NEEDED &&
          read_str(fd, strtab, strsz, e[i].d_un.d_val, d->needed[d->nneeded], NAME_LEN) == 0 &&
          !strchr(d->needed[d->nneeded], '/'))
        d->nneeded++;
    rc = 0;
  }
  free(e);
out:
  close(fd);
  return rc;
}

/* name found in one of the ':'-separated dirs (entries with '$' passed over): 1 and path. */
static int find_in(const char *dirs, const char *name, char *path, size_t cap) {
  for (const char *p = dirs; p && *p;) {
    size_t len = strcspn(p, ":");
    if (len && !memchr(p, '$', len) &&
        (size_t)snprintf(path, cap, "%.*s/%s", (int)len, p, name) < cap && access(path, R_OK) == 0)
      return 1;
    p += len;
    if (*p == ':') p++;
  }
  return 0;
}

static int find_lib(const char *name, const char *runpath, char *path, size_t cap) {
  if (find_in(runpath, name, path, cap) || find_in(getenv("LD_LIBRARY_PATH"), name, path, cap))
    return 1;
  for (size_t i = 0; i < sizeof system_dirs / sizeof system_dirs[0]; i++)
    if (find_in(system_dirs[i], name, path, cap)) return 1;
  return 0;
}

const char *gr__elf_mpi_family(const char *soname) {
  if (!strncmp(soname, "libmpi.so.", 10)) return "openmpi";
  if (!strncmp(soname, "libmpich.so.", 12)) return "mpich";
  return NULL;
}

int gr__elf_mpi_lib(const char *file, char *soname, size_t cap, char *via, size_t vcap) {
  static char seen[MAX_OBJECTS][NAME_LEN]; /* the launcher is single-threaded here */
  static char paths[MAX_OBJECTS][1024];
  static dyn_info d;
  int n = 0;
  snprintf(paths[0], sizeof paths[0], "%s", file);
  const char *base = strrchr(file, '/');
  snprintf(seen[0], sizeof seen[0], "%s", base ? base + 1 : file);
  n = 1;
  for (int i = 0; i < n; i++) {
    if (read_dynamic(paths[i], &d) != 0) continue;
    for (int k = 0; k < d.nneeded; k++) {
      const char *need = d.needed[k];
      if (gr__elf_mpi_family(need)) {
        snprintf(soname, cap, "%s", need);
        snprintf(via, vcap, "%s", seen[i]);
        return 1;
      }
      int dup = 0;
      for (int j = 0; j < n && !dup; j++)
        dup = !strcmp(seen[j], need);
      if (dup || n >= MAX_OBJECTS) continue;
      if (!find_lib(need, d.runpath, paths[n], sizeof paths[n])) continue;
      snprintf(seen[n], sizeof seen[n], "%s", need);
      n++;
    }
  }
  return 0;
}
