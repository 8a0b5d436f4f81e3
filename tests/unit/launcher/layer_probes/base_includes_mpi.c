/* Must NOT compile: the base layer sees no mpi.h. */
#include <mpi.h>
int layer_probe;
