/* What the node has: hwloc (live or XML) -> GPUs, NICs and GPU links in plain structs.
 * A GPU is counted per PCI function (cudaN, nvmlN and openclNdM under one function are one GPU),
 * except partitioned functions (several rsmi/MIG devices), which count once per partition. */
#include "gr_launcher.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const gpu_prefixes[] = {"nvml", "cuda", "rsmi", "ze", "opencl"};
#define NPREFIX 5

static int gpu_prefix(const char *name) {
  if (!name) return -1;
  for (int i = 0; i < NPREFIX; i++)
    if (strncmp(name, gpu_prefixes[i], strlen(gpu_prefixes[i])) == 0) return i;
  return -1;
}

static int is_gpu_osdev(hwloc_obj_t o) {
  return o->type == HWLOC_OBJ_OS_DEVICE &&
         (o->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU ||
          o->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC) &&
         gpu_prefix(o->name) >= 0;
}

int gr__is_gpu_pcidev(hwloc_obj_t pci) {
  if (!pci || pci->type != HWLOC_OBJ_PCI_DEVICE) return 0;
  unsigned v = pci->attr->pcidev.vendor_id, cls = pci->attr->pcidev.class_id;
  return (v == 0x10de || v == 0x1002) && ((cls >> 8) == 0x03 || cls == 0x1200);
}

/* Display chips of a GPU vendor that servers solder on the board for the BMC's remote console.
 * They are VGA functions (class 0x0300) like a workstation GPU, so only their ids tell them
 * apart: no compute runtime drives them, and hwloc shows at most a DRM card under them. The
 * other common BMC displays (ASPEED 1a03, Matrox G200e 102b) are not of a GPU vendor and are
 * never counted in the first place. */
static const struct {
  unsigned vendor, device;
  const char *name;
} bmc_displays[] = {
    {0x1002, 0x515e, "ATI ES1000"},
    {0x1002, 0x5969, "ATI ES1000"},
    {0x1002, 0x4752, "ATI Rage XL"},
};

const char *gr__bmc_display_name(hwloc_obj_t pci) {
  if (!pci || pci->type != HWLOC_OBJ_PCI_DEVICE) return NULL;
  for (size_t i = 0; i < sizeof bmc_displays / sizeof bmc_displays[0]; i++)
    if (pci->attr->pcidev.vendor_id == bmc_displays[i].vendor &&
        pci->attr->pcidev.device_id == bmc_displays[i].device)
      return bmc_displays[i].name;
  return NULL;
}

/* Records why a GPU-looking PCI function is not one, for gpurun -v. */
static void note_skipped(gr__node *n, hwloc_obj_t pci, const char *name) {
  if (n->nskipped >= GR__MAX_SKIPPED) {
    n->nskipped_more++;
    return;
  }
  char *out = n->skipped[n->nskipped++];
  snprintf(out, sizeof n->skipped[0],
           "ignoring PCI %04x:%02x:%02x.%x (%s %04x:%04x): a server-management display, not a GPU",
           pci->attr->pcidev.domain, pci->attr->pcidev.bus, pci->attr->pcidev.dev,
           pci->attr->pcidev.func, name, pci->attr->pcidev.vendor_id, pci->attr->pcidev.device_id);
}

hwloc_obj_t gr__io_common_ancestor(hwloc_obj_t a, hwloc_obj_t b) {
  for (hwloc_obj_t x = a; x; x = x->parent)
    for (hwloc_obj_t y = b; y; y = y->parent)
      if (x == y) return x;
  return NULL;
}

static hwloc_obj_t pci_ancestor(hwloc_obj_t o) {
  for (; o; o = o->parent)
    if (o->type == HWLOC_OBJ_PCI_DEVICE) return o;
  return NULL;
}

static hwloc_obj_t locality_of(const gr__node *n, hwloc_obj_t o) {
  hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(n->topo, o);
  while (a && a->parent && !hwloc_bitmap_intersects(a->cpuset, n->allowed))
    a = a->parent;
  return a;
}

