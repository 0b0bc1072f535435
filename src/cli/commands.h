/*
 * commands.h - one function per command; each returns the exit status.
 */
#ifndef VISDEV_COMMANDS_H
#define VISDEV_COMMANDS_H

int cmd_list(int argc, char **argv);
int cmd_map(int argc, char **argv);
int cmd_pick(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_leases(int argc, char **argv);
int cmd_queue(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_top(int argc, char **argv);

#endif
