/* Test support for sanitizer builds: a dlclose() that keeps the library mapped.
 *
 * Open MPI dlcloses its plugins in MPI_Finalize. Allocations they made and never freed then show up
 * in LeakSanitizer's report with "<unknown module>" frames that no suppression can match. Linked
 * into a test executable, this definition takes precedence over libc's for every library in the
 * process, so plugins stay mapped until exit and tests/lsan.supp can name them. Never part of the
 * library or of anything installed. */
int dlclose(void *handle);

int dlclose(void *handle) {
  (void)handle;
  return 0;
}
