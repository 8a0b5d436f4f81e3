/* gpurun-doctor's checks (see gr_doctor.h). Each check adds its lines to the report; the live-only
 * ones skip with their reason when the node comes from a recorded topology. Nothing here waits
 * without a bound: ompi_info runs in the background from the start with a deadline, every file
 * read is bounded, and the libraries are loaded with dlopen. */
#include "gr_doctor.h"

#include "gr_config.h" /* GPURUN_HWLOC_VERSION: the hwloc built against */
#include "gr_cuda_probe.h"
#include "gr_health.h"
#include "gr_launcher.h"
#include "gr_nvml.h"
#include "gr_strbuf.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LIVE_ONLY "live-only: the node comes from a recorded topology"

/* ---- small helpers ---------------------------------------------------------------------- */

/* Appends to a fixed buffer; keeps what fits. */
static void app(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void app(char *buf, size_t cap, const char *fmt, ...) {
  gr__strbuf sb;
  gr__strbuf_init_tail(&sb, buf, cap);
  if (gr__strbuf_len(&sb) + 1 >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  gr__strbuf_vappendf(&sb, fmt, ap);
  va_end(ap);
}

/* The first cap-1 bytes of a regular file (a /proc or /sys entry), trailing newlines dropped;
 * -1 when it cannot be opened or is not a regular file. */
static ssize_t read_small(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return -1;
  }
  size_t len = 0;
  while (len + 1 < cap) {
    ssize_t got = read(fd, buf + len, cap - 1 - len);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    len += (size_t)got;
  }
  close(fd);
  buf[len] = 0;
  while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
    buf[--len] = 0;
  return (ssize_t)len;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void gr__dr_cuda_version(int v, char *out, size_t cap) {
  snprintf(out, cap, "%d.%d", v / 1000, (v % 1000) / 10);
}

int gr__dr_ib_state(const char *text, char *out, size_t cap) {
  const char *p = strchr(text, ':');
  if (!p || p == text) return -1;
  for (const char *q = text; q < p; q++)
    if (*q < '0' || *q > '9') return -1;
  p++;
  while (*p == ' ')
    p++;
  size_t len = strcspn(p, "\n");
  if (len == 0 || len >= cap) return -1;
  for (size_t i = 0; i < len; i++)
    if ((p[i] < 'A' || p[i] > 'Z') && p[i] != '_') return -1;
  memcpy(out, p, len);
  out[len] = 0;
  return 0;
}

/* ---- ompi_info in the background -------------------------------------------------------- */

typedef struct {
  pid_t pid; /* 0: not started */
  int fd;
  char *out;
  size_t len, cap;
  int started_errno; /* exec failed: the child exits 127 */
} bg_cmd;

static void bg_start(bg_cmd *b, char *const argv[]) {
  memset(b, 0, sizeof *b);
  b->fd = -1;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return;
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]), close(p[1]);
    return;
  }
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) dup2(null, 0), dup2(null, 2);
    dup2(p[1], 1);
    setpgid(0, 0); /* its own group, so that a kill on time-out reaches anything it started */
    execvp(argv[0], argv);
    _exit(127);
  }
  close(p[1]);
  b->pid = pid;
  b->fd = p[0];
  b->cap = 1 << 18;
  b->out = malloc(b->cap);
  if (!b->out) b->cap = 0;
}

/* Collects the output until the command ends or the deadline passes (then it is killed). Returns
 * its exit status, -2 on time-out, -1 when it could not be started. */
static int bg_finish(bg_cmd *b, double deadline) {
  if (!b->pid) return -1;
  int timed_out = 0;
  for (;;) {
    double left = deadline - now_s();
    if (left <= 0) {
      timed_out = 1;
      break;
    }
    struct pollfd pf = {.fd = b->fd, .events = POLLIN};
    int rc = poll(&pf, 1, (int)(left * 1000) + 1);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    char tmp[8192];
    ssize_t got = read(b->fd, tmp, sizeof tmp);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    size_t keep = (size_t)got;
    if (b->len + keep + 1 > b->cap) keep = b->cap > b->len + 1 ? b->cap - b->len - 1 : 0;
    if (keep) memcpy(b->out + b->len, tmp, keep), b->len += keep;
  }
  if (b->out) b->out[b->len] = 0;
  close(b->fd);
  /* the exit, also bounded: a command can close its output and go on, and a killed one can sit in
   * an uninterruptible wait; one still there 0.5 s after the kill is left to init */
  int st = 0;
  double give_up = (timed_out ? now_s() : deadline) + 0.5;
  pid_t got = 0;
  for (int killed = timed_out;;) {
    if (killed == 1) kill(-b->pid, SIGKILL), kill(b->pid, SIGKILL), killed = 2;
    got = waitpid(b->pid, &st, WNOHANG);
    if (got != 0 && !(got < 0 && errno == EINTR)) break;
    if (!killed && now_s() >= deadline) {
      timed_out = killed = 1;
      continue;
    }
    if (killed && now_s() >= give_up) break;
    struct timespec ms = {0, 10 * 1000 * 1000};
    nanosleep(&ms, NULL);
  }
  b->pid = 0;
  if (timed_out || got <= 0) return -2;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Is prog an executable on PATH? */
static int on_path(const char *prog) {
  const char *path = getenv("PATH");
  if (!path) return 0;
  while (*path) {
    size_t len = strcspn(path, ":");
    char full[4096];
    if (len && len + strlen(prog) + 2 < sizeof full) {
      memcpy(full, path, len);
      full[len] = '/';
      strcpy(full + len + 1, prog);
      if (access(full, X_OK) == 0) return 1;
    }
    path += len;
    if (*path == ':') path++;
  }
  return 0;
}

/* Adds name to a comma-separated list unless it is there. */
static void list_add(char *list, size_t cap, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    size_t len = strcspn(p, ",");
    if (len == n && strncmp(p, name, n) == 0) return;
    p += len;
    if (*p == ',') p++;
  }
  app(list, cap, "%s%s", list[0] ? "," : "", name);
}

/* The MPI family this gpurun is built for (gr_config.h): the tool that describes that MPI is
 * ompi_info (Open MPI) or mpichversion (MPICH). */
static int built_for_mpich(void) { return strcmp(GPURUN_MPI_FAMILY_NAME, "MPICH") == 0; }

