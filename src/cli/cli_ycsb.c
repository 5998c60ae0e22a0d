/* cli_ycsb.c - `lotus ycsb` (being built). */
#include <stdio.h>
#include "cli/cli.h"

int cmd_ycsb(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "lotus ycsb: not built yet\n");
	return 1;
}
