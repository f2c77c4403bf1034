/* ckey convert: rewrite a checkpoint as safetensors. */
#include <stdio.h>
#include <string.h>

#include "ckey.h"
#include "commands.h"
#include "help.h"
#include "opts.h"
#include "output.h"

int cmd_convert(int argc, char **argv) {
    opts o;
    opts_init(&o, "convert");
    int rc = parse_opts(argc, argv, O_JSON, 2, help_convert, &o);
    if (rc != CONTINUE) return rc;
    if (o.npositional != 2)
        return usage_error(o.cmd, "expected IN and OUT.safetensors, got %d argument%s",
                           o.npositional, o.npositional == 1 ? "" : "s");
    const char *in = o.positional[0], *out = o.positional[1];
    ckey_error err;
    memset(&err, 0, sizeof err);
    ckey_model *model = NULL;
    double t0 = now_seconds();
    if (ckey_model_load(in, &model, &err) != CKEY_OK) return fail_err(o.json, &err);
    const double t_load = now_seconds() - t0;
    ckey_model_info mi;
    memset(&mi, 0, sizeof mi);
    ckey_model_get_info(model, &mi);
    t0 = now_seconds();
    ckey_status st = ckey_model_save_safetensors(model, out, &err);
    const double t_save = now_seconds() - t0;
    ckey_model_free(model);
    if (st != CKEY_OK) return fail_err(o.json, &err);
    if (o.json) {
        printf("{\"ok\": true, \"command\": \"convert\", \"input\": ");
        json_str(stdout, in);
        printf(", \"output\": ");
        json_str(stdout, out);
        printf(", \"num_params\": %lld, \"seconds\": {\"load\": %.6f, \"save\": %.6f}}\n",
               (long long)mi.num_params, t_load, t_save);
    } else {
        printf("wrote %s (%lld parameters; load %.3f s, save %.3f s)\n", out,
               (long long)mi.num_params, t_load, t_save);
    }
    return EXIT_OK;
}
