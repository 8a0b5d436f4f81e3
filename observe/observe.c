/* Observability's start (gr_observe.h): once per process, with the job id. */
#include "gr_observe.h"

#include "gr_flight.h"
#include "gr_jobdir.h"
#include "gr_live.h"

#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int started;

void gr__observe_start(const char *job) {
#ifndef GR_MPI_LAYER
  /* The MPI layer (libgpurun-mpi.so) may have started in MPI_Init, before this program's first
   * gpurun call: it stands aside, so that one recorder and one publisher speak for the rank. A
   * program linked statically with libgpurun exports no gr_init the layer could have seen. */
  void (*aside)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gr_mpi_layer_stand_aside");
  if (aside) aside();
#endif
  pthread_mutex_lock(&lock);
  int first = !started;
  if (first) {
    gr__flight_arm(job);
    __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&lock);
  if (first) gr__live_setup(job);
}

int gr__observe_start_from_env(void) {
  if (__atomic_load_n(&started, __ATOMIC_ACQUIRE)) return 1;
  char job[128] = "";
  if (gr__monitor_job_from_env(job, sizeof job) != 0) return 0;
  gr__observe_start(job);
  return 1;
}

void gr__observe_start_over(MPI_Comm mpi) {
  if (__atomic_load_n(&started, __ATOMIC_ACQUIRE)) return;
  char job[128] = "";
  gr__job_agree(mpi, job, sizeof job);
  gr__observe_start(job);
}

void gr__job_agree(MPI_Comm comm, char *out, size_t cap) {
  if (gr__monitor_job_from_env(out, cap) == 0) return;
  long long t = (long long)time(NULL);
  MPI_Bcast(&t, 1, MPI_LONG_LONG, 0, comm);
  gr__job_from_time((time_t)t, 0, out, cap);
}
