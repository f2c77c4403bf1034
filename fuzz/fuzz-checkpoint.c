/* libFuzzer target: the whole checkpoint reader (sniffing, zip, pickle,
 * safetensors, JSON) on untrusted bytes, then every accessor. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ck_checkpoint *c = NULL;
    ckey_error err;
    if (ck_checkpoint_open_memory(data, size, "fuzz", &c, &err) != CKEY_OK) return 0;
    (void)ck_checkpoint_format(c);
    (void)ck_checkpoint_meta(c, "ckey.head_dim");
    for (size_t i = 0; i < ck_checkpoint_count(c); i++) {
        const ck_tensor_info *t = ck_checkpoint_at(c, i);
        if (ck_checkpoint_find(c, t->name) == NULL) abort(); /* every name must be findable */
        if (t->numel > (1u << 16)) continue;
        float *dst = malloc((size_t)t->numel * sizeof(float) + 1);
        if (!dst) continue;
        ck_tensor_to_f32(t, dst, &err);
        free(dst);
        ck_checkpoint_drop_pages(c, t);
    }
    ck_checkpoint_close(c);
    return 0;
}
