/* Internal: the one way gpurun writes (and reads) files in directories other users may reach.
 *
 * Threat: gpurun runs as whoever submits the job, sometimes root, and writes into a monitor root
 * (GPURUN_MONITOR_DIR) that may be shared. Another user must not be able to make it write through
 * a symlink they planted, into a directory they own, or leave half a file in place of a good one.
 *
 * - A job directory is <root>/<job>. Missing parts of root are created with the job directory's
 *   mode; root itself may be shared (e.g. a sticky /scratch/mon). The job directory is created
 *   0700 (0750 when GPURUN_MONITOR_GROUP=1) and used only when it is a real directory (not a
 *   symlink) owned by this user and not writable by group or others; otherwise refused, with a
 *   one-line reason. The job id must be a safe name (gr__safe_name).
 * - Every file is opened relative to the directory's descriptor with O_NOFOLLOW; new files with
 *   O_EXCL. A whole file is written to a fresh temporary name and renamed into place.
 * - An append-only file (the monitor CSV) gets whole rows or nothing: a short write is rolled back.
 * - Readers open regular files only (no symlinks, FIFOs, devices), up to a size cap.
 *
 * Every call returns 0 (or a descriptor), or -1 with errno set and a one-line reason in why
 * (which may be NULL). Nothing here prints or exits; MPI-free, so gpurun-report uses it too. */
#ifndef GR_SAFEFILE_H
#define GR_SAFEFILE_H

#include <stddef.h>
#include <sys/types.h>

/* Longest job id / file name component accepted. */
#define GR_SAFE_NAME_MAX 128

/* 1 when s is a safe single path component: 1..GR_SAFE_NAME_MAX characters from [A-Za-z0-9._+@-],
 * not starting with '.' (so never "." or ".."), else 0. */
int gr__safe_name(const char *s);
/* Whether c is in the safe alphabet [A-Za-z0-9._+@-]. */
int gr__safe_char(int c);
/* Maps s in place onto the safe alphabet: every other byte becomes '_', a leading '.' too. */
void gr__safe_name_fix(char *s);

/* Mode for job directories: 0700, or 0750 when GPURUN_MONITOR_GROUP is 1/yes/true. Files get the
 * same without the execute bits. */
mode_t gr__jobdir_mode(void);

/* Opens <root>/<job> as described above and returns its descriptor (O_DIRECTORY, close-on-exec).
 * root "" or NULL means ".". */
int gr__jobdir_open(const char *root, const char *job, char *why, size_t why_len);
/* Whether an open directory is safe to write into: owned by this user, not group/world-writable.
 * 0, or -1 (errno EPERM) with the reason; name is only used in the reason. */
int gr__dir_check(int dirfd, const char *name, char *why, size_t why_len);

/* Writes buf as dirfd/name, whole or not at all: a new temporary file (O_EXCL|O_NOFOLLOW) in the
 * same directory, written, synced, renamed over name. An existing name that is not a regular file
 * (a symlink, a directory, a device) is refused, never replaced or followed. */
int gr__file_replace(int dirfd, const char *name, const void *buf, size_t len, char *why,
                     size_t why_len);

/* Opens dirfd/name for appending: created with O_EXCL (and header written) when absent; when
 * present it must be a regular file owned by this user (no symlink is followed). Returns the fd. */
int gr__file_append_open(int dirfd, const char *name, const char *header, char *why,
                         size_t why_len);
/* Appends buf with one write(2); a short write is truncated away again, so the file never ends in
 * half a row. 0, or -1 with errno (ENOSPC, EFBIG, ...) and nothing of buf left in the file. */
int gr__file_append_row(int fd, const void *buf, size_t len);

/* Reads a regular file (O_NOFOLLOW|O_NONBLOCK: symlinks, FIFOs and devices are refused) of at
 * most max bytes into a malloc'd, NUL-terminated buffer; *len gets its length. dirfd may be
 * AT_FDCWD. Returns the buffer, or NULL with errno (EFBIG when over max) and the reason. */
char *gr__file_read(int dirfd, const char *name, size_t max, size_t *len, char *why,
                    size_t why_len);
/* Opens a regular file for reading as above and returns its fd (for line-by-line readers). */
int gr__file_open_read(int dirfd, const char *name, char *why, size_t why_len);

#endif
