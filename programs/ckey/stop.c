#include "stop.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) { stop_signal = sig; }

void stop_install_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int stop_requested(void *user) {
    (void)user;
    return stop_signal != 0;
}

int stop_signal_received(void) { return (int)stop_signal; }