/* The value after "KEY:" on one of mpichversion's lines ("MPICH Version:\t4.0.2"), trimmed. */
static void mpich_field(const char *line, const char *key, char *out, size_t cap) {
  size_t k = strlen(key);
  if (strncmp(line, key, k) != 0) return;
  line += k;
  while (*line == ' ' || *line == '\t')
    line++;
  snprintf(out, cap, "%.*s", (int)strcspn(line, "\r\n"), line);
}

static void check_mpich(gr__dr_report *r, bg_cmd *b, double deadline, double timeout) {
  int rc = bg_finish(b, deadline);
  if (rc == -1 || rc == 127) {
    if (on_path("ompi_info"))
      gr__dr_add(r, "mpi", GR__DR_WARN,
                 "use the gpurun built for Open MPI, or put MPICH's bin directory first on PATH",
                 "this gpurun is built for MPICH, but the MPI on PATH is Open MPI (ompi_info)");
    else if (on_path("mpiexec") || on_path("mpirun"))
      gr__dr_add(r, "mpi", GR__DR_WARN,
                 "check that it is of the MPICH family (mpiexec --version): this gpurun is built "
                 "for MPICH",
                 "no mpichversion on PATH, but an mpiexec (Cray MPICH and Intel MPI have no "
                 "mpichversion)");
    else
      gr__dr_add(r, "mpi", GR__DR_WARN, "install MPICH or put its bin directory on PATH",
                 "no MPI on PATH (no mpichversion, no mpiexec)");
    return;
  }
  if (rc == -2) {
    gr__dr_add(r, "mpi", GR__DR_WARN, "run mpichversion by hand; a slow file system?",
               "mpichversion did not finish within %.1f s (killed)", timeout);
    return;
  }
  char version[64] = "", device[64] = "";
  int cuda = 0;
  for (char *line = b->out; line && *line;) {
    char *end = strchr(line, '\n');
    if (end) *end = 0;
    mpich_field(line, "MPICH Version:", version, sizeof version);
    mpich_field(line, "MPICH Device:", device, sizeof device);
    if (strncmp(line, "MPICH configure:", 16) == 0)
      cuda = strstr(line, "--with-cuda") && !strstr(line, "--with-cuda=no");
    line = end ? end + 1 : NULL;
  }
  if (rc != 0 || !version[0]) {
    gr__dr_add(r, "mpi", GR__DR_WARN, "run mpichversion by hand to see why",
               "mpichversion exited %d%s", rc, version[0] ? "" : " without a version");
    return;
  }
  gr__dr_add(r, "mpi", GR__DR_OK,
             cuda ? NULL : "no CUDA support: gpurun stages device buffers through host memory",
             "MPICH %s, device %s, CUDA-aware %s", version, device[0] ? device : "?",
             cuda ? "yes" : "no");
}

static void check_mpi(gr__dr_report *r, bg_cmd *b, double deadline, double timeout) {
  if (built_for_mpich()) {
    check_mpich(r, b, deadline, timeout);
    return;
  }
  int rc = bg_finish(b, deadline);
  if (rc == -1 || rc == 127) {
    if (on_path("mpichversion"))
      gr__dr_add(r, "mpi", GR__DR_WARN,
                 "use the gpurun built for MPICH, or put Open MPI's bin directory first on PATH",
                 "this gpurun is built for Open MPI, but the MPI on PATH is MPICH (mpichversion)");
    else if (on_path("mpirun") || on_path("mpiexec"))
      gr__dr_add(r, "mpi", GR__DR_WARN, "gpurun is built against Open MPI; check this MPI matches",
                 "no ompi_info on PATH, but an mpirun");
    else
      gr__dr_add(r, "mpi", GR__DR_WARN, "install Open MPI or put its bin directory on PATH",
                 "no MPI on PATH (no ompi_info, no mpirun)");
    return;
  }
  if (rc == -2) {
    gr__dr_add(r, "mpi", GR__DR_WARN, "run ompi_info by hand; a slow file system or a hung plugin?",
               "ompi_info --parsable did not finish within %.1f s (killed)", timeout);
    return;
  }
  char version[64] = "", btl[256] = "", pml[256] = "", mtl[256] = "";
  int cuda = 0; /* a CUDA transport: btl smcuda (Open MPI 4) or an accelerator cuda (5) */
  for (char *line = b->out; line && *line;) {
    char *end = strchr(line, '\n');
    if (end) *end = 0;
    char name[64];
    if (strncmp(line, "ompi:version:full:", 18) == 0)
      snprintf(version, sizeof version, "%.40s", line + 18);
    else if (sscanf(line, "mca:btl:%63[^:]:version:", name) == 1)
      list_add(btl, sizeof btl, name), cuda |= strcmp(name, "smcuda") == 0;
    else if (sscanf(line, "mca:pml:%63[^:]:version:", name) == 1)
      list_add(pml, sizeof pml, name);
    else if (sscanf(line, "mca:mtl:%63[^:]:version:", name) == 1)
      list_add(mtl, sizeof mtl, name);
    else if (sscanf(line, "mca:accelerator:%63[^:]:version:", name) == 1)
      cuda |= strcmp(name, "cuda") == 0;
    line = end ? end + 1 : NULL;
  }
  if (rc != 0 || !version[0]) {
    gr__dr_add(r, "mpi", GR__DR_WARN, "run ompi_info by hand to see why",
               "ompi_info --parsable exited %d%s", rc, version[0] ? "" : " without a version");
    return;
  }
  gr__dr_add(r, "mpi", GR__DR_OK,
             cuda ? NULL : "no CUDA transport: gpurun stages device buffers through host memory",
             "Open MPI %s, pml %s, btl %s%s%s, CUDA-aware %s", version, pml[0] ? pml : "none",
             btl[0] ? btl : "none", mtl[0] ? ", mtl " : "", mtl, cuda ? "yes" : "no");
}

/* ---- topology --------------------------------------------------------------------------- */

