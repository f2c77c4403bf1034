/*
 * SIGINT / SIGTERM as a request to stop (`ckey key`, `ckey encode`): the
 * handler only records the signal; the library polls stop_requested (a
 * cancel callback) and stops at its next frame. SA_RESETHAND: a second
 * signal takes the default action at once.
 */
#ifndef CKEY_CLI_STOP_H
#define CKEY_CLI_STOP_H

/* Install the SIGINT and SIGTERM handlers. */
void stop_install_handlers(void);

/* Nonzero once a signal came (the signature of a library cancel callback). */
int stop_requested(void *user);

/* The signal that came; 0 when none did. */
int stop_signal_received(void);

#endif
