/* libFuzzer target: the pickle interpreter alone, without a zip around it,
 * so mutations reach opcodes directly. Every storage key resolves to the
 * same 4 KiB of zeros. */
#include <stdint.h>
#include <stdlib.h>

#include "ckpt/pickle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t storage_bytes[4096];

static ckey_status any_storage(void *ctx, const char *key, size_t key_len, const uint8_t **out,
                               uint64_t *bytes, ckey_error *err) {
    (void)ctx, (void)key, (void)key_len, (void)err;
    *out = storage_bytes;
    *bytes = sizeof storage_bytes;
    return CKEY_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ck_tensor_table tab = {0};
    ckey_error err;
    if (ck_pickle_load_state_dict(data, size, "fuzz", any_storage, NULL, &tab, &err) == CKEY_OK) {
        for (size_t i = 0; i < tab.count; i++) {
            const ck_tensor_info *t = &tab.items[i];
            if (t->numel > 4096) continue;
            float dst[4096];
            ck_tensor_to_f32(t, dst, &err);
        }
    }
    ck_table_free(&tab);
    return 0;
}