static void check_topology(gr__dr_report *r, const gr__node *n) {
  unsigned api = hwloc_get_api_version(); /* the library's API, e.g. 2.8 for hwloc 2.9 */
  int nnuma = hwloc_get_nbobjs_by_type(n->topo, HWLOC_OBJ_NUMANODE);
  int ncores = hwloc_get_nbobjs_by_type(n->topo, HWLOC_OBJ_CORE);
  int npus = hwloc_get_nbobjs_by_type(n->topo, HWLOC_OBJ_PU);
  char nomem[128] = "";
  int nnomem = 0;
  for (hwloc_obj_t o = hwloc_get_next_obj_by_type(n->topo, HWLOC_OBJ_NUMANODE, NULL); o;
       o = hwloc_get_next_obj_by_type(n->topo, HWLOC_OBJ_NUMANODE, o))
    if (o->attr->numanode.local_memory == 0)
      app(nomem, sizeof nomem, "%s%u", nnomem++ ? "," : "", o->os_index);
  gr__dr_add(r, "topology", nnomem ? GR__DR_WARN : GR__DR_OK,
             nnomem ? "ranks bound there allocate from another node's memory" : NULL,
             "hwloc %s (API %u.%u): %d NUMA, %d cores, %d PUs, %d GPUs, %d NIC%s%s%s",
             GPURUN_HWLOC_VERSION, (api >> 16) & 0xff, (api >> 8) & 0xff, nnuma, ncores, npus,
             n->ngpus, n->nnics, n->nnics == 1 ? "" : "s", nnomem ? "; NUMA without memory: " : "",
             nomem);
  if (n->ngpus == 0) return;
  char far[160] = "";
  int nfar = 0;
  for (int g = 0; g < n->ngpus; g++) {
    hwloc_obj_t loc = n->gpus[g].locality;
    if (!loc || !loc->cpuset || !hwloc_bitmap_intersects(loc->cpuset, n->allowed) ||
        (loc->type == HWLOC_OBJ_MACHINE &&
         hwloc_get_nbobjs_by_type(n->topo, HWLOC_OBJ_PACKAGE) > 1))
      app(far, sizeof far, "%s%d", nfar++ ? "," : "", n->gpus[g].index);
  }
  if (nfar)
    gr__dr_add(r, "locality", GR__DR_WARN,
               "the plan binds their ranks to all cores; check the BIOS/ACPI tables (NUMA info)",
               "GPU %s without local cores (hwloc attaches them to the whole machine)", far);
  else
    gr__dr_add(r, "locality", GR__DR_OK, NULL, "every GPU has local cores");
}

/* How two GPUs reach each other: 0 NVLink/XGMI, 1 a PCIe switch, 2 one CPU's root complex, 3
 * across CPUs. */
static int pair_path(const gr__node *n, int a, int b) {
  if (n->link && n->link[a * n->ngpus + b] > 0) return 0;
  hwloc_obj_t x = n->gpus[a].pcidev ? n->gpus[a].pcidev : n->gpus[a].osdev;
  hwloc_obj_t y = n->gpus[b].pcidev ? n->gpus[b].pcidev : n->gpus[b].osdev;
  if (!x || !y) return 3;
  hwloc_obj_t c = gr__io_common_ancestor(x, y);
  if (!c) return 3;
  if (c->type == HWLOC_OBJ_BRIDGE) {
    /* a host bridge is the CPU's root complex, any other a switch */
    return c->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST ? 2 : 1;
  }
  if (c->type == HWLOC_OBJ_PCI_DEVICE) return 1;
  if (c->cpuset &&
      hwloc_get_nbobjs_inside_cpuset_by_type(n->topo, c->cpuset, HWLOC_OBJ_PACKAGE) <= 1)
    return 2;
  return 3;
}

static void check_peer(gr__dr_report *r, const gr__node *n) {
  if (n->ngpus < 2) {
    gr__dr_add(r, "peer", GR__DR_SKIP, NULL, "fewer than two GPUs: no peer access to judge");
    return;
  }
  int count[4] = {0, 0, 0, 0};
  char far[200] = "";
  for (int a = 0; a < n->ngpus; a++)
    for (int b = a + 1; b < n->ngpus; b++) {
      int k = pair_path(n, a, b);
      count[k]++;
      if (k == 3 && count[3] <= 6)
        app(far, sizeof far, "%s%d-%d", count[3] > 1 ? "," : "", n->gpus[a].index,
            n->gpus[b].index);
    }
  gr__dr_add(r, "peer", GR__DR_OK,
             count[3] ? "pairs across CPUs have no P2P: their traffic goes through host memory"
                      : NULL,
             "%d GPU pairs: %d %s, %d PCIe switch, %d one CPU, %d across CPUs%s%s%s",
             count[0] + count[1] + count[2] + count[3], count[0],
             n->link_name[0] == 'X' ? "XGMI" : "NVLink", count[1], count[2], count[3],
             count[3] ? " (" : "", far,
             count[3] > 6 ? ",...)"
             : count[3]   ? ")"
                          : "");
}

/* ---- NICs ------------------------------------------------------------------------------- */

static void check_nics(gr__dr_report *r, const gr__node *n) {
  char names[200] = "";
  for (int i = 0; i < n->nnics; i++)
    app(names, sizeof names, "%s%s", i ? "," : "", n->nics[i].name);
  if (n->nnics == 0) {
    gr__dr_add(r, "nics", GR__DR_OK, "multi-node jobs use TCP over the host's interfaces",
               "no InfiniBand, EFA or Slingshot NIC in the topology");
    gr__dr_add(r, "gpu-nic", GR__DR_SKIP, NULL, "no high-speed NIC to be near");
    return;
  }
  gr__dr_add(r, "nics", GR__DR_OK, NULL, "%d high-speed NIC%s: %s", n->nnics,
             n->nnics == 1 ? "" : "s", names);
  if (n->ngpus == 0) {
    gr__dr_add(r, "gpu-nic", GR__DR_SKIP, NULL, "no GPU in the topology");
    return;
  }
  /* per GPU, every NIC at the plan's nearest level: the plan spreads ranks over them */
  char found[GR__DR_FOUND] = "", lonely[160] = "";
  int nlonely = 0;
  for (int g = 0; g < n->ngpus; g++) {
    int best = 3;
    for (int i = 0; i < n->nnics; i++) {
      int lvl = gr__gpu_nic_level(n, g, &n->nics[i]);
      if (lvl < best) best = lvl;
    }
    if (best == 3) {
      app(lonely, sizeof lonely, "%s%d", nlonely++ ? "," : "", n->gpus[g].index);
      continue;
    }
    if (g >= 16) continue;
    app(found, sizeof found, "%s%d:", found[0] ? " " : "", n->gpus[g].index);
    for (int i = 0, k = 0; i < n->nnics; i++)
      if (gr__gpu_nic_level(n, g, &n->nics[i]) == best)
        app(found, sizeof found, "%s%s", k++ ? "," : "", n->nics[i].name);
    if (best == 0) app(found, sizeof found, "(switch)");
  }
  if (n->ngpus > 16) app(found, sizeof found, " ...");
  if (nlonely)
    gr__dr_add(r, "gpu-nic", GR__DR_WARN,
               "their ranks send through a NIC on another socket (the plan picks the nearest)",
               "GPU %s without a near NIC%s%s", lonely, found[0] ? "; " : "", found);
  else
    gr__dr_add(r, "gpu-nic", GR__DR_OK, NULL, "every GPU has a near NIC: %s", found);
}

