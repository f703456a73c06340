/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The user-space datapath tests' one assertion: count a passed check, or count a failed one and
 * say which on stderr. Each test prints "NAME: N passed, M failed" from the two counters.
 */
#ifndef CCP_TESTS_CHECK_H
#define CCP_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static int passed, failed;

__attribute__((format(printf, 2, 3)))
static void check(int ok, const char *what, ...)
{
	va_list ap;

	if (ok) {
		passed++;
		return;
	}
	failed++;
	fprintf(stderr, "FAIL: ");
	va_start(ap, what);
	vfprintf(stderr, what, ap);
	va_end(ap);
	fputc('\n', stderr);
}

#endif
