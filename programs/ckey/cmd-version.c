/* ckey version: the library version. */
#include <stdio.h>

#include "ckey.h"
#include "commands.h"
#include "help.h"
#include "opts.h"
#include "output.h"

int cmd_version(int argc, char **argv) {
    opts o;
    opts_init(&o, "version");
    int rc = parse_opts(argc, argv, O_JSON, 0, help_version, &o);
    if (rc != CONTINUE) return rc;
    if (o.json) {
        printf("{\"ok\": true, \"command\": \"version\", \"version\": ");
        json_str(stdout, ckey_version());
        printf(", \"api\": \"%d.%d.%d\"}\n", CKEY_VERSION_MAJOR, CKEY_VERSION_MINOR,
               CKEY_VERSION_PATCH);
    } else {
        printf("ckey %s\n", ckey_version());
    }
    return EXIT_OK;
}