/* Link states: InfiniBand ports (/sys/class/infiniband) and the network interfaces. */
static void check_links(gr__dr_report *r, const gr__node *n) {
  char ports[GR__DR_FOUND] = "", down[240] = "";
  int nports = 0, ndown = 0;
  DIR *d = opendir("/sys/class/infiniband");
  if (d) {
    for (struct dirent *e; (e = readdir(d)) && nports < 64;) {
      if (e->d_name[0] == '.' || strlen(e->d_name) > 64) continue;
      char path[512];
      snprintf(path, sizeof path, "/sys/class/infiniband/%.64s/ports", e->d_name);
      DIR *pd = opendir(path);
      if (!pd) continue;
      for (struct dirent *p; (p = readdir(pd)) && nports < 64;) {
        if (p->d_name[0] < '0' || p->d_name[0] > '9' || strlen(p->d_name) > 8) continue;
        char sp[600], text[64], state[32];
        snprintf(sp, sizeof sp, "%s/%.8s/state", path, p->d_name);
        if (read_small(sp, text, sizeof text) < 0 || gr__dr_ib_state(text, state, sizeof state))
          snprintf(state, sizeof state, "UNKNOWN");
        nports++;
        app(ports, sizeof ports, "%s%s:%s %s", ports[0] ? ", " : "", e->d_name, p->d_name, state);
        if (strcmp(state, "ACTIVE") != 0)
          app(down, sizeof down, "%s%s:%s", ndown++ ? "," : "", e->d_name, p->d_name);
      }
      closedir(pd);
    }
    closedir(d);
  }
  char nets[GR__DR_FOUND] = "";
  int nup = 0, nnet = 0;
  d = opendir("/sys/class/net");
  if (d) {
    for (struct dirent *e; (e = readdir(d)) && nnet < 64;) {
      if (e->d_name[0] == '.' || strcmp(e->d_name, "lo") == 0 || strlen(e->d_name) > 64) continue;
      char path[512], state[32];
      snprintf(path, sizeof path, "/sys/class/net/%.64s/operstate", e->d_name);
      if (read_small(path, state, sizeof state) < 0) continue;
      nnet++;
      if (strcmp(state, "up") == 0) {
        nup++;
        app(nets, sizeof nets, "%s%s", nets[0] ? "," : "", e->d_name);
      }
    }
    closedir(d);
  }
  if (nports)
    gr__dr_add(r, "ib-ports", ndown ? GR__DR_FAIL : GR__DR_OK,
               ndown ? "check the cable and the subnet manager (ibstat); jobs over it will fail"
                     : NULL,
               "%s", ports);
  else
    gr__dr_add(r, "ib-ports", GR__DR_SKIP, NULL, "no InfiniBand device in /sys/class/infiniband");
  gr__dr_add(r, "net", nup ? GR__DR_OK : GR__DR_WARN,
             nup ? NULL : "no interface is up: jobs across nodes cannot connect",
             "%d of %d interfaces up%s%s", nup, nnet, nup ? ": " : "", nets);
  /* the high-speed NICs hwloc names as network interfaces (Slingshot hsi*, EFA, ib*) */
  char hsn[GR__DR_FOUND] = "", hsn_down[200] = "";
  int nhsn = 0, nhsn_down = 0;
  for (int i = 0; i < n->nnics; i++) {
    const gr__nic *c = &n->nics[i];
    if (!c->osdev || c->osdev->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK ||
        strchr(c->name, '/') || c->name[0] == '.')
      continue;
    char path[160], state[32];
    snprintf(path, sizeof path, "/sys/class/net/%.64s/operstate", c->name);
    if (read_small(path, state, sizeof state) < 0) snprintf(state, sizeof state, "unknown");
    nhsn++;
    app(hsn, sizeof hsn, "%s%s %s", hsn[0] ? ", " : "", c->name, state);
    if (strcmp(state, "up") != 0)
      app(hsn_down, sizeof hsn_down, "%s%s", nhsn_down++ ? "," : "", c->name);
  }
  if (nhsn)
    gr__dr_add(r, "hsn", nhsn_down ? GR__DR_FAIL : GR__DR_OK,
               nhsn_down ? "bring the link up (ip link; the fabric manager) or drain the node"
                         : NULL,
               "%s", hsn);
}

/* ---- GPUs through CUDA, NCCL and NVML ----------------------------------------------------- */

static int nvidia_gpus(const gr__node *n) {
  int k = 0;
  for (int g = 0; g < n->ngpus; g++)
    k += n->gpus[g].vendor == 0x10de || (n->gpus[g].osdev && n->gpus[g].osdev->name &&
                                         (strncmp(n->gpus[g].osdev->name, "cuda", 4) == 0 ||
                                          strncmp(n->gpus[g].osdev->name, "nvml", 4) == 0));
  return k;
}

