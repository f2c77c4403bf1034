/* The ckey commands, one file each (cmd-<name>.c): argv[0] is the command's
 * name, the result the process exit code. */
#ifndef CKEY_CLI_COMMANDS_H
#define CKEY_CLI_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_key(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_install_model(int argc, char **argv);
int cmd_encode(int argc, char **argv);
int cmd_farm(int argc, char **argv);
int cmd_track(int argc, char **argv);

#endif
