/* seedpipe/dataset.h - dataset index: canonical sample order, labels, fingerprint.
 *
 * The kinds below, each detected by sp_dataset_open() from the path (the
 * library's driver table, dataset/dataset_drivers.c, in its order), and an
 * in-memory sample list (sp_dataset_open_list()); sp_dataset_info_get()
 * names an open dataset's kind ("imagefolder", "idx", "fakedata", "list",
 * "webdataset", "mixture", "tokens", "samples"). A program should compare
 * the name: a later library may have kinds this header does not number.
 *  - ImageFolder (a directory): one sub-folder per class, files ending in
 *    .png .jpg .jpeg .bmp .webp .tif .tiff (any case), as torchvision's
 *    ImageFolder. Class id = index of the class folder name in byte-wise sorted
 *    order (strcmp, not locale: "Zebra" < "apple"); a class folder without
 *    images is still a class.
 *    Samples in byte-wise sorted order of their relative path
 *    ("class/file"). Hidden entries (leading '.') are ignored at every
 *    level, as are other extensions and files directly in the root; nested
 *    folders inside a class are walked recursively, symlinks followed, each
 *    real directory (device, inode) read once: a second path to a folder
 *    already read (a link sideways, a bind mount, a class linked to
 *    another) is SP_EFORMAT naming both paths, as is a link back to an
 *    enclosing folder (torchvision would list those files twice, or
 *    forever); more than 64 levels or 2^26 entries read in all is
 *    SP_ELIMIT (the walk's time is bounded by the folder's real size, not
 *    by the number of paths links make).
 *    torchvision's ImageFolder index order is the same for a flat folder
 *    (images directly in their class folders) unless two class names are
 *    c and c+x with x starting with a byte below '/' (space !"#$%&'()*+,-.).
 *    It differs otherwise: torchvision orders classes by name, then within
 *    a class walks the folders in the sorted order of their path strings,
 *    each folder's own files (sorted) before any sub-folder's, where this
 *    order sorts the whole relative path byte-wise. Classes "a", "a-b" with
 *    a/b.png, a/z.png, a/a/c.png, a/b/c.png, a/b-c.png, a/b-c/d.png,
 *    a-b/x.png: torchvision a/b-c.png, a/b.png, a/z.png, a/a/c.png,
 *    a/b/c.png, a/b-c/d.png, a-b/x.png; here a-b/x.png, a/a/c.png,
 *    a/b-c.png, a/b-c/d.png, a/b.png, a/b/c.png, a/z.png (labels agree:
 *    both number the sorted class names). To get torchvision's order,
 *    pass its samples as a list (sp_dataset_open_list(), loader.h's
 *    cfg.samples). tests/test_order_ref.py checks both statements.
 *  - IDX (a file named *images-idx3-ubyte, *images.idx3-ubyte or
 *    *images-idx4-ubyte, optionally .gz): MNIST / Fashion-MNIST; labels
 *    from the sibling file with "images-idx3" (or "images-idx4") replaced
 *    by "labels-idx1" (".gz" added or dropped if the exact name is
 *    missing). Images are 3 dimensions (n, rows, columns: grey) or 4
 *    (n, rows, columns, channels) with 1 or 3 channels (RGB, interleaved;
 *    raw_view.channels says which). Samples in file order; classes named
 *    "0".."9", or "0".."L" where the largest label L (<= 255) is over 9.
 *    Only data type 0x08 (unsigned byte) is supported. Pixels are kept in memory: at most 4 GiB of them
 *    by default (the declared size is checked before reading, and the
 *    buffer grows with the data actually decompressed), another limit by
 *    SEEDPIPE_IDX_MAX_BYTES (a size as sp_parse_size() reads it, e.g. 8G).
 *  - Generated images, "fakedata:size=N,image=CxHxW,classes=K,offset=O"
 *    (each setting optional, torchvision FakeData's defaults otherwise):
 *    sample i a pure function of the settings and i + O, raw pixels like
 *    IDX's; docs/determinism.md section 14.
 *  - List file (any other regular file): one `path<TAB>label` per line,
 *    path relative to the list file's folder (or absolute), label a
 *    non-negative integer below 65536; a line whose first non-blank char is
 *    '#' and blank lines are ignored; CRLF accepted. Classes are "0".."K-1",
 *    K = largest label + 1. Samples in byte-wise sorted path order
 *    (duplicate paths are an error naming both lines).
 *
 *  - WebDataset (a .tar file, a folder of .tar shards and no class folder,
 *    or a brace pattern "dir/train-{000000..000099}.tar"): a sample is the
 *    adjacent members sharing a key, KEY.jpg / .jpeg / .png / .bmp / .webp /
 *    .tif / .tiff its image and KEY.cls its label (decimal text, below 65536);
 *    other members are ignored. Shards in byte-wise sorted name order, samples
 *    in tar order; classes "0".."K-1" as for lists; paths "<shard>/<image
 *    member>". Read in place (one pread per sample). A member that is a link,
 *    device or FIFO, a key without an image or label, an image cut short by the
 *    end of its shard: that sample fails when read (SP_EFORMAT, naming shard
 *    and member), so --on-error decides; a shard that is not a tar or ends
 *    between members without its end-of-archive block fails the open. The first
 *    open reads every shard once, sequentially; what it found is kept in the
 *    index cache folder, one entry per shard, and trusted while the shard's
 *    stat is unchanged (the rules of the persistent index below).
 *
 *  - Remote WebDataset shards (a URL, docs/remote.md): the same shards in an
 *    S3-compatible object store, `s3://bucket/prefix/train-{000000..000099}.tar`,
 *    or on an HTTP(S) server, `https://host/path/train-{...}.tar`; one
 *    shard `.../x.tar`, or a folder `.../path/` (every shard its index
 *    object lists). Opening reads one object, the dataset index object
 *    `seedpipe.index` beside the shards (sp_dataset_write_index(); the
 *    `seedpipe shard` and `seedpipe index URL` commands write it), never
 *    the shards: the same samples, paths, labels and fingerprint as a local
 *    open of the same shards (kind "webdataset"). A sample is one byte-range
 *    request of its member, checked against the shard's indexed size and
 *    the member's content hash (a replaced shard is SP_EMISMATCH naming the
 *    object); transient failures are retried, a permanent one (HTTP 403,
 *    404) is SP_EIO naming the object and the status. limits.index =
 *    SP_INDEX_REBUILD reads every shard once instead of the index object.
 *    Credentials (S3) from the AWS_* variables or the shared credentials
 *    file; never in a message or a dataset root (a URL with user:password@
 *    is refused). The loader and the pool read ahead in the known order
 *    (SEEDPIPE_PREFETCH); SEEDPIPE_SHARD_CACHE=DIR keeps whole local copies
 *    of the shards (docs/remote.md). Neither changes a byte.
 *  - Mixture (a regular file whose name ends in ".mix"): several datasets
 *    of the kinds above with weights, one `WEIGHT<TAB>DATASET` line each
 *    (DATASET relative to the .mix file's folder, or absolute; WEIGHT a
 *    positive decimal: digits with at most one '.', such as 3, 0.999 or
 *    .25, at most 18 digits after the leading zeros); an optional
 *    `length<TAB>N` line sets the epoch length (default: the sum of the
 *    sources' sizes); '#' comments, blank lines and CRLF as for lists; at
 *    most 256 sources, no mixture inside a mixture, token corpora as all
 *    the sources or none (a blend: the loader counts their windows,
 *    docs/tokens.md). A bad line is
 *    SP_EFORMAT naming the file and line; a source that fails to open is
 *    its own error, prefixed with the .mix file and line. The mixture's
 *    samples are its sources' concatenated in line order (sample i of
 *    source s is mixture sample off(s) + i, off(s) the sizes of sources
 *    0..s-1), so paths (the source's own), content hashes and reads are the
 *    sources'; labels are offset per source: source s's label c is mixture
 *    label coff(s) + c, coff(s) the class counts of sources 0..s-1, class
 *    names "s:name". An epoch is not a permutation of these samples but
 *    sp_dataset_info's mix_length draws by the weights: docs/determinism.md
 *    section 10 is the normative schedule, sp_dataset_mix_draw() computes
 *    it. Its fingerprint (section 10) covers every source's fingerprint,
 *    the weights and the length. A token corpus cannot be a source (yet):
 *    SP_EUNSUPP naming the line.
 *  - Token corpus (kind "tokens", docs/tokens.md): a Megatron indexed
 *    dataset (megatron-core's MMIDIDX format, version 1), PREFIX.idx +
 *    PREFIX.bin, named by either file (when the other is beside it) or by
 *    PREFIX itself (when PREFIX does not exist and both files do); the
 *    root (sp_dataset_info's root) is PREFIX. Token types uint8, int8, int16,
 *    uint16, int32, int64 (float64/float32 corpora are SP_EUNSUPP). Both
 *    files are mapped read-only and checked at open in one pass (O(sequences),
 *    no per-document memory): the arrays fill the .idx exactly (plus one
 *    mode byte a sequence in multimodal corpora), lengths >= 0, the
 *    pointers tile the .bin back to back from 0 to its last byte (as
 *    megatron-core writes them), the document index starts at 0, never
 *    decreases and ends at the sequence count; a violation is SP_EFORMAT
 *    "PREFIX.idx: reason". Samples are documents (sp_dataset_info's size = D;
 *    at most 2^32-1, else SP_ELIMIT; zero documents is SP_EFORMAT), all
 *    label 0 of one class "tokens", each path the prefix, content hash
 *    {0, 0}; sp__dataset_read() is SP_EUNSUPP (the loader packs tokens by
 *    seq_len). Its fingerprint is its own: XXH3-128 over
 *    "seedpipe.tokens.v1", the kind, the dtype code, D, the token count,
 *    the .bin's size and the XXH3-128 of the .idx's bytes
 *    (dataset/dataset_tokens.c). LIMIT: the .bin's bytes are not hashed
 *    (that would read the whole corpus at every open): a .bin rewritten in
 *    place with the same size keeps the fingerprint. Remote (s3:// or
 *    http(s)://, a URL ending in .idx or .bin, or any other whose last
 *    component is not empty, a .tar or a brace pattern: the prefix URL):
 *    the .idx is fetched whole (at most
 *    the larger of SEEDPIPE_REMOTE_INDEX_MAX and 4 GiB), the .bin's size
 *    read from a one-byte ranged GET, the same checks and fingerprint as
 *    the local copy; tokens are byte ranges of the .bin (SP_EMISMATCH when
 *    its size changed since the open).
 *
 * Fingerprint (XXH3-128 seed 0, streamed; integers little-endian):
 *     "seedpipe.dataset.v1" (19 bytes), u32 kind, u64 n, u32 num_classes,
 *     per class: u32 len + name bytes; u32 raw_w, u32 raw_h (0, 0 unless IDX);
 *     per sample in canonical order: u32 len + relative path bytes
 *     (sp_dataset_path()), u32 label, u64 content size,
 *     u64 content hash hi, u64 content hash lo.
 * The content hash is XXH3-128 (seed 0) of the file bytes (IDX: of the
 * image's h*w pixel bytes). digest.hi/lo = XXH128_hash_t.high64/low64. The
 * root path is not hashed, so a copied dataset keeps its fingerprint; a
 * changed byte, label, path, class name or sample set changes it.
 *
 * Persistent index (ImageFolder, list files and local shards): the first
 * open reads and hashes every file (in threads) and keeps the hashes in the
 * user's index cache folder, never in the data: $SEEDPIPE_CACHE if set,
 * else $XDG_CACHE_HOME/seedpipe, else ~/.cache/seedpipe, made mode 0700 and
 * refused when it is another user's or others may write it (or the folder
 * it is in, unless sticky). An entry is
 * named after the dataset's resolved path and its folder's device and
 * inode (folder-HEX, list-HEX, tar-HEX), so two datasets never share one
 * and a moved dataset is indexed again; a read-only dataset is indexed as
 * any other. The sidecar older versions wrote beside the data
 * (<root>/.seedpipe-index, .<list name>.seedpipe-index, .<shard>.seedpipe-index)
 * is still read, under the same rules, while the cache has no sound entry,
 * and never written. No usable cache folder is no error: every file is
 * hashed at each open and sp_dataset_index_info's warning says why. A later
 * open stats every file and re-hashes only those whose device, inode,
 * size, mtime or ctime changed (and those changed within 2 s of the last
 * index write, whose timestamps cannot tell), so reopening an unchanged
 * dataset reads no sample file; the fingerprint is the same as a full
 * hash's. A damaged, foreign or stale index is never trusted: it is
 * rebuilt (sp_dataset_info's index says why). A file changed without a
 * stat change is still refused when read: sp__dataset_read() re-hashes
 * every sample. SEEDPIPE_INDEX=off in the environment disables the index.
 * Each record also keeps whether the file's bytes decode without error in
 * full (checked when the file is hashed, when the cache folder is
 * writable) and, for a baseline JPEG, where each row's entropy-coded data
 * starts; the loader lets a JPEG crop of such a file stop after its last
 * row and start decoding near its first row, with the same pixels
 * (docs/determinism.md, "Damaged files: checked once", "Entropy
 * checkpoints").
 *
 * Thread/fork safety: an open sp_dataset is immutable; sp__dataset_read()
 * may be called concurrently from threads and from forked children (it
 * uses open()/read() per call, no shared FILE* or offset).
 */