static void check_cuda(gr__dr_report *r, const gr__node *n, int nvml_gpus) {
  gr__cuda_versions v;
  gr__launcher_cuda_versions(&v);
  char rt[16], drv[16];
  gr__dr_cuda_version(v.runtime, rt, sizeof rt);
  gr__dr_cuda_version(v.driver, drv, sizeof drv);
  int gpus = nvidia_gpus(n) > nvml_gpus ? nvidia_gpus(n) : nvml_gpus;
  if (!v.driver) {
    if (gpus)
      gr__dr_add(r, "cuda", GR__DR_FAIL, "install the NVIDIA driver (its libcuda.so.1)",
                 "%d NVIDIA GPU%s but no CUDA driver: %s", gpus, gpus == 1 ? "" : "s",
                 v.driver_why);
    else
      gr__dr_add(r, "cuda", GR__DR_SKIP, NULL, "no NVIDIA GPU and no driver (%s)%s%s", v.driver_why,
                 v.runtime ? "; runtime " : "", v.runtime ? rt : "");
    return;
  }
  if (!v.runtime) {
    gr__dr_add(r, "cuda", GR__DR_WARN, "install the CUDA runtime gpurun was built with",
               "driver supports CUDA %s; no runtime: %s", drv, v.runtime_why);
    return;
  }
  if (v.driver / 1000 < v.runtime / 1000)
    gr__dr_add(r, "cuda", GR__DR_FAIL, "update the NVIDIA driver, or use a runtime it supports",
               "runtime %s (%s) needs a newer driver: it supports CUDA %s", rt, v.runtime_lib, drv);
  else if (v.driver < v.runtime)
    gr__dr_add(r, "cuda", GR__DR_WARN,
               "minor-version compatibility only: PTX JIT and newer APIs fail; update the driver",
               "runtime %s (%s), driver supports CUDA %s", rt, v.runtime_lib, drv);
  else {
    int count = 0;
    gr_status cst = gr__launcher_cuda_device_count(&count);
    int seen = nvidia_gpus(n);
    gr__dr_add(r, "cuda", seen && count != seen ? GR__DR_WARN : GR__DR_OK,
               seen && count != seen ? "a GPU hwloc sees on the PCI bus is not usable by CUDA "
                                       "(nvidia-smi -q; dmesg for Xid errors)"
                                     : NULL,
               "runtime %s (%s), driver supports CUDA %s, %d device%s%s%s", rt, v.runtime_lib, drv,
               count, count == 1 ? "" : "s", cst != GR_OK ? ": " : "",
               cst != GR_OK ? gr_last_error() : "");
  }
}

static void check_nccl(gr__dr_report *r, const gr__node *n) {
  const char *soname = "libnccl.so.2";
  void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *err = dlerror();
    gr__dr_add(r, "nccl", nvidia_gpus(n) ? GR__DR_WARN : GR__DR_SKIP,
               nvidia_gpus(n) ? "collectives on device buffers fall back to MPI; install NCCL 2"
                              : NULL,
               "dlopen %s: %s", soname, err ? err : "failed");
    return;
  }
  int (*get)(int *);
  *(void **)&get = dlsym(lib, "ncclGetVersion");
  int v = 0;
  if (!get || get(&v) != 0 || v <= 0) {
    gr__dr_add(r, "nccl", GR__DR_WARN, "reinstall NCCL", "%s gives no ncclGetVersion", soname);
    return;
  }
  /* NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9, major*1000 + ... before */
  int major = v >= 10000 ? v / 10000 : v / 1000, minor = v >= 10000 ? v / 100 % 100 : v / 100 % 10,
      patch = v % 100;
  gr__dr_add(r, "nccl", GR__DR_OK, NULL, "NCCL %d.%d.%d (%s)", major, minor, patch, soname);
  /* stays loaded, as the CUDA runtime does */
}

/* One NVML-listed GPU. */
typedef struct {
  char pci[20];
  void *dev;
} nvml_gpu;

static void check_nvml(gr__dr_report *r, const gr__node *n, int *nvml_count) {
  *nvml_count = 0;
  gr__nvml lib, *l = &lib;
  if (gr__nvml_open(l) != GR_OK) {
    int nv = nvidia_gpus(n);
    gr__dr_add(r, "nvml", nv ? GR__DR_WARN : GR__DR_SKIP,
               nv ? "install the driver's NVML (libnvidia-ml.so.1) for health, MIG and "
                    "persistence checks"
                  : NULL,
               "%s", gr_last_error());
    gr__dr_add(r, "gpus", GR__DR_SKIP, NULL, "no NVML: GPU health, persistence and MIG not read");
    return;
  }
  char drv[96] = "";
  if (!l->driver_version || l->driver_version(drv, sizeof drv) != 0)
    snprintf(drv, sizeof drv, "unknown");
  drv[sizeof drv - 1] = 0;
  unsigned ndev = 0;
  if (!l->count || !l->by_index || !l->pci_info || l->count(&ndev) != 0) {
    gr__dr_add(r, "nvml", GR__DR_WARN, "reinstall the NVIDIA driver",
               "NVML (%s) does not list its GPUs", gr__nvml_library_name());
    gr__nvml_close(l);
    return;
  }
  if (ndev > 1024) ndev = 1024; /* a bound on what a broken NVML may claim */
  nvml_gpu *gpus = calloc(ndev ? ndev : 1, sizeof *gpus);
  const char **pcis = calloc(ndev ? ndev : 1, sizeof *pcis);
  gr__gpu_health *health = calloc(ndev ? ndev : 1, sizeof *health);
  if (!gpus || !pcis || !health) {
    free(gpus), free(pcis), free(health);
    gr__nvml_close(l);
    r->nomem = 1;
    return;
  }
  for (unsigned i = 0; i < ndev; i++) {
    /* nvmlPciInfo_t: busIdLegacy[16], domain, bus, device, pciDeviceId, pciSubSystemId,
     * busId[32] (and more in later versions: room to spare) */
    struct {
      char legacy[16];
      unsigned domain, bus, device, devid, subsys;
      char bus_id[32];
      char spare[64];
    } p;
    memset(&p, 0, sizeof p);
    if (l->by_index(i, &gpus[i].dev) == 0 && l->pci_info(gpus[i].dev, &p) == 0)
      snprintf(gpus[i].pci, sizeof gpus[i].pci, "%04x:%02x:%02x.0", p.domain & 0xffff, p.bus & 0xff,
               p.device & 0x1f);
    else
      gpus[i].dev = NULL;
    pcis[i] = gpus[i].pci;
  }
  *nvml_count = (int)ndev;
  /* NVML keeps its own init count: the health reader opens and closes it again inside */
  gr__gpu_health_read(pcis, (int)ndev, health);
  gr__dr_add(r, "nvml", GR__DR_OK, NULL, "NVML (%s): driver %s, %u GPU%s", gr__nvml_library_name(),
             drv, ndev, ndev == 1 ? "" : "s");
  int pers_on = 0, pers_known = 0, mig_on = 0, mig_pending = 0;
  char pers_off[160] = "", migs[160] = "";
  for (unsigned i = 0; i < ndev; i++) {
    char name[GR__DR_CHECK];
    snprintf(name, sizeof name, "gpu %u", i % 10000);
    if (!gpus[i].dev) {
      gr__dr_add(r, name, GR__DR_WARN, "nvidia-smi -q -i N; the GPU may have fallen off the bus",
                 "NVML lists it but gives no handle or PCI id");
      continue;
    }
    unsigned t = 0, slow = 0;
    char tinfo[64] = "";
    if (l->temperature && l->temperature(gpus[i].dev, 0, &t) == 0) {
      snprintf(tinfo, sizeof tinfo, ", %u C", t);
      if (l->threshold && l->threshold(gpus[i].dev, 1, &slow) == 0 && slow > 0)
        app(tinfo, sizeof tinfo, " (slowdown %u C)", slow);
    }
    const gr__gpu_health *h = &health[i];
    if (strstr(h->why, " C ")) tinfo[0] = 0; /* the reasons say the temperature already */
    if (!h->known)
      gr__dr_add(r, name, GR__DR_WARN, NULL, "%s: NVML gives no health reading", gpus[i].pci);
    else if (h->fault)
      gr__dr_add(r, name, GR__DR_FAIL,
                 "drain the node; reset the GPU (nvidia-smi -r) or have it replaced", "%s: %s%s",
                 gpus[i].pci, h->why, tinfo);
    else if (h->unhealthy)
      gr__dr_add(r, name, GR__DR_WARN, "check cooling and power; jobs on it run slower", "%s: %s%s",
                 gpus[i].pci, h->why, tinfo);
    else
      gr__dr_add(r, name, GR__DR_OK, NULL, "%s: healthy%s", gpus[i].pci, tinfo);
    int pm;
    if (l->persistence && l->persistence(gpus[i].dev, &pm) == 0) {
      pers_known++;
      if (pm == 1)
        pers_on++;
      else
        app(pers_off, sizeof pers_off, "%s%u", pers_off[0] ? "," : "", i);
    }
    unsigned cur, pend;
    if (l->mig_mode && l->mig_mode(gpus[i].dev, &cur, &pend) == 0) {
      if (cur == 1) app(migs, sizeof migs, "%s%u", mig_on++ ? "," : "", i);
      if (cur != pend) mig_pending++;
    }
  }
  if (!l->persistence)
    gr__dr_add(r, "persist", GR__DR_SKIP, NULL, "NVML has no nvmlDeviceGetPersistenceMode");
  else if (pers_known < (int)ndev || pers_on < pers_known)
    gr__dr_add(r, "persist", GR__DR_WARN,
               "nvidia-smi -pm 1 as root (or nvidia-persistenced): each job start reloads the "
               "driver otherwise",
               "persistence mode on %d of %u GPUs%s%s", pers_on, ndev, pers_off[0] ? "; off: " : "",
               pers_off);
  else
    gr__dr_add(r, "persist", GR__DR_OK, NULL, "persistence mode on for all %u GPUs", ndev);
  if (!l->mig_mode)
    gr__dr_add(r, "mig", GR__DR_SKIP, NULL, "NVML has no nvmlDeviceGetMigMode");
  else
    gr__dr_add(r, "mig", mig_pending ? GR__DR_WARN : GR__DR_OK,
               mig_pending ? "reset the GPU (or reboot) to apply the pending MIG mode"
               : mig_on ? "MIG instances of one GPU share its PCI id: gpurun groups them for NCCL"
                        : NULL,
               "MIG %s%s%s", mig_on ? "on for GPU " : "off on every GPU", migs,
               mig_pending ? "; a mode change is pending" : "");
  free(gpus), free(pcis), free(health);
  gr__nvml_close(l);
}

