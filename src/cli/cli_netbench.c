/* cli_netbench.c - `lotus netbench` (being built). */
#include <stdio.h>
#include "cli/cli.h"

int cmd_netbench(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "lotus netbench: not built yet\n");
	return 1;
}
