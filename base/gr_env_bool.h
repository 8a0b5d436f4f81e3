/* Internal: boolean environment variables. The parser and the reader by name live with the other
 * parameters (gr_param.h); one spelling rule for all of them, so that GPURUN_CHECK=no means off
 * everywhere. */
#ifndef GR_ENV_BOOL_H
#define GR_ENV_BOOL_H

#include "gr_param.h"

#endif