#undef SYM

/* MPS: is a control daemon running, for whom, and does this shell's pipe directory match. */
static void check_mps(gr__dr_report *r) {
  const char *pipe_env = getenv("CUDA_MPS_PIPE_DIRECTORY");
  const char *pipe_dir = pipe_env && pipe_env[0] ? pipe_env : "/tmp/nvidia-mps";
  char daemons[GR__DR_FOUND] = "";
  int ndaemons = 0, others = 0, mine_here = 0;
  DIR *d = opendir("/proc");
  if (!d) {
    gr__dr_add(r, "mps", GR__DR_SKIP, NULL, "/proc cannot be read: %s", strerror(errno));
    return;
  }
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9' || strlen(e->d_name) > 10) continue;
    char path[64], comm[64];
    snprintf(path, sizeof path, "/proc/%.10s/comm", e->d_name);
    if (read_small(path, comm, sizeof comm) < 0 || strcmp(comm, "nvidia-cuda-mps") != 0) continue;
    /* comm is cut at 15 characters: the command line tells the control daemon from a server */
    char cmd[512];
    snprintf(path, sizeof path, "/proc/%.10s/cmdline", e->d_name);
    if (read_small(path, cmd, sizeof cmd) < 0) continue;
    const char *base = strrchr(cmd, '/');
    base = base ? base + 1 : cmd;
    if (strcmp(base, "nvidia-cuda-mps-control") != 0) continue;
    struct stat st;
    snprintf(path, sizeof path, "/proc/%.10s", e->d_name);
    if (stat(path, &st) != 0) continue;
    char user[64];
    struct passwd pw, *res = NULL;
    char pwbuf[1024];
    if (getpwuid_r(st.st_uid, &pw, pwbuf, sizeof pwbuf, &res) == 0 && res)
      snprintf(user, sizeof user, "%.60s", pw.pw_name);
    else
      snprintf(user, sizeof user, "uid %u", (unsigned)st.st_uid);
    /* its pipe directory, where its environment can be read (the same user, or root) */
    char env[16384], theirs[256] = "";
    snprintf(path, sizeof path, "/proc/%.10s/environ", e->d_name);
    ssize_t len = read_small(path, env, sizeof env);
    for (ssize_t off = 0; len > 0 && off < len; off += (ssize_t)strlen(env + off) + 1)
      if (strncmp(env + off, "CUDA_MPS_PIPE_DIRECTORY=", 24) == 0)
        snprintf(theirs, sizeof theirs, "%.250s", env + off + 24);
    ndaemons++;
    if (st.st_uid != getuid()) others++;
    int same_dir =
        theirs[0] ? strcmp(theirs, pipe_dir) == 0 : strcmp(pipe_dir, "/tmp/nvidia-mps") == 0;
    if (st.st_uid == getuid() && same_dir) mine_here++;
    app(daemons, sizeof daemons, "%spid %s of %s, pipes %s", daemons[0] ? "; " : "", e->d_name,
        user,
        theirs[0] ? theirs
        : len > 0 ? "/tmp/nvidia-mps"
                  : "(environment unreadable)");
  }
  closedir(d);
  if (ndaemons == 0) {
    if (pipe_env && pipe_env[0])
      gr__dr_add(r, "mps", GR__DR_WARN,
                 "start nvidia-cuda-mps-control -d with this CUDA_MPS_PIPE_DIRECTORY, or unset it",
                 "no MPS control daemon, but CUDA_MPS_PIPE_DIRECTORY=%s", pipe_env);
    else
      gr__dr_add(r, "mps", GR__DR_OK, NULL, "no MPS control daemon running");
    return;
  }
  if (mine_here)
    gr__dr_add(r, "mps", GR__DR_OK, NULL, "MPS control daemon: %s", daemons);
  else
    gr__dr_add(r, "mps", GR__DR_WARN,
               others ? "MPS serves one user at a time: your CUDA processes wait or fail; ask "
                        "its owner to stop it"
                      : "set CUDA_MPS_PIPE_DIRECTORY to the daemon's pipe directory",
               "MPS control daemon not for this shell (pipes %s): %s", pipe_dir, daemons);
}

