// Package fsfault produces filesystem faults for tests: a small tmpfs
// mounted for one test, filled to the byte, or a directory made immutable
// so that nothing in it can be created, even by root. Linux only; it takes
// root or CAP_SYS_ADMIN, and a test without them skips, unless
// SPAMD_REQUIRE_E2E=1 forbids skipping.
package fsfault
