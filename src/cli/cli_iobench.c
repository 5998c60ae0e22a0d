/* cli_iobench.c - `lotus iobench` (being built). */
#include <stdio.h>
#include "cli/cli.h"

int cmd_iobench(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "lotus iobench: not built yet\n");
	return 1;
}
