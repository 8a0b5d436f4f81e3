/* Node-local snapshots that make all local ranks of one launch decide from the same readings (the
 * GPU health gate, least-loaded placement): local rank 0 produces the text and publishes it; the
 * others wait for it and read it.
 *
 * Keyed to one launch: the identity is what the launcher sets for one mpirun/srun (the PMIx
 * namespace, Open MPI's job id and its HNP's URI, Slurm's job id with the step id, Flux's job id,
 * PALS's application id, the hydra_pmi_proxy MPICH's mpiexec starts per launch and node: its pid
 * and start time, gr__hydra_launch), never the allocation alone, so two launches in one Slurm allocation
 * never read each other's. The identity and the node's GPUs name the file and are written inside
 * it; a reader takes a file only when they match its own exactly, and when it is under a minute
 * old.
 *
 * Kept in a directory only this user can write: $TMPDIR (else /tmp) / gpurun-<uid>, created 0700
 * and used only when it is a real directory of this user that nobody else can write (opened with
 * base/safefile.c's gr__jobdir_open: O_DIRECTORY|O_NOFOLLOW, then fstat). When another user took
 * that name every local rank finds the same thing at once, says so (local rank 0) and follows
 * the caller's rule for an unshared snapshot; nobody waits for a file that cannot come. */
#include "gr_launcher.h"

#include "gr_escape.h"
#include "gr_safefile.h"
#include "gr_strbuf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Variables that identify the launch, in the order they are written into the identity. launch:
 * the variable names one launch (one mpirun, one job step); the others only narrow it down
 * (SLURM_JOB_ID is the whole allocation; the HNP's URI carries mpirun's port, which tells apart
 * two mpiruns whose 16-bit job family collides). SLURM_STEP_ID counts only beside SLURM_JOB_ID. */
static const struct {
  const char *var;
  int launch;
} id_vars[] = {
    {"PMIX_NAMESPACE", 1},
    {"OMPI_MCA_ess_base_jobid", 1},
    {"OMPI_MCA_orte_ess_jobid", 1},
    {"OMPI_MCA_orte_hnp_uri", 0},
    {"SLURM_JOB_ID", 0},
    {"SLURM_STEP_ID", 1},
    {"FLUX_JOB_ID", 1},
    {"PALS_APID", 1},
};

#define ID_VALUE_MAX 256
#define ID_MAX 2048

/* "VAR=value VAR=value ..." of the variables set; 0 when one of them names a launch, else -1.
 * Values are cut at ID_VALUE_MAX bytes and bytes outside printable ASCII become '?', the same on
 * every rank, so the identity stays one line. */
static int launch_identity(char *out, size_t cap) {
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, out, cap);
  int launch = 0, have_job = getenv("SLURM_JOB_ID") && *getenv("SLURM_JOB_ID");
  for (size_t i = 0; i < sizeof id_vars / sizeof id_vars[0]; i++) {
    const char *v = getenv(id_vars[i].var);
    if (!v || !*v) continue;
    if (!strcmp(id_vars[i].var, "SLURM_STEP_ID") && !have_job) continue;
    gr__strbuf_appendf(&sb, "%s%s=", gr__strbuf_len(&sb) ? " " : "", id_vars[i].var);
    if (sb.truncated) return -1;
    for (size_t k = 0; v[k] && k < ID_VALUE_MAX && gr__strbuf_len(&sb) + 1 < cap; k++)
      gr__strbuf_putc(&sb, v[k] > ' ' && v[k] < 127 ? v[k] : '?');
    launch |= id_vars[i].launch;
  }
  /* under Hydra the proxy names the launch even where a batch step's Slurm variables are
   * inherited: two mpiexecs in one sbatch script share SLURM_JOB_ID and SLURM_STEP_ID */
  char hydra[64];
  if (getenv("PMI_RANK") && gr__hydra_launch(hydra, sizeof hydra) == 0) {
    gr__strbuf_appendf(&sb, "%shydra_pmi_proxy=%s", gr__strbuf_len(&sb) ? " " : "", hydra);
    launch = !sb.truncated;
  }
  return launch ? 0 : -1;
}

/* One "gpurun: warning: ..." line; paths and names in it come from the environment, so the
 * sentence is escaped for the terminal. */
static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn(const char *fmt, ...) {
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fputs("gpurun: warning: ", stderr);
  gr__esc_term(stderr, line);
  fputc('\n', stderr);
}

/* 64-bit FNV-1a. */
static unsigned long long fnv(const char *s, unsigned long long h) {
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* The first lines of every snapshot: what, for which launch, over which GPUs. */
static int header(const gr__node *n, const char *kind, const char *id, char *out, size_t cap) {
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, out, cap);
  gr__strbuf_appendf(&sb, "gpurun-snapshot 1 %s\nlaunch %s\ngpus", kind, id);
  for (int g = 0; g < n->ngpus; g++)
    gr__strbuf_appendf(&sb, " %s", n->gpus[g].pci);
  gr__strbuf_putc(&sb, '\n');
  return sb.truncated ? -1 : 0;
}

/* Snapshots older than this are removed by the next local rank 0 that publishes one, and so are
 * the temporary files of a local rank 0 killed before its rename (base/safefile.c's
 * .<name>.<pid>.<n>.tmp). */
#define SNAPSHOT_KEEP_S 600

