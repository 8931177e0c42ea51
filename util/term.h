/* SPDX-License-Identifier: MIT */
/*
 * term.h - text for a terminal from untrusted bytes (names from a ring or
 * a capture, file names): what every text line of the tools that quotes
 * such bytes writes, so that no escape sequence reaches the terminal.
 */
#ifndef SHMTRACE_TERM_H
#define SHMTRACE_TERM_H

#include <stddef.h>

/*
 * Escapes s[0..n) into out, NUL-terminated: a control character (below
 * 0x20, 0x7f, and the C1 controls U+0080..U+009F, which some terminals
 * obey as ESC [ and the like) and every byte of invalid UTF-8 become
 * \xNN (the byte, two lower-case hex digits; a C1 control is its two
 * bytes, \xc2\x9b), a backslash becomes \\; printable UTF-8 is kept.
 * Returns the bytes needed (without the NUL), which may exceed outlen:
 * then out holds a cut prefix, never a cut escape.
 */
size_t term_escape(const char *s, size_t n, char *out, size_t outlen);

/* term_escape() of the C string s into buf; returns buf. */
const char *term_str(const char *s, char *buf, size_t len);

/* Room term_escape() needs for n bytes at most, with the NUL. */
#define TERM_ESC_MAX(n)	((n) * 4 + 1)

#endif
