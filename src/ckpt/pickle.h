/*
 * The pickle subset a torch state dict needs (internal to src/ckpt). The
 * interpreter executes nothing: it builds plain values, resolves an allowlist
 * of globals to built-in behaviours (OrderedDict, tensor and parameter
 * rebuilds, storage types) and refuses everything else by name.
 */
#ifndef CK_IO_PICKLE_H
#define CK_IO_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt/internal.h"

/*
 * Resolve a persistent id ('storage', type, key, location, numel) to the
 * bytes of storage `key` (for a torch zip: the entry <archive>/data/<key>).
 * The pickle reader checks that numel elements fit in `size`.
 */
typedef ckey_status (*ck_pickle_storage_fn)(void *ctx, const char *key, size_t key_len,
                                            const uint8_t **data, uint64_t *size,
                                            ckey_error *err);

/* Limits applied to untrusted pickles. */
#define CK_PICKLE_MAX_OBJECTS (1u << 21)
#define CK_PICKLE_MAX_ITEMS (1u << 23)   /* container slots, all containers together */
#define CK_PICKLE_MAX_STACK (1u << 20)
#define CK_PICKLE_MAX_MARKS 1024u
#define CK_PICKLE_MAX_MEMO (1u << 21)
#define CK_PICKLE_MAX_STRING (1u << 20)

/*
 * Run data.pkl and add every tensor of the state dict to `out`: the top-level
 * dict, or its "state_dict" entry when that is a dict (other top-level values
 * are ignored). Each tensor is checked against its storage before it is added.
 */
ckey_status ck_pickle_load_state_dict(const uint8_t *pkl, size_t len, const char *label,
                                      ck_pickle_storage_fn storage, void *ctx,
                                      ck_tensor_table *out, ckey_error *err);

#endif
