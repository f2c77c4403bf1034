/*
 * SHA-256 (FIPS 180-4), for the checksum `ckey install-model` prints. Small
 * and self-contained: the CLI links no crypto library.
 */
#ifndef CKEY_CLI_SHA256_H
#define CKEY_CLI_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct sha256_ctx {
    uint32_t h[8];
    uint64_t bytes;    /* message length so far */
    uint8_t block[64]; /* the partial block */
    size_t fill;       /* bytes in block */
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t n);
/* The digest of everything passed to sha256_update; `c` is spent. */
void sha256_final(sha256_ctx *c, uint8_t digest[32]);
/* The digest as 64 lowercase hex digits and a NUL. */
void sha256_hex(const uint8_t digest[32], char hex[65]);

#endif