static int cmp_gpu(const void *pa, const void *pb) {
  const gr__gpu *a = pa, *b = pb;
  int c = strcmp(a->pci, b->pci);
  if (c) return c;
  if (a->partition != b->partition) return a->partition < b->partition ? -1 : 1;
  /* devices without PCI objects: by OS device name, numerically */
  if (a->osdev && b->osdev && a->osdev->name && b->osdev->name) {
    size_t la = strlen(a->osdev->name), lb = strlen(b->osdev->name);
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(a->osdev->name, b->osdev->name);
  }
  return 0;
}

static void fill_gpu(gr__gpu *g, hwloc_obj_t pci, hwloc_obj_t os, int partition) {
  memset(g, 0, sizeof *g);
  g->pcidev = pci;
  g->osdev = os;
  g->partition = partition;
  if (pci) {
    snprintf(g->pci, sizeof g->pci, "%04x:%02x:%02x.%x", pci->attr->pcidev.domain,
             pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
    g->vendor = pci->attr->pcidev.vendor_id;
  }
  const char *model = NULL;
  /* the model and memory size can sit on any of the function's OS devices */
  hwloc_obj_t scan = pci ? pci : os;
  for (hwloc_obj_t c = scan ? (pci ? pci->io_first_child : os) : NULL; c;
       c = pci ? c->next_sibling : NULL) {
    if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
    const char *m = hwloc_obj_get_info_by_name(c, "GPUModel");
    if (!m) m = hwloc_obj_get_info_by_name(c, "AMDProductName");
    if (m && !model) model = m;
    const char *mem = hwloc_obj_get_info_by_name(c, "CUDAGlobalMemorySize");
    if (mem && !g->mem_bytes) g->mem_bytes = strtoull(mem, NULL, 10) * 1024ull;
    if (!g->vendor) {
      const char *vend = hwloc_obj_get_info_by_name(c, "GPUVendor");
      if (vend && strstr(vend, "NVIDIA")) g->vendor = 0x10de;
      if (vend && strstr(vend, "AMD")) g->vendor = 0x1002;
    }
  }
  if (!model && pci) model = hwloc_obj_get_info_by_name(pci, "PCIDevice");
  if (!model && os) model = os->name;
  snprintf(g->name, sizeof g->name, "%s", model ? model : "GPU");
}

static gr_status find_gpus(gr__node *n) {
  int cap = 16;
  n->gpus = calloc((size_t)cap, sizeof *n->gpus);
  if (!n->gpus) return gr__fail_msg(GR_ERR_NOMEM, "out of memory");
#define PUSH(pci, os, part)                                                                        \
  do {                                                                                             \
    if (n->ngpus == cap) {                                                                         \
      gr__gpu *ng = realloc(n->gpus, (size_t)cap * 2 * sizeof *ng);                                \
      if (!ng) return gr__fail_msg(GR_ERR_NOMEM, "out of memory");                                 \
      n->gpus = ng;                                                                                \
      cap *= 2;                                                                                    \
    }                                                                                              \
    fill_gpu(&n->gpus[n->ngpus++], (pci), (os), (part));                                           \
  } while (0)

  for (hwloc_obj_t pci = hwloc_get_next_pcidev(n->topo, NULL); pci;
       pci = hwloc_get_next_pcidev(n->topo, pci)) {
    int count[NPREFIX] = {0}, any = 0;
    hwloc_obj_t first[NPREFIX] = {0};
    for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
      if (!is_gpu_osdev(c)) continue;
      int p = gpu_prefix(c->name);
      if (!first[p]) first[p] = c;
      count[p]++;
      any = 1;
    }
    /* A compute OS device (the vendor runtime's own) makes the function a GPU; without one the
     * PCI ids decide, and a known server-management display is not a GPU. */
    if (!any && !gr__is_gpu_pcidev(pci)) continue;
    const char *bmc = any ? NULL : gr__bmc_display_name(pci);
    if (bmc) {
      note_skipped(n, pci, bmc);
      continue;
    }
    int parts = 1, pp = -1;
    for (int p = 0; p < NPREFIX; p++)
      if (count[p] > parts) parts = count[p], pp = p;
    if (parts > 1) {
      int k = 0;
      for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling)
        if (is_gpu_osdev(c) && gpu_prefix(c->name) == pp) PUSH(pci, c, k++);
    } else {
      hwloc_obj_t os = NULL;
      for (int p = 0; p < NPREFIX && !os; p++)
        os = first[p];
      PUSH(pci, os, 0);
    }
  }
  /* GPU OS devices that hwloc shows without a PCI device: one family (the first present). */
  int fam = -1;
  for (hwloc_obj_t o = hwloc_get_next_osdev(n->topo, NULL); o; o = hwloc_get_next_osdev(n->topo, o))
    if (is_gpu_osdev(o) && !pci_ancestor(o)) {
      int p = gpu_prefix(o->name);
      if (fam < 0 || p < fam) fam = p;
    }
  if (fam >= 0)
    for (hwloc_obj_t o = hwloc_get_next_osdev(n->topo, NULL); o;
         o = hwloc_get_next_osdev(n->topo, o))
      if (is_gpu_osdev(o) && !pci_ancestor(o) && gpu_prefix(o->name) == fam) PUSH(NULL, o, 0);
