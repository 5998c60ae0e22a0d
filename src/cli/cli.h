/* cli.h - the subcommands of `lotus`; each returns the exit status. */
#ifndef LOTUS_CLI_H
#define LOTUS_CLI_H
int cmd_memserver(int argc, char **argv);
int cmd_ycsb(int argc, char **argv);
int cmd_bank(int argc, char **argv);
int cmd_txn_status(int argc, char **argv);
int cmd_backup(int argc, char **argv);
int cmd_restore(int argc, char **argv);
/* `lotus memserver --join`: copy partition id / replicas's primary into the
 * empty data directory dir (cli_backup.c).  0 or an error (logged). */
int backup_join(const char *config, const char *secret, unsigned id, unsigned replicas,
		const char *dir);
int cmd_netbench(int argc, char **argv);
int cmd_iobench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_durbench(int argc, char **argv);
int cmd_tpcc(int argc, char **argv);
int cmd_status(int argc, char **argv);
#endif