#ifndef SEEDPIPE_DATASET_H
#define SEEDPIPE_DATASET_H

#include "seedpipe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The numbers of the kinds this header lists (sp_dataset_info's kind; the
 * fingerprint hashes it). A later kind has a number of its own that this
 * list need not hold: compare kind_name. */
typedef enum {
    SP_DATASET_IMAGEFOLDER = 0,
    SP_DATASET_IDX = 1,
    SP_DATASET_LIST = 2,
    SP_DATASET_WEBDATASET = 3,
    SP_DATASET_SAMPLES = 4,     /* an in-memory sample list (sp_dataset_open_list) */
    SP_DATASET_MIX = 5,         /* a weighted mixture of datasets (a NAME.mix file) */
    SP_DATASET_TOKENS = 6,      /* a Megatron token corpus (PREFIX.idx + PREFIX.bin) */
    SP_DATASET_FAKE = 7         /* generated images, "fakedata:..." (torchvision's FakeData) */
} sp_dataset_kind;

typedef struct sp_dataset sp_dataset;

/* What sp_dataset_open() does with the persistent index (see above). */
typedef enum {
    SP_INDEX_AUTO = 0,     /* use a sound index, write one when anything changed */
    SP_INDEX_OFF = 1,      /* hash every file; neither read nor write an index */
    SP_INDEX_REBUILD = 2   /* ignore any index: hash every file, write a new one */
} sp_index_mode;

