/* Must NOT compile: built once per forbidden (layer, header) pair (tests/unit/launcher/
 * CMakeLists.txt, launcher_layers) with the usage requirements of the layer and PROBE_HEADER naming
 * a header of a layer above or beside it, or mpi.h for a layer that must not see MPI. */
#include PROBE_HEADER
int layer_probe;
