/* cli_memserver.c - `lotus memserver` (being built). */
#include <stdio.h>
#include "cli/cli.h"

int cmd_memserver(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "lotus memserver: not built yet\n");
	return 1;
}
