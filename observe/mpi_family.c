/* The MPI family check (gr_mpi_family.h). */
#include "gr_mpi_family.h"

#include "gr_error.h"

#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#if defined(OMPI_MAJOR_VERSION)
#define BUILT "Open MPI"
#elif defined(MPICH_VERSION)
#define BUILT "MPICH"
#else
#error "mpi.h is neither Open MPI's nor of the MPICH family"
#endif

const char *gr__mpi_family_built(void) { return BUILT; }

const char *gr__mpi_family_of(const char *v) {
  if (!v) return NULL;
  if (strstr(v, "Open MPI")) return "Open MPI";
  /* MPICH, CRAY MPICH, MVAPICH2/MVAPICH, Intel(R) MPI Library */
  if (strstr(v, "MPICH") || strstr(v, "MVAPICH") || strstr(v, "Intel(R) MPI")) return "MPICH";
  return NULL;
}

static char running[MPI_MAX_LIBRARY_VERSION_STRING];
static const char *running_family;

static void look(void) {
  int len = 0;
  running[0] = '\0';
  /* the running library's function, whichever MPI's symbols the loader bound: two char/int
   * arguments, the same in every ABI */
  if (MPI_Get_library_version(running, &len) != MPI_SUCCESS) running[0] = '\0';
  running[sizeof running - 1] = '\0';
  running[strcspn(running, "\n")] = '\0';
  /* one line of plain words for the sentence: tabs and other controls become single spaces */
  size_t o = 0;
  for (size_t i = 0; running[i]; i++) {
    char ch = (unsigned char)running[i] < ' ' || running[i] == 127 ? ' ' : running[i];
    if (ch != ' ' || (o && running[o - 1] != ' ')) running[o++] = ch;
  }
  running[o] = '\0';
  running_family = gr__mpi_family_of(running);
}

gr_status gr__mpi_family_check(const char *fn) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, look);
  /* an MPI that names neither family gets the benefit of the doubt: it may be a derivative we do
   * not know by name, and a wrong refusal would stop a working program */
  if (!running_family || strcmp(running_family, BUILT) == 0) return GR_OK;
  return gr__fail(GR_ERR_UNSUPPORTED, fn,
                  "this libgpurun is built for %s, but the program runs with %s (\"%.80s\"): the "
                  "two MPIs' handles differ (MPI_Comm is a pointer in Open MPI and an integer in "
                  "MPICH), so nothing was done; use the libgpurun built for %s (its lib directory "
                  "first on LD_LIBRARY_PATH, or its module)",
                  BUILT, running_family, running, running_family);
}