/* Bounds and choices applied while opening (hostile IDX headers, huge
 * lists). A zero field means "use the default". For IDX, max_file_bytes
 * bounds one image (rows * cols); the whole images file is also bounded by
 * 16 GiB. */
typedef struct sp_dataset_limits {
    uint64_t max_samples;     /* default 1<<31 (never more than 2^32-1) */
    uint64_t max_file_bytes;  /* per sample file, default 256 MiB */
    sp_index_mode index;      /* default SP_INDEX_AUTO */
    int hash_threads;         /* threads hashing files; default online CPUs, at most 8 */
} sp_dataset_limits;

/* What the persistent index did at open (sp_dataset_info's index). */
typedef struct sp_dataset_index_info {
    int used;                 /* 0: no index (IDX, SP_INDEX_OFF, SEEDPIPE_INDEX=off) */
    int written;              /* 1: the index was (re)written at this open */
    uint64_t reused;          /* samples whose hash came from the index (file not read) */
    uint64_t hashed;          /* samples read and hashed at this open */
    char path[4096];          /* the index read or written ("" if none) */
    char warning[768];        /* why an index found was not trusted, or why none
                               * could be kept (no usable cache folder), or "" */
} sp_dataset_index_info;

/*! sp_dataset_open() : index the dataset at `path` (limits may be NULL).
 *  @return 0, SP_EIO (unreadable root or file: path and strerror),
 *  SP_EFORMAT (malformed IDX/list: path, line or offset, reason),
 *  SP_EUNSUPP (IDX data type other than unsigned byte), SP_ELIMIT,
 *  SP_ENOMEM, SP_EINVAL. An ImageFolder with no class folder or no images
 *  is SP_EFORMAT. On failure *out is NULL. */
