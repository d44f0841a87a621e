/* seedpipe/manifest.h - digest manifests: one JSON line per batch.
 *
 * A manifest is JSON Lines. The first line describes the stream:
 *   {"seedpipe_manifest":1,"fingerprint":"<32 hex>","dataset_fingerprint":..,
 *    "dataset":"path","samples":N,"pipeline":"<canonical>","seed":S,
 *    "batch_size":B,"drop_last":false,"rank":0,"world":1,"dtype":"uint8",
 *    "layout":"nchw","sample_shape":[C,H,W],"epochs":E,"versions":{...}}
 * then one line per batch, in (epoch, batch) order:
 *   {"epoch":0,"batch":3,"count":32,"indices":[..],"labels":[..],
 *    "digest":"<32 hex>"}
 * where digest is sp_batch_digest(). Two runs of the same configuration on
 * any machine must produce identical batch lines; the header's versions may
 * differ. Writing goes to a caller's FILE *; nothing is printed elsewhere.
 */
#ifndef SEEDPIPE_MANIFEST_H
#define SEEDPIPE_MANIFEST_H

#include <stdio.h>

#include "seedpipe/loader.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp_manifest_write_header() : @return 0 or SP_EIO. */
int sp_manifest_write_header(FILE *f, const sp_loader *ld, uint32_t epochs, sp_error *err);
/*! sp_manifest_write_batch() : one batch line. @return 0 or SP_EIO. */
int sp_manifest_write_batch(FILE *f, const sp_batch *b, sp_digest digest, sp_error *err);
/*! sp_json_write_string() : write s as a JSON string literal (quoted,
 *  escaped). */
void sp_json_write_string(FILE *f, const char *s);

#ifdef __cplusplus
}
#endif
#endif
