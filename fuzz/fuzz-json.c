/* libFuzzer target: the strict JSON parser, then a walk of every node. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ck_json j;
    ckey_error err;
    if (ck_json_parse((const char *)data, size, "fuzz", &j, &err) != CKEY_OK) return 0;
    size_t total = 0;
    for (size_t i = 0; i < j.count; i++) {
        const ck_json_node *n = &j.nodes[i];
        total += strlen(ck_json_key(&j, n));
        if (n->type == CK_JSON_STRING && strlen(ck_json_str(&j, n)) != n->str_len) abort();
        if (n->type == CK_JSON_OBJECT && n->first)
            (void)ck_json_get(&j, n, ck_json_key(&j, &j.nodes[n->first]));
    }
    (void)total;
    ck_json_free(&j);
    return 0;
}
