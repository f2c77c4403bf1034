/* The help texts of the ckey CLI (help.c), each ending in a newline. */
#ifndef CKEY_CLI_HELP_H
#define CKEY_CLI_HELP_H

extern const char help_main[];    /* ckey --help; also on stderr when no command is given */
extern const char help_run[];
extern const char help_key[];
extern const char help_info[];
extern const char help_convert[];
extern const char help_devices[];
extern const char help_version[];
extern const char help_install_model[];
extern const char help_encode[];
extern const char help_farm[];
extern const char help_track[];

#endif
