/* A program that reaches MPI only through libgpurun: test_elf_needed's "through" case. */
#include <gpurun/status.h>

int main(void) { return gr_status_name(GR_OK) ? 0 : 1; }