SP_API int sp_dataset_open(const char *path, const sp_dataset_limits *limits,
                           sp_dataset **out, sp_error *err);
SP_API void sp_dataset_close(sp_dataset *ds);   /* accepts NULL */

/* An explicit list of samples (a torch Subset or ConcatDataset of image
 * folders, handed over without a temporary file). */
typedef struct sp_sample_list {
    size_t count;                /* samples, >= 1 */
    const char *const *paths;    /* count paths: absolute, or relative to `base` */
    const int32_t *labels;       /* count labels in [0, num_classes) */
    int32_t num_classes;         /* 1..65536; 0: the largest label + 1 */
} sp_sample_list;

/*! sp_dataset_open_list() : a dataset of the samples in `list`, in the
 *  given order, which is its canonical order (no sorting; duplicates are
 *  allowed, as a torch Subset may repeat an index: each occurrence is its
 *  own sample index). A path is used as written (and hashed so): absolute,
 *  or relative to `base`, a folder resolved with realpath() at open (NULL:
 *  the current directory at open). Otherwise it is a list file's dataset:
 *  every file is hashed at open (threads; there is no persistent index, so
 *  each open reads every file once), the fingerprint covers kind 4
 *  ("samples"), the paths, the labels, the class count (classes named
 *  "0".."K-1") and the contents; sp__dataset_read() re-hashes; a file
 *  changed since is SP_EMISMATCH. The list is copied: it need not outlive
 *  the call. limits as for sp_dataset_open() (index ignored).
 *  @return 0, SP_EINVAL (empty list, NULL path, empty path, label out of
 *  range: naming the entry), SP_EIO (a missing or unreadable file or base:
 *  path and strerror, "(sample list entry I)"), SP_EFORMAT (not a regular
 *  file), SP_ELIMIT, SP_ENOMEM. On failure *out is NULL. */