/* ---- this shell ------------------------------------------------------------------------- */

static void check_binding(gr__dr_report *r) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    gr__dr_add(r, "binding", GR__DR_SKIP, NULL, "sched_getaffinity: %s", strerror(errno));
    return;
  }
  char list[200] = "";
  int count = CPU_COUNT(&set), run = -1, prev = -2;
  for (int c = 0; c <= CPU_SETSIZE; c++) {
    int in = c < CPU_SETSIZE && CPU_ISSET(c, &set);
    if (in && prev != c - 1) run = c;
    if (!in && prev == c - 1 && run >= 0) {
      if (run == c - 1)
        app(list, sizeof list, "%s%d", list[0] ? "," : "", run);
      else
        app(list, sizeof list, "%s%d-%d", list[0] ? "," : "", run, c - 1);
      run = -1;
    }
    if (in) prev = c;
  }
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int narrow = online > 0 && count < online;
  gr__dr_add(r, "binding", narrow ? GR__DR_WARN : GR__DR_OK,
             narrow ? "gpurun plans within this mask; run from an unbound shell to use the node"
                    : NULL,
             "this shell runs on %d of %ld CPUs: %s", count, online, list);
}

/* A cgroup path from /proc/self/cgroup, kept only when it is a plain absolute path. */
static int cgroup_path_ok(const char *p) {
  return p[0] == '/' && !strstr(p, "/..") && strlen(p) < 400 && !strchr(p, '\n');
}

static void check_cgroup(gr__dr_report *r) {
  char text[4096];
  if (read_small("/proc/self/cgroup", text, sizeof text) < 0) {
    gr__dr_add(r, "cgroup", GR__DR_SKIP, NULL, "/proc/self/cgroup cannot be read");
    return;
  }
  char v2[512] = "", cpuset[512] = "", memory[512] = "";
  for (char *line = text; line && *line;) {
    char *end = strchr(line, '\n');
    if (end) *end = 0;
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (c2 && cgroup_path_ok(c2 + 1)) {
      *c2 = 0;
      const char *ctl = c1 + 1, *path = c2 + 1;
      if (strcmp(line, "0") == 0 && !*ctl) snprintf(v2, sizeof v2, "%s", path);
      for (const char *p = ctl; *p;) { /* "cpu,cpuacct" */
        size_t len = strcspn(p, ",");
        if (len == 6 && strncmp(p, "cpuset", 6) == 0) snprintf(cpuset, sizeof cpuset, "%s", path);
        if (len == 6 && strncmp(p, "memory", 6) == 0) snprintf(memory, sizeof memory, "%s", path);
        p += len;
        if (*p == ',') p++;
      }
    }
    line = end ? end + 1 : NULL;
  }
  char cpus[128] = "", mem[64] = "", path[1024];
  int v1 = cpuset[0] || memory[0];
  if (v1) {
    snprintf(path, sizeof path, "/sys/fs/cgroup/cpuset%s/cpuset.effective_cpus", cpuset);
    read_small(path, cpus, sizeof cpus);
    snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", memory);
    read_small(path, mem, sizeof mem);
  } else {
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpuset.cpus.effective", v2);
    read_small(path, cpus, sizeof cpus);
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", v2);
    read_small(path, mem, sizeof mem);
  }
  char memtext[64];
  char *end = NULL;
  unsigned long long bytes = mem[0] && mem[0] != '-' ? strtoull(mem, &end, 10) : 0;
  int limited = end && *end == 0 && bytes > 0 && bytes < (1ull << 60);
  if (!mem[0])
    snprintf(memtext, sizeof memtext, "memory limit unknown");
  else if (limited)
    snprintf(memtext, sizeof memtext, "memory limit %.1f GiB", (double)bytes / (1 << 30));
  else
    snprintf(memtext, sizeof memtext, "no memory limit");
  gr__dr_add(r, "cgroup", GR__DR_OK,
             limited ? "every rank of a job started here shares this memory limit" : NULL,
             "cgroup v%d %s: cpus %s, %s", v1 ? 1 : 2, v1 ? (memory[0] ? memory : cpuset) : v2,
             cpus[0] ? cpus : "unknown", memtext);
}

/* ---- the plan --------------------------------------------------------------------------- */

/* A CPU list in hwloc syntax shortened for one line: "8,12,16,...,172" past 32 characters. */
static void short_list(char *out, size_t cap, const char *list) {
  size_t len = strlen(list);
  if (len <= 32) {
    snprintf(out, cap, "%s", list);
    return;
  }
  size_t head = 20;
  while (head > 0 && list[head] != ',')
    head--;
  const char *tail = strrchr(list, ',');
  snprintf(out, cap, "%.*s,...%s", (int)head, list, tail ? tail : "");
}

/* The plan as gpurun makes it for local rank 0 of `ranks`: live, within the GPUs the scheduler's
 * variables give (visible.c) and an inherited CPU mask that is not an MPI launcher's binding, as
 * launcher/main.c does; the health gate is left out (the gpu lines judge the same readings). */