#undef PUSH
  qsort(n->gpus, (size_t)n->ngpus, sizeof *n->gpus, cmp_gpu);
  for (int i = 0; i < n->ngpus; i++) {
    n->gpus[i].index = i;
    n->gpus[i].locality = locality_of(n, n->gpus[i].pcidev ? n->gpus[i].pcidev : n->gpus[i].osdev);
  }
  return GR_OK;
}

static int is_hsn_name(const char *s) {
  return s && (strncmp(s, "hsi", 3) == 0 || strncmp(s, "cxi", 3) == 0 || strncmp(s, "ib", 2) == 0);
}

static gr_status find_nics(gr__node *n) {
  int cap = 8;
  n->nics = calloc((size_t)cap, sizeof *n->nics);
  if (!n->nics) return gr__fail_msg(GR_ERR_NOMEM, "out of memory");
  for (hwloc_obj_t o = hwloc_get_next_osdev(n->topo, NULL); o;
       o = hwloc_get_next_osdev(n->topo, o)) {
    int fabric = o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
    const char *sub = o->subtype;
    int net = o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK &&
              (is_hsn_name(o->name) || (sub && strcmp(sub, "Slingshot") == 0));
    if (!o->name || (!fabric && !net)) continue;
    hwloc_obj_t pci = pci_ancestor(o);
    if (net && pci) { /* the function's OpenFabrics name is the one UCX wants */
      int has_fabric = 0;
      for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling)
        if (c->type == HWLOC_OBJ_OS_DEVICE && c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
          has_fabric = 1;
      if (has_fabric) continue;
    }
    if (n->nnics == cap) {
      gr__nic *nn = realloc(n->nics, (size_t)cap * 2 * sizeof *nn);
      if (!nn) return gr__fail_msg(GR_ERR_NOMEM, "out of memory");
      n->nics = nn;
      cap *= 2;
    }
    gr__nic *c = &n->nics[n->nnics++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", o->name);
    if (fabric)
      snprintf(c->ucx, sizeof c->ucx, "%s:1", o->name);
    else
      snprintf(c->ucx, sizeof c->ucx, "%s", o->name);
    c->osdev = o;
    c->pcidev = pci;
    c->locality = locality_of(n, o);
  }
  return GR_OK;
}

/* GPU-GPU bandwidth from the vendor matrix: direct links, plus paths through one or two switches
 * (NVSwitch), each path counted at its narrowest link. Package/CPU entries are not paths. */
static void compute_links(gr__node *n) {
  free(n->link);
  n->link = NULL;
  n->link_name[0] = 0;
  if (n->ngpus < 2) return;
  static const char *const names[] = {"NVLinkBandwidth", "XGMIBandwidth"};
  for (int k = 0; k < 2 && !n->link; k++) {
    unsigned nr = 1;
    struct hwloc_distances_s *d = NULL;
    if (hwloc_distances_get_by_name(n->topo, names[k], &nr, &d, 0) != 0 || nr == 0) continue;
    unsigned m = d->nbobjs;
    int *gidx = malloc(m * sizeof *gidx);
    char *is_switch = calloc(m, 1);
    double *link = calloc((size_t)n->ngpus * (size_t)n->ngpus, sizeof *link);
    if (!gidx || !is_switch || !link) goto done;
    for (unsigned i = 0; i < m; i++) {
      hwloc_obj_t x = d->objs[i];
      gidx[i] = -1;
      for (int g = 0; g < n->ngpus && gidx[i] < 0; g++) {
        const gr__gpu *G = &n->gpus[g];
        if (x == G->osdev || (x == G->pcidev && G->partition == 0))
          gidx[i] = g;
        else if (x->type == HWLOC_OBJ_OS_DEVICE && G->pcidev && pci_ancestor(x) == G->pcidev &&
                 (g + 1 >= n->ngpus || n->gpus[g + 1].pcidev != G->pcidev) && G->partition == 0)
          gidx[i] = g;
      }
      if (gidx[i] < 0 && (x->type == HWLOC_OBJ_PCI_DEVICE || x->type == HWLOC_OBJ_OS_DEVICE))
        is_switch[i] = 1;
    }
#define V(i, j) ((double)d->values[(size_t)(i)*m + (j)])
#define MIN2(a, b) ((a) < (b) ? (a) : (b))
    for (unsigned i = 0; i < m; i++) {
      if (gidx[i] < 0) continue;
      for (unsigned j = 0; j < m; j++) {
        if (gidx[j] < 0 || i == j) continue;
        double bw = V(i, j);
        for (unsigned s = 0; s < m; s++) {
          if (!is_switch[s]) continue;
          bw += MIN2(V(i, s), V(s, j));
          for (unsigned t = 0; t < m; t++)
            if (is_switch[t] && t != s) bw += MIN2(MIN2(V(i, s), V(s, t)), V(t, j));
        }
        link[gidx[i] * n->ngpus + gidx[j]] = bw;
      }
    }
#undef V
    for (int a = 0; a < n->ngpus; a++) /* the narrower direction counts */
      for (int b = a + 1; b < n->ngpus; b++) {
        double v = MIN2(link[a * n->ngpus + b], link[b * n->ngpus + a]);
        link[a * n->ngpus + b] = link[b * n->ngpus + a] = v;
      }
#undef MIN2
    n->link = link;
    link = NULL;
    snprintf(n->link_name, sizeof n->link_name, "%s", names[k]);
  done:
    free(gidx);
    free(is_switch);
    free(link);
    hwloc_distances_release(n->topo, d);
  }
}

/* Reads a topology file whole (at most 256 MiB) into a NUL-terminated buffer; NULL with the
 * failure recorded. Read here, not by hwloc: a FIFO, a directory or a device is refused, not
 * waited on. */
static char *read_topology(const char *path, size_t *lenp) {
  FILE *f = gr__open_regular(path, "topology");
  if (!f) return NULL;
  size_t len = 0, cap = 1 << 16, got;
  char *buf = malloc(cap);
  while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (len + 1 == cap) {
      char *nb = cap < ((size_t)256 << 20) ? realloc(buf, cap * 2) : NULL;
      if (!nb) free(buf);
      buf = nb;
      cap *= 2;
    }
  }
  fclose(f);
  if (!buf) {
    gr__fail_msg(GR_ERR_TOPOLOGY, "topology %s: larger than 256 MiB or out of memory", path);
    return NULL;
  }
  buf[len] = 0;
  *lenp = len;
  return buf;
}

