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
 * Every call returns a gr_status and, on failure, records one sentence with gr__fail_msg (names in
 * it escaped for the terminal), read with gr_last_error(): GR_ERR_INVALID for a name or size
 * refused, GR_ERR_STATE for what is found there refused (another user's, writable by others, a
 * symlink, not a regular file or directory; a system call's ENOTDIR, ELOOP, EPERM),
 * GR_ERR_NOT_FOUND / GR_ERR_NOMEM / GR_ERR_SYSTEM for a system call that failed otherwise
 * (ENOENT, ENOMEM, anything else). A descriptor or buffer comes back
 * through an out-parameter, -1 / NULL on failure. Nothing here prints or exits; MPI-free, so
 * gpurun-report uses it too. */
#ifndef GR_SAFEFILE_H
#define GR_SAFEFILE_H

#include <gpurun/status.h>
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

/* Opens <root>/<job> as described above; *dirfd gets its descriptor (O_DIRECTORY, close-on-exec).
 * root "" or NULL means ".". */
gr_status gr__jobdir_open(const char *root, const char *job, int *dirfd);
/* Whether an open directory is safe to write into: owned by this user, not group/world-writable
 * (else GR_ERR_STATE); name is only used in the sentence. */
gr_status gr__dir_check(int dirfd, const char *name);

/* Writes buf as dirfd/name, whole or not at all: a new temporary file (O_EXCL|O_NOFOLLOW) in the
 * same directory, written, synced, renamed over name. An existing name that is not a regular file
 * (a symlink, a directory, a device) is refused, never replaced or followed. */
gr_status gr__file_replace(int dirfd, const char *name, const void *buf, size_t len);
/* gr__jobdir_open(root, job) then gr__file_replace of name in it: the one call of the writers of
 * whole job files (counters, flight dumps, MPI call statistics). */
gr_status gr__jobdir_replace(const char *root, const char *job, const char *name, const void *buf,
                             size_t len);

/* Opens dirfd/name for appending: created with O_EXCL (and header written) when absent; when
 * present it must be a regular file owned by this user (no symlink is followed). *fd gets the
 * descriptor. */
gr_status gr__file_append_open(int dirfd, const char *name, const char *header, int *fd);
/* Appends buf with one write(2); a short write is truncated away again, so the file never ends in
 * half a row. On failure (a full disk, a file-size limit: GR_ERR_SYSTEM) nothing of buf is left
 * in the file and the sentence is "cannot append to NAME: <reason>" (name only names it). */
gr_status gr__file_append_row(int fd, const char *name, const void *buf, size_t len);

/* Reads a regular file (O_NOFOLLOW|O_NONBLOCK: symlinks, FIFOs and devices are refused) of at
 * most max bytes (larger: GR_ERR_INVALID) into a malloc'd, NUL-terminated *buf; *len (may be NULL)
 * gets its length. dirfd may be AT_FDCWD. */
gr_status gr__file_read(int dirfd, const char *name, size_t max, char **buf, size_t *len);
/* Opens a regular file for reading as above; *fd gets the descriptor (for line-by-line readers). */
gr_status gr__file_open_read(int dirfd, const char *name, int *fd);

#endif