static int snapshot_name(const char *s) {
  if (*s == '.') {
    size_t n = strlen(s);
    if (n < 4 || strcmp(s + n - 4, ".tmp") != 0) return 0;
    s++;
  }
  return !strncmp(s, "health-", 7) || !strncmp(s, "load-", 5);
}

static void remove_old(int dirfd, time_t now) {
  int fd = dup(dirfd);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0) close(fd);
    return;
  }
  for (struct dirent *e; (e = readdir(d));) {
    struct stat st;
    if (!snapshot_name(e->d_name) || fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode) || st.st_mtime >= now - SNAPSHOT_KEEP_S)
      continue;
    unlinkat(dirfd, e->d_name, 0);
  }
  closedir(d);
}

/* The snapshot's text after the header, when dirfd/name is a regular file of this user that
 * others cannot write, at most a minute old, of at most cap - 1 bytes of text after exactly this
 * header. Its length, or -1. */
static ssize_t read_text(int dirfd, const char *name, const char *head, char *buf, size_t cap) {
  int fd;
  if (gr__file_open_read(dirfd, name, &fd) != GR_OK) return -1;
  size_t hl = strlen(head), max = hl + cap;
  struct stat st;
  char *all = NULL;
  ssize_t got = -1;
  if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && !(st.st_mode & 022) &&
      st.st_mtime >= time(NULL) - 60 && (size_t)st.st_size < max && (all = malloc(max))) {
    size_t n = 0;
    for (ssize_t r; n < max && (r = read(fd, all + n, max - n)) != 0;) {
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        n = max;
        break;
      }
      n += (size_t)r;
    }
    if (n < max && n >= hl && !memcmp(all, head, hl)) {
      memcpy(buf, all + hl, n - hl);
      buf[n - hl] = '\0';
      got = (ssize_t)(n - hl);
    }
  }
  free(all);
  close(fd);
  return got;
}

ssize_t gr__snapshot_share(const char *kind, const gr__node *n, int local_rank, int local_size,
                           const char *unshared, gr__snapshot_fn produce, void *ctx, char *buf,
                           size_t cap) {
  if (local_size <= 1) return produce(ctx, buf, cap);
  char id[ID_MAX];
  if (launch_identity(id, sizeof id) != 0) {
    /* Nothing tells this launch from another: no file could be trusted, so none is used. */
    if (local_rank != 0)
      warn("local rank %d: no launch id (PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid, SLURM_JOB_ID "
           "with SLURM_STEP_ID, FLUX_JOB_ID, PALS_APID, a parent hydra_pmi_proxy) to find local "
           "rank 0's %s snapshot by; judging alone",
           local_rank, kind);
    return produce(ctx, buf, cap);
  }
  size_t hcap = strlen(id) + (size_t)n->ngpus * 24 + 96;
  char *head = malloc(hcap);
  if (!head || header(n, kind, id, head, hcap) != 0) {
    free(head);
    return unshared ? -1 : produce(ctx, buf, cap);
  }
  const char *root = getenv("TMPDIR");
  if (!root || root[0] != '/') root = "/tmp";
  char dirname[64];
  snprintf(dirname, sizeof dirname, "gpurun-%u", (unsigned)geteuid());
  int dirfd;
  gr_status dst = gr__jobdir_open(root, dirname, &dirfd);
  if (dst != GR_OK) {
    /* GR_ERR_STATE: another user's, writable by others, a symlink or a file there. */
    int taken = dst == GR_ERR_STATE;
    if (local_rank == 0)
      warn("cannot share the %s snapshot between the local ranks: %s%s; %s", kind, gr_last_error(),
           taken ? " (remove it, or set TMPDIR to a directory of your own)" : "",
           unshared ? unshared : "each local rank judges alone");
    free(head);
    return unshared ? -1 : produce(ctx, buf, cap);
  }
  char name[64];
  snprintf(name, sizeof name, "%s-%016llx", kind, fnv(head, 14695981039346656037ull));
  ssize_t len = -1;
  if (local_rank == 0) {
    /* Readings the others cannot read are not shared: with unshared, local rank 0 then follows
     * the same rule as the others, which find no snapshot (a full or over-quota TMPDIR). */
    len = produce(ctx, buf, cap);
    size_t hl = strlen(head);
    char *all = len >= 0 ? malloc(hl + (size_t)len) : NULL;
    int published = 0;
    if (all) {
      memcpy(all, head, hl);
      memcpy(all + hl, buf, (size_t)len);
      published = gr__file_replace(dirfd, name, all, hl + (size_t)len) == GR_OK;
      if (!published)
        warn("cannot write the %s snapshot in %s/%s: %s; %s", kind, root, dirname, gr_last_error(),
             unshared ? unshared : "each local rank judges alone");
      free(all);
      remove_old(dirfd, time(NULL));
    }
    if (!published && unshared) len = -1;
  } else {
    /* Local rank 0 starts at about the same time; past 10 s follow unshared (or judge alone) and
     * say so. */
    for (int i = 0; i < 200 && len < 0; i++) {
      len = read_text(dirfd, name, head, buf, cap);
      if (len < 0) usleep(50000);
    }
    if (len < 0) {
      warn("local rank %d: no %s snapshot from local rank 0 (%s/%s/%s); %s", local_rank, kind, root,
           dirname, name, unshared ? unshared : "judging alone");
      if (!unshared) len = produce(ctx, buf, cap);
    }
  }
  close(dirfd);
  free(head);
  return len;
}
