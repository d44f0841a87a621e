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
 * ABI 7 (the house, third round: the ABI is what users call, 176
 * functions, each with a caller in the tool, the Python package, the
 * examples or the install test; tests/abi.py checks it):
 *   - one info call for each object's values: sp_dataset_info_get() with
 *     sp_dataset_info (size, num_classes, root, kind and its driver's
 *     kind_name, fingerprint, shard_count, class_counts, raw_w/raw_h, the
 *     index's info, mix_sources, mix_length) replaces sp_dataset_size,
 *     _num_classes, _root, _kind_of, _kind_name, _fingerprint,
 *     _shard_count, _class_count, _raw_dims, _index_info_get,
 *     _mix_sources and _mix_length; sp_dataset_mix_source_get() with
 *     sp_mix_source replaces sp_dataset_mix_source, _mix_weight,
 *     _mix_class_offset and _mix_locate; sp_loader_info_get() with
 *     sp_loader_info replaces sp_loader_config_of, _dataset, _pipeline,
 *     _spec, _size, _padded_size, _batches_per_epoch, _sample_dims,
 *     _sample_bytes, _fingerprint and _pipeline_hash (each struct begins
 *     with struct_size, so it can grow);
 *   - sp_order_parse()/sp_order_name() are sp_order_spec_parse()/
 *     _format(); sp_cache_parse_size() is sp_parse_size();
 *     sp_image_write() (by format or by the file's name) replaces
 *     sp_png_write() and sp_jpeg_write();
 *   - internal now (sp__ names in their layer's internal headers, not
 *     exported): what only the layers called one another through: the
 *     pixel ops (ops.h is augment/ops_internal.h), the decoders of
 *     decode.h, the pipeline's run, explain and canonical form, the
 *     encoders, the mask rasterisers, the pool's and the client's direct
 *     calls (a stream is their front door), the cache writer, the CPU
 *     kernels of model.h and graph.h, the trainer's raw-array step and
 *     eval, and the tool's file helpers (sp_read_file,
 *     sp_write_file_atomic, sp_publish_*, sp_json_write_string: the tool
 *     has its own, programs/cli_util.c).
 *
 * SP_API marks the functions libseedpipe.so exports; the library is built
 * with -fvisibility=hidden, so nothing else (no sp__ internal) is visible.
 */
#ifndef SEEDPIPE_VERSION_H
#define SEEDPIPE_VERSION_H

#define SP_VERSION_MAJOR 0
#define SP_VERSION_MINOR 1
#define SP_VERSION_PATCH 0
#define SP_ABI_VERSION 7

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
