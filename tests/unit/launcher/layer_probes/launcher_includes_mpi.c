/* Must NOT compile: the launcher side sees no mpi.h. */
#include <mpi.h>
int layer_probe;
