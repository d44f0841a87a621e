/* dataset_drivers.c - the driver table: every dataset kind, in the order
 * sp_dataset_open() asks them (dataset_open.c, "DETECTION").
 *
 * A kind is one file ending in its `const sp__ds_driver sp__ds_driver_NAME`
 * (dataset_internal.h: name, number, round, probe, open, source table) and
 * one line below. The order is the detection's: within a round the first
 * probe that claims a path wins, so a probe that takes anything (a list
 * file: any regular file; an ImageFolder: any folder) comes last. A new
 * kind takes the next free number (8: the numbers 0..7 are in
 * include/seedpipe/dataset.h's sp_dataset_kind); the number is hashed in
 * the fingerprint, so it never changes once given. Several drivers may
 * open one kind (local and remote shards, local and remote corpora).
 */
#include "dataset/dataset_internal.h"

#include <stddef.h>

/* X(NAME): sp__ds_driver_NAME, in detection order. */
#define SP__DS_DRIVERS(X) \
    X(mix)                /* NAME.mix: a weighted mixture (dataset_mix.c) */ \
    X(fake)               /* "fakedata:...": generated images (dataset_fake.c) */ \
    X(tokens)             /* a Megatron corpus, local PREFIX (dataset_tokens.c) */ \
    X(tokens_url)         /* ... or a URL ending in .idx, .bin or a PREFIX */ \
    X(remote)             /* other URLs: remote shards (dataset_remote.c) */ \
    X(tar_pattern)        /* dir/train-{000000..000099}.tar (dataset_tar.c) */ \
    X(tar)                /* a .tar file or a folder of them (round 2) */ \
    X(folder)             /* any other folder: an ImageFolder (dataset_folder.c) */ \
    X(idx)                /* *images-idx3-ubyte[.gz]: IDX (dataset_idx.c) */ \
    X(list)               /* any other regular file: a list (dataset_list.c) */ \
    X(samples)            /* no probe: sp_dataset_open_list() (dataset_samples.c) */

#define SP__DS_DECLARE(name) extern const sp__ds_driver sp__ds_driver_##name;
SP__DS_DRIVERS(SP__DS_DECLARE)

#define SP__DS_ENTRY(name) &sp__ds_driver_##name,
const sp__ds_driver *const sp__ds_drivers[] = {SP__DS_DRIVERS(SP__DS_ENTRY) NULL};
