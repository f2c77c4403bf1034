/*
 * PNG images (public API in ckey.h: ckey_image_read_png / _write_png /
 * _free). This header adds the in-memory reader the fuzz target drives.
 */
#ifndef CK_IMAGE_H
#define CK_IMAGE_H

#include <stddef.h>

#include "ckey.h"

/* ckey_image_read_png on a buffer; `label` stands for the file name in
 * error messages. */
ckey_status ck_image_read_png_memory(const void *data, size_t size, const char *label,
                                     ckey_image_kind kind, ckey_image *out, ckey_error *err);

#endif
