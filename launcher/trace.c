/* The MPI layer's start (gr_launcher.h, "the MPI layer"): put libgpurun-mpi.so in front of the
 * program's LD_PRELOAD and export what it reads. The layer does the rest in the program. */
#include "gr_launcher.h"

#include "gr_error.h"
#include "gr_log.h"
#include "gr_param.h"
#include "gr_strbuf.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int readable(const char *p) { return *p && access(p, R_OK) == 0; }

/* A library of gpurun's beside gpurun (<prefix>/bin/../<libdir>/name), else in this build tree
 * (build_path); NULL when neither exists. */
static const char *lib_beside(char *buf, size_t cap, const char *name, const char *build_path) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = '\0';
      snprintf(buf, cap, "%s/../%s/%s", exe, GR_INSTALL_LIBDIR, name);
      if (readable(buf)) return buf;
    }
  }
  snprintf(buf, cap, "%s", build_path);
  return readable(buf) ? buf : NULL;
}

const char *gr__trace_lib(char *buf, size_t cap) {
  const char *env = gr__param_str(GR_PARAM_TRACE_LIB);
  if (env && *env) {
    snprintf(buf, cap, "%s", env);
    return readable(buf) ? buf : NULL;
  }
  return lib_beside(buf, cap, GR_TRACE_LIB_NAME, GR_TRACE_LIB_BUILD);
}

/* NCCL's profiler plugin (ncclprof/): NCCL loads NCCL_PROFILER_PLUGIN itself, in the programs
 * that use NCCL, so gpurun only names it where the user has not (their own plugin, or "none",
 * wins). Nothing to preload. */
static void nccl_plugin(void) {
  char plib[PATH_MAX];
  if (getenv("NCCL_PROFILER_PLUGIN")) return;
  if (lib_beside(plib, sizeof plib, GR_NCCL_PLUGIN_NAME, GR_NCCL_PLUGIN_BUILD))
    setenv("NCCL_PROFILER_PLUGIN", plib, 0);
}

/* The program's file as execvp would find it; "" when not found (execvp then says so). */
static void find_program(const char *prog, char *out, size_t cap) {
  out[0] = '\0';
  if (strchr(prog, '/')) {
    snprintf(out, cap, "%s", prog);
    return;
  }
  const char *path = getenv("PATH");
  if (!path) path = "/usr/bin:/bin";
  for (const char *p = path; *p;) {
    size_t len = strcspn(p, ":");
    snprintf(out, cap, "%.*s/%s", (int)(len ? len : 1), len ? p : ".", prog);
    if (access(out, X_OK) == 0) return;
    p += len;
    if (*p == ':') p++;
  }
  out[0] = '\0';
}

/* 1 when file is an ELF executable without a program interpreter (statically linked): the
 * dynamic loader, and so LD_PRELOAD, never runs for it. 0 otherwise (dynamic, a script, unread). */
static int is_static_elf(const char *file) {
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  Elf64_Ehdr eh;
  int stat_elf = 0;
  if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr) &&
      eh.e_phnum > 0 && eh.e_phnum < 4096) {
    stat_elf = 1;
    for (int i = 0; i < eh.e_phnum; i++) {
      Elf64_Phdr ph;
      if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (Elf64_Off)i * sizeof ph)) !=
          (ssize_t)sizeof ph) {
        stat_elf = 0;
        break;
      }
      if (ph.p_type == PT_INTERP) {
        stat_elf = 0;
        break;
      }
    }
  }
  close(fd);
  return stat_elf;
}

gr_status gr__trace_setup(const gr__options *o, const char *prog) {
  const char *trace_var = gr__param_name(GR_PARAM_TRACE);
  if (o->timeout > 0) {
    char v[64];
    snprintf(v, sizeof v, "%.17g", o->timeout);
    setenv(gr__param_name(GR_PARAM_TIMEOUT), v, 1);
  }
  setenv(gr__param_name(GR_PARAM_ON_HANG), o->on_hang == GR_ON_HANG_ABORT ? "abort" : "report", 1);
  int on = o->trace == GR_TRACE_MPI || (o->trace == GR_TRACE_AUTO && o->monitor);
  if (!on) {
    /* an inherited preload (gpurun under gpurun) stands aside too */
    setenv(trace_var, "none", 1);
    return GR_OK;
  }
  char lib[PATH_MAX];
  if (!gr__trace_lib(lib, sizeof lib)) {
    if (o->trace != GR_TRACE_MPI) {
      GR_INFO("--monitor: the MPI layer (" GR_TRACE_LIB_NAME ") is not installed beside gpurun; "
              "the program's MPI calls are not recorded");
      setenv(trace_var, "none", 1);
      return GR_OK;
    }
    return gr__fail_msg(GR_ERR_NOT_FOUND,
                        "--trace=mpi: the MPI layer " GR_TRACE_LIB_NAME
                        " was found neither in %s (GPURUN_TRACE_LIB), nor in gpurun's library "
                        "directory, nor in the build tree (%s)",
                        gr__param_str(GR_PARAM_TRACE_LIB) ? gr__param_str(GR_PARAM_TRACE_LIB) : "",
                        GR_TRACE_LIB_BUILD);
  }
  char file[PATH_MAX];
  find_program(prog, file, sizeof file);
  if (file[0] && is_static_elf(file)) {
    fprintf(stderr,
            "gpurun: notice: %s is statically linked: the MPI layer is loaded with LD_PRELOAD, "
            "which a static program never reads, so its MPI calls are not recorded\n",
            file);
    setenv(trace_var, "none", 1);
    return GR_OK;
  }
  nccl_plugin(); /* NCCL's plugin carries no MPI handle: it serves either family */
  /* the layer carries the handles of the family it was built for (GR_TRACE_LIB_FAMILY) */
  char uses[256], via[256];
  const char *fam = NULL;
  if (file[0] && gr__elf_mpi_lib(file, uses, sizeof uses, via, sizeof via) &&
      (fam = gr__elf_mpi_family(uses)) && strcmp(fam, GR_TRACE_LIB_FAMILY)) {
    fprintf(stderr,
            "gpurun: notice: %s uses %s (%s's, needed by %s), but the MPI layer was built for "
            "%s: a layer of one MPI family cannot carry the other's handles, so its MPI calls "
            "are not recorded\n",
            file, uses, fam, via, GR_TRACE_LIB_FAMILY);
    setenv(trace_var, "none", 1);
    return GR_OK;
  }
  const char *old = getenv("LD_PRELOAD");
  char *pre = NULL;
  if (old && *old) {
    if (strstr(old, lib)) { /* already there (gpurun under gpurun): keep the order */
      setenv(trace_var, "mpi", 1);
      return GR_OK;
    }
    size_t len = strlen(lib) + 1 + strlen(old) + 1;
    pre = malloc(len);
    if (!pre) return gr__fail_msg(GR_ERR_NOMEM, "--trace: out of memory");
    snprintf(pre, len, "%s:%s", lib, old); /* first: the layer sees a call before another tool */
  }
  setenv("LD_PRELOAD", pre ? pre : lib, 1);
  free(pre);
  setenv(trace_var, "mpi", 1);
  return GR_OK;
}