SP_API int sp_dataset_open_list(const char *base, const sp_sample_list *list,
                                const sp_dataset_limits *limits, sp_dataset **out,
                                sp_error *err);

/* What a dataset is (sp_dataset_info_get()). The struct grows at its end:
 * a caller sets struct_size (SP_DATASET_INFO_INIT does), and the library
 * fills only the fields that fit in it, so a program built against an
 * older header keeps working. */
typedef struct sp_dataset_info {
    size_t struct_size;          /* in: sizeof(sp_dataset_info) */
    const char *kind_name;       /* the kind's name: "imagefolder", "idx", "list",
                                  * "webdataset", "samples", "mixture", "tokens",
                                  * "fakedata", or a later kind's (owned by the library) */
    int kind;                    /* its number: sp_dataset_kind, or a later kind's */
    const char *root;            /* the path given at open (trailing '/' removed);
                                  * a token corpus's PREFIX; owned by ds */
    uint64_t size;               /* samples (a token corpus: documents) */
    int num_classes;
    const uint64_t *class_counts;   /* num_classes sample counts by label; owned by ds */
    sp_digest fingerprint;       /* see "Fingerprint" above */
    uint32_t shard_count;        /* a WebDataset's shards (local or remote; samples
                                  * numbered shard by shard, sp_dataset_shard_of()); 0
                                  * for every other kind, a mixture included */
    int raw_w, raw_h;            /* IDX and fakedata: the images' common size; 0, 0
                                  * for encoded files */
    uint32_t mix_sources;        /* a mixture's sources (sp_dataset_mix_source_get());
                                  * 0 for any other dataset */
    uint64_t mix_length;         /* a mixture's epoch length L (the slots an epoch
                                  * draws); size for any other dataset */
    sp_dataset_index_info index; /* what the persistent index did at open: hashes
                                  * reused, files hashed, its path, and a warning when
                                  * one was found but not trusted or none could be
                                  * kept (the tool prints it) */
} sp_dataset_info;

#define SP_DATASET_INFO_INIT {.struct_size = sizeof(sp_dataset_info)}

/*! sp_dataset_info_get() : fill *out (its first out->struct_size bytes)
 *  with what ds is. @return 0, or SP_EINVAL (ds or out NULL, struct_size
 *  smaller than the kind_name field's end). */
SP_API int sp_dataset_info_get(const sp_dataset *ds, sp_dataset_info *out);

/* Per class and per sample. Out-of-range arguments give NULL / -1 /
 * UINT32_MAX, never a crash. */
SP_API const char *sp_dataset_class_name(const sp_dataset *ds, int cls);
/*! sp_dataset_shard_of() : the shard sample i lies in (shard by shard:
 *  non-decreasing in i); UINT32_MAX without shards or for i >= size. */
SP_API uint32_t sp_dataset_shard_of(const sp_dataset *ds, uint64_t i);
SP_API int sp_dataset_label(const sp_dataset *ds, uint64_t i);
/*! sp_dataset_path() : the sample's relative path ("class/file.png"), for
 *  lists the path as written, or for IDX "<images file name>#<index>" with a
 *  ".gz" suffix dropped (a plain and a gzip'd copy fingerprint alike).
 *  Owned by ds. */