/* Why hwloc refused an XML buffer, when the text shows it: empty, not XML, no <topology>
 * element, or a format version newer than this hwloc reads (hwloc 3 writes <topology
 * version="3.0">, hwloc 2 "2.0", hwloc 1 no version). GR_ERR_TOPOLOGY with the sentence
 * "topology WHAT ..." recorded; GR_OK when nothing shows. */
static gr_status xml_problem(const char *what, const char *buf, size_t len) {
  const char *p = buf, *end = buf + len;
  if (len >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0) p += 3; /* UTF-8 byte order mark */
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
    p++;
  static const char *const want = "expected an hwloc XML export (lstopo --of xml FILE writes one)";
  const gr_status st = GR_ERR_TOPOLOGY;
  if (len == 0) return gr__fail_msg(st, "topology %s is empty: %s", what, want);
  if (p == end) return gr__fail_msg(st, "topology %s holds only white space: %s", what, want);
  if (*p != '<' || memchr(buf, 0, len))
    return gr__fail_msg(st, "topology %s is not XML: %s", what, want);
  const char *t = p;
  while ((t = strstr(t, "<topology")) != NULL) {
    char c = t[9];
    if (c == '>' || c == '/' || c == ' ' || c == '\t' || c == '\n' || c == '\r') break;
    t += 9;
  }
  if (!t)
    return gr__fail_msg(st, "topology %s is XML without a <topology> element: %s", what, want);
  const char *close = strchr(t, '>');
  const char *v = strstr(t, "version=");
  if (v && close && v < close && (v[8] == '"' || v[8] == '\'')) {
    char ver[16];
    size_t k = 0;
    for (const char *q = v + 9;
         q < close && k + 1 < sizeof ver && ((*q >= '0' && *q <= '9') || *q == '.'); q++)
      ver[k++] = *q;
    ver[k] = 0;
    long major = k ? strtol(ver, NULL, 10) : 0;
    if (major > (long)(HWLOC_API_VERSION >> 16))
      return gr__fail_msg(st,
                          "topology %s is hwloc XML format version %s, which hwloc %s (the one "
                          "this gpurun is built with) cannot read: export it again for hwloc "
                          "%ld.x (hwloc 3: lstopo --of v2xml FILE; hwloc 2: lstopo --of xml FILE)",
                          what, ver, HWLOC_VERSION, (long)(HWLOC_API_VERSION >> 16));
  }
  return GR_OK;
}

