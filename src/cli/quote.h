/*
 * quote.h - text that others wrote (lease records and their command lines,
 * process and GPU names from NVML or a fixture, messages that quote them),
 * made safe to print as text: no byte of it can move the cursor, retitle or
 * clear a terminal, or be mistaken for visdev's own output.
 *
 * The escapes are C's and those of bash's $'...': a backslash becomes \\,
 * BEL BS TAB LF VT FF CR ESC become \a \b \t \n \v \f \r \e, every other C0
 * control (0x00-0x1f) and DEL \xNN (two lower-case hex digits), and so do
 * the bytes of a C1 control written in UTF-8 (U+0080-U+009F: \xc2\x9b) and
 * every byte that is not part of valid UTF-8 (a lone 0x9b is a CSI to an
 * 8-bit terminal). Everything else, valid UTF-8 included, is kept as it is.
 * The escaped text is printable UTF-8, and unambiguous: its source can be
 * read back from it. JSON output is never escaped this way: jansson's own
 * escapes keep it exact.
 */
#ifndef VISDEV_QUOTE_H
#define VISDEV_QUOTE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* The size of a buffer that holds any string of n bytes (NUL included) once escaped. */
#define CLI_ESCAPED_SIZE(n) (4 * (n) + 1)

/*
 * Writes src escaped into dst, of n bytes (n > 0), always NUL-terminated,
 * and returns dst, so that it can be an argument of printf. When dst is too
 * short the text is cut before the escape or the character that does not
 * fit, never inside one; CLI_ESCAPED_SIZE(strlen(src) + 1) is never short.
 */
const char *cli_escape(char *dst, size_t n, const char *src);

/* Writes s escaped to f, however long it is. */
void cli_fputs_escaped(const char *s, FILE *f);

/*
 * printf for text output: what fmt and its arguments make is written to f
 * escaped, except a newline that ends fmt itself, so that only visdev's
 * own line ends reach the terminal. fmt must hold no other control.
 */
void cli_fprintf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_vfprintf(FILE *f, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
#define cli_printf(...) cli_fprintf(stdout, __VA_ARGS__)

#endif