static void check_plan(gr__dr_report *r, gr__node *n, int ranks, int live) {
  gr__visible vis;
  memset(&vis, 0, sizeof vis);
  if (live) {
    if (gr__visible_apply(n, 0, ranks, gr__real_getenv, NULL, &vis) != GR_OK) {
      gr__dr_add(r, "plan", GR__DR_FAIL, "gpurun refuses the same (exit 2): fix the variable", "%s",
                 gr_last_error());
      return;
    }
    if (vis.note[0]) gr__dr_add(r, "visible", GR__DR_OK, NULL, "%s", vis.note);
    hwloc_bitmap_t cur = hwloc_bitmap_alloc();
    const char *bound_by = gr__launcher_bound(gr__real_getenv, NULL);
    if (cur && hwloc_get_cpubind(n->topo, cur, HWLOC_CPUBIND_PROCESS) == 0 &&
        !hwloc_bitmap_iszero(cur) && !hwloc_bitmap_isincluded(n->allowed, cur) && !bound_by &&
        gr__node_bound(n, cur)) {
      char *l = gr__bitmap_list(cur);
      gr__dr_add(r, "plan", GR__DR_OK, NULL, "planning within the inherited CPU mask %s",
                 l ? l : "?");
      free(l);
    }
    hwloc_bitmap_free(cur);
  }
  gr__node_plan_opts po = {GR__POLICY_CLOSEST, 0, 0, 0, &vis};
  gr__node_plan p;
  memset(&p, 0, sizeof p);
  gr_status pst = gr__node_plan_compute(n, ranks, &po, &p);
  gr__visible_free(&vis);
  if (pst != GR_OK) {
    gr__dr_add(r, "plan", GR__DR_FAIL, "gpurun --dry-run --all gives the same sentence",
               "no plan for %d ranks: %s", ranks, gr_last_error());
    return;
  }
  int shared = 0, nogpu = 0;
  for (int i = 0; i < p.local_size; i++)
    shared += p.ranks[i].sharers > 1 && p.ranks[i].ngpus > 0, nogpu += p.ranks[i].ngpus == 0;
  gr__dr_add(r, "plan", p.nwarn ? GR__DR_WARN : GR__DR_OK,
             p.nwarn ? "the warnings follow; gpurun prints the same ones" : NULL,
             "%d rank%s (policy %s): %d on a GPU of their own, %d sharing, %d without a GPU", ranks,
             ranks == 1 ? "" : "s", gr__policy_name(p.policy), ranks - shared - nogpu, shared,
             nogpu);
  for (int w = 0; w < p.nwarn; w++)
    gr__dr_add(r, "plan", GR__DR_WARN, NULL, "%s", p.warn[w]);
  int shown = p.local_size < 16 ? p.local_size : 16;
  for (int i = 0; i < shown; i++) {
    const gr__rank_plan *rp = &p.ranks[i];
    char gpus[160] = "", name[GR__DR_CHECK];
    for (int k = 0; k < rp->ngpus; k++)
      app(gpus, sizeof gpus, "%s%d", k ? "," : "", n->gpus[rp->gpu[k]].index);
    char *cpus = gr__bitmap_list(rp->cpuset), *numa = gr__bitmap_list(rp->nodeset), cpu_text[64];
    short_list(cpu_text, sizeof cpu_text, cpus ? cpus : "?");
    snprintf(name, sizeof name, "rank %d", i % 100000);
    int ncpu = hwloc_bitmap_weight(rp->cpuset);
    gr__dr_add(r, name, GR__DR_OK, NULL, "GPU %s%s, %d %s%s %s (NUMA %s), NIC %s",
               gpus[0] ? gpus : "none", rp->sharers > 1 && rp->ngpus ? " (shared)" : "", ncpu,
               p.smt ? "PU" : "core", ncpu == 1 ? "" : "s", cpu_text, numa ? numa : "?",
               rp->nic >= 0 ? n->nics[rp->nic].name : "none");
    free(cpus), free(numa);
  }
  if (shown < p.local_size)
    gr__dr_add(r, "plan", GR__DR_OK, NULL,
               "ranks %d-%d not shown (gpurun --dry-run --all lists every rank)", shown,
               p.local_size - 1);
  gr__node_plan_free(&p);
}

/* ---- all of it -------------------------------------------------------------------------- */

gr_status gr__dr_run(const gr__dr_opts *o, gr__dr_report *r) {
  int live = !o->topology || !o->topology[0];
  double start = now_s(), timeout = o->mpi_timeout > 0 ? o->mpi_timeout : 1.5;
  bg_cmd mpi;
  memset(&mpi, 0, sizeof mpi);
  if (live) { /* ompi_info takes most of a second: it runs while the other checks do */
    char *ompi[] = {"ompi_info", "--parsable", NULL}, *mpich[] = {"mpichversion", NULL};
    bg_start(&mpi, built_for_mpich() ? mpich : ompi);
  }
  if (gethostname(r->host, sizeof r->host) != 0) snprintf(r->host, sizeof r->host, "?");
  r->host[sizeof r->host - 1] = 0;
  snprintf(r->source, sizeof r->source, "%s", live ? "live" : o->topology);
  gr__node n;
  gr_status st = gr__node_load(&n, live ? NULL : o->topology);
  if (st != GR_OK) {
    bg_finish(&mpi, now_s()); /* nothing waits for it any more */
    return st;
  }
  r->ranks = o->ranks > 0 ? o->ranks : n.ngpus > 0 ? n.ngpus : 1;
  check_topology(r, &n);
  int nvml_gpus = 0;
  if (live) {
    check_nvml(r, &n, &nvml_gpus);
    check_cuda(r, &n, nvml_gpus);
    check_nccl(r, &n);
    check_mps(r);
  } else {
    static const char *const gpu_checks[] = {"nvml", "cuda", "nccl", "gpus", "mps"};
    for (int i = 0; i < 5; i++)
      gr__dr_add(r, gpu_checks[i], GR__DR_SKIP, NULL, LIVE_ONLY);
  }
  check_peer(r, &n);
  check_nics(r, &n);
  if (live)
    check_links(r, &n);
  else
    gr__dr_add(r, "links", GR__DR_SKIP, NULL, LIVE_ONLY);
  if (live) {
    check_binding(r);
    check_cgroup(r);
    check_mpi(r, &mpi, start + timeout, timeout);
  } else {
    static const char *const shell_checks[] = {"mpi", "binding", "cgroup"};
    for (int i = 0; i < 3; i++)
      gr__dr_add(r, shell_checks[i], GR__DR_SKIP, NULL, LIVE_ONLY);
  }
  check_plan(r, &n, r->ranks, live);
  free(mpi.out);
  gr__node_free(&n);
  return r->nomem ? GR_ERR_NOMEM : GR_OK;
}