SP_API const char *sp_dataset_path(const sp_dataset *ds, uint64_t i);

/* One sample's input. For encoded datasets `bytes` is a malloc'd copy of the
 * file; for IDX `raw` points at raw_view, a view into the dataset's pixels
 * (no copy; read-only; valid while ds lives). src.path == full_path: the
 * sample's absolute path (root resolved with realpath() at open, so a later
 * chdir() changes nothing), or "<images file as given>#<index>" for IDX.
 * Do not copy the
 * struct by value (src.raw points into it). */
typedef struct sp_sample_data {
    sp_sample_src src;   /* what sp__pipeline_run() takes */
    char *full_path;     /* absolute path (the root resolved at open), for messages */
    uint8_t *owned;      /* file bytes to free */
    sp_image raw_view;
} sp_sample_data;

/* ---- mixtures (SP_DATASET_MIX) --------------------------------------------------- */

/* One source of a mixture (sp_dataset_mix_source_get()); grows at its
 * end as sp_dataset_info does. */
typedef struct sp_mix_source {
    size_t struct_size;          /* in: sizeof(sp_mix_source) */
    const sp_dataset *dataset;   /* the source, owned by the mixture */
    uint64_t weight_num, weight_den;   /* its weight as the exact fraction num / den
                                  * (the weights as written, scaled to integers and
                                  * reduced; den is their sum) */
    uint64_t offset;             /* off(s): its first mixture sample */
    int class_offset;            /* coff(s): its first mixture label */
} sp_mix_source;

#define SP_MIX_SOURCE_INIT {.struct_size = sizeof(sp_mix_source)}

/*! sp_dataset_mix_source_get() : source s of a mixture into *out (its
 *  first out->struct_size bytes). @return 0, or SP_EINVAL (not a mixture,
 *  s >= sp_dataset_info's mix_sources, out NULL or too small). */
SP_API int sp_dataset_mix_source_get(const sp_dataset *ds, uint32_t s, sp_mix_source *out);

/* One draw of a mixture's schedule (docs/determinism.md section 10). */
typedef struct sp_mix_draw {
    uint32_t source;      /* the source slot q draws from */
    uint64_t draw;        /* k: slot q is the source's k-th draw of the epoch (from 0) */
    uint32_t pass;        /* the source's own epoch that draw falls in (its permutation's) */
    uint64_t local;       /* the sample drawn, an index of the source */
    uint64_t index;       /* the same sample as a mixture index: off(source) + local */
} sp_mix_draw;

/*! sp_dataset_mix_draw() : what slot q (< sp_dataset_info's mix_length) of
 *  epoch `epoch` draws under `seed`. O(1) after the open (a table of one
 *  period of the schedule). Pure: any process computes the same. @return 0,
 *  SP_EINVAL (not a mixture), SP_ERANGE (q >= length). */
SP_API int sp_dataset_mix_draw(const sp_dataset *ds, uint64_t seed, uint32_t epoch, uint64_t q,
                               sp_mix_draw *out);

/*! sp_dataset_write_shards_annotated() : the same, and with annotations (a
 *  COCO instances JSON, as --annotations; NULL: none) each sample also gets
 *  "%09llu.json", the JSON array of its image's annotations (their text
 *  copied from the file, in file order; "[]" when it has none), which a
 *  loader with annotations "@json" reads back to the same targets
 *  (docs/targets.md). @return as above, or the annotation file's errors. */
SP_API int sp_dataset_write_shards_annotated(const sp_dataset *ds, const char *annotations,
                                             const char *out_dir, uint64_t max_count,
                                             uint64_t *nshards, sp_error *err);

/*! sp_dataset_write_index() : write the dataset index object of a WebDataset
 *  (local or remote shards): every shard's name and size, every sample's
 *  member, label, offset, size and content hash (format in
 *  dataset/dataset_object.c). dest: a local file; NULL: beside the shards
 *  (the shards' folder/seedpipe.index, or for a remote dataset uploaded to
 *  its folder URL with PUT). A remote dataset opened from this object
 *  gives the same fingerprint as ds. @return 0, SP_EUNSUPP (not a
 *  WebDataset), SP_EIO (naming the file or object, with the HTTP status),
 *  SP_ENOMEM. */
SP_API int sp_dataset_write_index(const sp_dataset *ds, const char *dest, sp_error *err);

#ifdef __cplusplus
}
#endif
#endif
