/* The shared-memory path's reduction: n inputs into one output, in rank order, a block at a time
 * through a small buffer that stays in L1 (so the output may be one of the inputs, and the result
 * can go to two places at the cost of one read). The arithmetic is gr__reduce_host's, the one host
 * kernel every path uses, so the answer is the same bit for bit whichever path a call takes. */
#include "gr_dtype.h"
#include "gr_shm.h"

#include <string.h>

#define BLOCK_BYTES 4096

void gr__shm_reduce(gr_dtype t, gr_op op, const void *const *in, int n, void *out, void *out2,
                    size_t count) {
  size_t es = gr__dtype_size(t);
  if (n <= 0 || es == 0) return;
  _Alignas(64) unsigned char tmp[BLOCK_BYTES];
  size_t per = BLOCK_BYTES / es;
  for (size_t at = 0; at < count; at += per) {
    size_t m = count - at < per ? count - at : per, off = at * es;
    memcpy(tmp, (const char *)in[0] + off, m * es);
    for (int i = 1; i < n; i++)
      gr__reduce_host(t, op, tmp, (const char *)in[i] + off, m);
    memcpy((char *)out + off, tmp, m * es);
    if (out2) memcpy((char *)out2 + off, tmp, m * es);
  }
}
