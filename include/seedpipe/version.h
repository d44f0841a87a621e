/* seedpipe/version.h - the library's version, its ABI version, and SP_API.
 *
 * The single source of seedpipe's version: CMakeLists.txt reads the three
 * SP_VERSION_* numbers from this file (project(VERSION)), the Python
 * package's build reads them for its metadata, and the library reports them
 * at run time (sp_version_string()).
 *
 * SP_ABI_VERSION is the shared library's SONAME number (libseedpipe.so.N).
 * It changes whenever a public struct's layout or a public function's
 * signature changes incompatibly. A program or binding built for one ABI
 * version compares it with sp_abi_version() of the library it loaded (the
 * Python package does so at import) rather than calling through a wrong
 * signature.
 *
 * ABI 3: the front door (README.md "The C API"): the generator's streams
 * are SP_RNG_* and sp_rng_key() (the batch streams keep SP_STREAM_*), one
 * end code SP_END (SP_POOL_END, SP_CLIENT_END and SP_STREAM_END are gone)
 * and SP_STOPPED (SP_SERVICE_STOPPED), sp_dataset_close() (was
 * sp_dataset_destroy()), sp_trainer_config_of() (was sp_trainer_config()),
 * sp_service_join() returns a status and gives the exit status through a
 * pointer; the exports for tests and benchmarks are internal now.
 *
 * ABI 4: the block order (loader.h SP_ORDER_BLOCK): sp_loader_config and
 * sp_loader_state end with block_shards, sp_manifest with order; and
 * sp_pool_config loses region_name (always refused: a named region is the
 * service's); sp_pool_release() takes the view, and views go back to a
 * pool or a stream in any order (the one release rule, stream.h).
 *
 * ABI 5: token corpora (dataset.h SP_DATASET_TOKENS, docs/tokens.md): the
 * dtypes SP_DTYPE_INT32 and SP_DTYPE_INT64 (a token window's integers;
 * image pipelines refuse them), sp_loader_spec() (the canonical pipeline
 * or token spec), the writer of tokens.h.
 * ABI 6 (this round, one bump for all):
 *   - a blend's weights may change at a resume (state.h: the blend_ fields
 *     of sp_loader_state, sp_loader_resume(), SP_STATE_TEXT_MAX;
 *     docs/determinism.md section 12b);
 *   - bicubic resampling (ops.h: the `filter` field of sp_resample_geom,
 *     sp_image_resize_filter());
 *   - targets (targets.h, docs/targets.md: sp_loader_config.annotations,
 *     the `targets` op, sp_pipeline_run_geom(), sp_targets_apply(); a
 *     sample record with targets is the image then its target fields);
 *   - samplers (loader.h "Samplers", docs/determinism.md section 13):
 *     sp_loader_config ends with indices, nindices, num_samples,
 *     replacement, weights, nweights and repeat;
 *   - the service carries targets and batch mixes: sp_client_info ends
 *     with targets, max_boxes, keypoints, masks, image_bytes,
 *     target_offset and mix_classes; sp_service_config ends with
 *     batch_mix; sp_client_mix_targets() (ring layout version 5);
 *   - additive: SP_DATASET_FAKE, generated images (dataset.h "fakedata:");
 *     IDX images of 3 channels; the batch mixes of batchmix.h
 *     (sp_batch_mix_draw(), sp_batch_mix_pick(), sp_batch_mix_f32(),
 *     sp_batch_mix_parse(), sp_batch_mix_spec_draw()).
 *
 * SP_API marks the functions libseedpipe.so exports; the library is built
 * with -fvisibility=hidden, so nothing else (no sp__ internal) is visible.
 */
#ifndef SEEDPIPE_VERSION_H
#define SEEDPIPE_VERSION_H

#define SP_VERSION_MAJOR 0
#define SP_VERSION_MINOR 1
#define SP_VERSION_PATCH 0
#define SP_ABI_VERSION 6

#if defined(__GNUC__) || defined(__clang__)
#define SP_API __attribute__((visibility("default")))
#else
#define SP_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*! sp_version_string() : "seedpipe X.Y.Z" of the library that is running. */
SP_API const char *sp_version_string(void);

/*! sp_abi_version() : SP_ABI_VERSION of the library that is running; a
 *  caller built against another ABI version must not use it. */
SP_API int sp_abi_version(void);

#ifdef __cplusplus
}
#endif
#endif