/* The sentence for an XML topology hwloc refused; what names the file ("x.xml",
 * "HWLOC_XMLFILE=x.xml"). */
static gr_status xml_refused(const char *what, const char *buf, size_t len, int err) {
  if (xml_problem(what, buf, len) != GR_OK) return GR_ERR_TOPOLOGY;
  return gr__fail_msg(GR_ERR_TOPOLOGY,
                      "topology %s does not load: hwloc %s refuses it (%s): is it a whole hwloc "
                      "XML export (lstopo --of xml FILE)?",
                      what, HWLOC_VERSION, strerror(err));
}

gr_status gr__node_load(gr__node *n, const char *xml) {
  memset(n, 0, sizeof *n);
  if (hwloc_topology_init(&n->topo) != 0)
    return gr__fail_msg(GR_ERR_SYSTEM, "hwloc_topology_init failed");
  gr_status st = GR_OK;
  char *xmlbuf = NULL;
  size_t xmllen = 0;
  if (xml && *xml) {
    xmlbuf = read_topology(xml, &xmllen); /* freed after the load */
    if (!xmlbuf) {
      st = GR_ERR_TOPOLOGY;
      goto bad;
    }
    if (xmllen > INT_MAX - 1 ||
        hwloc_topology_set_xmlbuffer(n->topo, xmlbuf, (int)xmllen + 1) != 0) {
      st = xml_refused(xml, xmlbuf, xmllen, errno);
      goto bad;
    }
    n->foreign = 1;
    hwloc_topology_set_io_types_filter(n->topo, HWLOC_TYPE_FILTER_KEEP_ALL);
  } else {
    /* Only what placement needs: PCI/OS devices for GPUs and NICs, no caches below L3. The GL
     * (X displays) and OpenCL (vendor ICDs, which start the GPU driver) backends cost startup
     * time and add nothing PCI discovery does not already give. */
    hwloc_topology_set_components(n->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "gl");
    hwloc_topology_set_components(n->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "opencl");
    hwloc_topology_set_io_types_filter(n->topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    hwloc_topology_set_type_filter(n->topo, HWLOC_OBJ_L1CACHE, HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_type_filter(n->topo, HWLOC_OBJ_L2CACHE, HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_type_filter(n->topo, HWLOC_OBJ_L1ICACHE, HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_type_filter(n->topo, HWLOC_OBJ_L2ICACHE, HWLOC_TYPE_FILTER_KEEP_NONE);
  }
  if (hwloc_topology_load(n->topo) != 0) {
    int err = errno;
    /* hwloc reads HWLOC_XMLFILE itself in place of the live machine */
    const char *env = xml && *xml ? NULL : getenv("HWLOC_XMLFILE");
    if (xmlbuf) {
      st = xml_refused(xml, xmlbuf, xmllen, err);
    } else if (env && *env) {
      char what[PATH_MAX + 16];
      snprintf(what, sizeof what, "HWLOC_XMLFILE=%s", env);
      size_t elen = 0;
      char *ebuf = read_topology(env, &elen);
      st = ebuf ? xml_refused(what, ebuf, elen, err) : GR_ERR_TOPOLOGY;
      free(ebuf);
    } else {
      st = gr__fail_msg(GR_ERR_TOPOLOGY, "topology (live) does not load: %s", strerror(err));
    }
    goto bad;
  }
  n->allowed = hwloc_topology_get_allowed_cpuset(n->topo);
  if (hwloc_bitmap_iszero(n->allowed)) {
    st = gr__fail_msg(GR_ERR_TOPOLOGY, "topology %s has no allowed PUs",
                      xml && *xml ? xml : "(live)");
    goto bad;
  }
  free(xmlbuf);
  xmlbuf = NULL;
  GR_CHECK_GOTO(find_gpus(n), st, bad);
  GR_CHECK_GOTO(find_nics(n), st, bad);
  compute_links(n);
  return GR_OK;
bad:
  free(xmlbuf);
  gr__node_free(n);
  return st;
}

int gr__node_restrict(gr__node *n, const char *visible, char *note, size_t notelen) {
  if (note && notelen) note[0] = 0;
  if (!visible) return 0;
  char *keep = calloc((size_t)n->ngpus + 1, 1);
  if (!keep) return -1;
  const char *s = visible;
  int kept = 0;
  while (*s) {
    char *end;
    if (*s < '0' || *s > '9') {
      if (note)
        snprintf(note, notelen,
                 "visible devices '%.60s' are not ordinals: planning over all %d GPUs", visible,
                 n->ngpus);
      free(keep);
      return 0;
    }
    long v = strtol(s, &end, 10);
    if (v < n->ngpus && !keep[v])
      keep[v] = 1, kept++;
    else if (note && v >= n->ngpus)
      snprintf(note, notelen, "visible device %ld does not exist here (%d GPUs)", v, n->ngpus);
    s = end;
    if (*s == ',')
      s++;
    else if (*s) {
      if (note)
        snprintf(note, notelen, "visible devices '%.60s' do not parse: planning over all %d GPUs",
                 visible, n->ngpus);
      free(keep);
      return 0;
    }
  }
  int w = 0;
  for (int i = 0; i < n->ngpus; i++)
    if (keep[i]) n->gpus[w++] = n->gpus[i]; /* .index stays the node-wide ordinal */
  n->ngpus = w;
  free(keep);
  compute_links(n);
  return kept;
}

int gr__node_bound(gr__node *n, hwloc_const_cpuset_t mask) {
  if (!mask || hwloc_bitmap_iszero(mask)) return 0;
  hwloc_bitmap_t a = hwloc_bitmap_alloc();
  if (!a) return 0;
  hwloc_bitmap_and(a, n->allowed, mask);
  if (hwloc_bitmap_iszero(a) || hwloc_bitmap_isequal(a, n->allowed)) {
    hwloc_bitmap_free(a);
    return 0;
  }
  hwloc_bitmap_free(n->allowed_own);
  n->allowed = n->allowed_own = a;
  for (int i = 0; i < n->ngpus; i++)
    n->gpus[i].locality = locality_of(n, n->gpus[i].pcidev ? n->gpus[i].pcidev : n->gpus[i].osdev);
  for (int i = 0; i < n->nnics; i++)
    n->nics[i].locality = locality_of(n, n->nics[i].osdev);
  return 1;
}

void gr__node_keep(gr__node *n, const char *keep) {
  int w = 0;
  for (int i = 0; i < n->ngpus; i++)
    if (keep[i]) n->gpus[w++] = n->gpus[i]; /* .index stays the node-wide ordinal */
  n->ngpus = w;
  compute_links(n);
}

void gr__node_free(gr__node *n) {
  if (n->topo) hwloc_topology_destroy(n->topo);
  hwloc_bitmap_free(n->allowed_own);
  free(n->gpus);
  free(n->nics);
  free(n->link);
  memset(n, 0, sizeof *n);
}
